# tools/report.sh end to end on stories260K and its committed head, without setup (the build's heterospec, the
# plotting venv's Python): it refuses a report split that overlaps the calibration split, or is no range, and a
# device HS_DEVICE does not name; it calibrates on one split (greedy and temperature 1), runs bench-spec on the
# other with each mode's calibration (eagle2-tuned is the setting that mode's file chose), every greedy method's
# output equals ar's, and it draws the plots and REPORT.md with the commands; run again, it keeps what it made,
# and with other settings it refuses the folder.
#   cmake -DSH=<bash> -DSRC=<source tree> -DHS=<heterospec> -DPY=<python> -DMODEL=<gguf> -DHEAD=<head gguf>
#         -DDATA=<bench dir> -DWORK=<dir> -P report_smoke.cmake
file(REMOVE_RECURSE ${WORK})
set(base ${SH} ${SRC}/tools/report.sh --no-setup --hs ${HS} --python ${PY} --out ${WORK}/rep --calib-n 16 -r 1)
set(extra -- -m ${MODEL} --head ${HEAD} --data ${DATA} --no-chat --sets gsm8k,alpaca)

# report([ENV VAR=VALUE] ARGS...): report.sh with the options above and ARGS, then the calibrate/bench-spec
# options (in the environment VAR=VALUE); rc and err in the caller's scope.
function(report)
  cmake_parse_arguments(R "" "ENV" "" ${ARGN})
  set(cmd ${base} ${R_UNPARSED_ARGUMENTS} ${extra})
  if(R_ENV)
    set(cmd ${CMAKE_COMMAND} -E env ${R_ENV} ${cmd})
  endif()
  execute_process(COMMAND ${cmd} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc "${rc}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()
# refused(WHAT PATTERN ARGS...): report.sh with ARGS must exit non-zero with a message matching PATTERN.
function(refused what pattern)
  report(${ARGN})
  if(rc EQUAL 0 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${what} was not refused (exit ${rc}):\n${err}")
  endif()
endfunction()

refused("an overlapping report split" "overlaps the calibration split" --questions 2-3 --calib-questions 1-2 -n 12)
refused("a report split 3-2" "--questions 3-2: expected F-T" --questions 3-2 --calib-questions 1-1 -n 12)
# A device HS_DEVICE does not name (`heterospec devices` says which device the commands use).
refused("HS_DEVICE naming no device" "HS_DEVICE=no-such-device names none of these devices"
        ENV HS_DEVICE=no-such-device --questions 2-3 --calib-questions 1-1 -n 12)
if(EXISTS ${WORK}/rep)
  message(FATAL_ERROR "a refused run made its folder")
endif()

report(--questions 2-3 --calib-questions 1-1 -n 12)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "report.sh exited ${rc}:\n${err}")
endif()
foreach(f calib-greedy.json calib-sample.json bench-spec-t0.json bench-spec-t1.json REPORT.md plots/speedup.png
          plots/tau_vs_verified.png plots/cost_curve.png plots/devices.md)
  if(NOT EXISTS ${WORK}/rep/${f})
    message(FATAL_ERROR "report.sh made no ${f}:\n${err}")
  endif()
endforeach()

# Each mode's report: its methods, on the report split, with the eagle2-tuned setting of its own calibration.
foreach(mode greedy sample)
  if(mode STREQUAL "greedy")
    set(t 0)
    set(want "ar;heterospec;eagle2-tuned;eagle2")
  else()
    set(t 1)
    set(want "ar;heterospec;eagle2-tuned")
  endif()
  file(READ ${WORK}/rep/bench-spec-t${t}.json js)
  file(READ ${WORK}/rep/calib-${mode}.json cal)
  # bench-spec loaded this mode's file (its log says which), and took its EAGLE-2 setting (below).
  file(READ ${WORK}/rep/bench-spec-t${t}.log log)
  if(NOT log MATCHES "calibration: [^\n]*/rep/calib-${mode}\\.json ")
    message(FATAL_ERROR "bench-spec-t${t} did not load calib-${mode}.json:\n${log}")
  endif()
  string(JSON from GET "${js}" question_from)
  string(JSON to GET "${js}" question_to)
  string(JSON temp GET "${js}" temperature)
  if(NOT from EQUAL 2 OR NOT to EQUAL 3 OR NOT temp EQUAL t)
    message(FATAL_ERROR "bench-spec-t${t}.json: questions ${from}-${to} at temperature ${temp}")
  endif()
  foreach(key top_k depth total eager p_min rest)
    string(JSON ${key} GET "${cal}" eagle2_tuned ${key})
  endforeach()
  # bench-spec's label of that setting (host/cli_bench_spec.c): /eager with eager lists, /pP/rR with a floor or rest.
  set(label "k${top_k}/d${depth}/n${total}")
  if(NOT eager EQUAL 0)
    string(APPEND label "/eager")
  endif()
  if(NOT p_min EQUAL 0 OR NOT rest EQUAL 0)
    string(APPEND label "/p[0-9.]+/r${rest}")
  endif()
  list(LENGTH want n_want)
  string(JSON n LENGTH "${js}" all)
  if(NOT n EQUAL n_want)
    message(FATAL_ERROR "bench-spec-t${t}.json: ${n} methods, want ${want}")
  endif()
  math(EXPR last "${n} - 1")
  foreach(i RANGE ${last})
    list(GET want ${i} w)
    string(JSON method GET "${js}" all ${i} method)
    string(JSON q GET "${js}" all ${i} questions)
    if(NOT method MATCHES "^${w}( |$)" OR NOT q EQUAL 4)
      message(FATAL_ERROR "bench-spec-t${t}.json: method ${i} is '${method}' over ${q} questions, want '${w}' over 4")
    endif()
    if(w STREQUAL "eagle2-tuned" AND NOT method MATCHES "^eagle2-tuned \\(${label}\\)$")
      message(FATAL_ERROR "bench-spec-t${t}.json: '${method}' is not calib-${mode}.json's setting (${label})")
    endif()
    if(t EQUAL 0)
      string(JSON eq GET "${js}" all ${i} equal_to_ar)
      if(NOT eq EQUAL 4)
        message(FATAL_ERROR "bench-spec-t0.json: ${method}: ${eq} of 4 outputs equal to ar")
      endif()
    endif()
    # REPORT.md's table has the method's row at this temperature.
    file(READ ${WORK}/rep/REPORT.md report)
    string(REPLACE "(" "\\(" m "${method}")
    string(REPLACE ")" "\\)" m "${m}")
    if(NOT report MATCHES "\\| ${t} \\| ${m} \\| [0-9.]+ \\| [0-9.]+x \\|")
      message(FATAL_ERROR "REPORT.md has no row for ${method} at temperature ${t}:\n${report}")
    endif()
  endforeach()
  message("report.sh, ${mode}: ${want} on questions 2-3, eagle2-tuned ${label}")
endforeach()
foreach(line "calibrate --questions 1-1 -n 16 --temp 0 " "calibrate --questions 1-1 -n 16 --temp 1 "
             "bench-spec --questions 2-3 -n 12 -r 1 --temp 0 --methods ar,heterospec,eagle2-tuned,eagle2 --calibration calib-greedy.json "
             "bench-spec --questions 2-3 -n 12 -r 1 --temp 1 --methods ar,heterospec,eagle2-tuned --calibration calib-sample.json "
             " -o calib-greedy.json\n" " -o json > bench-spec-t0.json\n" " -o json > bench-spec-t1.json\n")
  string(FIND "${report}" "${line}" at)
  if(at LESS 0)
    message(FATAL_ERROR "REPORT.md does not list the command '${line}...':\n${report}")
  endif()
endforeach()

# Again: every measured file kept as it was.
file(SHA256 ${WORK}/rep/bench-spec-t0.json sum0)
report(--questions 2-3 --calib-questions 1-1 -n 12)
file(SHA256 ${WORK}/rep/bench-spec-t0.json sum1)
string(REGEX MATCHALL "[a-z0-9-]+\\.json: kept" kept "${err}")
list(LENGTH kept n_kept)
if(NOT rc EQUAL 0 OR NOT n_kept EQUAL 4 OR NOT sum0 STREQUAL sum1)
  message(FATAL_ERROR "the second run (exit ${rc}) kept ${n_kept} of 4 files:\n${err}")
endif()

# Other settings in the same folder are refused, naming the difference.
refused("a run with other settings" "< new tokens: 12\n> new tokens: 10" --questions 2-3 --calib-questions 1-1 -n 10)
message("report.sh: kept its files on a second run, refused other settings")
