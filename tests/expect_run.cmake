# Runs one command and checks how it ended, for tests of the test harness:
#   cmake -DCMD=<program> [-DARG=<argument>] -DEXPECT_RC=zero|nonzero
#         [-DEXPECT=<regex>[;<regex>...]] -P expect_run.cmake
# Every regex must match the output (stdout and stderr, which cmocka
# interleave differently, are searched as one text).
# (CTest's WILL_FAIL would also pass on a crash, and PASS_REGULAR_EXPRESSION
# ignores the exit status; this checks both.)
execute_process(COMMAND ${CMD} ${ARG} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
set(all "${out}${err}")
message("${all}")
if(NOT rc MATCHES "^[0-9]+$")
  message(FATAL_ERROR "expect_run: ${CMD} ${ARG} did not exit normally: ${rc}")
endif()
if(EXPECT_RC STREQUAL "zero" AND NOT rc EQUAL 0)
  message(FATAL_ERROR "expect_run: ${CMD} ${ARG} exited ${rc}, expected 0")
endif()
if(EXPECT_RC STREQUAL "nonzero" AND rc EQUAL 0)
  message(FATAL_ERROR "expect_run: ${CMD} ${ARG} exited 0, expected a failure")
endif()
foreach(re IN LISTS EXPECT)
  if(NOT all MATCHES "${re}")
    message(FATAL_ERROR "expect_run: the output of ${CMD} ${ARG} does not match '${re}'")
  endif()
endforeach()
