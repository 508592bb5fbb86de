# Token-picking reductions (runtime/op_select.c): argmax and Top-K with tail
# mass and entropy. Subgroup (_sg) and portable variants; the op picks one at
# record time from hs_ops_subgroup().
hs_shader(argmax_sg argmax.comp DEFINES USE_SUBGROUP=1)
hs_shader(argmax_nosg argmax.comp DEFINES USE_SUBGROUP=0)
# _tx: the logits through a uniform texel buffer (lavapipe: one gather per
# vec4 instead of a loop over the lanes); the same results.
hs_shader(argmax_sg_tx argmax.comp DEFINES USE_SUBGROUP=1 USE_TEXEL=1)
hs_shader(argmax_nosg_tx argmax.comp DEFINES USE_SUBGROUP=0 USE_TEXEL=1)
hs_shader(topk_sg topk.comp DEFINES USE_SUBGROUP=1)
hs_shader(topk_nosg topk.comp DEFINES USE_SUBGROUP=0)
hs_shader(topk_sg_tx topk.comp DEFINES USE_SUBGROUP=1 USE_TEXEL=1)
hs_shader(topk_nosg_tx topk.comp DEFINES USE_SUBGROUP=0 USE_TEXEL=1)
