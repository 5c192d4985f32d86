# bench_import: streaming import of a generated >= 1 GB Kineto trace (speed and peak memory).
npuscope_add_benchmark(bench_import SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/bench_import.cpp LIBS npuscope::import)
find_package(ZLIB REQUIRED)
target_link_libraries(bench_import PRIVATE ZLIB::ZLIB)
# A real trace beside the generated one (benchmarks/data, with its provenance).
target_compile_definitions(bench_import PRIVATE NPUSCOPE_BENCH_DATA="${CMAKE_CURRENT_SOURCE_DIR}/data")
