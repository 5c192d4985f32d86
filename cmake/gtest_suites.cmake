# Registers one CTest test per GoogleTest suite of a test executable: run after the executable is
# linked (tests/CMakeLists.txt), it lists the executable's tests and writes OUT, which CTest
# includes. One process per suite, not per test: most test executables load libtorch, whose
# start costs about 0.7 s of a 2-core machine per process, and there are over 800 tests. A
# failing suite's output names the failing tests.
#   cmake -D EXE=... -D OUT=... -D WORKDIR=... -D LABELS=... -D ENVIRONMENT=... -P gtest_suites.cmake
execute_process(COMMAND "${EXE}" --gtest_list_tests OUTPUT_VARIABLE listing RESULT_VARIABLE rc TIMEOUT 60)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} --gtest_list_tests failed (${rc}): ${listing}")
endif()
string(REPLACE ";" "\\;" listing "${listing}")
string(REPLACE "\n" ";" lines "${listing}")
set(suites "")
set(current "")
foreach(line IN LISTS lines)
  if(line MATCHES "^([^ #][^ ]*)\\.")  # "Suite." or "Instance/Suite.  # TypeParam = ..."
    set(current "${CMAKE_MATCH_1}")
    list(APPEND suites "${current}")
    set(count_${current} 0)
  elseif(line MATCHES "^  [^ ]" AND current)
    math(EXPR count_${current} "${count_${current}} + 1")
  endif()
endforeach()
set(script "")
foreach(suite IN LISTS suites)
  string(APPEND script "add_test([=[${suite}]=] \"${EXE}\" [=[--gtest_filter=${suite}.*]=] --gtest_brief=1)\n")
  set(props "WORKING_DIRECTORY \"${WORKDIR}\" LABELS \"${LABELS}\"")
  if(ENVIRONMENT)
    string(APPEND props " ENVIRONMENT \"${ENVIRONMENT}\"")
  endif()
  # A suite of one test that skips itself is reported skipped, as GoogleTest says; in a larger
  # suite the others' results count and GoogleTest's output names what it skipped.
  if(count_${suite} EQUAL 1)
    string(APPEND props " SKIP_REGULAR_EXPRESSION [==[\\[  SKIPPED \\]]==]")
  endif()
  string(APPEND script "set_tests_properties([=[${suite}]=] PROPERTIES ${props})\n")
endforeach()
file(WRITE "${OUT}" "${script}")
