# Compiler launcher, warnings and sanitizers shared by every target.
find_program(NPUSCOPE_CCACHE ccache)
if(NPUSCOPE_CCACHE)
  # Precompiled headers are only cacheable with this sloppiness (ccache manual, "Precompiled headers").
  # The scripts set CCACHE_BASEDIR to the source tree, so a clone elsewhere (a CI checkout, a
  # worktree) hashes the same relative paths; with -g ccache would still hash the working
  # directory (hash_dir), so every new clone compiled cold. Not hashing it makes them hit: the
  # price is a DW_AT_comp_dir naming the directory an object was first compiled in.
  set(_ccache_launcher ${CMAKE_COMMAND} -E env
      CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
      CCACHE_NOHASHDIR=1
      ${NPUSCOPE_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${_ccache_launcher})
endif()

# Unity build: the files of a target are compiled in batches of up to eight, one translation unit
# a batch. Most of a file's compile time is templates its neighbours instantiate too (libtorch's,
# CLI11's, nlohmann::json's, GoogleTest's); a batch instantiates them once. Measured here under
# ASan + UBSan: the CLI's eight report/import/export files took 112 s one by one, 30 s as one
# unit. Every tree (the main job, the tests, the sanitizer and fuzz trees) builds this way, so the
# build CI checks is the one users get. -DCMAKE_UNITY_BUILD=OFF compiles file by file: a change
# then recompiles its file, not its batch. Files of one target share one unit, so a helper in an
# anonymous namespace needs a name its batch does not use already.
if(NOT DEFINED CMAKE_UNITY_BUILD)
  set(CMAKE_UNITY_BUILD ON)
endif()
if(NOT DEFINED CMAKE_UNITY_BUILD_BATCH_SIZE)
  set(CMAKE_UNITY_BUILD_BATCH_SIZE 8)
endif()

add_library(npuscope_warnings INTERFACE)
target_compile_options(npuscope_warnings INTERFACE -Wall -Wextra -Wno-unused-parameter)

if(NPUSCOPE_SANITIZE)
  add_compile_options(-fsanitize=${NPUSCOPE_SANITIZE} -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${NPUSCOPE_SANITIZE})
endif()

# RelWithDebInfo with line tables only (-g1): backtraces, sanitizer reports and profilers keep
# file and line, and a cold build of the torch files takes a fifth to a third less time than with
# full debug information (-g). Configure a Debug build to see local variables in a debugger.
add_compile_options($<$<CONFIG:RelWithDebInfo>:-g1>)
