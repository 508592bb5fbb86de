# Weight products and embedding gather (runtime/op_matmul.c). One variant per
# weight type; matmul has a subgroup (_sg) and a portable variant, which give
# bitwise the same results. Prologue, epilogue and tile sizes are
# specialization constants.
foreach(t f32:0 f16:1 q4_0:2 q4_1:3 q8_0:8 q4_K:12 q6_K:14)
  string(REPLACE ":" ";" tv ${t})
  list(GET tv 0 tname)
  list(GET tv 1 tid)
  hs_shader(matmul_${tname} matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=0)
  hs_shader(matmul_${tname}_sg matmul.comp DEFINES TYPE=${tid} USE_SUBGROUP=1)
  hs_shader(get_rows_${tname} get_rows.comp DEFINES TYPE=${tid})
endforeach()
