# Attention over the KV cache with tree visibility, the tree ancestor mask, and
# KV compaction (runtime/op_attn.c).
# attention uses no subgroup operations, so it has no portable twin.
hs_shader(attention_f32 attention.comp DEFINES KV_F16=0)
hs_shader(attention_f16x4 attention.comp DEFINES KV_F16=2)
hs_shader(attention_f16x8 attention.comp DEFINES KV_F16=4)
hs_shader(tree_mask tree_mask.comp)
hs_shader(kv_gather_u1 kv_gather.comp DEFINES VEC4=0)
hs_shader(kv_gather_u4 kv_gather.comp DEFINES VEC4=1)
