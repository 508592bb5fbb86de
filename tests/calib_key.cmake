# A CPU device's calibration is keyed by the host processor too (host/cli_hx.c):
# lavapipe reports the same UUID and driver on every processor, whose costs
# differ. calibrate --device on stories260K as if on two processors
# (HS_HOST_CPU) writes two cache files, each naming its processor, and generate
# loads the one of the processor it runs on and says so; --if-missing keeps an
# existing file and makes a missing one. Without split execution
# throughout: the number of parts, which a busy CPU changes, is in the key too.
# The target's cache type is in the key as well: an f32 calibration is a file of
# its own, found for an f32 cache (also under the name files had before the type
# was in the key), and an f16 cache without one of its own takes it and says so.
#   cmake -DHS=<heterospec> -DMODEL=<gguf> -DHEAD=<head gguf> -DWORK=<dir> -P calib_key.cmake
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
# hs(CPU ARGS...): heterospec ARGS on the stories260K model and head as if on processor CPU; rc, out and err in
# the caller's scope.
function(hs cpu)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env HS_HOME=${WORK} HS_VK_DISABLE_SPLIT=1 HS_HOST_CPU=${cpu}
                          ${HS} ${ARGN} -m ${MODEL} --head ${HEAD}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc "${rc}" PARENT_SCOPE)
  set(out "${out}" PARENT_SCOPE)
  set(err "${err}" PARENT_SCOPE)
endfunction()
# calib_sums(VAR): the sha256 of every calibration file, in file name order.
function(calib_sums var)
  file(GLOB files ${WORK}/calib/*-greedy-f16.json)
  set(sums "")
  foreach(f ${files})
    file(SHA256 ${f} sum)
    list(APPEND sums ${sum})
  endforeach()
  set(${var} "${sums}" PARENT_SCOPE)
endfunction()
foreach(cpu cpuA cpuB)
  hs(${cpu} calibrate --device -r 1)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "calibrate --device (HS_HOST_CPU=${cpu}) exited ${rc}:\n${out}\n${err}")
  endif()
  # timed twice back to back, the faster of each pair kept
  if(NOT err MATCHES "timing verification[^\n]*\n[^\n]*timing them again\n[^\n]*kept the faster of two")
    message(FATAL_ERROR "calibrate --device did not time the device twice:\n${err}")
  endif()
endforeach()
file(GLOB files ${WORK}/calib/*-greedy-f16.json)
list(LENGTH files n)
if(NOT n EQUAL 2)
  message(FATAL_ERROR "two processors gave ${n} calibration files, not 2: ${files}")
endif()
set(seen "")
foreach(f ${files})
  file(READ ${f} text)
  string(JSON cpu ERROR_VARIABLE jerr GET "${text}" device host_cpu)
  if(jerr)
    message(FATAL_ERROR "${f}: no device.host_cpu (${jerr})")
  endif()
  list(APPEND seen ${cpu})
endforeach()
list(SORT seen)
if(NOT seen STREQUAL "cpuA;cpuB")
  message(FATAL_ERROR "the files name the processors '${seen}', not cpuA and cpuB")
endif()
hs(cpuB generate --spec heterospec -p "Once upon a time" -n 4 -q)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "generate exited ${rc}:\n${out}\n${err}")
endif()
if(NOT err MATCHES "calibration: ${WORK}/calib/[0-9a-f-]+-greedy-f16.json \\(measured on [^\n]* on cpuB\\)")
  message(FATAL_ERROR "generate did not load the cpuB calibration:\n${err}")
endif()
# calibrate --if-missing (tools/demo.sh's first-run calibration) keeps this
# processor's file as it is and says so; for a processor without one it
# calibrates.
calib_sums(before)
hs(cpuB calibrate --device --if-missing -r 1)
if(NOT rc EQUAL 0 OR NOT out MATCHES "exists, kept \\(--if-missing\\)" OR out MATCHES "device cost")
  message(FATAL_ERROR "calibrate --if-missing on cpuB (exit ${rc}) did not keep its file:\n${out}\n${err}")
endif()
calib_sums(after)
if(NOT after STREQUAL before)
  message(FATAL_ERROR "calibrate --if-missing changed a calibration file")
endif()
hs(cpuC calibrate --device --if-missing -r 1)
calib_sums(sums)
list(LENGTH sums n)
if(NOT rc EQUAL 0 OR NOT n EQUAL 3)
  message(FATAL_ERROR "calibrate --if-missing on cpuC (exit ${rc}) left ${n} files, not 3:\n${out}\n${err}")
endif()

# The cache type: calibrate --kv-type f32 on cpuB writes a file of its own beside the f16 one; generate
# over an f32 cache loads it, over the default f16 cache the f16 one.
hs(cpuB calibrate --device --kv-type f32 -r 1)
file(GLOB f32_files ${WORK}/calib/*-greedy-f32.json)
list(LENGTH f32_files n)
if(NOT rc EQUAL 0 OR NOT n EQUAL 1)
  message(FATAL_ERROR "calibrate --kv-type f32 (exit ${rc}) left ${n} f32 files, not 1:\n${out}\n${err}")
endif()
file(READ ${f32_files} text)
string(JSON kv ERROR_VARIABLE jerr GET "${text}" kv_type)
if(NOT kv STREQUAL "f32")
  message(FATAL_ERROR "${f32_files}: kv_type '${kv}' (${jerr}), not f32")
endif()
hs(cpuB generate --spec heterospec --kv-type f32 -p "Once upon a time" -n 4 -q)
if(NOT rc EQUAL 0 OR NOT err MATCHES "calibration: [^\n]*-greedy-f32.json \\(measured on [^\n]* on cpuB\\)")
  message(FATAL_ERROR "generate --kv-type f32 (exit ${rc}) did not load the f32 calibration:\n${err}")
endif()
hs(cpuB generate --spec heterospec -p "Once upon a time" -n 4 -q)
if(NOT rc EQUAL 0 OR NOT err MATCHES "calibration: [^\n]*-greedy-f16.json \\(measured on [^\n]* on cpuB\\)\n")
  message(FATAL_ERROR "generate (f16) (exit ${rc}) did not load the f16 calibration:\n${err}")
endif()
# Under the name of the files before the cache type was in the key (all f32): found for an f32 cache.
string(REGEX REPLACE "-f32\\.json$" ".json" legacy "${f32_files}")
file(RENAME ${f32_files} ${legacy})
hs(cpuB generate --spec heterospec --kv-type f32 -p "Once upon a time" -n 4 -q)
if(NOT rc EQUAL 0 OR NOT err MATCHES "calibration: ${legacy} \\(measured on [^\n]* on cpuB\\)")
  message(FATAL_ERROR "generate --kv-type f32 (exit ${rc}) did not load ${legacy}:\n${err}")
endif()
# A processor with only an f32 calibration: the f16 cache takes it, saying which cache it measured.
file(GLOB c_files ${WORK}/calib/*-greedy-f16.json)
foreach(f ${c_files})
  file(READ ${f} text)
  string(JSON cpu GET "${text}" device host_cpu)
  if(cpu STREQUAL "cpuA")
    file(REMOVE ${f})
  endif()
endforeach()
hs(cpuA calibrate --device --kv-type f32 -r 1)
hs(cpuA generate --spec heterospec -p "Once upon a time" -n 4 -q)
if(NOT rc EQUAL 0 OR NOT err MATCHES
   "calibration: [^\n]*-greedy-f32.json \\(measured on [^\n]* on cpuA with an f32 KV cache\\)")
  message(FATAL_ERROR "generate on cpuA (exit ${rc}) did not take its f32 calibration:\n${err}")
endif()
