# Row and element-wise ops and RoPE (runtime/op_elem.c). Subgroup (_sg) and
# portable variants of every reduction; the op picks one at record time.
hs_shader(rmsnorm rmsnorm.comp DEFINES USE_SUBGROUP=0)
hs_shader(rmsnorm_sg rmsnorm.comp DEFINES USE_SUBGROUP=1)
hs_shader(softmax softmax.comp DEFINES USE_SUBGROUP=0)
hs_shader(softmax_sg softmax.comp DEFINES USE_SUBGROUP=1)

hs_shader(add eltwise.comp DEFINES OP=1)
hs_shader(mul eltwise.comp DEFINES OP=2)
hs_shader(scale eltwise.comp DEFINES OP=3)
hs_shader(gelu eltwise.comp DEFINES OP=4)
hs_shader(silu eltwise.comp DEFINES OP=5)
hs_shader(swiglu eltwise.comp DEFINES OP=6)
hs_shader(geglu eltwise.comp DEFINES OP=7)

hs_shader(rope rope.comp DEFINES ROPE_KV=0)
hs_shader(rope_kv_f32 rope.comp DEFINES ROPE_KV=1 CACHE_F16=0)
hs_shader(rope_kv_f16 rope.comp DEFINES ROPE_KV=1 CACHE_F16=1)
# Caches bound as HS_KV_MAX_CHUNKS windows (layers past maxStorageBufferRange).
hs_shader(rope_kv_f32_kv4 rope.comp DEFINES ROPE_KV=1 CACHE_F16=0 KV_CHUNKS=4)
hs_shader(rope_kv_f16_kv4 rope.comp DEFINES ROPE_KV=1 CACHE_F16=1 KV_CHUNKS=4)

# Row gather / scatter by device-read index lists (draft head inputs and hidden states).
hs_shader(gather_rows gather_rows.comp)
