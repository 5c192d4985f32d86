# Configure-time guards of the folder plan (README.md, "Layout"):
# - store/ and analysis/ include no torch, ATen, c10 or Qt header;
# - sqlite3.h, zstd.h and the store's SQL helpers (database.h, sqlite_handles.h) are included only
#   in store/ and by the importer's reader of torch_npu's databases (import/src/torch_npu_db.cpp);
#   tests, benchmarks and fuzz targets may check files with SQL.
function(npuscope_check_includes folder regex why)
  file(GLOB_RECURSE _files ${PROJECT_SOURCE_DIR}/${folder}/*.h ${PROJECT_SOURCE_DIR}/${folder}/*.cpp)
  foreach(_f ${_files})
    if(_f MATCHES "/import/src/torch_npu_db\\.cpp$")
      continue()
    endif()
    file(STRINGS ${_f} _bad REGEX "^[ \t]*#[ \t]*include[ \t]*[<\"](${regex})[/>\"]")
    if(_bad)
      message(FATAL_ERROR "${why}, but ${_f} has: ${_bad}")
    endif()
  endforeach()
endfunction()
foreach(_folder store analysis)
  npuscope_check_includes(${_folder} "torch|ATen|c10|Q[A-Za-z]+" "${_folder}/ must stay torch- and Qt-free")
endforeach()
foreach(_folder analysis import device amp optim dumper distributed profiler workloads cli gui python)
  npuscope_check_includes(${_folder} "sqlite3\\.h|zstd\\.h|npuscope/store/database\\.h|npuscope/store/sqlite_handles\\.h"
                          "only store/ reads and writes the trace file's database")
endforeach()
