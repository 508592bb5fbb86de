# Converts a random EAGLE-3 checkpoint of stories260K's sizes (saved as pytorch_model.bin) into a head file
# for stories260K and checks that heterospec's GGUF reader takes it (`heterospec info`):
#   cmake -DPY=<venv python> -DSRC=<source dir> -DHS=<heterospec> -DTARGET=<stories260K.gguf> -DWORK=<dir>
#         -P eagle3_convert_info.cmake
function(run what)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "eagle3_convert_info: ${what} failed (${rc})")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()
file(REMOVE_RECURSE ${WORK})
run("making the checkpoint" ${PY} ${SRC}/tools/tests/eagle3_ckpt.py ${WORK}/ckpt --format bin)
run("converting" ${PY} ${SRC}/tools/convert_eagle3.py ${WORK}/ckpt -o ${WORK}/head.gguf --target ${TARGET})
run("heterospec info" ${HS} info -m ${WORK}/head.gguf)
foreach(re "14 metadata keys, 14 tensors" "general.architecture +str +\"eagle3\""
        "eagle3.target_layers +arr\\[i32\\] +3 items: \\[2, 2, 2\\]" "eagle3.draft_vocab_size +u32 +256"
        "blk.0.attn_q.weight +F16 +\\[128, 64\\]" "d2t +I32 +\\[256\\]")
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "eagle3_convert_info: heterospec info does not show '${re}'")
  endif()
endforeach()
