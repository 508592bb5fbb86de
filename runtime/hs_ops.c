/* hs_ops: element types, pipeline registry, tuning-table lookup. */
#include "hs_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

struct hs_ops {
    hs_vk_ctx *vk;
    hs_tuning tuning;
    char env_name[48]; /* tuning name + "+env" when HS_TUNING overrides it */
    uint32_t subgroup;
    struct {
        char *key;
        hs_vk_pipeline *value;
    } *pipes; /* stb_ds string hash map */
};

bool hs_type_supported(uint32_t type) {
    switch (type) {
    case HS_TYPE_F32:
    case HS_TYPE_F16:
    case HS_TYPE_Q4_0:
    case HS_TYPE_Q4_1:
    case HS_TYPE_Q8_0:
    case HS_TYPE_Q4_K:
    case HS_TYPE_Q6_K: return true;
    }
    return false;
}

const char *hs_type_name(hs_type t) {
    switch (t) {
    case HS_TYPE_F32: return "f32";
    case HS_TYPE_F16: return "f16";
    case HS_TYPE_Q4_0: return "q4_0";
    case HS_TYPE_Q4_1: return "q4_1";
    case HS_TYPE_Q8_0: return "q8_0";
    case HS_TYPE_Q4_K: return "q4_K";
    case HS_TYPE_Q6_K: return "q6_K";
    }
    return "?";
}

uint32_t hs_type_block_elems(hs_type t) {
    switch (t) {
    case HS_TYPE_F32:
    case HS_TYPE_F16: return 1;
    case HS_TYPE_Q4_0:
    case HS_TYPE_Q4_1:
    case HS_TYPE_Q8_0: return 32;
    case HS_TYPE_Q4_K:
    case HS_TYPE_Q6_K: return 256;
    }
    return 0;
}

uint32_t hs_type_block_bytes(hs_type t) {
    switch (t) {
    case HS_TYPE_F32: return 4;
    case HS_TYPE_F16: return 2;
    case HS_TYPE_Q4_0: return 18;  /* f16 d, 16 B nibbles */
    case HS_TYPE_Q4_1: return 20;  /* f16 d, f16 m, 16 B nibbles */
    case HS_TYPE_Q8_0: return 34;  /* f16 d, 32 int8 */
    case HS_TYPE_Q4_K: return 144; /* f16 d, f16 dmin, 12 B scales, 128 B nibbles */
    case HS_TYPE_Q6_K: return 210; /* 128 B ql, 64 B qh, 16 int8 scales, f16 d */
    }
    return 0;
}

uint64_t hs_type_row_bytes(hs_type t, uint64_t n) {
    uint32_t be = hs_type_block_elems(t);
    HS_ASSERT(be && n % be == 0);
    return n / be * hs_type_block_bytes(t);
}

/* The per-vendor tuning table. Rows are matched in order; the first whose
 * vendor (0 = any), driver-name substring and, for a CPU device, host CPU
 * substring (hs_vk_caps.host_cpu; NULL = any) match wins. */
static const struct {
    uint32_t vendor;
    const char *driver, *host;
    hs_tuning t;
} k_tuning[] = {
    /* lavapipe: dispatches are expensive, barriers very expensive; a workgroup
     * of one subgroup (8 lanes) computing several rows that share activation
     * loads is the fast shape (DESIGN.md section 9). A texel fetch is one
     * vector gather where a storage-buffer load loops over the lanes (measured:
     * bench-ops "device memory read"), so weights come through texel buffers.
     * Every product with a prologue computes x' in a pass of its own (split 1):
     * fused, each workgroup reloads its columns lane by lane for the norm
     * (measured: SmolLM2 tg64 and the N = 1..64 batches all faster split).
     * Activations come through uniform buffers: a uniform-buffer load is one
     * vector gather where a storage-buffer load loops over the lanes with a
     * branch per lane and component (measured: SmolLM2 batches of 4-64
     * tokens 1.3-1.5x faster, `bench -p`). The products are bound by f32
     * multiply-adds, so q4_1 products take 8-bit activations and multiply
     * integers, two products per 32-bit multiply (q8 1; measured: pp512 1.3-1.4x,
     * the N = 64 batch 1.35-1.45x, tg128 1.1-1.25x). The Q/K/V product rotates
     * and writes the KV cache in its epilogue (ropepass 0): one dispatch and
     * barrier fewer per layer. GPUs take no 8-bit activations, so they run the
     * RoPE + KV pass whatever this value says. Attention over two or more
     * queries takes blocks of up to 4 that share each prefix row's loads
     * (attnqb 4; one query keeps a workgroup of its own, whose 8 lanes are one
     * subgroup and merge their states through shuffles). Measured on a 2-core
     * Zen 4 EPYC, 2026-12-06, f16 cache: bench-ops attention at ctx 1024,
     * N = 4 184-193 us against 238-297 one query per workgroup, N = 8 333-370
     * against 500-560, N = 64 2.58-2.68 ms against 3.73-4.35; SmolLM2 `bench
     * -p 512` pp512 348-361 t/s against 322, `bench -v 64 -d 1024` 232-239 ms
     * against 282-298; N = 1 .. 3 the same. (On an earlier kernel whose
     * blocks merged through shared memory in one part, blocks cost every query
     * a fixed ~27 us per layer and were off.) GPUs keep one query per workgroup. Products on 8-bit
     * activations take up to 16 columns per workgroup (x8cols 16): their loops
     * over a tile's rows and columns are [[unroll]]ed, so a wide tile's
     * activations and sums stay in registers rather than in arrays indexed at
     * run time (measured: `bench -p`, SmolLM2, 4 columns without unrolling
     * against 16 with: N = 5 31.6 against 24.2 ms, N = 8 36.6 against 32.7,
     * N = 64 257 against 219; pp512 234 against 268 t/s; 8 columns: pp512 254;
     * rows 8 with 8 columns: pp512 277, but N = 4 32 against 21 ms). */
    /* lavapipe on AMD processors: the same, with 8-bit activation tiles of up
     * to 8 columns (measured on a 2-core Zen 4 EPYC, 2026-12-03, five
     * alternating rounds of `bench -p 16,512 -n 0 -r 3` with HS_TUNING=x8cols=8
     * against the row below: pp512 1-26 % faster in every round, 214-283
     * against 189-242 t/s; N = 16 47-61 against 56-138 ms; N <= 8 takes a tile
     * of its own width either way). On the Intel Xeon measured (Sapphire Rapids) the
     * wider tile was faster (pp512 269 against 254 t/s with 8 columns). */
    {0x10005, NULL, "AMD", {"lavapipe-amd", 4, 4, 8, 1, 1, 1, 1, 0, 4, 8}},
    {0x10005, NULL, NULL, {"lavapipe", 4, 4, 8, 1, 1, 1, 1, 0, 4, 16}},
    /* GPUs (none measured here; each line says why): storage-buffer loads are
     * as wide as texel fetches and skip the texture path, so weights stay in
     * storage buffers everywhere below. A fused prologue rereads x from cache,
     * cheap next to the weights, so x' gets its own pass (one more dispatch and
     * barrier) only from 16 columns on. Activations stay in storage buffers:
     * the lanes of a subgroup read different words of x, which a GPU's
     * constant cache serializes. Activations stay f32 (q8 0): a GPU's
     * matrix-vector product waits on memory, not on multiply-adds, so 8-bit
     * activations would cost precision and a pass for nothing at decode. */
    /* NVIDIA: 32-lane warps, many registers: 8 columns share each dequantized
     * weight; 128-lane reductions fill an SM's schedulers. */
    {0x10DE, NULL, NULL, {"nvidia", 2, 8, 128, 0, 16, 0, 0, 0, 0, 0}},
    /* AMD: 64-lane waves on GCN (32 on RDNA), large register files: as NVIDIA. */
    {0x1002, NULL, NULL, {"amd", 2, 8, 128, 0, 16, 0, 0, 0, 0, 0}},
    /* Intel: SIMD8-32 EUs with smaller register budgets per lane: 64-lane
     * reductions, 8 columns. */
    {0x8086, NULL, NULL, {"intel", 2, 8, 64, 0, 16, 0, 0, 0, 0, 0}},
    /* Adreno: 64/128-wide waves but register pressure spills early: 4 columns. */
    {0x5143, NULL, NULL, {"qualcomm", 2, 4, 64, 0, 16, 0, 0, 0, 0, 0}},
    /* Mali: 16-lane warps (Valhall), few registers per thread: 4 columns. */
    {0x13B5, NULL, NULL, {"arm", 2, 4, 64, 0, 16, 0, 0, 0, 0, 0}},
    /* Anything else: the conservative middle. */
    {0, NULL, NULL, {"generic", 2, 4, 64, 0, 16, 0, 0, 0, 0, 0}},
};

hs_tuning hs_tuning_for(const hs_vk_caps *c) {
    for (size_t i = 0; i < sizeof k_tuning / sizeof k_tuning[0]; i++) {
        if (k_tuning[i].vendor && k_tuning[i].vendor != c->vendor_id) continue;
        if (k_tuning[i].driver && !strstr(c->driver_name, k_tuning[i].driver)) continue;
        if (k_tuning[i].host && !strstr(c->host_cpu, k_tuning[i].host)) continue;
        return k_tuning[i].t;
    }
    return k_tuning[sizeof k_tuning / sizeof k_tuning[0] - 1].t;
}

void hs_feature_uses(const hs_vk_caps *c, hs_feature_use out[HS_FEATURE_COUNT]) {
    const hs_feature_use t[HS_FEATURE_COUNT] = {
        {"subgroup operations", "HS_VK_DISABLE_SUBGROUP_OPS", c->subgroup_ops,
         "products, RMSNorm, softmax, argmax, Top-K, attention's merge of its lanes and its query blocks, "
         "which share a tree's prefix rows through shuffles (lavapipe)",
         "portable shared-memory twins and one query per workgroup, bitwise the same results"},
        {"subgroup size control", "HS_VK_DISABLE_SUBGROUP_SIZE_CONTROL", c->subgroup_size_control,
         "argmax and Top-K, which pin the subgroup size, and attention's merge through shuffles, which needs "
         "its lanes in one subgroup",
         "the driver's default subgroup size; attention merges through shared memory"},
        {"16-bit storage", "HS_VK_DISABLE_16BIT_STORAGE", c->storage16, NULL, NULL},
        {"fp16 arithmetic", "HS_VK_DISABLE_F16", c->fp16, NULL, NULL},
        {"8-bit storage", "HS_VK_DISABLE_8BIT_STORAGE", c->storage8, NULL, NULL},
        {"int8 dot product", "HS_VK_DISABLE_INT8_DOT", c->int8_dot, NULL, NULL},
        {"cooperative matrix", "HS_VK_DISABLE_COOPMAT", c->coopmat, NULL, NULL},
        {"uniform texel buffers", "HS_VK_DISABLE_TEXEL_BUFFER", c->max_texel_elements > 0,
         "products' weight loads, attention's query and cache reads (f32, or f16 eight halves per texel), "
         "argmax's and Top-K's logits (where the "
         "tuning table asks for them: lavapipe)",
         "storage-buffer loads of the same bits, bitwise the same results"},
    };
    memcpy(out, t, sizeof t);
}

/* Why t does not fit this device, in why; false when it fits. */
static bool tuning_invalid(const hs_ops *ops, const hs_tuning *t, char *why, size_t size) {
    const hs_vk_caps *c = hs_vk_ctx_caps(ops->vk);
    const uint32_t wg_max = c->max_wg_invocations < c->max_wg_size[0] ? c->max_wg_invocations : c->max_wg_size[0];
    if (t->matvec_rows_per_wg < 1 || t->matvec_rows_per_wg > HS_TUNING_MAX_ROWS)
        snprintf(why, size, "matvec rows %u out of [1, %u]", t->matvec_rows_per_wg, HS_TUNING_MAX_ROWS);
    else if (t->matmul_cols_per_wg < 1 || t->matmul_cols_per_wg > HS_TUNING_MAX_COLS)
        snprintf(why, size, "matmul columns %u out of [1, %u]", t->matmul_cols_per_wg, HS_TUNING_MAX_COLS);
    else if (t->reduce_wg_size == 0 || t->reduce_wg_size % ops->subgroup || t->reduce_wg_size > wg_max)
        snprintf(why, size, "reduction workgroup %u must be a multiple of the subgroup (%u) and at most %u",
                 t->reduce_wg_size, ops->subgroup, wg_max);
    else if (t->matvec_rows_per_wg * t->matmul_cols_per_wg > HS_TUNING_MAX_ACC)
        snprintf(why, size, "rows x cols = %u exceeds %u accumulators per invocation",
                 t->matvec_rows_per_wg * t->matmul_cols_per_wg, HS_TUNING_MAX_ACC);
    else if (t->texel_weights > 1)
        snprintf(why, size, "texel %u is not 0 or 1", t->texel_weights);
    else if (t->uniform_x > 1)
        snprintf(why, size, "ubo %u is not 0 or 1", t->uniform_x);
    else if (t->q8_act > 1)
        snprintf(why, size, "q8 %u is not 0 or 1", t->q8_act);
    else if (t->rope_pass > 1)
        snprintf(why, size, "ropepass %u is not 0 or 1", t->rope_pass);
    else if (t->attn_qb && (t->attn_qb & (t->attn_qb - 1)))
        snprintf(why, size, "attnqb %u is not 0 or a power of two", t->attn_qb);
    else if (t->x8_cols > HS_TUNING_MAX_X8_COLS)
        snprintf(why, size, "x8cols %u out of [0, %u]", t->x8_cols, HS_TUNING_MAX_X8_COLS);
    else if (t->matvec_rows_per_wg * t->x8_cols > HS_TUNING_MAX_X8_ACC)
        snprintf(why, size, "rows x x8cols = %u exceeds %u accumulators per invocation",
                 t->matvec_rows_per_wg * t->x8_cols, HS_TUNING_MAX_X8_ACC);
    else
        return false;
    return true;
}

/* Applies HS_TUNING ("rows=8,cols=4,reduce=64,texel=0,split=2,ubo=0,q8=0,ropepass=1,attnqb=0,x8cols=8", any
 * subset) to t. */
static hs_status apply_env_tuning(hs_tuning *t, char *name, size_t name_size) {
    const char *env = getenv("HS_TUNING");
    if (!env || !*env) return HS_OK;
    const char *p = env;
    while (*p) {
        static const char *keys[] = {"rows", "cols", "reduce",   "texel",  "split",
                                     "ubo",  "q8",   "ropepass", "attnqb", "x8cols"};
        uint32_t *fields[] = {&t->matvec_rows_per_wg,
                              &t->matmul_cols_per_wg,
                              &t->reduce_wg_size,
                              &t->texel_weights,
                              &t->split_n,
                              &t->uniform_x,
                              &t->q8_act,
                              &t->rope_pass,
                              &t->attn_qb,
                              &t->x8_cols};
        const size_t n_keys = sizeof keys / sizeof keys[0];
        size_t k = 0, len = 0;
        for (; k < n_keys; k++) {
            len = strlen(keys[k]);
            if (!strncmp(p, keys[k], len) && p[len] == '=') break;
        }
        if (k == n_keys)
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "HS_TUNING='%s': expected rows=N, cols=N, reduce=N, texel=0|1, split=N, ubo=0|1, "
                           "q8=0|1, ropepass=0|1, attnqb=N or x8cols=N at '%s'",
                           env, p);
        char *end = NULL;
        errno = 0;
        unsigned long v = strtoul(p + len + 1, &end, 10);
        if (end == p + len + 1 || errno || v > 65536 || (*end != ',' && *end != '\0') ||
            (*end == ',' && end[1] == '\0'))
            return HS_FAIL(HS_ERR_INVALID_ARG, "HS_TUNING='%s': '%s' needs a number", env, keys[k]);
        *fields[k] = (uint32_t)v;
        p = *end == ',' ? end + 1 : end;
    }
    snprintf(name, name_size, "%s+env", t->name);
    t->name = name;
    return HS_OK;
}

hs_status hs_ops_create(hs_vk_ctx *vk, hs_ops **out) {
    *out = NULL;
    hs_ops *ops = calloc(1, sizeof *ops);
    if (!ops) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_ops_create: out of memory");
    ops->vk = vk;
    const hs_vk_caps *c = hs_vk_ctx_caps(vk);
    ops->subgroup = c->subgroup_ops ? c->subgroup_size : 1;
    hs_tuning t = hs_tuning_for(c);
    /* Reductions are written for workgroups that are a multiple of the subgroup. */
    if (t.reduce_wg_size % ops->subgroup) t.reduce_wg_size = (t.reduce_wg_size / ops->subgroup + 1) * ops->subgroup;
    if (t.reduce_wg_size > c->max_wg_invocations || t.reduce_wg_size > c->max_wg_size[0])
        t.reduce_wg_size = ops->subgroup;
    char why[160];
    hs_status st = apply_env_tuning(&t, ops->env_name, sizeof ops->env_name);
    if (st == HS_OK && tuning_invalid(ops, &t, why, sizeof why))
        st = ops->env_name[0] ? HS_FAIL(HS_ERR_INVALID_ARG, "HS_TUNING='%s': %s", getenv("HS_TUNING"), why)
                              : HS_FAIL(HS_ERR_INVALID_ARG, "tuning table entry %s: %s", t.name, why);
    if (st != HS_OK) {
        free(ops);
        return st;
    }
    ops->tuning = t;
    stbds_sh_new_strdup(ops->pipes);
    *out = ops;
    return HS_OK;
}

hs_status hs_ops_set_tuning(hs_ops *ops, const hs_tuning *t) {
    char why[160];
    if (tuning_invalid(ops, t, why, sizeof why)) return HS_FAIL(HS_ERR_INVALID_ARG, "tuning: %s", why);
    ops->tuning = *t;
    return HS_OK;
}

void hs_ops_destroy(hs_ops *ops) {
    if (!ops) return;
    for (ptrdiff_t i = 0; i < stbds_shlen(ops->pipes); i++) hs_vk_pipeline_destroy(ops->pipes[i].value);
    stbds_shfree(ops->pipes);
    free(ops);
}

uint32_t hs_widen_for_trips(uint32_t wg, uint32_t wg_max, uint64_t budget, hs_trips_fn trips, const void *ctx) {
    while (trips(wg, ctx) > budget && (uint64_t)wg * 2 <= wg_max) wg *= 2;
    return wg;
}

uint64_t hs_ops_max_slack(const hs_vk_caps *c, uint64_t offset, uint64_t stride) {
    const uint64_t align = c->min_storage_offset_align ? c->min_storage_offset_align : 1;
    /* align is a power of two; g, the largest power of two dividing stride (at
     * most align), is the step of (offset + i stride) mod align, which takes
     * every value offset mod g + j g below align. */
    uint64_t g = align;
    while (stride && stride % g) g /= 2;
    return align - g + offset % g;
}

hs_vk_ctx *hs_ops_vk(const hs_ops *ops) { return ops->vk; }
const hs_vk_caps *hs_ops_caps(const hs_ops *ops) { return hs_vk_ctx_caps(ops->vk); }
const hs_tuning *hs_ops_tuning(const hs_ops *ops) { return &ops->tuning; }
uint32_t hs_ops_subgroup(const hs_ops *ops) { return ops->subgroup; }

bool hs_ops_made_pipeline(const hs_ops *ops, const char *prefix) {
    const size_t len = strlen(prefix);
    for (ptrdiff_t i = 0; i < stbds_shlen(ops->pipes); i++)
        if (!strncmp(ops->pipes[i].key, prefix, len)) return true;
    return false;
}

hs_status hs_ops_pipeline(hs_ops *ops, const hs_vk_pipeline_desc *desc, hs_vk_pipeline **out) {
    char key[256];
    int n = snprintf(key, sizeof key, "%s", desc->name);
    for (uint32_t i = 0; i < desc->n_spec && n < (int)sizeof key - 12; i++)
        n += snprintf(key + n, sizeof key - n, ":%u", desc->spec[i]);
    ptrdiff_t idx = stbds_shgeti(ops->pipes, key);
    if (idx >= 0) {
        *out = ops->pipes[idx].value;
        return HS_OK;
    }
    hs_vk_pipeline *p = NULL;
    hs_status st = hs_vk_pipeline_create(ops->vk, desc, &p);
    if (st != HS_OK) return st;
    stbds_shput(ops->pipes, key, p);
    *out = p;
    return HS_OK;
}
