# Split execution on llvmpipe with 512-bit vectors (LP_NATIVE_VECTOR_WIDTH=512: 16-lane subgroups, as on an
# AVX-512 machine whose user asks for them): plain generation of 64 tokens on stories260K must end, and soon.
# Each split barrier's wait (shaders/spin.comp) once ran 8 invocations, half of a 16-lane vector, and so
# waited out llvmpipe's loop limit at every barrier: no error, but seconds per barrier, a run of hours.
# Its own Mesa shader cache: Mesa keys compiled shaders without the vector width, so 512-bit code read
# back by a 256-bit run (or the reverse) hangs.
#   cmake -DHS=<heterospec> -DMODEL=<gguf> -DCACHE=<dir> -P wide_vectors.cmake
set(ENV{LP_NATIVE_VECTOR_WIDTH} 512)
set(ENV{MESA_SHADER_CACHE_DIR} ${CACHE})
execute_process(COMMAND ${HS} generate -m ${MODEL} -p "Once upon a time" -n 64 --spec none
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
if(NOT rc EQUAL 0 OR NOT err MATCHES "generated [0-9]+ tokens")
  message(FATAL_ERROR "generate with 512-bit vectors ended with '${rc}' (a timeout: the split barriers "
                      "wait out llvmpipe's loop limit):\n${out}${err}")
endif()
# generate names its device: the variable must have reached llvmpipe, or nothing was tested.
if(NOT err MATCHES "on llvmpipe [^\n]*512 bits")
  message(FATAL_ERROR "generate did not run on 512-bit llvmpipe:\n${err}")
endif()
string(REGEX MATCH "[^\n]*generated[^\n]*" line "${err}")
message("wide vectors: ${line}")
