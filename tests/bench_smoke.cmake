# `heterospec bench` end to end on stories260K: lists in -p, -n and -v, a
# context depth, the JSON report (one entry per test, named as llama-bench
# names them, vN for verification passes), the batch and verification cost
# curves of the markdown report, and a malformed list rejected.
#   cmake -DHS=<heterospec> -DMODEL=<gguf> -P bench_smoke.cmake
execute_process(COMMAND ${HS} bench -m ${MODEL} -p 1,4 -n 3 -v 3 -d 9 -r 1 -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench -o json exited ${rc}:\n${err}")
endif()
string(JSON n LENGTH "${out}" tests)
string(JSON depth GET "${out}" depth)
if(NOT n EQUAL 4 OR NOT depth EQUAL 9)
  message(FATAL_ERROR "expected 4 tests at depth 9:\n${out}")
endif()
set(names "pp1 @ d9;pp4 @ d9;tg3 @ d9;v3 @ d9")
foreach(i 0 1 2 3)
  list(GET names ${i} want)
  string(JSON name GET "${out}" tests ${i} test)
  string(JSON ts GET "${out}" tests ${i} avg_ts)
  if(NOT name STREQUAL want OR NOT ts GREATER 0)
    message(FATAL_ERROR "test ${i}: '${name}' at ${ts} t/s, expected '${want}' at > 0:\n${out}")
  endif()
endforeach()
execute_process(COMMAND ${HS} bench -m ${MODEL} -p 1,2,4 -n 0 -v 1,8 -r 1 RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err)
set(row "[^\n]*\n\\| ms per pass \\|[^\n]*\n\\| cost / N=1 \\| 1\\.00 \\|")
if(NOT rc EQUAL 0 OR NOT out MATCHES "batch cost curve[^|]*\\| N \\| 1 \\| 2 \\| 4 \\|\n${row}")
  message(FATAL_ERROR "no batch cost curve (rc ${rc}):\n${out}${err}")
endif()
if(NOT out MATCHES "verification cost curve[^|]*\\| N \\| 1 \\| 8 \\|\n${row}")
  message(FATAL_ERROR "no verification cost curve:\n${out}${err}")
endif()
execute_process(COMMAND ${HS} bench -m ${MODEL} -p 1,x RESULT_VARIABLE rc ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "lists of integers")
  message(FATAL_ERROR "a malformed -p list gave rc ${rc}:\n${err}")
endif()
message("bench: lists, depth, JSON and the cost curves as expected")
