/* op_select: recording of argmax and Top-K (shaders/argmax.comp, topk.comp).
 * Both kernels run one workgroup per row and share the planning below: a
 * subgroup or portable variant, the workgroup size (the tuning table's
 * reduce_wg_size, widened for long rows to stay below llvmpipe's loop-trip
 * limit), the number of lists the shared memory holds, the subgroup size
 * pinned where the device allows, and the split of large inputs into
 * dispatches at row boundaries. */
#include "op_select.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "hs_shaders.h"
#include "op_common.h"

/* Mirrors the push constants of shaders/argmax.comp. */
typedef struct hs_argmax_push {
    uint32_t n_rows;
    uint32_t vocab;
    uint32_t in_base;  /* elements from the binding start to row 0 */
    uint32_t out_base; /* words from the binding start to out[0] */
} hs_argmax_push;
static_assert(sizeof(hs_argmax_push) == 16, "hs_argmax_push must mirror argmax.comp");

/* Mirrors the push constants of shaders/topk.comp. */
typedef struct hs_topk_push {
    uint32_t n_rows;
    uint32_t vocab;
    uint32_t k;
    uint32_t in_base;  /* elements from the binding start to row 0 */
    uint32_t out_base; /* words from the binding start to record 0 */
    float inv_temp;
} hs_topk_push;
static_assert(sizeof(hs_topk_push) == 24, "hs_topk_push must mirror topk.comp");
static_assert(sizeof(hs_topk_push) <= 128, "push constants are limited to 128 bytes");

/* Shared memory the kernels may use: the smallest maxComputeSharedMemorySize
 * of the devices we target (some phones), so one plan fits everywhere. */
#define HS_SELECT_SHARED_BUDGET 16384u
/* Portable Top-K: one invocation merges every invocation's list serially. */
#define HS_TOPK_PORTABLE_MAX_WG 32u
/* The kernels' worst-case loop trips per invocation are estimated from the
 * vocabulary (and k); the workgroup widens until they stay below this budget
 * (hs_widen_for_trips: llvmpipe's loop-trip cap), which leaves room for the
 * short loops after the main one. */
#define HS_SELECT_TRIP_BUDGET 32768u

typedef struct select_kernel {
    const char *name;
    const uint32_t *code;
    size_t code_size;
    uint32_t push_size;
    uint32_t wg;        /* workgroup size */
    uint32_t sg;        /* spec 1: subgroup size the kernel is built for (1: portable) */
    uint32_t max_lists; /* spec 2: shared slots, one per subgroup (per invocation when portable) */
    uint32_t required_sg;
    bool texel; /* binding 0 a uniform texel buffer (RGBA32UI), rows of whole texels */
} select_kernel;

/* Worst-case loop trips of one invocation, see the kernels' headers. */
typedef uint64_t (*select_trips_fn)(uint64_t n_chunks, uint32_t wg, uint32_t sg, uint32_t k);

/* argmax: one trip per block of one chunk (4 elements) per invocation. */
static uint64_t argmax_trips(uint64_t n_chunks, uint32_t wg, uint32_t sg, uint32_t k) {
    (void)sg;
    (void)k;
    return (n_chunks + wg - 1) / wg;
}

/* topk: per block, the hot trip, the outer trip, and at most min(k, 4 sg)
 * insertions plus the final check of the candidate loop. */
static uint64_t topk_trips(uint64_t n_chunks, uint32_t wg, uint32_t sg, uint32_t k) {
    uint64_t ins = 4ull * sg < k ? 4ull * sg : k;
    return (n_chunks + wg - 1) / wg * (3 + ins);
}

typedef struct select_trips {
    uint64_t n_chunks;
    uint32_t sg, k;
    select_trips_fn fn;
} select_trips;

static uint64_t select_trip_count(uint32_t wg, const void *ctx) {
    const select_trips *t = ctx;
    return t->fn(t->n_chunks, wg, t->sg, t->k);
}

/* Chooses the workgroup, the variant and the shared list capacity.
 * list_bytes: shared bytes per list; fixed_bytes: shared bytes besides lists;
 * lists_per_lane: true if the kernel may need one list per invocation (any
 * subgroup size), false if one per subgroup of the planned size suffices. */
static void plan_kernel(const hs_ops *ops, uint32_t list_bytes, uint32_t fixed_bytes, bool lists_per_lane,
                        uint32_t portable_max_wg, select_trips_fn trips, uint32_t vocab, uint32_t k,
                        select_kernel *kk) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    uint32_t budget =
        c->max_shared_memory < HS_SELECT_SHARED_BUDGET ? c->max_shared_memory : HS_SELECT_SHARED_BUDGET;
    uint32_t lists_cap = budget > fixed_bytes ? (budget - fixed_bytes) / list_bytes : 1;
    if (lists_cap < 1) lists_cap = 1;
    uint32_t wg_max = c->max_wg_invocations < c->max_wg_size[0] ? c->max_wg_invocations : c->max_wg_size[0];
    uint32_t sg = hs_ops_subgroup(ops);
    if (sg > wg_max) sg = 1; /* cannot happen on a conforming device; stay portable */
    if (sg == 1 && wg_max > portable_max_wg) wg_max = portable_max_wg;
    /* Largest workgroup whose lists fit in shared memory. */
    uint32_t lanes_per_list = (sg == 1 || lists_per_lane) ? 1 : sg;
    if ((uint64_t)lists_cap * lanes_per_list < wg_max) wg_max = lists_cap * lanes_per_list;
    if (sg > 1) wg_max = wg_max / sg * sg;
    if (wg_max < sg) wg_max = sg;

    uint32_t wg = hs_ops_tuning(ops)->reduce_wg_size;
    if (sg > 1) wg = (wg + sg - 1) / sg * sg; /* whole subgroups */
    if (wg > wg_max) wg = wg_max;
    if (wg < 1) wg = 1;
    const select_trips st = {((uint64_t)vocab + 3) / 4, sg, k, trips};
    wg = hs_widen_for_trips(wg, wg_max, HS_SELECT_TRIP_BUDGET, select_trip_count, &st);

    kk->wg = wg;
    kk->sg = sg;
    kk->max_lists = lanes_per_list == 1 ? wg : (wg + sg - 1) / sg;
    kk->required_sg = 0;
    /* Pin the subgroup size where the device allows it, so the kernel's
     * layout assumptions (subgroups of sg lanes) hold everywhere. */
    if (sg > 1 && c->subgroup_size_control && sg >= c->subgroup_min && sg <= c->subgroup_max)
        kk->required_sg = sg;
}

/* A kernel's build: [subgroups][texel logits]. */
typedef struct select_variant {
    const char *name;
    const uint32_t *code;
    const size_t *size;
} select_variant;
#define SELECT_BUILD(k, v) {#k "_" #v, hs_spv_##k##_##v, &hs_spv_##k##_##v##_size}
#define SELECT_VARIANTS(k) {{SELECT_BUILD(k, nosg), SELECT_BUILD(k, nosg_tx)}, {SELECT_BUILD(k, sg), SELECT_BUILD(k, sg_tx)}}

/* The variant for this device and these logits: subgroup operations where the device has them, and on
 * lavapipe (tuning texel) rows of whole texels at a texel's offset through a uniform texel buffer, one
 * gather per vec4 where a storage-buffer load loops over the lanes; the same values, the same results. */
static void pick_variant(const hs_ops *ops, const select_variant v[2][2], const hs_vk_binding *logits,
                         uint32_t vocab, select_kernel *k) {
    const bool sg = hs_ops_subgroup(ops) > 1;
    const bool tx = hs_op_texel_loads(ops) && vocab % 4 == 0 && logits->offset % 16 == 0 &&
                    hs_op_texel_rows(hs_ops_caps(ops), logits->offset, (uint64_t)vocab * 4) > 0;
    k->name = v[sg][tx].name;
    k->code = v[sg][tx].code;
    k->code_size = *v[sg][tx].size;
    k->texel = tx;
}

static hs_status get_pipeline(hs_ops *ops, const select_kernel *k, hs_vk_pipeline **out) {
    hs_vk_pipeline_desc d = {
        .name = k->name,
        .code = k->code,
        .code_size = k->code_size,
        .n_bindings = 2,
        .texel_mask = k->texel ? 1u : 0u,
        .write_mask = 1u << 1,
        .push_size = k->push_size,
        .n_spec = 3,
        .spec = {k->wg, k->sg, k->max_lists},
        .required_subgroup_size = k->required_sg,
        .wg_size = {k->wg, 1, 1},
    };
    return hs_ops_pipeline(ops, &d, out);
}

/* Rows per dispatch: every binding of a dispatch must stay within
 * maxStorageBufferRange (with the alignment slack its windows can have) and
 * the row count within maxComputeWorkGroupCount[0]. 0 if a single row does not
 * fit. */
static uint32_t rows_per_dispatch(const hs_vk_caps *c, const hs_vk_binding *in, uint64_t in_row_bytes,
                                  const hs_vk_binding *out, uint64_t out_row_bytes) {
    const uint64_t range = c->max_storage_buffer_range;
    const uint64_t in_slack = hs_ops_max_slack(c, in->offset, in_row_bytes);
    const uint64_t out_slack = hs_ops_max_slack(c, out->offset, out_row_bytes);
    uint64_t rows = c->max_wg_count[0];
    uint64_t in_fit = range > in_slack ? (range - in_slack) / in_row_bytes : 0;
    uint64_t out_fit = range > out_slack ? (range - out_slack) / out_row_bytes : 0;
    if (in_fit < rows) rows = in_fit;
    if (out_fit < rows) rows = out_fit;
    return (uint32_t)rows;
}

/* Records the dispatches of one op over n rows. */
static hs_status dispatch_rows(hs_ops *ops, hs_vk_seq *seq, const char *op, const select_kernel *k,
                               const hs_vk_binding *logits, const hs_vk_binding *out, uint32_t n,
                               uint32_t vocab, uint32_t out_row_words, void *push, uint32_t *push_in_base,
                               uint32_t *push_out_base, uint32_t *push_rows) {
    hs_status st = HS_OK;
    const hs_vk_caps *c = hs_ops_caps(ops);
    uint64_t in_row = (uint64_t)vocab * 4u, out_row = (uint64_t)out_row_words * 4u;
    uint32_t per = rows_per_dispatch(c, logits, in_row, out, out_row);
    /* A texel view starts at an offset aligned for it (the slack, whole texels, in the push constant) and
     * holds at most maxTexelBufferElements texels. */
    if (k->texel && hs_op_texel_rows(c, logits->offset, in_row) < per)
        per = (uint32_t)hs_op_texel_rows(c, logits->offset, in_row);
    if (per == 0)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE,
                       "%s: a row of %u logits (%llu bytes) exceeds maxStorageBufferRange %llu", op, vocab,
                       (unsigned long long)in_row, (unsigned long long)c->max_storage_buffer_range);
    hs_vk_pipeline *pipe = NULL;
    HS_TRY(get_pipeline(ops, k, &pipe));
    for (uint32_t r0 = 0; r0 < n; r0 += per) {
        uint32_t rows = n - r0 < per ? n - r0 : per;
        hs_vk_binding b[2];
        const uint64_t align = k->texel ? hs_op_texel_align(c) : c->min_storage_offset_align;
        b[0] = hs_op_window_aligned(logits->buf, logits->offset + r0 * in_row, rows * in_row, 4, align, push_in_base);
        b[1] = hs_op_window(c, out->buf, out->offset + r0 * out_row, rows * out_row, 4, push_out_base);
        *push_rows = rows;
        HS_TRY(hs_vk_seq_dispatch(seq, pipe, b, 2, push, rows, 1, 1));
    }
fail:
    return st;
}

hs_status hs_op_argmax(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *logits, uint32_t n, uint32_t vocab,
                       const hs_vk_binding *out) {
    hs_status st = HS_OK;
    HS_ASSERT(ops && seq);
    if (n == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_op_argmax: n (rows) must be >= 1");
    if (vocab == 0 || vocab == UINT32_MAX)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_op_argmax: vocab %u must be in [1, 2^32 - 2]", vocab);
    HS_TRY(hs_op_check("hs_op_argmax", "logits", logits, 0, (uint64_t)n * vocab * 4u, 4));
    HS_TRY(hs_op_check("hs_op_argmax", "out", out, 0, (uint64_t)n * 4u, 4));

    select_kernel k = {.push_size = sizeof(hs_argmax_push)};
    static const select_variant variants[2][2] = SELECT_VARIANTS(argmax);
    pick_variant(ops, variants, logits, vocab, &k);
    /* One (value, id) per invocation covers any subgroup size; the portable
     * merge is a short serial scan. */
    plan_kernel(ops, 8, 0, true, UINT32_MAX, argmax_trips, vocab, 1, &k);
    hs_argmax_push push = {.vocab = vocab};
    HS_TRY(dispatch_rows(ops, seq, "hs_op_argmax", &k, logits, out, n, vocab, 1, &push, &push.in_base,
                         &push.out_base, &push.n_rows));
fail:
    return st;
}

hs_status hs_op_topk(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *logits, uint32_t n, uint32_t vocab,
                     uint32_t k, float temperature, const hs_vk_binding *out) {
    hs_status st = HS_OK;
    HS_ASSERT(ops && seq);
    if (n == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_op_topk: n (rows) must be >= 1");
    if (vocab == 0 || vocab == UINT32_MAX)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_op_topk: vocab %u must be in [1, 2^32 - 2]", vocab);
    if (k == 0 || k > HS_TOPK_MAX_K)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_op_topk: k = %u must be in [1, %u]", k, HS_TOPK_MAX_K);
    if (k > vocab)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_op_topk: k = %u is larger than the vocabulary (%u)", k, vocab);
    if (!(temperature > 0.0f) || !isfinite(temperature) || !isfinite(1.0f / temperature))
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "hs_op_topk: temperature %g must be finite and > 0 (use argmax for greedy)",
                       (double)temperature);
    uint32_t words = hs_topk_record_words(k);
    HS_TRY(hs_op_check("hs_op_topk", "logits", logits, 0, (uint64_t)n * vocab * 4u, 4));
    HS_TRY(hs_op_check("hs_op_topk", "out", out, 0, (uint64_t)n * words * 4u, 4));

    select_kernel kk = {.push_size = sizeof(hs_topk_push)};
    static const select_variant variants[2][2] = SELECT_VARIANTS(topk);
    pick_variant(ops, variants, logits, vocab, &kk);
    /* Per list: HS_TOPK_MAX_K (value, id) pairs + count, tail, head; plus the
     * final list. Must match the shared arrays of topk.comp. */
    plan_kernel(ops, HS_TOPK_MAX_K * 8u + 12u, HS_TOPK_MAX_K * 8u, false, HS_TOPK_PORTABLE_MAX_WG, topk_trips,
                vocab, k, &kk);
    hs_topk_push push = {.vocab = vocab, .k = k, .inv_temp = 1.0f / temperature};
    HS_TRY(dispatch_rows(ops, seq, "hs_op_topk", &kk, logits, out, n, vocab, words, &push, &push.in_base,
                         &push.out_base, &push.n_rows));
fail:
    return st;
}

void hs_topk_unpack(const void *records, uint32_t k, uint32_t row, hs_topk_result *res) {
    HS_ASSERT(k >= 1 && k <= HS_TOPK_MAX_K);
    const unsigned char *r = (const unsigned char *)records + (size_t)row * hs_topk_record_words(k) * 4u;
    memset(res, 0, sizeof *res);
    res->k = k;
    memcpy(res->ids, r, 4u * k);
    memcpy(res->probs, r + 4u * k, 4u * k);
    memcpy(&res->tail, r + 8u * k, 4);
    memcpy(&res->entropy, r + 8u * k + 4u, 4);
    memcpy(&res->max_logit, r + 8u * k + 8u, 4);
    memcpy(&res->lse, r + 8u * k + 12u, 4);
}

float hs_topk_log_prob(const hs_topk_result *res, float logit, float temperature) {
    return (logit - res->max_logit) / temperature - (res->lse - res->max_logit / temperature);
}
