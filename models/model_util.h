/* model_util — what the architectures (llama, eagle3) share when they load a
 * GGUF's weights: a 2-D tensor of the expected shape in a type the kernels
 * compute with, uploaded as a device weight; the capacity buckets of their
 * recorded graphs; how the second half of a decoder layer takes its inputs.
 *
 * Errors: HS_ERR_FORMAT naming the file and tensor for a missing or
 * misshapen tensor, HS_ERR_UNSUPPORTED_TYPE for a type no kernel takes.
 * Ownership: the tensor points into the gguf; the weight is the caller's.
 */
#ifndef HS_MODEL_UTIL_H
#define HS_MODEL_UTIL_H

#include "gguf.h"
#include "hs_ops.h"
#include "op_matmul.h"

/* The tensor `name` of shape [rows][cols] (GGUF ne = {cols, rows}). */
hs_status hs_model_matrix(const hs_gguf *g, const char *name, uint32_t rows, uint32_t cols,
                          const hs_gguf_tensor **out);

/* hs_model_matrix, uploaded; adds its device bytes to *bytes. */
hs_status hs_model_load_matrix(hs_ops *ops, const hs_gguf *g, const char *name, uint32_t rows, uint32_t cols,
                               hs_weight **out, uint64_t *bytes);

/* The capacity bucket of a batch of n: the next power of two, at most limit.
 * Graphs are recorded per bucket, so batches of changing size reuse a few. */
uint32_t hs_model_bucket(uint32_t n, uint32_t limit);
/* The target's verification buckets: n itself up to HS_MODEL_EXACT_BUCKETS
 * (the small trees speculation verifies most, where an inert slot costs the
 * most), else hs_model_bucket. */
#define HS_MODEL_EXACT_BUCKETS 8u
uint32_t hs_model_tree_bucket(uint32_t n, uint32_t limit);

/* The second half of a pre-norm decoder layer: attention's output through
 * wo added into the residual stream h, then h += down(silu(gate) * up) of
 * rmsnorm(h). On 8-bit activations its products need no activation pass of
 * their own: attention writes wo's x in that form (into the scratch xs), wo
 * writes x8n of h for gate/up's deferred norm (where gate/up reads x8n: every
 * part on 8-bit activations and an xn buffer), and a stacked [gate | up]
 * weight writes down's x (silu(gate) * up). Each form is bitwise what its pass
 * makes, so the outputs do not depend on the plan. */
typedef struct hs_model_mlp_in {
    const hs_weight *wo, *gu, *wdown; /* gu: gate/up's first part where it is in parts */
    bool gu_stacked;                  /* gate/up is one [gate | up] weight */
    bool gu_x8n;                      /* gate/up reads x8n of h from xn */
    uint32_t head_dim, ff;
    hs_vk_binding h;        /* f32 [n][dim]: the residual stream */
    hs_vk_binding att;      /* f32 [n][q_dim]: attention's output in float form */
    hs_vk_binding gu_out;   /* f32 [n][2 ff]: gate/up's output */
    hs_vk_binding xs, xn;   /* the products' scratch; x8n of h ([n][dim / 32] blocks of 80 bytes) */
    hs_vk_binding ffn_norm; /* f32 [dim] */
    float eps;
    bool act_q8; /* q4_1 products on 8-bit activations */
} hs_model_mlp_in;

typedef struct hs_model_mlp {
    bool att_q8;                         /* attention writes its 8-bit form (the _q8 op) */
    hs_vk_binding att_out;               /* where attention writes: in->att, or xs when att_q8 */
    hs_matmul_opts wo, gu, down;         /* the three products' options */
    hs_vk_binding wo_x, gu_x, down_x;    /* and their inputs */
} hs_model_mlp;

void hs_model_plan_mlp(const hs_model_mlp_in *in, hs_model_mlp *out);

#endif
