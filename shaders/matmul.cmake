# Weight products and embedding gather (runtime/op_matmul.c). One variant per
# weight type; matmul has a subgroup (_sg) and a portable variant, which give
# bitwise the same results, and each of those reads the weights from storage
# buffers or, with _tx, from uniform texel buffers (the same bits), and the
# activations from a storage buffer or, with _ux, a uniform buffer. Prologue,
# epilogue and tile sizes are specialization constants.
foreach(t f32:0 f16:1 q4_0:2 q4_1:3 q8_0:8 q4_K:12 q6_K:14)
  string(REPLACE ":" ";" tv ${t})
  list(GET tv 0 tname)
  list(GET tv 1 tid)
  hs_shader(matmul_${tname} matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=0 USE_TEXEL=0)
  hs_shader(matmul_${tname}_sg matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=1 USE_TEXEL=0)
  hs_shader(matmul_${tname}_tx matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=0 USE_TEXEL=1)
  hs_shader(matmul_${tname}_sg_tx matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=1 USE_TEXEL=1)
  hs_shader(matmul_${tname}_ux matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=0 USE_TEXEL=0 USE_UBO_X=1)
  hs_shader(matmul_${tname}_sg_ux matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=1 USE_TEXEL=0 USE_UBO_X=1)
  hs_shader(matmul_${tname}_tx_ux matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=0 USE_TEXEL=1 USE_UBO_X=1)
  hs_shader(matmul_${tname}_sg_tx_ux matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=1 USE_TEXEL=1 USE_UBO_X=1)
  hs_shader(get_rows_${tname} get_rows.comp DEFINES TYPE=${tid})
endforeach()
hs_shader(matmul_pro matmul_pro.comp DEFINES USE_SUBGROUP=0)
hs_shader(matmul_pro_sg matmul_pro.comp DEFINES USE_SUBGROUP=1)
hs_shader(matmul_pro_ux matmul_pro.comp DEFINES USE_SUBGROUP=0 USE_UBO_X=1)
hs_shader(matmul_pro_sg_ux matmul_pro.comp DEFINES USE_SUBGROUP=1 USE_UBO_X=1)
