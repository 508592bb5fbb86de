# Token-picking reductions (runtime/op_select.c): argmax and Top-K with tail
# mass and entropy. Subgroup (_sg) and portable variants; the op picks one at
# record time from hs_ops_subgroup().
hs_shader(argmax_sg argmax.comp DEFINES USE_SUBGROUP=1)
hs_shader(argmax_nosg argmax.comp DEFINES USE_SUBGROUP=0)
hs_shader(topk_sg topk.comp DEFINES USE_SUBGROUP=1)
hs_shader(topk_nosg topk.comp DEFINES USE_SUBGROUP=0)
