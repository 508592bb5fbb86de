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

/* Per-vendor tuning: one table (runtime/hs_ops.c), chosen from caps, which
 * the environment can override for experiments on a new device:
 *   HS_TUNING="rows=8,cols=4,reduce=64"   (any subset of the keys: rows, cols, reduce,
 *                                          texel, split, ubo, q8, ropepass, attnqb, x8cols)
 * sets matvec_rows_per_wg, matmul_cols_per_wg, reduce_wg_size and the rest in order. None of the
 * values but q8_act changes results: kernels are bitwise the same for every shape. */
typedef struct hs_tuning {
    const char *name;            /* "lavapipe", "nvidia", ...; "...+env" when overridden */
    uint32_t matvec_rows_per_wg; /* rows per invocation of the products (1 .. HS_TUNING_MAX_ROWS);
                                  * a workgroup computes subgroup x this many rows */
    uint32_t matmul_cols_per_wg; /* activation columns sharing one weight load (1 .. HS_TUNING_MAX_COLS) */
    uint32_t reduce_wg_size;     /* workgroup size of row reductions (norm, softmax, top-k); a
                                  * multiple of the subgroup, at most the device's limit */
    uint32_t texel_weights;      /* 1: the products read weights, and attention an unsplit f32 KV
                                  * cache, through uniform texel buffers where the device has them
                                  * (HS_VK_DISABLE_TEXEL_BUFFER), 0: storage buffers */
    uint32_t split_n;            /* products of this many columns or more with a prologue and a
                                  * scratch buffer compute x' in a pass of its own; 0: never */
    uint32_t uniform_x;          /* 1: the products read their activations through uniform
                                  * buffers (windows of whole tiles, one dispatch each), 0: storage
                                  * buffers */
    uint32_t q8_act;             /* 1: q4_1 products that compute x' in a pass of their own
                                  * (split_n) read it as 8-bit integers per 32-element block
                                  * (x8) and multiply in integers; 0: f32 x'. The one tuning
                                  * value that changes results (the activations' precision) */
    uint32_t rope_pass;          /* 1: RoPE + KV write always as a pass of its own; 0: fused into
                                  * the Q/K/V product's epilogue where that product runs on 8-bit
                                  * activations (the same bits either way) */
    uint32_t attn_qb;            /* attention over an unsplit f32 cache with at least this many
                                  * queries: that many queries per workgroup share the prefix rows'
                                  * loads through subgroup shuffles (a power of two dividing the
                                  * subgroup; the same bits); 0: one query per workgroup */
    uint32_t x8_cols;            /* activation columns per workgroup of the products on 8-bit
                                  * activations (q8_act; 1 .. HS_TUNING_MAX_X8_COLS), whose loops
                                  * are [[unroll]]ed for wide tiles; 0: matmul_cols_per_wg */
} hs_tuning;
#define HS_TUNING_MAX_ROWS 8u
#define HS_TUNING_MAX_COLS 8u
/* rows x cols: the accumulators of one product invocation. Larger tiles took
 * lavapipe over 8 minutes to compile (rows 8, cols 8), so they are refused. */
#define HS_TUNING_MAX_ACC 32u
/* The same limits for the products on 8-bit activations, whose unrolled loops
 * compile a tile of rows 4 with 16 columns in seconds. */
#define HS_TUNING_MAX_X8_COLS 16u
#define HS_TUNING_MAX_X8_ACC 64u

/* The table's entry for a device, before any override. */
hs_tuning hs_tuning_for(const hs_vk_caps *caps);

/* The optional device features of DESIGN.md section 6: each with its
 * HS_VK_DISABLE_* switch, whether the device offers it (after the switches),
 * and which kernels use it. A feature that no kernel of this build uses has
 * used_by == NULL: its switch only changes what is enabled on the device, so a
 * test pass with it off runs the same code as the default. The table is in
 * runtime/hs_ops.c; tests/test_runtime.c checks that each switch of a used
 * feature changes the kernel variant it claims to change. */
typedef struct hs_feature_use {
    const char *name;     /* "subgroup operations" */
    const char *env;      /* "HS_VK_DISABLE_SUBGROUP_OPS" */
    bool available;       /* the device has it, after the switches */
    const char *used_by;  /* the kernels that use it when available; NULL: none yet */
    const char *fallback; /* what those kernels do without it */
} hs_feature_use;
#define HS_FEATURE_COUNT 8u
/* Fills out[HS_FEATURE_COUNT] for a device. */
void hs_feature_uses(const hs_vk_caps *caps, hs_feature_use out[HS_FEATURE_COUNT]);

typedef struct hs_ops hs_ops;

hs_status hs_ops_create(hs_vk_ctx *vk, hs_ops **out);
void hs_ops_destroy(hs_ops *ops);
/* Whether a pipeline whose name starts with prefix was made (tests: which kernel an op chose). */
bool hs_ops_made_pipeline(const hs_ops *ops, const char *prefix);
hs_vk_ctx *hs_ops_vk(const hs_ops *ops);
const hs_vk_caps *hs_ops_caps(const hs_ops *ops);
const hs_tuning *hs_ops_tuning(const hs_ops *ops);
/* Replaces the tuning (t->name must outlive ops, e.g. a string literal).
 * HS_ERR_INVALID_ARG, with the reason, for a value out of range for this
 * device. Weights keep the layout they were made with; pipelines are keyed by
 * their constants, so earlier ones stay valid. */
hs_status hs_ops_set_tuning(hs_ops *ops, const hs_tuning *t);
/* llvmpipe (lavapipe) silently ends the loops of a shader invocation after
 * 65535 trips in total (LP_MAX_TGSI_LOOP_ITERATIONS, one counter shared by
 * every loop of the shader). A kernel whose trips grow with a row's length
 * spreads the row over a wider workgroup instead: starting from wg, the
 * workgroup doubles while trips(wg, ctx), the worst-case trips of one
 * invocation, exceed budget and 2 wg stays within wg_max. The budget sits well
 * below the cap, leaving room for the kernel's short loops. The result depends
 * on the row's shape only, never on how many rows a call has, so batch
 * invariance holds. */
#define HS_LOOP_TRIP_CAP 65535u
typedef uint64_t (*hs_trips_fn)(uint32_t wg, const void *ctx);
uint32_t hs_widen_for_trips(uint32_t wg, uint32_t wg_max, uint64_t budget, hs_trips_fn trips, const void *ctx);

/* Binding offsets must be multiples of minStorageBufferOffsetAlignment, so an
 * op binds a window of a tensor at its offset aligned down and passes the
 * remainder (the slack) to the shader; the slack counts against
 * maxStorageBufferRange. This is the largest slack of the windows starting at
 * offset + i * stride for any i >= 0 (stride 0: the one window at offset):
 * exact, so a row that fits the range with the slack it really has is never
 * refused (a 1 MiB row at an aligned offset fits a 1 MiB range). */
uint64_t hs_ops_max_slack(const hs_vk_caps *c, uint64_t offset, uint64_t stride);

/* Returns the pipeline for desc, creating it on first use. Keyed by desc->name
 * and the specialization constants, so the name must identify the SPIR-V. */
hs_status hs_ops_pipeline(hs_ops *ops, const hs_vk_pipeline_desc *desc, hs_vk_pipeline **out);
/* Subgroup size the op kernels are built for: the device's, or 1 when
 * subgroup operations are off (HS_VK_DISABLE_SUBGROUP_OPS). */
uint32_t hs_ops_subgroup(const hs_ops *ops);

#endif
