# bench-spec end to end on stories260K with its committed head: every method
# (heterospec and eagle2-tuned with a calibration file written here, the
# latter with a floor on path probability and rest rounds) runs on
# the same questions (also heterospec without its context lookup and prompt
# lookup without a head), exits 0, and in the JSON report every method's greedy
# output equals ar's on every question, and tau >= 1; then two temperatures
# in one run; unknown methods are refused by name.
#   cmake -DHS=<heterospec> -DMODEL=<gguf> -DDATA=<bench dir> -DWORK=<dir> -P bench_spec_smoke.cmake
file(MAKE_DIRECTORY ${WORK})
# Only the EAGLE-2 choice: heterospec keeps its built-in strata and costs.
file(WRITE ${WORK}/cal.json "{\"kind\": \"heterospec-calibration\", \"eagle2_tuned\": {\"top_k\": 2, \"depth\": 3, \"total\": 6, \"p_min\": 0.2, \"rest\": 1}}")
# Then: every output head in the target's pass (eager lists; a static tree takes /eN too); the last, EAGLE-2
# with a floor of 0.6 on path probability (rounds with no candidate above it) and rest rounds after them.
set(methods "chain/d3,ar,eagle2/k4/d3/n8,static/2x2,heterospec,eagle2-tuned,heterospec/l0,lookup/l6/m1")
set(methods "${methods},chain/d3/e4,static/2x2/e7,eagle2/k4/d3/n8/p60/r2")
execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k,alpaca --questions 1-2
                        -n 12 --methods ${methods}
                        --calibration ${WORK}/cal.json -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench-spec exited ${rc}:\n${err}")
endif()
if(NOT err MATCHES "\\[bench-spec\\] alpaca 2/2  question 2/2")
  message(FATAL_ERROR "bench-spec printed no progress line:\n${err}")
endif()
string(JSON n LENGTH "${out}" all)
if(NOT n EQUAL 11)
  message(FATAL_ERROR "expected 11 methods in \"all\", got ${n}:\n${out}")
endif()
string(JSON tuned GET "${out}" all 5 method)
if(NOT tuned STREQUAL "eagle2-tuned (k2/d3/n6/p20/r1)")
  message(FATAL_ERROR "the calibration's EAGLE-2 setting was not used: ${tuned}")
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
# The eager methods ran rounds with every head in the pass, the others none; only the methods with rest rounds
# (eagle2-tuned's r1, the last one's r2) rested.
foreach(i RANGE ${last})
  string(JSON method GET "${out}" all ${i} method)
  string(JSON share GET "${out}" all ${i} eager_share)
  string(JSON rest GET "${out}" all ${i} rest_share)
  if((method MATCHES "/e[0-9]$" AND NOT share GREATER 0) OR (NOT method MATCHES "/e[0-9]$" AND share GREATER 0)
     OR (method MATCHES "/r[0-9]" AND NOT rest GREATER 0) OR (NOT method MATCHES "/r[0-9]|^heterospec" AND rest GREATER 0))
    message(FATAL_ERROR "${method}: eager_share ${share}, rest_share ${rest}")
  endif()
endforeach()

# Greedy and temperature 1 in one run: labels @tT, each temperature its own ar.
execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k --questions 1-2 -n 12
                        --methods ar,heterospec --temp 0,1 --calibration ${WORK}/cal.json -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench-spec --temp 0,1 exited ${rc}:\n${err}")
endif()
set(want "ar @t0;heterospec @t0;ar @t1;heterospec @t1")
foreach(i 0 1 2 3)
  list(GET want ${i} w)
  string(JSON method GET "${out}" all ${i} method)
  string(JSON speedup GET "${out}" all ${i} speedup)
  string(JSON t GET "${out}" all ${i} temperature)
  if(NOT method STREQUAL w OR NOT speedup GREATER 0)
    message(FATAL_ERROR "entry ${i}: '${method}' (want '${w}') at temperature ${t}, speedup ${speedup}:\n${out}")
  endif()
endforeach()
string(JSON eq GET "${out}" all 1 equal_to_ar)
if(NOT eq EQUAL 2)
  message(FATAL_ERROR "heterospec @t0: ${eq} of 2 outputs equal to ar")
endif()
message("bench-spec: two temperatures in one run as expected")

# -r 3: every method three times per question, in turned orders; a question's figures are its median run's, every
# run gave the same tokens, and a count of runs outside 1..15 is refused.
execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k --questions 1-2 -n 12
                        --methods ar,chain/d3,eagle2/k4/d3/n8 --temp 0,1 -r 3 -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT err MATCHES "question 2/2  run 3/3  ")
  message(FATAL_ERROR "bench-spec -r 3 exited ${rc}:\n${err}")
endif()
# The order turns by one each run: run 2 starts with the second method.
string(REGEX MATCH "run 2/3  [^ ]+ @t0" first "${err}")
if(NOT first STREQUAL "run 2/3  chain/d3 @t0")
  message(FATAL_ERROR "bench-spec -r 3: run 2 started with '${first}', not the second method:\n${err}")
endif()
string(JSON repeat GET "${out}" repeat)
string(JSON nrec LENGTH "${out}" questions)
if(NOT repeat EQUAL 3 OR NOT nrec EQUAL 12)
  message(FATAL_ERROR "bench-spec -r 3: repeat ${repeat}, ${nrec} question records (want 3 and 12):\n${out}")
endif()
math(EXPR last "${nrec} - 1")
foreach(i RANGE ${last})
  string(JSON method GET "${out}" questions ${i} method)
  string(JSON t GET "${out}" questions ${i} gen_s)
  string(JSON same GET "${out}" questions ${i} runs_equal)
  string(JSON nruns LENGTH "${out}" questions ${i} gen_s_runs)
  set(below 0)
  set(above 0)
  set(found OFF)
  foreach(j 0 1 2)
    string(JSON tj GET "${out}" questions ${i} gen_s_runs ${j})
    if(tj STREQUAL t)
      set(found ON)
    elseif(tj LESS t)
      math(EXPR below "${below} + 1")
    else()
      math(EXPR above "${above} + 1")
    endif()
  endforeach()
  if(NOT nruns EQUAL 3 OR NOT same OR NOT found OR below GREATER 1 OR above GREATER 1)
    message(FATAL_ERROR "record ${i} (${method}): ${nruns} runs, runs_equal ${same}, gen_s ${t} not the median of "
                        "the runs (${below} below, ${above} above):\n${out}")
  endif()
endforeach()
foreach(i 0 1 2)
  string(JSON eq GET "${out}" all ${i} equal_to_ar)
  if(NOT eq EQUAL 2)
    message(FATAL_ERROR "bench-spec -r 3: entry ${i}: ${eq} of 2 equal to ar:\n${out}")
  endif()
endforeach()
foreach(bad 0 16 2x)
  execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k --questions 1-1 -n 4
                          --methods ar -r ${bad}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "-r ${bad}" OR err MATCHES "\\[bench-spec\\]")
    message(FATAL_ERROR "-r ${bad}: exit ${rc}, not refused by name before running:\n${err}")
  endif()
endforeach()
message("bench-spec -r 3: median runs, equal tokens in every run, -r 0 / 16 / 2x refused")

# A calibration that found no tree pays here ("plain": true): heterospec runs
# plainly, says so in its label, tau 1, output equal to ar's.
file(WRITE ${WORK}/plain.json "{\"kind\": \"heterospec-calibration\", \"plain\": true}")
execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k --questions 1-2 -n 12
                        --methods ar,heterospec --calibration ${WORK}/plain.json -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench-spec with a plain calibration exited ${rc}:\n${err}")
endif()
string(JSON method GET "${out}" all 1 method)
string(JSON tau GET "${out}" all 1 tau)
string(JSON vpr GET "${out}" all 1 verified_per_round)
string(JSON eq GET "${out}" all 1 equal_to_ar)
if(NOT method STREQUAL "heterospec (plain)" OR NOT tau EQUAL 1 OR NOT vpr EQUAL 1 OR NOT eq EQUAL 2)
  message(FATAL_ERROR "plain calibration: '${method}', tau ${tau}, verified ${vpr}, ${eq} of 2 equal to ar:\n${out}")
endif()
message("a plain calibration: heterospec decodes plainly (tau 1), equal to ar")

# A calibration that found the head does not pay here ("headless"): heterospec
# drafts from the context lookup alone and says so in its label, /h1 keeps the
# head; outputs equal to ar's. generate with it loads no head and says so.
file(WRITE ${WORK}/headless.json "{\"kind\": \"heterospec-calibration\", \"headless\": {\"use\": true, \"max_len\": 6, \"min_match\": 1}}")
execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k --questions 1-2 -n 24
                        --methods ar,heterospec,heterospec/h1 --calibration ${WORK}/headless.json -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench-spec with a headless calibration exited ${rc}:\n${err}")
endif()
string(JSON m1 GET "${out}" all 1 method)
string(JSON eq1 GET "${out}" all 1 equal_to_ar)
string(JSON m2 GET "${out}" all 2 method)
string(JSON eq2 GET "${out}" all 2 equal_to_ar)
if(NOT m1 STREQUAL "heterospec (no head)" OR NOT eq1 EQUAL 2 OR NOT m2 STREQUAL "heterospec/h1" OR NOT eq2 EQUAL 2)
  message(FATAL_ERROR "headless calibration: '${m1}' (${eq1} of 2 equal to ar), '${m2}' (${eq2}):\n${out}")
endif()
execute_process(COMMAND ${HS} generate -m ${MODEL} -p "Once upon a time" -n 24 --json
                        --calibration ${WORK}/headless.json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
string(JSON spec GET "${out}" spec)
string(JSON head ERROR_VARIABLE no_head GET "${out}" head)
if(NOT rc EQUAL 0 OR NOT spec STREQUAL "heterospec" OR NOT no_head OR NOT err MATCHES "context lookup only")
  message(FATAL_ERROR "generate with a headless calibration: exit ${rc}, spec '${spec}', head '${head}':\n${err}")
endif()
message("a headless calibration: heterospec without the head (and /h1 with it), equal to ar")
# A method that does not exist is refused by its name, before anything runs.
foreach(bad foo none chain/x2 chain/d3/e9 chain/p20 eagle2/p100 eagle2/r99)
  execute_process(COMMAND ${HS} bench-spec -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k --questions 1-1
                          -n 4 --methods ar,${bad}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "method ${bad}: " OR err MATCHES "\\[bench-spec\\]")
    message(FATAL_ERROR "--methods ar,${bad}: exit ${rc}, not refused by name before running:\n${err}")
  endif()
endforeach()
message("unknown methods refused by name")
# A question set that cannot be read is refused before the model loads (bench-spec) or the device is timed
# (calibrate, which loads the model and head first to find whether --if-missing has a calibration already).
foreach(cmd bench-spec calibrate)
  execute_process(COMMAND ${HS} ${cmd} -m ${MODEL} --no-chat --data ${DATA} --sets gsm8k,no_such_set --questions 1-1
                          -n 4 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "cannot open [^\n]*/no_such_set/question.jsonl" OR err MATCHES "\\[bench-spec\\]|timing verification"
     OR out MATCHES "${cmd}: ")
    message(FATAL_ERROR "${cmd} --sets gsm8k,no_such_set: exit ${rc}, not refused before loading:\n${out}\n${err}")
  endif()
endforeach()
message("an unreadable question set refused before anything loads")
