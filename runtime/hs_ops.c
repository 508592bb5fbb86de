/* hs_ops: element types, pipeline registry, tuning-table lookup. */
#include "hs_ops.h"

#include <string.h>

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

struct hs_ops {
    hs_vk_ctx *vk;
    hs_tuning tuning;
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
 * vendor (0 = any) and driver-name substring (NULL = any) match wins. */
static const struct {
    uint32_t vendor;
    const char *driver;
    hs_tuning t;
} k_tuning[] = {
    /* lavapipe: dispatches are expensive, barriers very expensive; a workgroup
     * of one subgroup (8 lanes) computing several rows that share activation
     * loads is the fast shape (DESIGN.md section 9). */
    {0x10005, NULL, {"lavapipe", 4, 4, 8}},
    {0x10DE, NULL, {"nvidia", 2, 8, 128}},
    {0x1002, NULL, {"amd", 2, 8, 128}},
    {0x8086, NULL, {"intel", 2, 8, 64}},
    {0x5143, NULL, {"qualcomm", 2, 4, 64}},
    {0x13B5, NULL, {"arm", 2, 4, 64}},
    {0, NULL, {"generic", 2, 4, 64}},
};

static hs_tuning pick_tuning(const hs_vk_caps *c) {
    for (size_t i = 0; i < sizeof k_tuning / sizeof k_tuning[0]; i++) {
        if (k_tuning[i].vendor && k_tuning[i].vendor != c->vendor_id) continue;
        if (k_tuning[i].driver && !strstr(c->driver_name, k_tuning[i].driver)) continue;
        return k_tuning[i].t;
    }
    return k_tuning[sizeof k_tuning / sizeof k_tuning[0] - 1].t;
}

hs_status hs_ops_create(hs_vk_ctx *vk, hs_ops **out) {
    *out = NULL;
    hs_ops *ops = calloc(1, sizeof *ops);
    if (!ops) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_ops_create: out of memory");
    ops->vk = vk;
    const hs_vk_caps *c = hs_vk_ctx_caps(vk);
    ops->tuning = pick_tuning(c);
    ops->subgroup = c->subgroup_ops ? c->subgroup_size : 1;
    /* Reductions are written for workgroups that are a multiple of the subgroup. */
    if (ops->tuning.reduce_wg_size < ops->subgroup) ops->tuning.reduce_wg_size = ops->subgroup;
    stbds_sh_new_strdup(ops->pipes);
    *out = ops;
    return HS_OK;
}

void hs_ops_destroy(hs_ops *ops) {
    if (!ops) return;
    for (ptrdiff_t i = 0; i < stbds_shlen(ops->pipes); i++) hs_vk_pipeline_destroy(ops->pipes[i].value);
    stbds_shfree(ops->pipes);
    free(ops);
}

hs_vk_ctx *hs_ops_vk(const hs_ops *ops) { return ops->vk; }
const hs_vk_caps *hs_ops_caps(const hs_ops *ops) { return hs_vk_ctx_caps(ops->vk); }
const hs_tuning *hs_ops_tuning(const hs_ops *ops) { return &ops->tuning; }
uint32_t hs_ops_subgroup(const hs_ops *ops) { return ops->subgroup; }

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
