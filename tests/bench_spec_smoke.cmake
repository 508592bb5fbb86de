# bench-spec end to end on stories260K with its committed head: every method
# runs on the same questions, exits 0, and in the JSON report every method's
# greedy output equals ar's on every question, and tau >= 1.
#   cmake -DHS=<heterospec> -DMODEL=<gguf> -DDATA=<bench dir> -P bench_spec_smoke.cmake
execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k,alpaca --questions 1-2
                        -n 12 --methods chain/d3,ar,eagle2/k4/d3/n8,static/2x2 -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench-spec exited ${rc}:\n${err}")
endif()
if(NOT err MATCHES "\\[bench-spec\\] alpaca 2/2  question 2/2")
  message(FATAL_ERROR "bench-spec printed no progress line:\n${err}")
endif()
string(JSON n LENGTH "${out}" all)
if(NOT n EQUAL 4)
  message(FATAL_ERROR "expected 4 methods in \"all\", got ${n}:\n${out}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON method GET "${out}" all ${i} method)
  string(JSON q GET "${out}" all ${i} questions)
  string(JSON eq GET "${out}" all ${i} equal_to_ar)
  string(JSON cmp GET "${out}" all ${i} compared_to_ar)
  string(JSON tau GET "${out}" all ${i} tau)
  if(NOT q EQUAL 4 OR NOT eq EQUAL 4 OR NOT cmp EQUAL 4 OR tau LESS 1)
    message(FATAL_ERROR "${method}: ${q} questions, ${eq} of ${cmp} equal to ar, tau ${tau}")
  endif()
  message("${method}: 4 questions equal to ar, tau ${tau}")
endforeach()
