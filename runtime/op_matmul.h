/* op_matmul — device weights and the ops that read them: the weight products
 * (matrix x activations, with fused RMSNorm / SwiGLU prologues and a residual
 * epilogue) and the embedding row gather.
 *
 * Usage:
 *   hs_weight *wq;
 *   hs_weight_create(ops, HS_TYPE_Q4_1, rows, cols, gguf_bytes, &wq);   // uploads
 *   hs_op_matmul(ops, seq, wq, x, n, y, NULL);          // y [n][rows] = x [n][cols] W^T
 *   hs_matmul_opts o = {.prologue = HS_MATMUL_RMSNORM, .norm = g, .eps = 1e-5f,
 *                       .residual = true, .res = h};
 *   hs_op_matmul(ops, seq, w_o, x, n, h, &o);           // h += W rmsnorm(x) (in place)
 *   hs_op_get_rows(ops, seq, tok_embd, ids, n, h);      // h [n][cols] = rows ids[j]
 *
 * Weights: the GGUF rows (ggml block layouts of runtime/hs_quant.h) are
 * repacked at upload into the device layout of shaders/quant.glsl, which
 * moves bits only: the device computes with exactly the values ggml's
 * dequantize_row_* gives. A weight larger than maxStorageBufferRange (or
 * maxMemoryAllocationSize) is split into row chunks, each in its own buffer;
 * the ops issue one dispatch per chunk. Activations (x, y, res) of a batch
 * past the range are processed as consecutive column batches that fit, with
 * bitwise the same results. The layout depends on the hs_ops it was
 * made with (rows per group from the tuning table): use a weight only with that
 * hs_ops.
 *
 * Exactness (DESIGN.md section 3): every output y[j][r] is one multiply-add
 * chain over k in increasing order, with the prologue computed per column in a
 * fixed order, whatever n, the tile shape, the chunk or the subgroup variant:
 * column j of a batch is bitwise equal to column j computed alone (the
 * subgroup and portable variants even agree with each other). The products
 * use f32 arithmetic only (no fp16 arithmetic, no int8 dot products; f16
 * weights and scales are read as packed uints and converted exactly), so the
 * results follow the f32 reference up to summation rounding. The RMSNorm
 * prologue is fused per workgroup: its result may differ in the last bits from
 * hs_op_rmsnorm followed by a plain product.
 *
 * Ownership: hs_weight_create gives the weight to the caller; destroy it
 * before its hs_ops. The ops borrow every binding. Thread-safety: as hs_ops.
 */
#ifndef HS_OP_MATMUL_H
#define HS_OP_MATMUL_H

#include "hs_ops.h"
#include "op_elem.h"

typedef struct hs_weight hs_weight;

/* Uploads a [rows][cols] matrix given in GGUF layout (rows * row_bytes). cols
 * must be a multiple of the type's block. */
hs_status hs_weight_create(hs_ops *ops, hs_type type, uint32_t rows, uint32_t cols, const void *data,
                           hs_weight **out);
/* Stacks count matrices of the same type and cols by rows (part i has rows[i]
 * rows, GGUF data data[i]) into one weight: output rows of part i follow those
 * of parts 0..i-1. Used for fused Q/K/V and gate/up products. */
hs_status hs_weight_create_stacked(hs_ops *ops, hs_type type, uint32_t cols, uint32_t count, const uint32_t *rows,
                                   const void *const *data, hs_weight **out);
void hs_weight_destroy(hs_weight *w);

uint32_t hs_weight_rows(const hs_weight *w);
uint32_t hs_weight_cols(const hs_weight *w);
hs_type hs_weight_type(const hs_weight *w);
/* Bytes the weight occupies on the device (all chunks, padding included). */
uint64_t hs_weight_device_bytes(const hs_weight *w);
/* Number of row chunks (buffers) the weight was split into. */
uint32_t hs_weight_chunks(const hs_weight *w);
/* Rows of one group of a weight's device layout on this context (the
 * products' lanes x the tuning's rows per invocation): a chunk holds whole
 * groups, so one group must fit maxStorageBufferRange. */
uint32_t hs_weight_group_rows(const hs_ops *ops);

typedef enum hs_matmul_prologue {
    HS_MATMUL_PLAIN = 0,   /* x' = x */
    HS_MATMUL_RMSNORM = 1, /* x' = x * (1 / sqrt(mean(x^2) + eps)) * norm */
    HS_MATMUL_SWIGLU = 2,  /* x is [n][2 * cols] = [gate | up]; x' = silu(gate) * up */
} hs_matmul_prologue;

/* The RoPE + KV write that follows a stacked Q/K/V product (hs_matmul_opts.rope_kv):
 * the arguments of hs_op_rope_kv but the product's output. */
typedef struct hs_matmul_rope_kv {
    const hs_vk_binding *pos;   /* int32 [n] */
    const hs_vk_binding *rows;  /* uint32 [n]: cache rows */
    const hs_vk_binding *q_out; /* f32 [n][n_head][head_dim] */
    const hs_kv_layer *kv;
    uint32_t n_head;
    const hs_rope_params *rp;
} hs_matmul_rope_kv;

typedef struct hs_matmul_opts {
    hs_matmul_prologue prologue;
    hs_vk_binding norm; /* f32 [cols], HS_MATMUL_RMSNORM only */
    float eps;          /* HS_MATMUL_RMSNORM only */
    bool residual;      /* y = res + W x' */
    hs_vk_binding res;  /* f32 [n][y_stride]; may be the very same range as y (in place) */
    uint32_t y_stride;  /* floats between columns of y and res (0: rows). A larger stride
                         * writes the rows into a slice of a wider output, e.g. Q, K and V
                         * of different types into one [n][q + 2 kv] buffer */
    hs_vk_binding scratch; /* optional f32 [n][cols], not overlapping x, y or res: with a
                            * prologue and n >= the tuning's split_n, x' is computed there once
                            * per column and the product reads it (bitwise the same results;
                            * without it, every workgroup recomputes its columns' x') */
    bool act_q8;           /* q4_1 weights (others ignore it): x' is rounded to 8-bit integers per
                            * 32-element block (d = max |x'| / 127, x' ~ d round(x' / d)) in a pass of
                            * its own into scratch (needed, 16-byte aligned, for any n and prologue),
                            * and the product multiplies integers: faster where f32 multiply-adds
                            * bound the products (lavapipe), at 8-bit activation precision as
                            * llama.cpp's q8_1 dot products. Results differ from act_q8 = false but
                            * stay the same for every batch, shape, tuning and variant */
    bool x_q8;             /* with act_q8 and no prologue: x already holds that 8-bit form of x
                            * ([n][cols / 32] blocks of 80 bytes, as hs_op_attention_q8 writes it),
                            * so the product reads it without a pass of its own. With
                            * HS_MATMUL_RMSNORM: x holds x8n of the input h (hs_op_q8_norm or
                            * q8_out below: the 8-bit form of h * norm with each block's sum of
                            * squares of h), and the product scales its result by RMSNorm's
                            * 1 / sqrt(mean(h^2) + eps) itself (eps used, norm not) */
    hs_vk_binding q8_out;  /* optional (rows % 32 == 0, y_stride = rows): also write x8n of y (after
                            * the residual) with gain q8_norm, [n][rows / 32] blocks of 80 bytes,
                            * 16-byte aligned, not overlapping x, y, res or scratch: the input of
                            * the next RMSNorm product. Products on 8-bit activations whose
                            * workgroups own whole 32-row blocks write it in their epilogue (no
                            * pass); others run hs_op_q8_norm after the product: the same bits */
    hs_vk_binding q8_norm; /* f32 [rows], 16-byte aligned: the gain of q8_out */
    hs_vk_binding swiglu_q8; /* optional, for a stacked [gate | up] weight (rows = 2 ff, ff % 32 == 0,
                              * no residual or q8_out): write the 8-bit form of silu(gate) * up,
                              * [n][ff / 32] blocks of 80 bytes, 16-byte aligned, not overlapping x, y
                              * or scratch: the x of the next product with x_q8. y is scratch then
                              * (left unspecified). Products on 8-bit activations whose workgroups own
                              * whole 32-row blocks compute gate and up rows together and write no y;
                              * others write y and run the SwiGLU pass: the same bits */
    const hs_matmul_rope_kv *rope_kv; /* optional, for a stacked Q/K/V weight (rows = (n_head + 2 n_kv)
                              * head_dim, no residual, q8_out or swiglu_q8, y_stride = rows): then
                              * hs_op_rope_kv(y, ...) (y is scratch then, left unspecified).
                              * Products on 8-bit activations rotate and write Q, K and V in their
                              * epilogue where the write can be fused (an f32 cache in one binding,
                              * normal mode with a frequency table, one weight chunk, one batch;
                              * not with HS_TUNING ropepass=1); others write y and run the pass: the
                              * same bits */
} hs_matmul_opts;

/* y[j][r] = (res[j][r] +) sum_k W[r][k] * x'[j][k] for j < n, r < rows.
 * x: f32 [n][cols] ([n][2 cols] with SwiGLU); y: f32 [n][y_stride] of which
 * the first rows of each column are written, must not overlap x. Offsets
 * must be multiples of 4 bytes. opt may be NULL. */
hs_status hs_op_matmul(hs_ops *ops, hs_vk_seq *seq, const hs_weight *w, hs_vk_binding x, uint32_t n,
                       hs_vk_binding y, const hs_matmul_opts *opt);

/* Whether hs_op_matmul computes x' (f32) in a pass of its own into opt->scratch
 * for a product of w with n columns (it then leaves x' there: more products of
 * the same x' may read it with HS_MATMUL_PLAIN). False where the pass writes
 * the 8-bit form instead (act_q8). */
bool hs_matmul_splits(const hs_ops *ops, const hs_weight *w, uint32_t n, const hs_matmul_opts *opt);

/* Whether a product of w with opt runs on 8-bit activations (act_q8 and a
 * q4_1 weight). */
bool hs_matmul_act_q8(const hs_weight *w, const hs_matmul_opts *opt);

/* The columns per workgroup of a product of n columns whose tiles may be up
 * to cmax wide: n spread evenly over the fewest tiles, except that a spread
 * wider than 8 takes cmax itself (so a wide tuning compiles tiles of 1..8
 * columns and of cmax, not one per batch size). */
uint32_t hs_matmul_tile_cols(uint32_t n, uint32_t cmax);

/* out = x8n of x with gain norm (see hs_matmul_opts.x_q8): x f32 [n][cols],
 * norm f32 [cols], both 16-byte aligned; out [n][cols / 32] blocks of 80
 * bytes, 16-byte aligned, not overlapping x; cols a multiple of 32. */
hs_status hs_op_q8_norm(hs_ops *ops, hs_vk_seq *seq, hs_vk_binding x, uint32_t n, uint32_t cols,
                        hs_vk_binding norm, hs_vk_binding out);

/* out[j][:] = row ids[j] of table, dequantized (f32 [n][cols]); zeros for ids
 * >= rows. ids: uint32 [n], read on the device when the sequence runs. */
hs_status hs_op_get_rows(hs_ops *ops, hs_vk_seq *seq, const hs_weight *table, hs_vk_binding ids, uint32_t n,
                         hs_vk_binding out);

#endif
