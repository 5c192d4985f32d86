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
