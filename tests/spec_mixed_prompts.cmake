# Greedy speculative output equals plain decoding's with SmolLM2-135M-Instruct and its committed head on
# prompts that are not benchmark questions (the first six of tests/data/prompts/mixed, written for this test:
# accented text, emoji, a count, JSON, C code, an article to summarise), through `bench-spec`:
# HeteroSpec as calibrated (the context lookup alone on lavapipe), HeteroSpec with the head kept, an EAGLE-2
# tree of 12 candidates, a chain of 4 whose head sees only the last 64 rows of a prompt (--head-window) and
# prompt lookup without a head, each over 24 tokens of every prompt (about 30 s here, 60-70 s in the slowest
# fallback passes).
# Every method must equal ar on every prompt, and every speculative method must have kept drafts (tau > 1.05),
# so that the comparison is not between two plain decodings. The head's window each method reports must be the
# one asked for, and by default 384: three quarters of the 512 rows the committed head was trained on (its
# MANIFEST.json, training.args.seq), which its file records (eagle3.train_row_length).
#   cmake -DHS=<heterospec> -DHEAD=<smollm2 head.gguf> -DDATA=<dir holding mixed/question.jsonl> -P spec_mixed_prompts.cmake
# The model is looked up as the C tests do: $HS_TEST_MODELS, then ~/.cache/heterospec/models.
set(file SmolLM2-135M-Instruct.Q4_1.gguf)
set(model "")
foreach(dir "$ENV{HS_TEST_MODELS}" "$ENV{HOME}/.cache/heterospec/models")
  if(NOT model AND NOT dir STREQUAL "" AND EXISTS "${dir}/${file}")
    set(model "${dir}/${file}")
  endif()
endforeach()
if(NOT model)
  message(FATAL_ERROR "${file} not found in \$HS_TEST_MODELS or ~/.cache/heterospec/models (tools/fetch_model.sh smollm2)")
endif()
set(methods "ar,heterospec,heterospec/h1,eagle2/k4/d3/n12,chain/d4/w64,lookup/l4/m1")
# The head's window per method ("": not checked: heterospec keeps the head or not as the calibration found).
set(windows 0 - 384 384 64 0)
execute_process(COMMAND ${HS} bench-spec -m ${model} --head ${HEAD} --data ${DATA} --sets mixed --questions 1-6
                        -n 24 --methods ${methods} -o json
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench-spec exited ${rc}:\n${err}")
endif()
string(JSON n LENGTH "${out}" all)
if(NOT n EQUAL 6)
  message(FATAL_ERROR "expected 6 methods in \"all\", got ${n}:\n${out}")
endif()
math(EXPR last "${n} - 1")
foreach(i RANGE ${last})
  string(JSON method GET "${out}" all ${i} method)
  string(JSON q GET "${out}" all ${i} questions)
  string(JSON eq GET "${out}" all ${i} equal_to_ar)
  string(JSON cmp GET "${out}" all ${i} compared_to_ar)
  string(JSON tau GET "${out}" all ${i} tau)
  string(JSON window GET "${out}" all ${i} head_window)
  list(GET windows ${i} want)
  if(NOT want STREQUAL "-" AND NOT window EQUAL want)
    message(FATAL_ERROR "${method}: the head's window is ${window}, expected ${want}")
  endif()
  if(NOT q EQUAL 6 OR NOT eq EQUAL 6 OR NOT cmp EQUAL 6)
    message(FATAL_ERROR "${method}: ${eq} of ${cmp} outputs equal to ar's (${q} prompts)")
  endif()
  if(i GREATER 0 AND NOT tau GREATER 1.05)
    message(FATAL_ERROR "${method}: tau ${tau}: too few drafts kept for the comparison to mean anything")
  endif()
  message("${method}: 6 prompts equal to ar, tau ${tau}")
endforeach()
