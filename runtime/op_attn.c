/* op_attn: recording of tree attention, the tree ancestor mask and KV
 * compaction. Shaders: attention.comp, tree_mask.comp, kv_gather.comp. */
#include "op_attn.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "hs_shaders.h"
#include "op_common.h"

/* Per-lane vec4 registers of one operand (queries or accumulators) the
 * attention kernel may hold: the query heads sharing a workgroup are cut to
 * stay under it (one head always fits), trading K/V-load sharing for fewer
 * register spills on GPUs. */
#define HS_ATTN_LANE_VEC4 48u
/* Lanes of the attention kernel: keys are dealt to lanes by ordinal, so more
 * lanes mean more keys in flight, and a larger merge. */
#define HS_ATTN_MIN_LANES 8u
#define HS_ATTN_MAX_LANES 64u
/* Workgroup size of the tree-mask and kv-gather kernels (independent lanes, no
 * barriers: the size only sets how the work is cut into workgroups). */
#define HS_ATTN_SIMPLE_WG 32u

/* Mirrors the push block of attention.comp. */
typedef struct hs_attn_push {
    uint32_t n_ctx, n_kv_head, n_head, n;
    uint32_t group, mask_words, q_base;
    float scale_log2;
    uint32_t q_off, k_off, v_off, o_off;
    uint32_t info_off, mask_off, chunk_rows, n_cols;
    uint32_t live_word, pad0;
} hs_attn_push;
static_assert(sizeof(hs_attn_push) == 72 && sizeof(hs_attn_push) <= 128, "attention push constants");

/* Mirrors the push block of tree_mask.comp. */
typedef struct hs_tree_mask_push {
    uint32_t n, words, parents_off, mask_off, depth_off, pad0;
} hs_tree_mask_push;
static_assert(sizeof(hs_tree_mask_push) == 24, "tree_mask push constants");

/* Mirrors the push block of kv_gather.comp. */
typedef struct hs_kv_gather_push {
    uint32_t row_units, layer_units, n_ctx, cap;
    uint32_t k_off, v_off, info_off, chunk_rows;
} hs_kv_gather_push;
static_assert(sizeof(hs_kv_gather_push) == 32, "kv_gather push constants");

hs_status hs_attn_check_parents(const int32_t *parents, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (parents[i] < -1 || parents[i] >= (int64_t)i)
            return HS_FAIL(HS_ERR_INVALID_ARG, "tree: parent[%u] = %d is not in [-1, %u)", i, parents[i], i);
    return HS_OK;
}

/* ---- tree mask ---- */

hs_status hs_op_tree_mask(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *parents, uint32_t n,
                          const hs_vk_binding *mask, const hs_vk_binding *depth) {
    hs_status st = HS_OK;
    const hs_vk_caps *c = hs_ops_caps(ops);
    if (n == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "tree_mask: n = 0");
    const uint32_t words = hs_attn_mask_words(n);
    const uint32_t groups = (n + HS_ATTN_SIMPLE_WG - 1) / HS_ATTN_SIMPLE_WG;
    if (groups > c->max_wg_count[0] || (uint64_t)n * words * 4 > UINT32_MAX)
        return HS_FAIL(HS_ERR_INVALID_ARG, "tree_mask: n = %u nodes is too many", n);

    hs_vk_binding b[3];
    hs_tree_mask_push pc = {.n = n, .words = words};
    HS_TRY(hs_op_bind(c, "tree_mask", "parents", parents, 0, (uint64_t)n * 4, 4, &b[0], &pc.parents_off));
    HS_TRY(hs_op_bind(c, "tree_mask", "mask", mask, 0, (uint64_t)n * words * 4, 4, &b[1], &pc.mask_off));
    HS_TRY(hs_op_bind(c, "tree_mask", "depth", depth, 0, (uint64_t)n * 4, 4, &b[2], &pc.depth_off));

    hs_vk_pipeline_desc d = {.name = "tree_mask",
                             .code = hs_spv_tree_mask,
                             .code_size = hs_spv_tree_mask_size,
                             .n_bindings = 3,
                             .write_mask = 0x6,
                             .push_size = sizeof pc,
                             .n_spec = 1,
                             .spec = {HS_ATTN_SIMPLE_WG},
                             .wg_size = {HS_ATTN_SIMPLE_WG, 1, 1}};
    hs_vk_pipeline *p = NULL;
    HS_TRY(hs_ops_pipeline(ops, &d, &p));
    HS_TRY(hs_vk_seq_dispatch(seq, p, b, 3, &pc, groups, 1, 1));
fail:
    return st;
}

/* ---- attention ---- */

/* The kernel shape for one (device, model). It must not depend on n: a query
 * gives the same bits in any batch because the lane split follows from it. */
typedef struct attn_plan {
    uint32_t lanes; /* workgroup size: keys are dealt to lanes by ordinal */
    uint32_t hpw;   /* query heads per workgroup (one KV head) */
} attn_plan;

/* A compiled attention kernel and the byte size of its cache load unit. */
typedef struct attn_variant {
    const uint32_t *code;
    const size_t *size;
    const char *name;
    uint32_t unit;
} attn_variant;

static uint64_t attn_shared_bytes(uint32_t lanes, uint32_t heads, uint32_t head_dim) {
    return (uint64_t)lanes * heads * (head_dim + 2) * 4;
}

/* Queries per workgroup of the prefix-sharing kernel (attention.comp QBLOCK) for
 * this call: the largest power of two up to the tuning's attnqb that is below
 * 2 n (so n = 3 takes one block of 4 with a dead slot rather than blocks of 2,
 * which load the prefix twice for the same four query slots), divides the
 * subgroup and `units`, the 16-byte cache loads of a head's row that the
 * slots deal among themselves (head_dim / 4 of an f32 cache, head_dim / 8 of
 * an f16 one read eight halves per unit; 0 where no such kernel reads the
 * cache), and fits the device; 0 for one query per workgroup (any choice
 * gives the same bits). Under split execution
 * (vk_seq.c), where the gx head blocks divide too unevenly among the parts
 * for hs_vk_split_dim to keep them (SmolLM2's 3 among 2), also small enough
 * to leave a query block for each part, along which the dispatch is then
 * divided instead:
 * n = 4 on two cores takes blocks of 2 (each core 3 blocks of 2 queries,
 * instead of one core 2 blocks of 4 and the other 1; bench-ops attention
 * N = 4 at ctx 1024 about 10 % less). *parts: the fewest merge parts
 * (dividing head_dim / 4) whose shared memory fits. */
static uint32_t attn_qblock(const hs_ops *ops, const attn_plan *pl, uint32_t head_dim, uint32_t n, uint32_t gx,
                            uint32_t units, bool q8, uint32_t *parts) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint32_t sg = c->subgroup_size, d4 = head_dim / 4;
    if (units == 0 || !c->subgroup_ops || sg == 0) return 0;
    /* query blocks wanted: one per part where the split would leave the head blocks for an even
     * count of query blocks */
    const uint32_t even_q[3] = {gx, c->parts, 1};
    const uint32_t split = c->parts > 1 && hs_vk_split_dim(even_q, c->parts) != 0 ? c->parts : 1;
    for (uint32_t qb = hs_ops_tuning(ops)->attn_qb; qb >= 2; qb /= 2) {
        const uint32_t wg = pl->lanes * qb;
        if (qb >= 2 * n || (n + qb - 1) / qb < split || sg % qb || units % qb || wg % sg ||
            wg > c->max_wg_invocations || wg > c->max_wg_size[0])
            continue;
        for (uint32_t mp = 1; mp <= d4; mp++) {
            if (d4 % mp) continue;
            /* wg (query, lane) states of hpw heads, head_dim / mp columns each at a time */
            const uint64_t s_o = q8 ? (uint64_t)qb * pl->hpw * head_dim * 4 : 0; /* the merged 8-bit input */
            const uint64_t shared = attn_shared_bytes(wg, pl->hpw, head_dim / mp) + s_o;
            if (shared <= c->max_shared_memory) {
                *parts = mp;
                return qb;
            }
        }
    }
    return 0;
}

static hs_status attn_plan_for(const hs_ops *ops, uint32_t head_dim, uint32_t group, attn_plan *pl) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    /* The tuning table's row-reduction width: one subgroup on lavapipe. */
    uint32_t l = hs_ops_tuning(ops)->reduce_wg_size;
    if (l < HS_ATTN_MIN_LANES) l = HS_ATTN_MIN_LANES;
    if (l > HS_ATTN_MAX_LANES) l = HS_ATTN_MAX_LANES;
    while (l > 1 && (l > c->max_wg_invocations || l > c->max_wg_size[0]))
        l /= 2;
    /* The merge needs every lane's state in shared memory: halve the lanes
     * until one head fits (at 16 KiB that is 31 lanes of head_dim 128). */
    while (l > 1 && attn_shared_bytes(l, 1, head_dim) > c->max_shared_memory)
        l /= 2;
    if (attn_shared_bytes(l, 1, head_dim) > c->max_shared_memory)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                       "attention: head_dim %u needs %llu bytes of shared memory (limit %u)", head_dim,
                       (unsigned long long)attn_shared_bytes(1, 1, head_dim), c->max_shared_memory);
    pl->lanes = l;
    pl->hpw = 1;
    for (uint32_t h = group; h > 1; h--) {
        if (group % h || h * (head_dim / 4) > HS_ATTN_LANE_VEC4 ||
            attn_shared_bytes(l, h, head_dim) > c->max_shared_memory)
            continue;
        pl->hpw = h;
        break;
    }
    return HS_OK;
}

/* Both attention ops: n_cols mask columns; live queries from info word
 * live_word (HS_ATTN_INFO_N_USED: the tree's nodes are the queries). */
static hs_status attention(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                           uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask, uint32_t n,
                           uint32_t n_cols, uint32_t live_word, float scale, const hs_vk_binding *out,
                           bool q8) {
    hs_status st = HS_OK;
    const hs_vk_caps *c = hs_ops_caps(ops);
    if (!kv) return HS_FAIL(HS_ERR_INVALID_ARG, "attention: no KV cache");
    const uint32_t hd = kv->head_dim, nkv = kv->n_kv_head;
    if (kv->type != HS_TYPE_F32 && kv->type != HS_TYPE_F16)
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "attention: KV cache type %s (f32 or f16 only)",
                       hs_type_name(kv->type));
    if (n == 0 || n_cols == 0 || kv->n_ctx == 0 || nkv == 0 || n_head == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "attention: empty shape (n %u, n_cols %u, n_ctx %u, n_kv_head %u, n_head %u)", n,
                       n_cols, kv->n_ctx, nkv, n_head);
    if (n_head % nkv)
        return HS_FAIL(HS_ERR_INVALID_ARG, "attention: n_head %u is not a multiple of n_kv_head %u", n_head,
                       nkv);
    if (hd == 0 || hd % 4 || hd > HS_ATTN_MAX_HEAD_DIM)
        return HS_FAIL(HS_ERR_INVALID_ARG, "attention: head_dim %u must be a multiple of 4 in [4, %u]", hd,
                       HS_ATTN_MAX_HEAD_DIM);
    if (q8 && hd % 32)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "attention: an 8-bit output needs head_dim %u to be a multiple of 32", hd);
    if (!isfinite(scale)) return HS_FAIL(HS_ERR_INVALID_ARG, "attention: scale is not finite");
    const uint64_t q_row = (uint64_t)n_head * hd * 4;                    /* one query's heads */
    const uint64_t o_row = q8 ? (uint64_t)n_head * hd / 32 * 80 : q_row; /* its output */
    if (q && out && q->buf == out->buf) {
        uint64_t qe = q->offset + (uint64_t)n * q_row, oe = out->offset + (uint64_t)n * o_row;
        if (q->offset < oe && out->offset < qe)
            return HS_FAIL(HS_ERR_INVALID_ARG, "attention: out overlaps q");
    }
    const uint32_t group = n_head / nkv;
    attn_plan pl = {0};
    HS_TRY(attn_plan_for(ops, hd, group, &pl));
    const uint32_t gx = nkv * (group / pl.hpw);
    if (gx > c->max_wg_count[0])
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "attention: %u head blocks exceed the grid limit", gx);

    const uint32_t words = hs_attn_mask_words(n_cols);
    const uint64_t esize = kv->type == HS_TYPE_F16 ? 2 : 4;
    const uint64_t row_bytes = (uint64_t)nkv * hd * esize, kv_bytes = kv->n_ctx * row_bytes;
    if ((uint64_t)n * words > UINT32_MAX)
        return HS_FAIL(HS_ERR_INVALID_ARG, "attention: shapes exceed 32-bit indexing");

    hs_vk_binding b[HS_VK_MAX_BINDINGS];
    hs_attn_push pc = {.n_ctx = kv->n_ctx,
                       .n_kv_head = nkv,
                       .n_head = n_head,
                       .n = n,
                       .group = group,
                       .mask_words = words,
                       .scale_log2 = (float)(scale * 1.4426950408889634),
                       .n_cols = n_cols,
                       .live_word = live_word};
    /* The cache's load unit: vec4 (f32), eight halves as a uvec4 when head_dim
     * and both offsets allow, else four halves as a uvec2. Each in one binding
     * per cache, or (_kv4) in HS_KV_MAX_CHUNKS windows. */
    static const attn_variant variants[2][2][3] = {
        {{{hs_spv_attention_f32, &hs_spv_attention_f32_size, "attention_f32", 16},
          {hs_spv_attention_f16x8, &hs_spv_attention_f16x8_size, "attention_f16x8", 16},
          {hs_spv_attention_f16x4, &hs_spv_attention_f16x4_size, "attention_f16x4", 8}},
         {{hs_spv_attention_f32_kv4, &hs_spv_attention_f32_kv4_size, "attention_f32_kv4", 16},
          {hs_spv_attention_f16x8_kv4, &hs_spv_attention_f16x8_kv4_size, "attention_f16x8_kv4", 16},
          {hs_spv_attention_f16x4_kv4, &hs_spv_attention_f16x4_kv4_size, "attention_f16x4_kv4", 8}}},
        /* the output in the 8-bit form of q4_1 products (hs_op_attention_q8) */
        {{{hs_spv_attention_f32_q8, &hs_spv_attention_f32_q8_size, "attention_f32_q8", 16},
          {hs_spv_attention_f16x8_q8, &hs_spv_attention_f16x8_q8_size, "attention_f16x8_q8", 16},
          {hs_spv_attention_f16x4_q8, &hs_spv_attention_f16x4_q8_size, "attention_f16x4_q8", 8}},
         {{hs_spv_attention_f32_kv4_q8, &hs_spv_attention_f32_kv4_q8_size, "attention_f32_kv4_q8", 16},
          {hs_spv_attention_f16x8_kv4_q8, &hs_spv_attention_f16x8_kv4_q8_size, "attention_f16x8_kv4_q8", 16},
          {hs_spv_attention_f16x4_kv4_q8, &hs_spv_attention_f16x4_kv4_q8_size, "attention_f16x4_kv4_q8", 8}}},
    };
    const bool x8 = hd % 8 == 0 && kv->k.offset % 16 == 0 && kv->v.offset % 16 == 0;
    const uint32_t type_index = kv->type == HS_TYPE_F16 ? (x8 ? 1 : 2) : 0;
    /* Both caches hold the layer and start on a load unit; a layer past
     * maxStorageBufferRange is bound in windows. */
    HS_TRY(hs_op_check("attention", "k cache", &kv->k, 0, kv_bytes, variants[0][0][type_index].unit));
    HS_TRY(hs_op_check("attention", "v cache", &kv->v, 0, kv_bytes, variants[0][0][type_index].unit));
    hs_kv_split sp;
    HS_TRY(hs_kv_plan_rows(ops, "attention", &kv->k, &kv->v, row_bytes, kv->n_ctx, &sp));
    const attn_variant *variant = &variants[q8][sp.chunks > 1][type_index];
    const uint32_t n_bind = hs_kv_bindings(6, &sp);
    /* lavapipe: an unsplit cache (f32, or f16 in eight-half units) and q read
     * through texel buffers (one gather per 16 bytes instead of a loop over the
     * lanes), bound from an offset aligned for texel views (the offsets are
     * whole 16-byte units, checked above); the same values, the same results. */
    const uint64_t ta = hs_op_texel_align(c);
    const bool kv_tx = hs_op_texel_loads(ops) && sp.chunks == 1 && type_index < 2;
    static const attn_variant tx_variants[2][2] = {
        {{hs_spv_attention_f32_tx, &hs_spv_attention_f32_tx_size, "attention_f32_tx", 16},
         {hs_spv_attention_f32_tx_q8, &hs_spv_attention_f32_tx_q8_size, "attention_f32_tx_q8", 16}},
        {{hs_spv_attention_f16x8_tx, &hs_spv_attention_f16x8_tx_size, "attention_f16x8_tx", 16},
         {hs_spv_attention_f16x8_tx_q8, &hs_spv_attention_f16x8_tx_q8_size, "attention_f16x8_tx_q8", 16}}};
    /* ... with the lanes' states merged through subgroup shuffles where the lanes are one subgroup: a
     * shared-memory access loops over the lanes on lavapipe (HS_VK_DISABLE_SUBGROUP_OPS or _SIZE_CONTROL keep
     * the other). */
    static const attn_variant sg_variants[2][2] = {
        {{hs_spv_attention_f32_tx_sg, &hs_spv_attention_f32_tx_sg_size, "attention_f32_tx_sg", 16},
         {hs_spv_attention_f32_tx_sg_q8, &hs_spv_attention_f32_tx_sg_q8_size, "attention_f32_tx_sg_q8", 16}},
        {{hs_spv_attention_f16x8_tx_sg, &hs_spv_attention_f16x8_tx_sg_size, "attention_f16x8_tx_sg", 16},
         {hs_spv_attention_f16x8_tx_sg_q8, &hs_spv_attention_f16x8_tx_sg_q8_size, "attention_f16x8_tx_sg_q8",
          16}}};
    /* Trees on lavapipe: qb queries per workgroup share the prefix rows (tuning attnqb). */
    static const attn_variant qb_variants[2][2][2] = {
        {{{hs_spv_attention_f32_qb, &hs_spv_attention_f32_qb_size, "attention_f32_qb", 16},
          {hs_spv_attention_f32_qb_q8, &hs_spv_attention_f32_qb_q8_size, "attention_f32_qb_q8", 16}},
         {{hs_spv_attention_f32_tx_qb, &hs_spv_attention_f32_tx_qb_size, "attention_f32_tx_qb", 16},
          {hs_spv_attention_f32_tx_qb_q8, &hs_spv_attention_f32_tx_qb_q8_size, "attention_f32_tx_qb_q8", 16}}},
        {{{hs_spv_attention_f16x8_qb, &hs_spv_attention_f16x8_qb_size, "attention_f16x8_qb", 16},
          {hs_spv_attention_f16x8_qb_q8, &hs_spv_attention_f16x8_qb_q8_size, "attention_f16x8_qb_q8", 16}},
         {{hs_spv_attention_f16x8_tx_qb, &hs_spv_attention_f16x8_tx_qb_size, "attention_f16x8_tx_qb", 16},
          {hs_spv_attention_f16x8_tx_qb_q8, &hs_spv_attention_f16x8_tx_qb_q8_size, "attention_f16x8_tx_qb_q8",
           16}}}};
    uint32_t parts = 1;
    const bool sg = kv_tx && c->subgroup_ops && c->subgroup_size_control && pl.lanes == c->subgroup_size;
    /* the blocked kernels read an unsplit cache in 16-byte units (f32, or f16 eight halves at a time) */
    const uint32_t qb_units = sp.chunks == 1 && type_index < 2 ? (uint32_t)(hd * esize / 16) : 0;
    const uint32_t qb = attn_qblock(ops, &pl, hd, n, gx, qb_units, q8, &parts);
    if (qb) variant = &qb_variants[type_index][kv_tx][q8];
    if (kv_tx) {
        if (!qb) variant = sg ? &sg_variants[type_index][q8] : &tx_variants[type_index][q8];
        b[1] = (hs_vk_binding){kv->k.buf, kv->k.offset - kv->k.offset % ta, 0};
        b[2] = (hs_vk_binding){kv->v.buf, kv->v.offset - kv->v.offset % ta, 0};
        pc.k_off = (uint32_t)((kv->k.offset % ta) / 16);
        pc.v_off = (uint32_t)((kv->v.offset % ta) / 16);
    } else {
        hs_kv_bind_windows(ops, &kv->k, &kv->v, row_bytes, kv->n_ctx, &sp, variant->unit, 1, 2, 6, b,
                           &pc.k_off, &pc.v_off);
    }
    pc.chunk_rows = sp.chunk_rows;
    HS_TRY(
        hs_op_bind(c, "attention", "info", info, 0, (uint64_t)(live_word + 1) * 4, 4, &b[3], &pc.info_off));
    HS_TRY(hs_op_bind(c, "attention", "mask", mask, 0, (uint64_t)n * words * 4, 4, &b[4], &pc.mask_off));
    /* Whole q and out must exist even if they are bound chunk by chunk. */
    HS_TRY(hs_op_check("attention", "q", q, 0, (uint64_t)n * q_row, 16));
    HS_TRY(hs_op_check("attention", "out", out, 0, (uint64_t)n * o_row, 16));

    hs_vk_pipeline_desc d = {.name = variant->name,
                             .code = variant->code,
                             .code_size = *variant->size,
                             .n_bindings = n_bind,
                             .texel_mask = kv_tx ? 7u : 0u, /* q, k, v */
                             .write_mask = 1u << 5,
                             .push_size = sizeof pc,
                             .n_spec = qb ? 6 : 4,
                             .spec = {qb ? pl.lanes * qb : pl.lanes, pl.lanes, hd, pl.hpw, qb, parts},
                             .wg_size = {qb ? pl.lanes * qb : pl.lanes, 1, 1},
                             /* the QB slots of a lane share one subgroup; _sg's lanes are one */
                             .required_subgroup_size =
                                 (qb && c->subgroup_size_control) || (!qb && sg) ? c->subgroup_size : 0};
    hs_vk_pipeline *p = NULL;
    HS_TRY(hs_ops_pipeline(ops, &d, &p));

    /* Queries per dispatch: the grid's y limit and the q/out binding range. */
    uint64_t per = c->max_wg_count[1];
    const uint64_t q_slack = hs_ops_max_slack(c, q->offset, q_row);
    const uint64_t o_slack = hs_ops_max_slack(c, out->offset, o_row);
    const uint64_t slack = q_slack > o_slack ? q_slack : o_slack, range = c->max_storage_buffer_range;
    uint64_t by_range = range > slack ? (range - slack) / q_row : 0; /* o_row <= q_row */
    if (by_range < per) per = by_range;
    if (kv_tx) { /* q's texel view: at most maxTexelBufferElements texels */
        by_range = hs_op_texel_rows(c, q->offset, q_row);
        if (by_range < per) per = by_range;
    }
    if (per == 0)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "attention: one query row exceeds maxStorageBufferRange");
    /* Whole query blocks in every dispatch but the last, so a block never reads past its queries. */
    if (qb && per > qb) per -= per % qb;
    for (uint32_t q0 = 0; q0 < n; q0 += (uint32_t)per) {
        uint32_t cnt = n - q0 < per ? n - q0 : (uint32_t)per;
        if (kv_tx) /* a texel view from an offset aligned for it; q_off absorbs the slack */
            b[0] = hs_op_window_aligned(q->buf, q->offset + q0 * q_row, cnt * q_row, 16, ta, &pc.q_off);
        else
            HS_TRY(hs_op_bind(c, "attention", "q", q, q0 * q_row, cnt * q_row, 16, &b[0], &pc.q_off));
        HS_TRY(hs_op_bind(c, "attention", "out", out, q0 * o_row, cnt * o_row, 16, &b[5], &pc.o_off));
        pc.q_base = q0;
        HS_TRY(hs_vk_seq_dispatch(seq, p, b, n_bind, &pc, gx, qb ? (cnt + qb - 1) / qb : cnt, 1));
    }
fail:
    return st;
}

hs_status hs_op_attention(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                          uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask, uint32_t n,
                          float scale, const hs_vk_binding *out) {
    return attention(ops, seq, q, kv, n_head, info, mask, n, n, HS_ATTN_INFO_N_USED, scale, out, false);
}

hs_status hs_op_attention_q8(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                             uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask,
                             uint32_t n, float scale, const hs_vk_binding *out) {
    return attention(ops, seq, q, kv, n_head, info, mask, n, n, HS_ATTN_INFO_N_USED, scale, out, true);
}

hs_status hs_op_attention_cols(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                               uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask,
                               uint32_t n, uint32_t n_cols, float scale, const hs_vk_binding *out) {
    return attention(ops, seq, q, kv, n_head, info, mask, n, n_cols, HS_ATTN_INFO_N_LIVE, scale, out, false);
}

hs_status hs_op_attention_cols_q8(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                                  uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask,
                                  uint32_t n, uint32_t n_cols, float scale, const hs_vk_binding *out) {
    return attention(ops, seq, q, kv, n_head, info, mask, n, n_cols, HS_ATTN_INFO_N_LIVE, scale, out, true);
}

/* ---- KV compaction ---- */

/* The gather kernel of a unit (uvec4 or uint) for caches in `chunks` windows. */
static hs_status kv_gather_pipeline(hs_ops *ops, bool u4, uint32_t chunks, hs_vk_pipeline **out) {
    static const struct {
        const char *name;
        const uint32_t *code;
        const size_t *size;
    } variants[2][2] = {
        {{"kv_gather_u1", hs_spv_kv_gather_u1, &hs_spv_kv_gather_u1_size},
         {"kv_gather_u4", hs_spv_kv_gather_u4, &hs_spv_kv_gather_u4_size}},
        {{"kv_gather_u1_kv4", hs_spv_kv_gather_u1_kv4, &hs_spv_kv_gather_u1_kv4_size},
         {"kv_gather_u4_kv4", hs_spv_kv_gather_u4_kv4, &hs_spv_kv_gather_u4_kv4_size}},
    };
    const hs_kv_split sp = {.chunks = chunks};
    hs_vk_pipeline_desc d = {.name = variants[chunks > 1][u4].name,
                             .code = variants[chunks > 1][u4].code,
                             .code_size = *variants[chunks > 1][u4].size,
                             .n_bindings = hs_kv_bindings(3, &sp),
                             .write_mask = 0x3 | hs_kv_extra_mask(3, &sp),
                             .push_size = sizeof(hs_kv_gather_push),
                             .n_spec = 1,
                             .spec = {HS_ATTN_SIMPLE_WG},
                             .wg_size = {HS_ATTN_SIMPLE_WG, 1, 1}};
    return hs_ops_pipeline(ops, &d, out);
}

hs_status hs_op_kv_gather(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *k, const hs_vk_binding *v,
                          hs_type type, uint32_t n_layers, uint64_t layer_stride, uint32_t n_ctx,
                          uint32_t row_elems, const hs_vk_binding *rows, uint32_t cap) {
    hs_status st = HS_OK;
    const hs_vk_caps *c = hs_ops_caps(ops);
    if (type != HS_TYPE_F32 && type != HS_TYPE_F16)
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "kv_gather: type %s (f32 or f16 only)", hs_type_name(type));
    if (n_layers == 0 || n_ctx == 0 || row_elems == 0 || cap == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "kv_gather: empty shape (layers %u, n_ctx %u, row %u, cap %u)",
                       n_layers, n_ctx, row_elems, cap);
    const uint64_t row_bytes = (uint64_t)row_elems * (type == HS_TYPE_F16 ? 2 : 4);
    if (row_bytes % 4)
        return HS_FAIL(HS_ERR_INVALID_ARG, "kv_gather: a row of %llu bytes is not whole uints",
                       (unsigned long long)row_bytes);
    const uint64_t layer_bytes = row_bytes * n_ctx;
    if (n_layers > 1 && (layer_stride < layer_bytes || layer_stride % 4))
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "kv_gather: layer stride %llu (layer holds %llu bytes, multiple of 4)",
                       (unsigned long long)layer_stride, (unsigned long long)layer_bytes);
    if (n_layers == 1) layer_stride = layer_bytes;
    if (!k || !k->buf || !v || !v->buf) return HS_FAIL(HS_ERR_INVALID_ARG, "kv_gather: k or v missing");

    /* uvec4 units when rows, strides and both offsets allow, else uints. */
    const bool u4 =
        row_bytes % 16 == 0 && layer_stride % 16 == 0 && k->offset % 16 == 0 && v->offset % 16 == 0;
    const uint32_t unit = u4 ? 16 : 4;
    const uint64_t row_units = row_bytes / unit, stride_units = layer_stride / unit;
    if (stride_units * n_layers > UINT32_MAX)
        return HS_FAIL(HS_ERR_INVALID_ARG, "kv_gather: caches exceed 32-bit indexing");
    const uint32_t gx = (uint32_t)((row_units + HS_ATTN_SIMPLE_WG - 1) / HS_ATTN_SIMPLE_WG);
    if (gx > c->max_wg_count[0]) return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "kv_gather: row too long");

    hs_vk_binding b[HS_VK_MAX_BINDINGS];
    hs_kv_gather_push pc = {
        .row_units = (uint32_t)row_units, .layer_units = (uint32_t)stride_units, .n_ctx = n_ctx, .cap = cap};
    HS_TRY(hs_op_bind(c, "kv_gather", "rows", rows, 0, (uint64_t)(HS_KV_GATHER_SRC + cap) * 4, 4, &b[2],
                      &pc.info_off));
    HS_TRY(hs_op_check("kv_gather", "k", k, 0, (uint64_t)(n_layers - 1) * layer_stride + layer_bytes, unit));
    HS_TRY(hs_op_check("kv_gather", "v", v, 0, (uint64_t)(n_layers - 1) * layer_stride + layer_bytes, unit));

    /* Layers per dispatch: as many as one binding range holds with the
     * alignment slack their windows can have (all of them for any model that
     * fits a phone), within the grid's y limit. */
    const uint64_t ks = hs_ops_max_slack(c, k->offset, layer_stride);
    const uint64_t vs = hs_ops_max_slack(c, v->offset, layer_stride);
    const uint64_t slack = ks > vs ? ks : vs, range = c->max_storage_buffer_range;
    if (slack + layer_bytes <= range) {
        hs_vk_pipeline *p = NULL;
        HS_TRY(kv_gather_pipeline(ops, u4, 1, &p));
        uint64_t per = 1 + (range - slack - layer_bytes) / layer_stride;
        if (per > c->max_wg_count[1]) per = c->max_wg_count[1];
        for (uint32_t l0 = 0; l0 < n_layers; l0 += (uint32_t)per) {
            uint32_t cnt = n_layers - l0 < per ? n_layers - l0 : (uint32_t)per;
            uint64_t at = (uint64_t)l0 * layer_stride;
            uint64_t span = (uint64_t)(cnt - 1) * layer_stride + layer_bytes;
            HS_TRY(hs_op_bind(c, "kv_gather", "k", k, at, span, unit, &b[0], &pc.k_off));
            HS_TRY(hs_op_bind(c, "kv_gather", "v", v, at, span, unit, &b[1], &pc.v_off));
            HS_TRY(hs_vk_seq_dispatch(seq, p, b, 3, &pc, gx, cnt, 2));
        }
        return HS_OK;
    }
    /* Else one dispatch per layer, its caches bound in windows where they
     * pass the range (op_elem.h); each layer is planned on its own, as its
     * offsets' slack may differ. */
    for (uint32_t l = 0; l < n_layers; l++) {
        const hs_vk_binding kl = {k->buf, k->offset + l * layer_stride, 0};
        const hs_vk_binding vl = {v->buf, v->offset + l * layer_stride, 0};
        hs_kv_split sp;
        HS_TRY(hs_kv_plan_rows(ops, "kv_gather", &kl, &vl, row_bytes, n_ctx, &sp));
        const uint32_t n_bind = hs_kv_bindings(3, &sp);
        hs_vk_pipeline *p = NULL;
        HS_TRY(kv_gather_pipeline(ops, u4, sp.chunks, &p));
        hs_kv_bind_windows(ops, &kl, &vl, row_bytes, n_ctx, &sp, unit, 0, 1, 3, b, &pc.k_off, &pc.v_off);
        pc.chunk_rows = sp.chunk_rows;
        HS_TRY(hs_vk_seq_dispatch(seq, p, b, n_bind, &pc, gx, 1, 2));
    }
fail:
    return st;
}
