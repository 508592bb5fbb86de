/* op_elem: recording of the row, element-wise and RoPE ops (see op_elem.h).
 *
 * Every op follows the same steps: validate sizes against the bindings, pick
 * the shader variant (subgroup or portable; f32 or f16 cache), split the rows
 * into dispatches that each fit maxStorageBufferRange, and for each dispatch
 * bind every operand at its offset aligned down to
 * minStorageBufferOffsetAlignment, passing the remainder (in elements) as a
 * push constant. */
#include "op_elem.h"

#include <assert.h>
#include <math.h>
#include <string.h>

#include "hs_shaders.h"
#include "op_common.h"

/* Workgroup sizes of the kernels without reductions: several subgroups on
 * every device. llvmpipe pays roughly a microsecond per workgroup, so these
 * kernels give each invocation several chunks rather than launching more
 * workgroups. */
#define HS_ELTWISE_WG              64u
#define HS_ELTWISE_EPT             4u /* elements per chunk (one vec4) */
#define HS_ELTWISE_CHUNKS_PER_LANE 4u
#define HS_ROPE_WG                 64u
/* Largest n_rot / 2: the per-token cos/sin table in shared memory (MAX_PAIRS
 * in rope.comp, 2 KiB). */
#define HS_ROPE_MAX_PAIRS 256u

/* Push constants, mirrored field by field in the shaders. */
typedef struct hs_rmsnorm_push {
    uint32_t n, dim, x_off, w_off, y_off, has_w;
    float eps;
    uint32_t use_vec4;
} hs_rmsnorm_push;
static_assert(sizeof(hs_rmsnorm_push) == 32, "hs_rmsnorm_push must match rmsnorm.comp");

typedef struct hs_softmax_push {
    uint32_t n, dim, x_off, y_off;
    float scale;
    uint32_t use_vec4, pad[2];
} hs_softmax_push;
static_assert(sizeof(hs_softmax_push) == 32, "hs_softmax_push must match softmax.comp");

typedef struct hs_eltwise_push {
    uint32_t count, ff, a_off, b_off, y_off;
    float s;
    uint32_t use_vec4, pad;
} hs_eltwise_push;
static_assert(sizeof(hs_eltwise_push) == 32, "hs_eltwise_push must match eltwise.comp");

typedef struct hs_rope_push {
    uint32_t n_tok, n_head, n_kv, head_dim, n_rot, neox;
    float freq_base, freq_scale;
    uint32_t n_ctx, x_off, pos_off, rows_off, q_off, k_off, v_off, f_off, has_freqs;
    float l2b_hi, l2b_lo;
    uint32_t chunk_rows;
} hs_rope_push;
static_assert(sizeof(hs_rope_push) == 80, "hs_rope_push must match rope.comp");
static_assert(sizeof(hs_rope_push) <= 128, "push constants are limited to 128 bytes");

typedef struct hs_gather_rows_push {
    uint32_t n, i0, cols, src_stride, dst_stride, src_rows, dst_rows, src_row0, src_nrows, dst_row0;
    uint32_t src_off, dst_off, sids_off, dids_off, flags, pad;
} hs_gather_rows_push;
static_assert(sizeof(hs_gather_rows_push) == 64, "hs_gather_rows_push must match gather_rows.comp");
#define HS_GATHER_WG 64u

/* ---- operands ---- */

/* One tensor operand of an op: the caller's binding and what the op touches.
 * Split operands advance by row_bytes per row from dispatch to dispatch;
 * whole operands (weights, caches) are bound in full to every dispatch. */
typedef struct hs_operand {
    const hs_vk_binding *b;
    const char *name;
    uint64_t row_bytes; /* > 0: split by rows */
    uint64_t bytes;     /* total bytes the op reads or writes */
} hs_operand;

static hs_status check_operands(const char *op, const hs_operand *a, int n) {
    for (int i = 0; i < n; i++) {
        hs_status st = hs_op_check(op, a[i].name, a[i].b, 0, a[i].bytes, 4);
        if (st != HS_OK) return st;
    }
    return HS_OK;
}

/* Largest number of rows per dispatch such that every split operand's window
 * (plus the alignment slack it can have) fits maxStorageBufferRange, capped at
 * max_rows. Whole operands must fit as they are. */
static hs_status plan_rows(const hs_vk_caps *c, const char *op, const hs_operand *a, int n, uint64_t max_rows,
                           uint64_t *rows) {
    const uint64_t range = c->max_storage_buffer_range;
    uint64_t r = max_rows;
    for (int i = 0; i < n; i++) {
        uint64_t slack = hs_ops_max_slack(c, a[i].b->offset, a[i].row_bytes);
        uint64_t cap = range > slack ? range - slack : 0;
        if (a[i].row_bytes) {
            uint64_t fit = cap / a[i].row_bytes;
            if (fit == 0)
                return HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                               "%s: one row of %s (%llu bytes, %llu more for the offset's alignment) exceeds "
                               "maxStorageBufferRange %llu",
                               op, a[i].name, (unsigned long long)a[i].row_bytes, (unsigned long long)slack,
                               (unsigned long long)range);
            if (fit < r) r = fit;
        } else if (a[i].bytes > cap) {
            return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "%s: %s (%llu bytes) exceeds maxStorageBufferRange %llu",
                           op, a[i].name, (unsigned long long)a[i].bytes, (unsigned long long)range);
        }
    }
    *rows = r ? r : 1;
    return HS_OK;
}

/* Binds rows [r0, r0 + nr) of a split operand (or all of a whole one) at the
 * aligned-down offset; *off receives the remainder in units of `unit` bytes. */
static void bind_window(const hs_vk_caps *c, const hs_operand *a, uint64_t r0, uint64_t nr, uint32_t unit,
                        hs_vk_binding *out, uint32_t *off) {
    const uint64_t first = a->row_bytes ? r0 * a->row_bytes : 0;
    *out = hs_op_window(c, a->b->buf, a->b->offset + first, a->row_bytes ? nr * a->row_bytes : a->bytes, unit,
                        off);
}

/* Workgroup grid for `groups` workgroups: x first, then rows of x. */
static void grid_2d(const hs_vk_caps *c, uint64_t groups, uint32_t *gx, uint32_t *gy) {
    uint64_t mx = c->max_wg_count[0];
    *gx = (uint32_t)(groups < mx ? groups : mx);
    *gy = (uint32_t)(*gx ? (groups + *gx - 1) / *gx : 0);
}

static uint64_t max_groups_2d(const hs_vk_caps *c) {
    return (uint64_t)c->max_wg_count[0] * c->max_wg_count[1];
}

/* Row ops (rmsnorm.comp, softmax.comp) walk the row twice, four elements per
 * invocation and trip. The budget keeps each invocation far below llvmpipe's
 * loop-trip cap (hs_widen_for_trips). */
#define HS_ROW_TRIP_BUDGET 16384u

static uint64_t row_trip_count(uint32_t wg, const void *ctx) {
    const uint64_t dim = *(const uint64_t *)ctx, step = (uint64_t)wg * 4;
    return 2 * ((dim + step - 1) / step);
}

/* Workgroup of a row op over rows of dim elements: the tuning's, widened for
 * long rows. */
static uint32_t row_wg(hs_ops *ops, uint64_t dim) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    return hs_widen_for_trips(hs_op_clamp_wg(c, hs_ops_tuning(ops)->reduce_wg_size),
                              hs_op_clamp_wg(c, UINT32_MAX), HS_ROW_TRIP_BUDGET, row_trip_count, &dim);
}

static hs_status get_pipeline(hs_ops *ops, const char *name, const uint32_t *code, size_t code_size,
                              uint32_t n_bindings, uint32_t write_mask, uint32_t push_size, uint32_t wg,
                              bool subgroup_spec, hs_vk_pipeline **out) {
    hs_vk_pipeline_desc d = {
        .name = name,
        .code = code,
        .code_size = code_size,
        .n_bindings = n_bindings,
        .write_mask = write_mask,
        .push_size = push_size,
        .n_spec = subgroup_spec ? 2 : 1,
        .spec = {wg, hs_ops_subgroup(ops)},
        .wg_size = {wg, 1, 1},
    };
    return hs_ops_pipeline(ops, &d, out);
}

/* ---- rmsnorm ---- */

hs_status hs_op_rmsnorm(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *w,
                        const hs_vk_binding *y, uint32_t n, uint32_t dim, float eps) {
    static const char *op = "hs_op_rmsnorm";
    const hs_vk_caps *c = hs_ops_caps(ops);
    if (dim == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: dim must be > 0", op);
    if (!(eps >= 0.0f)) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: eps must be >= 0 (got %g)", op, (double)eps);
    uint64_t row = (uint64_t)dim * 4;
    hs_operand a[3] = {{x, "x", row, row * n}, {y, "y", row, row * n}, {w ? w : x, "w", 0, w ? row : 4}};
    hs_status st = check_operands(op, a, w ? 3 : 2);
    if (st != HS_OK || n == 0) return st;

    bool sg = hs_ops_subgroup(ops) > 1;
    uint32_t wg = row_wg(ops, dim);
    hs_vk_pipeline *p;
    st = get_pipeline(ops, sg ? "rmsnorm_sg" : "rmsnorm", sg ? hs_spv_rmsnorm_sg : hs_spv_rmsnorm,
                      sg ? hs_spv_rmsnorm_sg_size : hs_spv_rmsnorm_size, 3, 1u << 2, sizeof(hs_rmsnorm_push),
                      wg, true, &p);
    if (st != HS_OK) return st;

    uint64_t per;
    st = plan_rows(c, op, a, w ? 3 : 2, max_groups_2d(c), &per);
    if (st != HS_OK) return st;
    for (uint64_t r0 = 0; r0 < n; r0 += per) {
        uint64_t nr = n - r0 < per ? n - r0 : per;
        hs_vk_binding bind[3];
        hs_rmsnorm_push pc = {.n = (uint32_t)nr, .dim = dim, .has_w = w != NULL, .eps = eps};
        bind_window(c, &a[0], r0, nr, 4, &bind[0], &pc.x_off);
        bind_window(c, &a[1], r0, nr, 4, &bind[2], &pc.y_off);
        if (w) {
            bind_window(c, &a[2], 0, 0, 4, &bind[1], &pc.w_off);
        } else {
            bind[1] = bind[0]; /* unused by the shader; any valid binding */
        }
        pc.use_vec4 = dim % 4 == 0 && (pc.x_off | pc.y_off | pc.w_off) % 4 == 0;
        uint32_t gx, gy;
        grid_2d(c, nr, &gx, &gy);
        st = hs_vk_seq_dispatch(seq, p, bind, 3, &pc, gx, gy, 1);
        if (st != HS_OK) return st;
    }
    return HS_OK;
}

/* ---- softmax ---- */

hs_status hs_op_softmax(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                        uint32_t n, uint32_t dim, float scale) {
    static const char *op = "hs_op_softmax";
    const hs_vk_caps *c = hs_ops_caps(ops);
    if (dim == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: dim must be > 0", op);
    uint64_t row = (uint64_t)dim * 4;
    hs_operand a[2] = {{x, "x", row, row * n}, {y, "y", row, row * n}};
    hs_status st = check_operands(op, a, 2);
    if (st != HS_OK || n == 0) return st;

    bool sg = hs_ops_subgroup(ops) > 1;
    uint32_t wg = row_wg(ops, dim);
    hs_vk_pipeline *p;
    st = get_pipeline(ops, sg ? "softmax_sg" : "softmax", sg ? hs_spv_softmax_sg : hs_spv_softmax,
                      sg ? hs_spv_softmax_sg_size : hs_spv_softmax_size, 2, 1u << 1, sizeof(hs_softmax_push),
                      wg, true, &p);
    if (st != HS_OK) return st;

    uint64_t per = 1;
    st = plan_rows(c, op, a, 2, max_groups_2d(c), &per);
    if (st != HS_OK) return st;
    for (uint64_t r0 = 0; r0 < n; r0 += per) {
        uint64_t nr = n - r0 < per ? n - r0 : per;
        hs_vk_binding bind[2];
        hs_softmax_push pc = {.n = (uint32_t)nr, .dim = dim, .scale = scale};
        bind_window(c, &a[0], r0, nr, 4, &bind[0], &pc.x_off);
        bind_window(c, &a[1], r0, nr, 4, &bind[1], &pc.y_off);
        pc.use_vec4 = dim % 4 == 0 && (pc.x_off | pc.y_off) % 4 == 0;
        uint32_t gx, gy;
        grid_2d(c, nr, &gx, &gy);
        st = hs_vk_seq_dispatch(seq, p, bind, 2, &pc, gx, gy, 1);
        if (st != HS_OK) return st;
    }
    return HS_OK;
}

/* ---- element-wise ---- */

typedef enum hs_elt_op { ELT_ADD, ELT_MUL, ELT_SCALE, ELT_GELU, ELT_SILU, ELT_SWIGLU, ELT_GEGLU } hs_elt_op;

static const struct {
    const char *name;
    const char *api;
    const uint32_t *code;
    const size_t *size;
    bool binary, gated;
} k_elt[] = {
    [ELT_ADD] = {"add", "hs_op_add", hs_spv_add, &hs_spv_add_size, true, false},
    [ELT_MUL] = {"mul", "hs_op_mul", hs_spv_mul, &hs_spv_mul_size, true, false},
    [ELT_SCALE] = {"scale", "hs_op_scale", hs_spv_scale, &hs_spv_scale_size, false, false},
    [ELT_GELU] = {"gelu", "hs_op_gelu", hs_spv_gelu, &hs_spv_gelu_size, false, false},
    [ELT_SILU] = {"silu", "hs_op_silu", hs_spv_silu, &hs_spv_silu_size, false, false},
    [ELT_SWIGLU] = {"swiglu", "hs_op_swiglu", hs_spv_swiglu, &hs_spv_swiglu_size, false, true},
    [ELT_GEGLU] = {"geglu", "hs_op_geglu", hs_spv_geglu, &hs_spv_geglu_size, false, true},
};

/* Flat ops: rows of one element, so a dispatch may start anywhere. Gated ops:
 * one row per token (gate | up in, ff out). */
static hs_status eltwise(hs_ops *ops, hs_vk_seq *seq, hs_elt_op kind, const hs_vk_binding *a,
                         const hs_vk_binding *b, const hs_vk_binding *y, uint64_t rows, uint32_t ff,
                         float s) {
    const char *op = k_elt[kind].api;
    const hs_vk_caps *c = hs_ops_caps(ops);
    bool binary = k_elt[kind].binary, gated = k_elt[kind].gated;
    if (gated && ff == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: ff must be > 0", op);
    uint64_t in_row = gated ? 8ull * ff : 4, out_row = gated ? 4ull * ff : 4;
    hs_operand o[3] = {{a,
                        gated    ? "gu"
                        : binary ? "a"
                                 : "x",
                        in_row, in_row * rows},
                       {y, "y", out_row, out_row * rows},
                       {b, "b", 4, 4 * rows}};
    int n_o = binary ? 3 : 2;
    hs_status st = check_operands(op, o, n_o);
    if (st != HS_OK || rows == 0) return st;

    uint32_t wg = hs_op_clamp_wg(c, HS_ELTWISE_WG);
    hs_vk_pipeline *p;
    st = get_pipeline(ops, k_elt[kind].name, k_elt[kind].code, *k_elt[kind].size, (uint32_t)n_o,
                      1u << (n_o - 1), sizeof(hs_eltwise_push), wg, false, &p);
    if (st != HS_OK) return st;

    /* Workgroups loop over 4-element chunks with a grid stride; aim for about
     * HS_ELTWISE_CHUNKS_PER_LANE chunks per invocation. Flat ops: one grid row,
     * outputs per dispatch below 2^32 (32-bit indices in the shader). Gated
     * ops: one grid row per token. */
    uint64_t per_group = (uint64_t)wg * HS_ELTWISE_EPT * HS_ELTWISE_CHUNKS_PER_LANE;
    uint64_t max_rows = gated ? c->max_wg_count[1] : 0xFFFFFFF0ull;
    uint64_t per;
    st = plan_rows(c, op, o, n_o, max_rows, &per);
    if (st != HS_OK) return st;
    if (!gated && per >= 4) per &= ~3ull; /* keep later dispatches on vec4 boundaries */
    for (uint64_t r0 = 0; r0 < rows; r0 += per) {
        uint64_t nr = rows - r0 < per ? rows - r0 : per;
        hs_vk_binding bind[3];
        hs_eltwise_push pc = {.count = (uint32_t)nr, .ff = ff, .s = s};
        bind_window(c, &o[0], r0, nr, 4, &bind[0], &pc.a_off);
        if (binary) {
            bind_window(c, &o[2], r0, nr, 4, &bind[1], &pc.b_off);
            bind_window(c, &o[1], r0, nr, 4, &bind[2], &pc.y_off);
        } else {
            bind_window(c, &o[1], r0, nr, 4, &bind[1], &pc.y_off);
        }
        pc.use_vec4 = (pc.a_off | pc.b_off | pc.y_off | (gated ? ff : 0)) % 4 == 0;
        uint64_t gx = ((gated ? ff : nr) + per_group - 1) / per_group;
        if (gx > c->max_wg_count[0]) gx = c->max_wg_count[0];
        st = hs_vk_seq_dispatch(seq, p, bind, (uint32_t)n_o, &pc, (uint32_t)gx, gated ? (uint32_t)nr : 1, 1);
        if (st != HS_OK) return st;
    }
    return HS_OK;
}

hs_status hs_op_add(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *a, const hs_vk_binding *b,
                    const hs_vk_binding *y, uint64_t count) {
    return eltwise(ops, seq, ELT_ADD, a, b, y, count, 0, 0.0f);
}

hs_status hs_op_mul(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *a, const hs_vk_binding *b,
                    const hs_vk_binding *y, uint64_t count) {
    return eltwise(ops, seq, ELT_MUL, a, b, y, count, 0, 0.0f);
}

hs_status hs_op_scale(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                      uint64_t count, float s) {
    return eltwise(ops, seq, ELT_SCALE, x, NULL, y, count, 0, s);
}

hs_status hs_op_gelu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                     uint64_t count) {
    return eltwise(ops, seq, ELT_GELU, x, NULL, y, count, 0, 0.0f);
}

hs_status hs_op_silu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *y,
                     uint64_t count) {
    return eltwise(ops, seq, ELT_SILU, x, NULL, y, count, 0, 0.0f);
}

hs_status hs_op_swiglu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *gu, const hs_vk_binding *y,
                       uint32_t n, uint32_t ff) {
    return eltwise(ops, seq, ELT_SWIGLU, gu, NULL, y, n, ff, 0.0f);
}

hs_status hs_op_geglu(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *gu, const hs_vk_binding *y,
                      uint32_t n, uint32_t ff) {
    return eltwise(ops, seq, ELT_GEGLU, gu, NULL, y, n, ff, 0.0f);
}

/* ---- row gather / scatter ---- */

/* Rows of `stride` bytes (the last one `row` bytes) that one binding holds from
 * offsets off + i stride on, with the slack those windows can have; 0 if not
 * even one. */
static uint64_t rows_in_range(const hs_vk_caps *c, uint64_t off, uint64_t stride, uint64_t row) {
    const uint64_t slack = hs_ops_max_slack(c, off, stride), range = c->max_storage_buffer_range;
    if (slack + row > range) return 0;
    return 1 + (range - slack - row) / stride;
}

/* Binds rows [r0, r0 + nr) of a [..][stride] f32 tensor at b; *off gets the
 * slack in floats. */
static void bind_rows(const hs_vk_caps *c, const hs_vk_binding *b, uint64_t r0, uint64_t nr, uint64_t stride,
                      uint64_t row, hs_vk_binding *out, uint32_t *off) {
    *out = hs_op_window(c, b->buf, b->offset + r0 * stride, (nr - 1) * stride + row, 4, off);
}

hs_status hs_op_gather_rows(hs_ops *ops, hs_vk_seq *seq, const hs_gather_rows *g, uint32_t n) {
    static const char *op = "hs_op_gather_rows";
    const hs_vk_caps *c = hs_ops_caps(ops);
    if (!g) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: no arguments", op);
    if (g->cols == 0 || g->cols > g->src_stride || g->cols > g->dst_stride || g->src_rows == 0 ||
        g->dst_rows == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "%s: %u columns of rows with strides %u (src, %u rows) and %u (dst, %u rows)", op,
                       g->cols, g->src_stride, g->src_rows, g->dst_stride, g->dst_rows);
    const bool sidx = g->src_ids != NULL, didx = g->dst_ids != NULL;
    if ((!sidx && n > g->src_rows) || (!didx && n > g->dst_rows))
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "%s: %u entries without an index list need as many %s rows (it has %u)", op, n,
                       !sidx && n > g->src_rows ? "source" : "destination",
                       !sidx && n > g->src_rows ? g->src_rows : g->dst_rows);
    const uint64_t row = (uint64_t)g->cols * 4, ss = (uint64_t)g->src_stride * 4,
                   ds = (uint64_t)g->dst_stride * 4;
    const uint64_t src_bytes = (g->src_rows - 1) * ss + row, dst_bytes = (g->dst_rows - 1) * ds + row;
    hs_operand a[4] = {{&g->src, "src", 0, src_bytes},
                       {&g->dst, "dst", 0, dst_bytes},
                       {sidx ? g->src_ids : &g->src, "src_ids", 4, 4ull * n},
                       {didx ? g->dst_ids : &g->dst, "dst_ids", 4, 4ull * n}};
    hs_status st = check_operands(op, a, 4);
    if (st != HS_OK || n == 0) return st;

    /* Entries per dispatch: the grid, the id lists, and the unindexed sides'
     * rows (bound from the dispatch's first entry). */
    uint64_t per = max_groups_2d(c);
    st = plan_rows(c, op, &a[2], 2, per, &per);
    if (st != HS_OK) return st;
    const uint64_t src_fit = rows_in_range(c, g->src.offset, ss, row);
    const uint64_t dst_fit = rows_in_range(c, g->dst.offset, ds, row);
    if (src_fit == 0 || dst_fit == 0)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                       "%s: one %s row (%llu bytes) exceeds maxStorageBufferRange %llu", op,
                       src_fit ? "dst" : "src", (unsigned long long)row,
                       (unsigned long long)c->max_storage_buffer_range);
    if (!sidx && src_fit < per) per = src_fit;
    if (!didx && dst_fit < per) per = dst_fit;
    if (didx && dst_fit < g->dst_rows)
        return HS_FAIL(
            HS_ERR_VK_UNSUPPORTED,
            "%s: an indexed destination of %u rows (%llu bytes) exceeds maxStorageBufferRange %llu", op,
            g->dst_rows, (unsigned long long)dst_bytes, (unsigned long long)c->max_storage_buffer_range);
    /* An indexed source larger than one binding: one dispatch per window. */
    const uint64_t win = sidx ? (src_fit < g->src_rows ? src_fit : g->src_rows) : 0;

    const uint32_t wg = hs_op_clamp_wg(c, HS_GATHER_WG);
    hs_vk_pipeline *p;
    st = get_pipeline(ops, "gather_rows", hs_spv_gather_rows, hs_spv_gather_rows_size, 4, 1u << 3,
                      sizeof(hs_gather_rows_push), wg, false, &p);
    if (st != HS_OK) return st;
    for (uint64_t i0 = 0; i0 < n; i0 += per) {
        const uint64_t ni = n - i0 < per ? n - i0 : per;
        for (uint64_t r0 = 0; r0 < (sidx ? g->src_rows : 1); r0 += sidx ? win : 1) {
            hs_vk_binding b[4];
            hs_gather_rows_push pc = {.n = (uint32_t)ni,
                                      .i0 = (uint32_t)i0,
                                      .cols = g->cols,
                                      .src_stride = g->src_stride,
                                      .dst_stride = g->dst_stride,
                                      .src_rows = g->src_rows,
                                      .dst_rows = g->dst_rows};
            if (sidx) {
                const uint64_t nr = g->src_rows - r0 < win ? g->src_rows - r0 : win;
                bind_rows(c, &g->src, r0, nr, ss, row, &b[0], &pc.src_off);
                pc.src_row0 = (uint32_t)r0;
                pc.src_nrows = (uint32_t)nr;
                bind_window(c, &a[2], i0, ni, 4, &b[1], &pc.sids_off);
                pc.flags |= 1u | (r0 == 0 ? 4u : 0u);
            } else {
                bind_rows(c, &g->src, i0, ni, ss, row, &b[0], &pc.src_off);
                pc.src_row0 = (uint32_t)i0;
                pc.src_nrows = (uint32_t)ni;
                b[1] = b[0]; /* unused by the shader; any valid binding */
            }
            if (didx) {
                bind_rows(c, &g->dst, 0, g->dst_rows, ds, row, &b[3], &pc.dst_off);
                bind_window(c, &a[3], i0, ni, 4, &b[2], &pc.dids_off);
                pc.flags |= 2u;
            } else {
                bind_rows(c, &g->dst, i0, ni, ds, row, &b[3], &pc.dst_off);
                pc.dst_row0 = (uint32_t)i0;
                b[2] = b[0];
            }
            if ((g->cols | g->src_stride | g->dst_stride | pc.src_off | pc.dst_off) % 4 == 0) pc.flags |= 8u;
            uint32_t gx, gy;
            grid_2d(c, ni, &gx, &gy);
            st = hs_vk_seq_dispatch(seq, p, b, 4, &pc, gx, gy, 1);
            if (st != HS_OK) return st;
        }
    }
    return HS_OK;
}

/* ---- KV caches in windows (op_elem.h) ---- */

hs_status hs_kv_plan_rows(const hs_ops *ops, const char *op, const hs_vk_binding *k, const hs_vk_binding *v,
                          uint64_t row_bytes, uint32_t n_ctx, hs_kv_split *out) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint64_t align = c->min_storage_offset_align ? c->min_storage_offset_align : 1;
    const uint64_t range = c->max_storage_buffer_range;
    const uint64_t ks = k->offset % align, vs = v->offset % align, slack = ks > vs ? ks : vs;
    if (slack + (uint64_t)n_ctx * row_bytes <= range) {
        *out = (hs_kv_split){.chunks = 1, .chunk_rows = n_ctx};
        return HS_OK;
    }
    /* Window c starts c * rows * row_bytes after window 0: a multiple of the
     * alignment keeps its slack equal to window 0's. */
    uint64_t g = align;
    while (row_bytes % g) g /= 2;
    const uint64_t step = align / g;
    uint64_t rows = range > slack ? (range - slack) / row_bytes : 0;
    rows -= rows % step;
    if (rows == 0)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                       "%s: %llu rows of a KV cache (%llu bytes each, the alignment step) exceed "
                       "maxStorageBufferRange %llu",
                       op, (unsigned long long)step, (unsigned long long)row_bytes, (unsigned long long)range);
    const uint64_t chunks = (n_ctx + rows - 1) / rows;
    if (chunks > HS_KV_MAX_CHUNKS)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                       "%s: a KV cache layer of %u rows x %llu bytes needs %llu windows of %llu rows under "
                       "maxStorageBufferRange %llu; the kernels bind at most %u (use a smaller context)",
                       op, n_ctx, (unsigned long long)row_bytes, (unsigned long long)chunks,
                       (unsigned long long)rows, (unsigned long long)range, HS_KV_MAX_CHUNKS);
    *out = (hs_kv_split){.chunks = (uint32_t)chunks, .chunk_rows = (uint32_t)rows};
    return HS_OK;
}

hs_status hs_kv_split_plan(const hs_ops *ops, const hs_kv_layer *kv, hs_kv_split *out) {
    if (!kv || (kv->type != HS_TYPE_F32 && kv->type != HS_TYPE_F16) || kv->n_ctx == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_kv_split_plan: no f32 or f16 cache");
    const uint64_t row = (uint64_t)kv->n_kv_head * kv->head_dim * (kv->type == HS_TYPE_F16 ? 2 : 4);
    return hs_kv_plan_rows(ops, "hs_kv_split_plan", &kv->k, &kv->v, row, kv->n_ctx, out);
}

void hs_kv_bind_windows(const hs_ops *ops, const hs_vk_binding *k, const hs_vk_binding *v, uint64_t row_bytes,
                        uint32_t n_ctx, const hs_kv_split *sp, uint32_t unit, uint32_t k_slot, uint32_t v_slot,
                        uint32_t n_base, hs_vk_binding *b, uint32_t *k_off, uint32_t *v_off) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint64_t align = c->min_storage_offset_align ? c->min_storage_offset_align : 1;
    const hs_vk_binding *t[2] = {k, v};
    uint32_t *off[2] = {k_off, v_off};
    for (uint32_t i = 0; i < 2; i++) {
        const uint64_t slack = t[i]->offset % align, base = t[i]->offset - slack;
        *off[i] = (uint32_t)(slack / unit);
        const uint32_t slots = sp->chunks > 1 ? HS_KV_MAX_CHUNKS : 1;
        for (uint32_t w = 0; w < slots; w++) {
            const uint32_t ch = w < sp->chunks ? w : 0;
            const uint64_t r0 = (uint64_t)ch * sp->chunk_rows;
            const uint64_t nr = n_ctx - r0 < sp->chunk_rows ? n_ctx - r0 : sp->chunk_rows;
            const uint32_t slot = w == 0 ? (i ? v_slot : k_slot) : n_base + 2 * (w - 1) + i;
            b[slot] = (hs_vk_binding){t[i]->buf, base + r0 * row_bytes, slack + nr * row_bytes};
        }
    }
}

/* ---- RoPE ---- */

void hs_rope_freqs(const hs_rope_params *rp, float *out) {
    /* The operation order of ggml and of the C reference, in float. */
    for (uint32_t i = 0; i < rp->n_rot / 2; i++)
        out[i] = powf(rp->freq_base, -2.0f * (float)i / (float)rp->n_rot);
}

static hs_status check_rope(const char *op, const hs_rope_params *rp, uint32_t head_dim) {
    if (!rp) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: no RoPE parameters", op);
    if (head_dim == 0 || head_dim % 2)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: head_dim must be even and > 0 (got %u)", op, head_dim);
    if (rp->n_rot % 2 || rp->n_rot > head_dim || rp->n_rot > 2 * HS_ROPE_MAX_PAIRS)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: n_rot must be even, <= head_dim %u and <= %u (got %u)", op,
                       head_dim, 2 * HS_ROPE_MAX_PAIRS, rp->n_rot);
    if (rp->mode != HS_ROPE_NORMAL && rp->mode != HS_ROPE_NEOX)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: unknown RoPE mode %d", op, (int)rp->mode);
    if (!(rp->freq_base > 0.0f) || !(rp->freq_scale > 0.0f) || isinf(rp->freq_base) || isinf(rp->freq_scale))
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: freq_base and freq_scale must be finite and > 0 (got %g, %g)",
                       op, (double)rp->freq_base, (double)rp->freq_scale);
    return HS_OK;
}

/* Push constants every RoPE dispatch shares. */
static hs_rope_push rope_push(const hs_rope_params *rp, uint32_t head_dim) {
    double l2b = log2((double)rp->freq_base);
    float hi = (float)l2b;
    return (hs_rope_push){.head_dim = head_dim,
                          .n_rot = rp->n_rot,
                          .neox = rp->mode == HS_ROPE_NEOX,
                          .freq_base = rp->freq_base,
                          .freq_scale = rp->freq_scale,
                          .has_freqs = rp->freqs != NULL,
                          .l2b_hi = hi,
                          .l2b_lo = (float)(l2b - (double)hi)};
}

hs_status hs_op_rope(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *x, const hs_vk_binding *pos,
                     uint32_t n, uint32_t n_heads, uint32_t head_dim, const hs_rope_params *rp) {
    static const char *op = "hs_op_rope";
    const hs_vk_caps *c = hs_ops_caps(ops);
    hs_status st = check_rope(op, rp, head_dim);
    if (st != HS_OK) return st;
    if (n_heads == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: n_heads must be > 0", op);
    uint64_t row = (uint64_t)n_heads * head_dim * 4;
    hs_operand a[3] = {
        {x, "x", row, row * n}, {pos, "pos", 4, 4ull * n}, {rp->freqs, "freqs", 0, 2ull * rp->n_rot}};
    st = check_operands(op, a, rp->freqs ? 3 : 2);
    if (st != HS_OK || n == 0) return st;

    if (rp->n_rot == 0) return HS_OK; /* nothing rotates */
    uint32_t wg = hs_op_clamp_wg(c, HS_ROPE_WG);
    hs_vk_pipeline *p;
    st = get_pipeline(ops, "rope", hs_spv_rope, hs_spv_rope_size, 3, 1u << 0, sizeof(hs_rope_push), wg, false,
                      &p);
    if (st != HS_OK) return st;

    uint64_t per;
    st = plan_rows(c, op, a, rp->freqs ? 3 : 2, c->max_wg_count[0], &per);
    if (st != HS_OK) return st;
    for (uint64_t t0 = 0; t0 < n; t0 += per) {
        uint64_t nt = n - t0 < per ? n - t0 : per;
        hs_vk_binding bind[3];
        hs_rope_push pc = rope_push(rp, head_dim);
        pc.n_tok = (uint32_t)nt;
        pc.n_head = n_heads;
        bind_window(c, &a[0], t0, nt, 4, &bind[0], &pc.x_off);
        bind_window(c, &a[1], t0, nt, 4, &bind[1], &pc.pos_off);
        if (rp->freqs)
            bind_window(c, &a[2], 0, 0, 4, &bind[2], &pc.f_off);
        else
            bind[2] = bind[1]; /* unused by the shader; any valid binding */
        st = hs_vk_seq_dispatch(seq, p, bind, 3, &pc, (uint32_t)nt, 1, 1);
        if (st != HS_OK) return st;
    }
    return HS_OK;
}

/* The operands of a RoPE + KV write (hs_op_rope_kv, and the Q/K/V product's
 * fused epilogue): a[0..6] = qkv, pos, rows, q_out, k cache, v cache, freqs;
 * *n_a of them are used (6 without a frequency table). */
static hs_status rope_kv_operands(const char *op, const hs_vk_binding *qkv, const hs_vk_binding *pos,
                                  const hs_vk_binding *rows, const hs_vk_binding *q_out, const hs_kv_layer *kv,
                                  uint32_t n, uint32_t n_head, const hs_rope_params *rp, hs_operand a[7],
                                  int *n_a) {
    if (!kv) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: no KV cache", op);
    hs_status st = check_rope(op, rp, kv->head_dim);
    if (st != HS_OK) return st;
    if (kv->type != HS_TYPE_F32 && kv->type != HS_TYPE_F16)
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "%s: KV cache type %s is not f32 or f16", op,
                       hs_type_name(kv->type));
    if (n_head == 0 || kv->n_kv_head == 0 || kv->n_ctx == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: n_head (%u), n_kv_head (%u) and n_ctx (%u) must be > 0", op,
                       n_head, kv->n_kv_head, kv->n_ctx);
    const uint32_t hd = kv->head_dim;
    const uint64_t n_slot = (uint64_t)n_head + 2ull * kv->n_kv_head;
    const uint64_t esize = kv->type == HS_TYPE_F16 ? 2 : 4;
    const uint64_t row_bytes = (uint64_t)kv->n_kv_head * hd * esize, cache_bytes = kv->n_ctx * row_bytes;
    const hs_operand all[7] = {
        {qkv, "qkv", n_slot * hd * 4, n_slot * hd * 4 * n},
        {pos, "pos", 4, 4ull * n},
        {rows, "rows", 4, 4ull * n},
        {q_out, "q_out", (uint64_t)n_head * hd * 4, (uint64_t)n_head * hd * 4 * n},
        {&kv->k, "k cache", 0, cache_bytes},
        {&kv->v, "v cache", 0, cache_bytes},
        {rp->freqs, "freqs", 0, 2ull * rp->n_rot},
    };
    memcpy(a, all, sizeof all);
    *n_a = rp->freqs && rp->n_rot > 0 ? 7 : 6;
    return check_operands(op, a, *n_a);
}

hs_status hs_rope_kv_fused(const hs_ops *ops, const char *op, const hs_vk_binding *qkv, const hs_vk_binding *pos,
                           const hs_vk_binding *rows, const hs_vk_binding *q_out, const hs_kv_layer *kv,
                           uint32_t n, uint32_t n_head, const hs_rope_params *rp, hs_rope_kv_bind *out) {
    hs_operand a[7];
    int n_a = 0;
    hs_status st = rope_kv_operands(op, qkv, pos, rows, q_out, kv, n, n_head, rp, a, &n_a);
    if (st != HS_OK) return st;
    memset(out, 0, sizeof *out);
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint32_t esize = kv->type == HS_TYPE_F16 ? 2 : 4;
    const uint64_t row_bytes = (uint64_t)kv->n_kv_head * kv->head_dim * esize;
    hs_kv_split sp;
    /* caches in one binding, normal mode with a frequency table, every operand in one window */
    if (rp->mode != HS_ROPE_NORMAL || n_a != 7 || n == 0 ||
        hs_kv_plan_rows(ops, op, &kv->k, &kv->v, row_bytes, kv->n_ctx, &sp) != HS_OK || sp.chunks != 1)
        return HS_OK;
    uint64_t per = 0;
    if (plan_rows(c, op, a, n_a, n, &per) != HS_OK || per < n) return HS_OK;
    out->fused = true;
    out->f16 = kv->type == HS_TYPE_F16;
    bind_window(c, &a[1], 0, n, 4, &out->pos, &out->pos_off);
    bind_window(c, &a[2], 0, n, 4, &out->rows, &out->rows_off);
    bind_window(c, &a[6], 0, 0, 4, &out->freqs, &out->f_off);
    bind_window(c, &a[3], 0, n, 4, &out->q_out, &out->q_off);
    hs_vk_binding kvb[2];
    hs_kv_bind_windows(ops, &kv->k, &kv->v, row_bytes, kv->n_ctx, &sp, esize, 0, 1, 2, kvb, &out->k_off,
                       &out->v_off);
    out->k = kvb[0];
    out->v = kvb[1];
    return HS_OK;
}

hs_status hs_op_rope_kv(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *qkv, const hs_vk_binding *pos,
                        const hs_vk_binding *rows, const hs_vk_binding *q_out, const hs_kv_layer *kv,
                        uint32_t n, uint32_t n_head, const hs_rope_params *rp) {
    static const char *op = "hs_op_rope_kv";
    const hs_vk_caps *c = hs_ops_caps(ops);
    hs_operand a[7];
    int n_a = 0;
    hs_status st = rope_kv_operands(op, qkv, pos, rows, q_out, kv, n, n_head, rp, a, &n_a);
    if (st != HS_OK || n == 0) return st;
    const uint32_t hd = kv->head_dim;
    const uint64_t esize = kv->type == HS_TYPE_F16 ? 2 : 4;
    const uint64_t row_bytes = (uint64_t)kv->n_kv_head * hd * esize;
    const bool use_freqs = n_a == 7;

    /* A cache past maxStorageBufferRange is bound in windows (op_elem.h). */
    hs_kv_split sp;
    st = hs_kv_plan_rows(ops, op, &kv->k, &kv->v, row_bytes, kv->n_ctx, &sp);
    if (st != HS_OK) return st;
    const uint32_t n_bind = hs_kv_bindings(7, &sp);

    uint32_t wg = hs_op_clamp_wg(c, HS_ROPE_WG);
    static const struct {
        const char *name;
        const uint32_t *code;
        const size_t *size;
    } variants[2][2] = {
        {{"rope_kv_f32", hs_spv_rope_kv_f32, &hs_spv_rope_kv_f32_size},
         {"rope_kv_f16", hs_spv_rope_kv_f16, &hs_spv_rope_kv_f16_size}},
        {{"rope_kv_f32_kv4", hs_spv_rope_kv_f32_kv4, &hs_spv_rope_kv_f32_kv4_size},
         {"rope_kv_f16_kv4", hs_spv_rope_kv_f16_kv4, &hs_spv_rope_kv_f16_kv4_size}},
    };
    const uint32_t vi = kv->type == HS_TYPE_F32 ? 0 : 1; /* f16: halves packed in uints (rope.comp) */
    hs_vk_pipeline *p;
    st = get_pipeline(ops, variants[sp.chunks > 1][vi].name, variants[sp.chunks > 1][vi].code,
                      *variants[sp.chunks > 1][vi].size, n_bind,
                      (1u << 3) | (1u << 4) | (1u << 5) | hs_kv_extra_mask(7, &sp), sizeof(hs_rope_push), wg,
                      false, &p);
    if (st != HS_OK) return st;

    /* The caches are whole operands of plan_rows only when unsplit. */
    uint64_t per;
    st = plan_rows(c, op, a, sp.chunks > 1 ? 4 : n_a, c->max_wg_count[0], &per);
    if (st != HS_OK) return st;
    if (sp.chunks > 1 && use_freqs) {
        st = plan_rows(c, op, &a[6], 1, per, &per);
        if (st != HS_OK) return st;
    }
    for (uint64_t t0 = 0; t0 < n; t0 += per) {
        uint64_t nt = n - t0 < per ? n - t0 : per;
        hs_vk_binding bind[HS_VK_MAX_BINDINGS];
        hs_rope_push pc = rope_push(rp, hd);
        pc.has_freqs = use_freqs;
        pc.n_tok = (uint32_t)nt;
        pc.n_head = n_head;
        pc.n_kv = kv->n_kv_head;
        pc.n_ctx = kv->n_ctx;
        pc.chunk_rows = sp.chunk_rows;
        bind_window(c, &a[0], t0, nt, 4, &bind[0], &pc.x_off);
        bind_window(c, &a[1], t0, nt, 4, &bind[1], &pc.pos_off);
        bind_window(c, &a[2], t0, nt, 4, &bind[2], &pc.rows_off);
        bind_window(c, &a[3], t0, nt, 4, &bind[3], &pc.q_off);
        hs_kv_bind_windows(ops, &kv->k, &kv->v, row_bytes, kv->n_ctx, &sp, (uint32_t)esize, 4, 5, 7, bind,
                           &pc.k_off, &pc.v_off);
        if (use_freqs)
            bind_window(c, &a[6], 0, 0, 4, &bind[6], &pc.f_off);
        else
            bind[6] = bind[1]; /* unused by the shader; any valid binding */
        st = hs_vk_seq_dispatch(seq, p, bind, n_bind, &pc, (uint32_t)nt, 1, 1);
        if (st != HS_OK) return st;
    }
    return HS_OK;
}
