/* hs_ops — the op layer over hs_vk: tensor element types, a registry of
 * pipelines (created on first use, keyed by variant name and specialization
 * constants), the per-vendor tuning table, and the recording functions of every
 * op (declared per group in runtime/op_<group>.h).
 *
 * Conventions for every op:
 *   - activations are f32 on the device, row-major, described by hs_vk_binding
 *     plus sizes passed to the op;
 *   - an op records into a hs_vk_seq (hs_op_<name>(ops, seq, ...)); nothing is
 *     submitted; barriers come from the sequence's automatic hazard tracking;
 *   - every op has a plain-C reference in tests/ and a test comparing them;
 *   - products and reductions have a fixed reduction order per output element,
 *     independent of the batch size N (batch invariance, DESIGN.md section 3).
 *
 * Ownership: hs_ops borrows the hs_vk_ctx; destroy hs_ops before the context.
 */
#ifndef HS_OPS_H
#define HS_OPS_H

#include "hs_vk.h"

/* Element types; values match ggml's type ids as written in GGUF. */
typedef enum hs_type {
    HS_TYPE_F32 = 0,
    HS_TYPE_F16 = 1,
    HS_TYPE_Q4_0 = 2,
    HS_TYPE_Q4_1 = 3,
    HS_TYPE_Q8_0 = 8,
    HS_TYPE_Q4_K = 12,
    HS_TYPE_Q6_K = 14,
} hs_type;

bool hs_type_supported(uint32_t type);
const char *hs_type_name(hs_type t);
uint32_t hs_type_block_elems(hs_type t); /* elements per block (1 for f32/f16) */
uint32_t hs_type_block_bytes(hs_type t); /* bytes per block in GGUF */
/* Bytes of one row of n elements in GGUF layout; n must be a multiple of the block. */
uint64_t hs_type_row_bytes(hs_type t, uint64_t n);

/* Per-vendor tuning: one table, chosen from caps (runtime/hs_tuning.c). */
typedef struct hs_tuning {
    const char *name;            /* "lavapipe", "nvidia", ... */
    uint32_t matvec_rows_per_wg; /* output rows one workgroup computes for N = 1 */
    uint32_t matmul_cols_per_wg; /* activation columns sharing one weight load (N > 1) */
    uint32_t reduce_wg_size;     /* workgroup size of row reductions (norm, softmax, top-k) */
} hs_tuning;

typedef struct hs_ops hs_ops;

hs_status hs_ops_create(hs_vk_ctx *vk, hs_ops **out);
void hs_ops_destroy(hs_ops *ops);
hs_vk_ctx *hs_ops_vk(const hs_ops *ops);
const hs_vk_caps *hs_ops_caps(const hs_ops *ops);
const hs_tuning *hs_ops_tuning(const hs_ops *ops);
/* Returns the pipeline for desc, creating it on first use. Keyed by desc->name
 * and the specialization constants, so the name must identify the SPIR-V. */
hs_status hs_ops_pipeline(hs_ops *ops, const hs_vk_pipeline_desc *desc, hs_vk_pipeline **out);
/* Subgroup size the op kernels are built for: the device's, or 1 when
 * subgroup operations are off (HS_VK_DISABLE_SUBGROUP_OPS). */
uint32_t hs_ops_subgroup(const hs_ops *ops);

#endif
