# `heterospec generate` and `heterospec calibrate` end to end on stories260K
# and its committed head: the default method is HeteroSpec when a head fits,
# its greedy output equals plain decoding's (--spec none), a calibration made
# by `calibrate` is found and named when given, and a bad calibration file is
# refused with a clear message and a non-zero exit; a failed `logits -o`
# leaves no partial file.
#   cmake -DHS=<heterospec> -DMODEL=<gguf> -DDATA=<bench dir> -DMISFIT_HEAD=<a head of another model>
#         -DWORK=<dir> -P generate_smoke.cmake
file(MAKE_DIRECTORY ${WORK})
# Runs heterospec with the arguments after out_var and err_var and fails unless it exits 0; its
# standard output and error in out_var and err_var.
function(hs_ok out_var err_var)
  execute_process(COMMAND ${HS} ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "heterospec ${cmd} exited ${rc}:\n${err}")
  endif()
  set(${out_var} "${out}" PARENT_SCOPE)
  set(${err_var} "${err}" PARENT_SCOPE)
endfunction()
# Runs heterospec with the arguments after re and fails unless it exits non-zero with an error
# matching re.
function(hs_refused re)
  execute_process(COMMAND ${HS} ${ARGN} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(rc EQUAL 0 OR NOT err MATCHES "${re}")
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "heterospec ${cmd} gave rc ${rc}, expected a refusal matching '${re}':\n${err}")
  endif()
endfunction()
set(args generate -m ${MODEL} -p "Once upon a time" -n 48 --json)
hs_ok(auto err ${args})
hs_ok(plain err ${args} --spec none)
string(JSON spec GET "${auto}" spec)
string(JSON none GET "${plain}" spec)
string(JSON ids_auto GET "${auto}" ids)
string(JSON ids_plain GET "${plain}" ids)
string(JSON tau GET "${auto}" tau)
if(NOT spec STREQUAL "heterospec" OR NOT none STREQUAL "none")
  message(FATAL_ERROR "default method '${spec}' (expected heterospec), --spec none gave '${none}'")
endif()
if(NOT ids_auto STREQUAL ids_plain)
  message(FATAL_ERROR "heterospec's greedy output differs from plain decoding:\n${ids_auto}\n${ids_plain}")
endif()
if(NOT tau GREATER 1)
  message(FATAL_ERROR "heterospec accepted nothing (tau ${tau}):\n${auto}")
endif()

# The head's weights as stored or quantized to q4_1 at load: either way plain decoding's output,
# and the JSON says which; an unknown choice is refused by name.
foreach(w file q4_1)
  hs_ok(out err ${args} --spec chain --head-weights ${w})
  string(JSON ids_w GET "${out}" ids)
  string(JSON hw GET "${out}" head_weights)
  if(NOT ids_w STREQUAL ids_plain OR NOT hw STREQUAL w)
    message(FATAL_ERROR "--head-weights ${w}: head_weights '${hw}', ids ${ids_w} (plain ${ids_plain})")
  endif()
endforeach()
hs_refused("--head-weights q5: expected auto, file or q4_1" ${args} --head-weights q5)

# The cache type: f16 by default, f32 when asked, and the JSON says which; the default method's greedy
# output equals plain decoding's over an f32 cache too; an unknown cache type is refused by name.
hs_ok(a32 err ${args} --kv-type f32)
hs_ok(p32 err ${args} --kv-type f32 --spec none)
string(JSON ids_a32 GET "${a32}" ids)
string(JSON ids_p32 GET "${p32}" ids)
string(JSON kv32 GET "${a32}" kv_type)
string(JSON kv_default GET "${plain}" kv_type)
if(NOT kv32 STREQUAL "f32" OR NOT kv_default STREQUAL "f16" OR NOT ids_a32 STREQUAL ids_p32)
  message(FATAL_ERROR "--kv-type f32: kv_type '${kv32}' (default '${kv_default}'), ids ${ids_a32} (plain ${ids_p32})")
endif()
hs_refused("--kv-type q8_0: expected f32 or f16" ${args} --kv-type q8_0)

# Numbers are parsed whole: a value with trailing characters, not a number, or out of range is refused
# by name (not read as 12, 0 or a cut tree), and so is a tree the target cannot verify in one pass.
foreach(bad "-n;12x;-n 12x: expected an integer" "--temp;abc;--temp abc: expected a number"
            "--seed;-3;--seed -3: expected an unsigned integer"
            "--depth;5x;--depth 5x: expected an integer 1\\.\\."
            "--tree-size;100000;--tree-size 100000: the target verifies at most [0-9]+ tokens per pass"
            "--eager;9;--eager 9: expected an integer 0\\.\\.8"
            "--p-min;1;--p-min 1: expected a number 0\\.\\.0\\.999" "--rest;17;--rest 17: expected an integer 0\\.\\.16")
  list(GET bad 0 opt)
  list(GET bad 1 val)
  list(GET bad 2 re)
  hs_refused("${re}" ${args} --spec eagle2 ${opt} ${val})
endforeach()
# eagle2's floor on path probability and rest rounds are refused for the other methods.
hs_refused("--p-min and --rest are eagle2's options, not chain's" ${args} --spec chain --p-min 0.2)

# A head given by name that does not fit the model is refused, naming what differs, also where the
# calibration beside it (SmolLM2's, which runs without its head on lavapipe) would not load it.
hs_refused("head does not fit the target; hidden size" ${args} --head ${MISFIT_HEAD})

# A head given as the model is refused as a head, not as a GGUF without a tokenizer.
hs_refused("this is an EAGLE-3 draft head \\(architecture 'eagle3'\\), not a model"
           generate -m ${MISFIT_HEAD} -p "Once" -n 2)

# A calibration made on another model file (SmolLM2's, committed beside its head) still loads, with a
# warning naming both files' hashes.
get_filename_component(misfit_dir ${MISFIT_HEAD} DIRECTORY)
hs_ok(out err ${args} --calibration ${misfit_dir}/heterospec-greedy.json)
if(NOT err MATCHES "warning: calibration [^\n]* was made for another model file \\(fnv1a64 ")
  message(FATAL_ERROR "generate with SmolLM2's calibration on stories260K gave no warning:\n${err}")
endif()

# A calibration of this device, model and head (one short question), then used. A file left by an
# earlier run would lend it its device cost (calibrate measures only what the file lacks).
file(REMOVE ${WORK}/cal.json)
hs_ok(out err calibrate -m ${MODEL} --data ${DATA} --sets gsm8k --questions 1-2 -n 24 -r 1 --no-chat
      -o ${WORK}/cal.json)
if(NOT out MATCHES "node records" OR NOT EXISTS ${WORK}/cal.json)
  message(FATAL_ERROR "calibrate wrote no node records or no file:\n${out}\n${err}")
endif()
# The device timed before the recording and again after it, the faster of each pair kept and printed once.
set(steps "timing verification, draft and consume;timing them again after the recording;kept the fastest of 2")
string(REPLACE ";" "|" any_step "${steps}")
string(REGEX MATCHALL "${any_step}" timed "${err}")
string(REGEX MATCHALL "device cost \\(ms\\)" printed "${out}")
list(LENGTH printed n_printed)
if(NOT timed STREQUAL steps OR NOT n_printed EQUAL 1)
  message(FATAL_ERROR "calibrate did not time the device twice (${timed}) or printed its cost "
                      "${n_printed} times:\n${out}\n${err}")
endif()
file(READ ${WORK}/cal.json cal)
string(JSON kind GET "${cal}" kind)
string(JSON n_strata LENGTH "${cal}" strata)
string(JSON n_verify LENGTH "${cal}" cost verify_s)
# The passes with every output head (lists of up to 8, the target's exact buckets), at both contexts.
string(JSON n_verify_all ERROR_VARIABLE no_all LENGTH "${cal}" cost verify_all_s)
string(JSON n_verify_all_long ERROR_VARIABLE no_all_long LENGTH "${cal}" cost verify_all_long_s)
string(JSON eager ERROR_VARIABLE no_eager GET "${cal}" eager)
string(JSON cal_kv ERROR_VARIABLE no_kv GET "${cal}" kv_type)
# The EAGLE-2 setting chosen, with its floor on path probability and rest rounds.
string(JSON e2_p_min ERROR_VARIABLE no_p_min GET "${cal}" eagle2_tuned p_min)
string(JSON e2_rest ERROR_VARIABLE no_rest GET "${cal}" eagle2_tuned rest)
# ... chosen for every question set (here the one), whose slowest it names.
string(JSON e2_slowest ERROR_VARIABLE no_slowest GET "${cal}" eagle2_tuned replay_slowest_set)
if(NOT out MATCHES "per set [^\n]*\n\n\\| setting \\| gsm8k \\|")
  message(FATAL_ERROR "calibrate printed no per-set table of EAGLE-2's settings:\n${out}")
endif()
if(NOT kind STREQUAL "heterospec-calibration" OR n_strata LESS 1 OR NOT n_verify EQUAL 128
   OR NOT n_verify_all EQUAL 8 OR NOT n_verify_all_long EQUAL 8 OR no_eager OR NOT cal_kv STREQUAL "f16"
   OR no_p_min OR no_rest OR e2_p_min LESS 0 OR NOT e2_p_min LESS 1 OR NOT e2_slowest STREQUAL "gsm8k")
  message(FATAL_ERROR "calibration file: kind ${kind}, ${n_strata} strata, ${n_verify} verify costs, "
                      "${n_verify_all} / ${n_verify_all_long} with every head, eager ${eager}, "
                      "kv_type '${cal_kv}', eagle2_tuned p_min '${e2_p_min}' rest '${e2_rest}' slowest set "
                      "'${e2_slowest}':\n${cal}")
endif()
hs_ok(out err generate -m ${MODEL} -p "Once upon a time" -n 48 -q --calibration ${WORK}/cal.json)
if(NOT err MATCHES "calibration: [^\n]*cal.json \\(measured on ")
  message(FATAL_ERROR "generate with the calibration did not name it:\n${err}")
endif()

# A calibration that found no tree pays here ("plain": true): generate says so
# and decodes plainly, with plain decoding's output.
if(NOT cal MATCHES "\"plain\":[ \t]*(true|false)")
  message(FATAL_ERROR "calibrate wrote no \"plain\":\n${cal}")
endif()
string(REGEX REPLACE "\"plain\":[ \t]*(true|false)" "\"plain\": true" plain_cal "${cal}")
file(WRITE ${WORK}/plain.json "${plain_cal}")
hs_ok(out err ${args} --calibration ${WORK}/plain.json)
string(JSON spec_p GET "${out}" spec)
string(JSON ids_p GET "${out}" ids)
if(NOT err MATCHES "no tree pays on this device when greedy" OR NOT spec_p STREQUAL "none" OR
   NOT ids_p STREQUAL ids_plain)
  message(FATAL_ERROR "a plain calibration: spec '${spec_p}', ids ${ids_p} (plain ${ids_plain}):\n${err}")
endif()

# A broken calibration: refused by name, non-zero exit, no crash.
string(REPLACE "\"heterospec-calibration\"" "\"other\"" bad "${cal}")
file(WRITE ${WORK}/bad.json "${bad}")
hs_refused("bad.json: calibration: \"kind\" is not" generate -m ${MODEL} -p "Once" -n 4
           --calibration ${WORK}/bad.json)

# `logits -o`: written on success; on a failure after the file was created
# (here a bad HS_TUNING, refused when the device is opened) nothing partial stays.
file(REMOVE ${WORK}/good.hslg ${WORK}/bad.hslg)
hs_ok(out err logits -m ${MODEL} -p "Once" -o ${WORK}/good.hslg)
if(NOT EXISTS ${WORK}/good.hslg)
  message(FATAL_ERROR "logits -o wrote no file:\n${err}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -E env HS_TUNING=bogus=1 ${HS} logits -m ${MODEL} -p "Once"
                        -o ${WORK}/bad.hslg RESULT_VARIABLE rc ERROR_VARIABLE err)
if(rc EQUAL 0 OR NOT err MATCHES "HS_TUNING='bogus=1'" OR EXISTS ${WORK}/bad.hslg)
  message(FATAL_ERROR "logits with a bad HS_TUNING: rc ${rc}, output left: ${err}")
endif()
message("generate: heterospec by default, equal to plain decoding (also with the head's weights as "
        "stored and as q4_1); calibrate's file found and used; a plain "
        "calibration decodes plainly; bad file refused; "
        "logits leaves no partial file")
