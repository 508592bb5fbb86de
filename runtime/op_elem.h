/* op_elem — row and element-wise ops (RMSNorm, softmax, add/mul/scale, GELU,
 * SiLU, SwiGLU/GeGLU, row gather/scatter by index) and rotary position
 * embedding, including the fused RoPE + KV-cache write that follows the QKV
 * projection.
 *
 * Every function records one op into a hs_vk_seq (nothing is submitted) and
 * returns HS_ERR_INVALID_ARG / HS_ERR_OUT_OF_RANGE with a message on bad sizes.
 * Tensors are f32, row-major, given as hs_vk_binding (buffer, byte offset,
 * range; range 0 = to the end of the buffer). Offsets need only be multiples of
 * 4 bytes: the ops bind the aligned-down offset and pass the rest to the shader.
 * Rows (and flat arrays) that start on 16-byte boundaries are accessed as vec4,
 * which is faster; the results are bitwise the same either way. A tensor larger
 * than maxStorageBufferRange is processed in several dispatches (split at row
 * boundaries); row counts past maxComputeWorkGroupCount[0] use a 2-D grid and
 * the element-wise kernels loop with a grid stride, so any count fits. A single
 * row (or one token's QKV) must fit in
 * maxStorageBufferRange together with its offset's alignment slack (a row of
 * exactly the range at an aligned offset fits), else HS_ERR_VK_UNSUPPORTED
 * names the sizes. Rows are not split across bindings: a split softmax or norm
 * would need a second pass per row, and a vocabulary row (1 MiB for 262144
 * logits) is far below the 128 MiB of the smallest common range. KV caches
 * larger than the range are bound in windows (below).
 *
 * Exactness: rmsnorm and softmax reduce every row in a fixed order that does not
 * depend on n (DESIGN.md section 3): row j computed alone is bitwise equal to
 * row j inside a batch. The element-wise ops and RoPE have no reductions.
 * Aliasing: where noted, the output may be the very same range as an input (in
 * place); partially overlapping ranges are not supported.
 *
 * ---- KV-cache layout (shared with the attention kernels) ----
 * One layer's cache is two tensors k and v of shape [n_ctx][n_kv_head][head_dim]
 * (row-major), element type f32 or f16 (IEEE binary16, little-endian, as a plain
 * array of halves; with f16 a row r of head h starts at element
 * (r * n_kv_head + h) * head_dim, i.e. byte 2 * that). head_dim is even, so
 * every head row starts on a 4-byte boundary and may be read as packed pairs
 * (unpackHalf2x16: low half = even element). K is stored after RoPE; V as
 * projected. hs_op_rope_kv and the Q/K/V product's fused write both store an
 * f16 cache as packed pairs (packHalf2x16), so both round alike (the f32 -> f16
 * rounding is the device's: round to nearest even on lavapipe) and no 16-bit
 * storage is needed.
 *
 * Ownership: the ops borrow every buffer; nothing is kept after the call except
 * what the sequence records. Thread-safety: as hs_ops (one thread).
 */
#ifndef HS_OP_ELEM_H
#define HS_OP_ELEM_H

#include "hs_ops.h"

/* y [n][dim] = x [n][dim] / sqrt(mean(x^2) + eps) * w [dim], per row.
 * w may be NULL (no weight). y may alias x. One dispatch (more only for
 * tensors past maxStorageBufferRange). */
hs_status hs_op_rmsnorm(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *w,
                        const hs_vk_binding *y, uint32_t n, uint32_t dim, float eps);

/* y [n][dim] = softmax(scale * x [n][dim]) per row. dim may be a vocabulary
 * (one workgroup loops over the row). y may alias x. A row that is entirely
 * -inf gives NaN. */
hs_status hs_op_softmax(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                        uint32_t n, uint32_t dim, float scale);

/* y [count] = a + b, a * b (y may alias a or b). */
hs_status hs_op_add(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *a, const hs_vk_binding *b,
                    const hs_vk_binding *y, uint64_t count);
hs_status hs_op_mul(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *a, const hs_vk_binding *b,
                    const hs_vk_binding *y, uint64_t count);
/* y [count] = s * x (y may alias x). */
hs_status hs_op_scale(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                      uint64_t count, float s);
/* y [count] = gelu(x), tanh approximation (gelu_pytorch_tanh, ggml's GELU):
 * 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). y may alias x. */
hs_status hs_op_gelu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                     uint64_t count);
/* y [count] = silu(x) = x / (1 + exp(-x)). y may alias x. */
hs_status hs_op_silu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                     uint64_t count);
/* Gated MLP activations. gu [n][2 * ff] holds gate (first ff) then up per
 * token; y [n][ff] = act(gate) * up, act = silu (SwiGLU, llama) or gelu
 * (GeGLU, gemma). y must not overlap gu. */
hs_status hs_op_swiglu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *gu, const hs_vk_binding *y,
                       uint32_t n, uint32_t ff);
hs_status hs_op_geglu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *gu, const hs_vk_binding *y,
                      uint32_t n, uint32_t ff);

/* ---- row gather / scatter ----
 * Copies f32 rows picked by device-read index lists, so a recorded sequence
 * replays with new rows (hs_op_get_rows does this for weight tables; this op
 * for activations: a draft head's tap features by slot, its parents' hidden
 * states, its new nodes' hidden states into their slots). One dispatch; more
 * only when the source is larger than maxStorageBufferRange (one per window of
 * source rows) or an unindexed side, or n, must be cut into chunks. An indexed
 * destination must fit one binding. */
typedef struct hs_gather_rows {
    hs_vk_binding src; /* f32 [src_rows][src_stride] */
    uint32_t src_rows, src_stride;
    hs_vk_binding dst; /* f32 [dst_rows][dst_stride] */
    uint32_t dst_rows, dst_stride;
    uint32_t cols;                /* floats copied per row, <= both strides */
    const hs_vk_binding *src_ids; /* uint32 [n]: source row of entry i; NULL: row i */
    const hs_vk_binding *dst_ids; /* uint32 [n]: destination row of entry i; NULL: row i */
} hs_gather_rows;

/* For i < n: dst row d_i := src row s_i (the first cols floats). A source id
 * >= src_rows writes zeros; a destination id >= dst_rows skips the entry
 * (padding of a capacity bucket). Destination ids must not repeat, and dst
 * must not overlap src. Without an index list a side needs n rows. */
hs_status hs_op_gather_rows(hs_ops *ops, hs_vk_seq *seq, const hs_gather_rows *g, uint32_t n);

/* RoPE modes, values as ggml's rope type. */
typedef enum hs_rope_mode {
    HS_ROPE_NORMAL = 0, /* rotates adjacent pairs (x[2i], x[2i+1]) (llama, smollm2) */
    HS_ROPE_NEOX = 2,   /* rotates (x[i], x[i + n_rot/2]) (qwen2, gemma3) */
} hs_rope_mode;

/* theta_i = freq_scale * (pos * freq_base^(-2i / n_rot)), i in [0, n_rot/2);
 * head dims >= n_rot pass through unchanged. n_rot is even, <= head_dim and
 * <= 512.
 * This is ggml's rope with ext_factor = 0 and attn_factor = 1 (no YaRN). */
typedef struct hs_rope_params {
    uint32_t n_rot;
    hs_rope_mode mode;
    float freq_base;  /* 10000 for llama */
    float freq_scale; /* 1 / linear scaling factor; 1 for none */
    /* Optional (NULL: none) frequency table f32 [n_rot/2] filled from
     * hs_rope_freqs(); the ops then take f_i from it instead of computing
     * freq_base^(-2i/n_rot) on the device. Recommended: with it the angles are
     * bitwise those of the C reference (and of ggml's powf), and the rotated
     * values differ by ~1e-6 (cos/sin only). Without it the device computes f_i
     * to about one ulp, which moves angles by up to ~2 ulp of pos * f_i
     * (5e-4 rad at position 4096). */
    const hs_vk_binding *freqs;
} hs_rope_params;

/* out[i] = powf(freq_base, -2i / n_rot) for i < n_rot / 2: the table for
 * hs_rope_params.freqs (upload it once per model and RoPE configuration). */
void hs_rope_freqs(const hs_rope_params *rp, float *out);

/* Rotates x [n][n_heads][head_dim] in place; token t uses position pos[t]
 * (int32 [n], read on the device when the sequence runs). head_dim even. */
hs_status hs_op_rope(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *pos,
                     uint32_t n, uint32_t n_heads, uint32_t head_dim, const hs_rope_params *rp);

/* One layer's KV cache, layout as described at the top of this file. */
typedef struct hs_kv_layer {
    hs_vk_binding k; /* [n_ctx][n_kv_head][head_dim] */
    hs_vk_binding v; /* [n_ctx][n_kv_head][head_dim] */
    hs_type type;    /* HS_TYPE_F32 or HS_TYPE_F16 */
    uint32_t n_ctx;  /* rows */
    uint32_t n_kv_head;
    uint32_t head_dim; /* even */
} hs_kv_layer;

/* ---- KV caches larger than one binding ----
 * maxStorageBufferRange limits one binding, not a buffer (a buffer may grow to
 * maxMemoryAllocationSize), and long contexts make one layer's cache larger
 * than the range (128 MiB on lavapipe and many phones). The KV kernels
 * (hs_op_rope_kv, hs_op_attention, hs_op_kv_gather) then bind each cache
 * tensor as `chunks` consecutive windows of chunk_rows rows, and a variant of
 * each kernel (built with KV_CHUNKS = HS_KV_MAX_CHUNKS) picks the window of a
 * row as (row / chunk_rows, row % chunk_rows) with a chain of ifs on constant
 * indices: Vulkan 1.1 core, no descriptor indexing. The layout stays the one
 * above, flat in the caller's buffer; only the binding is cut, so results are
 * bitwise those of an unsplit cache (the same values reach the same
 * arithmetic). chunk_rows keeps every window start at the same alignment slack
 * as the first, so one offset per tensor serves all of its windows. A layer
 * that fits one binding keeps the unsplit kernels and bindings (no cost).
 * Splitting needs 2 (HS_KV_MAX_CHUNKS - 1) more storage-buffer bindings per
 * kernel (13 for hs_op_rope_kv): a device whose
 * maxPerStageDescriptorStorageBuffers is lower (checked when the pipeline is
 * created, before anything is recorded), or a layer that needs more than
 * HS_KV_MAX_CHUNKS chunks (512 MiB with a 128 MiB range), gets
 * HS_ERR_VK_UNSUPPORTED naming the numbers. */
#define HS_KV_MAX_CHUNKS 4u

typedef struct hs_kv_split {
    uint32_t chunks;     /* windows per cache tensor; 1: the layer fits one binding */
    uint32_t chunk_rows; /* rows per window (n_ctx when chunks = 1); the last may hold fewer */
} hs_kv_split;

/* How the KV kernels bind kv on this device (it depends on the range, the
 * offsets' alignment and the row size only). HS_ERR_VK_UNSUPPORTED when it
 * needs more than HS_KV_MAX_CHUNKS windows or one row does not fit. */
hs_status hs_kv_split_plan(const hs_ops *ops, const hs_kv_layer *kv, hs_kv_split *out);

/* For the KV kernels (op_elem.c, op_attn.c), not for callers.
 * hs_kv_plan_rows: the plan of caches k and v [n_ctx][row_bytes] given by the
 * bindings of their first row. A split kernel with n_base bindings unsplit
 * takes window 0 of K and V at the unsplit K and V bindings (k_slot, v_slot)
 * and window c >= 1 at bindings n_base + 2 (c - 1) (K) and + 1 (V); its
 * binding count is hs_kv_bindings(n_base, split). hs_kv_bind_windows fills
 * those bindings (unused windows repeat window 0) and gives in *k_off /
 * *v_off the slack in units of `unit` bytes, the same for every window. */
hs_status hs_kv_plan_rows(const hs_ops *ops, const char *op, const hs_vk_binding *k, const hs_vk_binding *v,
                          uint64_t row_bytes, uint32_t n_ctx, hs_kv_split *out);
static inline uint32_t hs_kv_bindings(uint32_t n_base, const hs_kv_split *sp) {
    return sp->chunks > 1 ? n_base + 2 * (HS_KV_MAX_CHUNKS - 1) : n_base;
}
/* Write mask bits of the extra windows (bindings n_base ..). */
static inline uint32_t hs_kv_extra_mask(uint32_t n_base, const hs_kv_split *sp) {
    return sp->chunks > 1 ? ((1u << (2 * (HS_KV_MAX_CHUNKS - 1))) - 1u) << n_base : 0;
}
void hs_kv_bind_windows(const hs_ops *ops, const hs_vk_binding *k, const hs_vk_binding *v, uint64_t row_bytes,
                        uint32_t n_ctx, const hs_kv_split *sp, uint32_t unit, uint32_t k_slot, uint32_t v_slot,
                        uint32_t n_base, hs_vk_binding *b, uint32_t *k_off, uint32_t *v_off);

/* Fused RoPE + KV write, one dispatch. qkv [n][(n_head + 2 n_kv_head) head_dim]
 * is the fused projection (all Q heads, then K heads, then V heads). Writes
 * q_out [n][n_head][head_dim] = rope(Q), and for each token t the cache row
 * rows[t] (uint32 [n], read on the device): k[rows[t]] = rope(K),
 * v[rows[t]] = V. Positions pos int32 [n] as hs_op_rope. Rows >= n_ctx are
 * skipped on the device; rows[] must not repeat within one call. No other cache
 * row is touched. q_out must not overlap qkv. */
hs_status hs_op_rope_kv(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *qkv, const hs_vk_binding *pos,
                        const hs_vk_binding *rows, const hs_vk_binding *q_out, const hs_kv_layer *kv,
                        uint32_t n, uint32_t n_head, const hs_rope_params *rp);

/* For op_matmul (the Q/K/V product's fused epilogue), not for callers: checks
 * the operands as hs_op_rope_kv does (the same errors), then says whether the
 * write can run inside the product (fused: an f32 or f16 cache in one binding, normal
 * mode with a frequency table, every operand in one window) and gives the
 * bindings and element offsets it needs. */
typedef struct hs_rope_kv_bind {
    bool fused;
    bool f16; /* an f16 cache: k_off and v_off in halves, pairs written packed */
    hs_vk_binding pos, rows, freqs, q_out, k, v;
    uint32_t pos_off, rows_off, f_off, q_off, k_off, v_off;
} hs_rope_kv_bind;
hs_status hs_rope_kv_fused(const hs_ops *ops, const char *op, const hs_vk_binding *qkv, const hs_vk_binding *pos,
                           const hs_vk_binding *rows, const hs_vk_binding *q_out, const hs_kv_layer *kv,
                           uint32_t n, uint32_t n_head, const hs_rope_params *rp, hs_rope_kv_bind *out);

#endif
