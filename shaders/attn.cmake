# Attention over the KV cache with tree visibility, the tree ancestor mask, and
# KV compaction (runtime/op_attn.c).
# _tx reads q and an unsplit f32 cache through uniform texel buffers (the same
# values); the plain kernels are the portable twins of _sg and _qb (subgroups).
hs_shader(attention_f32 attention.comp DEFINES KV_F16=0)
hs_shader(attention_f32_tx attention.comp DEFINES KV_F16=0 KV_TEXEL=1)
hs_shader(attention_f16x4 attention.comp DEFINES KV_F16=2)
hs_shader(attention_f16x8 attention.comp DEFINES KV_F16=4)
# Caches bound as HS_KV_MAX_CHUNKS windows (layers past maxStorageBufferRange).
hs_shader(attention_f32_kv4 attention.comp DEFINES KV_F16=0 KV_CHUNKS=4)
hs_shader(attention_f16x4_kv4 attention.comp DEFINES KV_F16=2 KV_CHUNKS=4)
hs_shader(attention_f16x8_kv4 attention.comp DEFINES KV_F16=4 KV_CHUNKS=4)
# _q8: the output in the 8-bit form of the q4_1 products (q8x.glsl).
hs_shader(attention_f32_q8 attention.comp DEFINES KV_F16=0 OUT_Q8=1)
hs_shader(attention_f32_tx_q8 attention.comp DEFINES KV_F16=0 KV_TEXEL=1 OUT_Q8=1)
hs_shader(attention_f16x4_q8 attention.comp DEFINES KV_F16=2 OUT_Q8=1)
hs_shader(attention_f16x8_q8 attention.comp DEFINES KV_F16=4 OUT_Q8=1)
hs_shader(attention_f32_kv4_q8 attention.comp DEFINES KV_F16=0 KV_CHUNKS=4 OUT_Q8=1)
hs_shader(attention_f16x4_kv4_q8 attention.comp DEFINES KV_F16=2 KV_CHUNKS=4 OUT_Q8=1)
hs_shader(attention_f16x8_kv4_q8 attention.comp DEFINES KV_F16=4 KV_CHUNKS=4 OUT_Q8=1)
# _sg: the one-query kernel's merge through subgroup shuffles instead of shared
# memory (the workgroup is one subgroup; the same bits).
hs_shader(attention_f32_tx_sg attention.comp DEFINES KV_F16=0 KV_TEXEL=1 SG_MERGE=1)
hs_shader(attention_f32_tx_sg_q8 attention.comp DEFINES KV_F16=0 KV_TEXEL=1 SG_MERGE=1 OUT_Q8=1)
# The same for an f16 cache read eight halves per texel (head_dim % 8 == 0).
hs_shader(attention_f16x8_tx attention.comp DEFINES KV_F16=4 KV_TEXEL=1)
hs_shader(attention_f16x8_tx_q8 attention.comp DEFINES KV_F16=4 KV_TEXEL=1 OUT_Q8=1)
hs_shader(attention_f16x8_tx_sg attention.comp DEFINES KV_F16=4 KV_TEXEL=1 SG_MERGE=1)
hs_shader(attention_f16x8_tx_sg_q8 attention.comp DEFINES KV_F16=4 KV_TEXEL=1 SG_MERGE=1 OUT_Q8=1)
# _qb: QB queries per workgroup share the prefix rows' loads through subgroup
# shuffles (an unsplit cache; the same bits as the kernels above).
hs_shader(attention_f32_qb attention.comp DEFINES KV_F16=0 QBLOCK=1)
hs_shader(attention_f32_tx_qb attention.comp DEFINES KV_F16=0 KV_TEXEL=1 QBLOCK=1)
hs_shader(attention_f32_qb_q8 attention.comp DEFINES KV_F16=0 QBLOCK=1 OUT_Q8=1)
hs_shader(attention_f32_tx_qb_q8 attention.comp DEFINES KV_F16=0 KV_TEXEL=1 QBLOCK=1 OUT_Q8=1)
# ... and over an f16 cache read eight halves per unit (head_dim % 8 == 0).
hs_shader(attention_f16x8_qb attention.comp DEFINES KV_F16=4 QBLOCK=1)
hs_shader(attention_f16x8_tx_qb attention.comp DEFINES KV_F16=4 KV_TEXEL=1 QBLOCK=1)
hs_shader(attention_f16x8_qb_q8 attention.comp DEFINES KV_F16=4 QBLOCK=1 OUT_Q8=1)
hs_shader(attention_f16x8_tx_qb_q8 attention.comp DEFINES KV_F16=4 KV_TEXEL=1 QBLOCK=1 OUT_Q8=1)
hs_shader(tree_mask tree_mask.comp)
hs_shader(kv_gather_u1 kv_gather.comp DEFINES VEC4=0)
hs_shader(kv_gather_u4 kv_gather.comp DEFINES VEC4=1)
hs_shader(kv_gather_u1_kv4 kv_gather.comp DEFINES VEC4=0 KV_CHUNKS=4)
hs_shader(kv_gather_u4_kv4 kv_gather.comp DEFINES VEC4=1 KV_CHUNKS=4)
