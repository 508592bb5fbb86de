/* op_matmul: device weights (repacked GGUF rows, split in row chunks), the
 * weight products and the embedding gather (see op_matmul.h).
 *
 * Shapes on the device (shaders/matmul.comp): a workgroup is LANES
 * invocations (the subgroup size, clamped to 8..64); each invocation owns RW
 * rows of one row group of G = LANES * RL rows (RL = the tuning table's
 * matvec_rows_per_wg) and C columns (n spread over the fewest tiles of at
 * most matmul_cols_per_wg, or x8_cols on 8-bit activations).
 * Rows are padded to whole groups in the layout; padded rows are never
 * written. */
#include "op_matmul.h"

#include <stdlib.h>
#include <string.h>

#include "hs_quant.h"
#include "hs_shaders.h"
#include "op_common.h"

#define HS_GET_ROWS_WG 64u
/* The widest tile a batch gets at its own width (hs_matmul_tile_cols);
 * wider spreads take the tuning's full width. */
#define HS_MM_EXACT_COLS 8u

/* Push constants, mirrored field by field in the shaders. */
typedef struct hs_matmul_push {
    uint32_t rows, cols, n, nblk;
    uint32_t group0, col0, x_stride, x_off;
    uint32_t y_off, g_off, r_off;
    float eps;
    uint32_t y_stride, xcol0, q_off, pair;
    /* EPILOGUE bit 3: the RoPE + KV write (matmul.comp) */
    uint32_t rp_pos_off, rp_rows_off, rp_f_off, rp_q_off, rp_k_off, rp_v_off;
    uint32_t rp_n_ctx, rp_head_dim, rp_n_head, rp_n_kv, rp_n_rot;
    float rp_freq_scale;
} hs_matmul_push;
static_assert(sizeof(hs_matmul_push) == 112, "hs_matmul_push must match matmul_x.glsl");
static_assert(sizeof(hs_matmul_push) <= 128, "push constants are limited to 128 bytes");

typedef struct hs_get_rows_push {
    uint32_t rows, cols, n, nblk;
    uint32_t group0, ngroups, tok0, ids_off;
    uint32_t out_off, zero_invalid, pad0, pad1;
} hs_get_rows_push;
static_assert(sizeof(hs_get_rows_push) == 48, "hs_get_rows_push must match get_rows.comp");

/* One buffer of row groups [group0, group0 + ngroups): the Q planes at offset
 * 0, the S words at s_off (none when s_bytes = 0). */
typedef struct hs_weight_chunk {
    hs_vk_buffer *buf;
    uint32_t group0, ngroups;
    uint64_t q_bytes, s_off, s_bytes;
} hs_weight_chunk;

struct hs_weight {
    hs_type type;
    uint32_t rows, cols;
    uint32_t lanes, rl, g; /* layout: G = lanes * rl rows per group */
    uint32_t nblk;         /* device blocks per row */
    uint32_t n_chunks;
    hs_weight_chunk *chunks;
    uint64_t device_bytes;
};

static uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

static uint32_t clamp_u32(uint32_t v, uint32_t lo, uint32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* Workgroup width of the matmul kernels: the subgroup, so that x can be
 * shared with shuffles; at least 8 (one lane per vec4 of a sub-block). */
static uint32_t matmul_lanes(const hs_ops *ops) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    uint32_t l = clamp_u32(c->subgroup_size, 8, 64);
    while (l > 8 && (l > c->max_wg_size[0] || l > c->max_wg_invocations)) l /= 2;
    return l;
}

static const char *type_suffix(hs_type t) { return hs_type_name(t); }

uint32_t hs_weight_group_rows(const hs_ops *ops) {
    return matmul_lanes(ops) * clamp_u32(hs_ops_tuning(ops)->matvec_rows_per_wg, 1, HS_TUNING_MAX_ROWS);
}

/* ---- weights ---- */

void hs_weight_destroy(hs_weight *w) {
    if (!w) return;
    for (uint32_t i = 0; i < w->n_chunks; i++) hs_vk_buffer_destroy(w->chunks[i].buf);
    free(w->chunks);
    free(w);
}

uint32_t hs_weight_rows(const hs_weight *w) { return w->rows; }
uint32_t hs_weight_cols(const hs_weight *w) { return w->cols; }
hs_type hs_weight_type(const hs_weight *w) { return w->type; }
uint64_t hs_weight_device_bytes(const hs_weight *w) { return w->device_bytes; }
uint32_t hs_weight_chunks(const hs_weight *w) { return w->n_chunks; }

hs_status hs_weight_create(hs_ops *ops, hs_type type, uint32_t rows, uint32_t cols, const void *data,
                           hs_weight **out) {
    return hs_weight_create_stacked(ops, type, cols, 1, &rows, &data, out);
}

hs_status hs_weight_create_stacked(hs_ops *ops, hs_type type, uint32_t cols, uint32_t count, const uint32_t *rows,
                                   const void *const *data, hs_weight **out) {
    hs_status st = HS_OK;
    uint32_t *stage = NULL;
    hs_weight *w = NULL;
    if (!out) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_weight_create: out is NULL");
    *out = NULL;
    if (!ops || !rows || !data || count == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_weight_create: missing ops, rows or data");
    if (!hs_type_supported(type))
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "hs_weight_create: unsupported type %u", (unsigned)type);
    if (cols == 0 || cols % hs_type_block_elems(type))
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_weight_create: cols %u is not a positive multiple of the %s block (%u)",
                       cols, hs_type_name(type), hs_type_block_elems(type));
    uint64_t total = 0;
    for (uint32_t i = 0; i < count; i++) {
        if (rows[i] == 0 || !data[i])
            return HS_FAIL(HS_ERR_INVALID_ARG, "hs_weight_create: part %u has no rows or no data", i);
        total += rows[i];
    }
    if (total > UINT32_MAX / 2)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_weight_create: %llu rows is too many", (unsigned long long)total);

    const hs_vk_caps *c = hs_ops_caps(ops);
    w = calloc(1, sizeof *w);
    if (!w) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_weight_create: out of memory");
    w->type = type;
    w->rows = (uint32_t)total;
    w->cols = cols;
    w->lanes = matmul_lanes(ops);
    w->rl = clamp_u32(hs_ops_tuning(ops)->matvec_rows_per_wg, 1, HS_TUNING_MAX_ROWS);
    w->g = hs_weight_group_rows(ops);
    w->nblk = hs_quant_device_blocks(type, cols);
    const hs_quant_layout L = hs_quant_device_layout(type);

    /* Groups per chunk: Q part, then S part at an aligned offset, all within
     * one binding range and one allocation; one dispatch per chunk must also
     * fit the grid (RW = 1 gives rl workgroups per group). Where the device
     * has texel buffers, both parts may be bound as RGBA32UI texels as well:
     * the S part starts at the texel offset alignment too, its range is padded
     * to whole texels, and a chunk stays within maxTexelBufferElements. */
    const uint64_t gq = hs_quant_group_q_bytes(type, cols, w->g), gs = hs_quant_group_s_bytes(type, cols, w->g);
    uint64_t align = c->min_storage_offset_align > 16 ? c->min_storage_offset_align : 16;
    if (c->max_texel_elements && c->min_texel_offset_align > align) align = c->min_texel_offset_align;
    uint64_t limit = c->max_alloc && c->max_alloc < c->max_storage_buffer_range ? c->max_alloc
                                                                                  : c->max_storage_buffer_range;
    if (c->max_texel_elements && c->max_texel_elements * 16 < limit) limit = c->max_texel_elements * 16;
    limit -= 16; /* the S part's padding */
    const uint32_t ngroups = (uint32_t)((total + w->g - 1) / w->g);
    uint64_t per = limit / (gq + gs);
    while (per > 0 && align_up(per * gq, align) + per * gs > limit) per--;
    if (per > c->max_wg_count[0] / w->rl) per = c->max_wg_count[0] / w->rl;
    if (per == 0) {
        st = HS_FAIL(HS_ERR_VK_UNSUPPORTED,
                     "hs_weight_create: one group of %u rows of %u %s elements (%llu bytes) exceeds "
                     "maxStorageBufferRange %llu",
                     w->g, cols, hs_type_name(type), (unsigned long long)(gq + gs),
                     (unsigned long long)c->max_storage_buffer_range);
        goto fail;
    }
    if (per > ngroups) per = ngroups;
    w->n_chunks = (uint32_t)((ngroups + per - 1) / per);
    w->chunks = calloc(w->n_chunks, sizeof *w->chunks);
    if (!w->chunks) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_weight_create: out of memory");
        goto fail;
    }

    const uint64_t row_bytes = hs_type_row_bytes(type, cols);
    uint32_t part = 0, part_row = 0; /* source cursor over the stacked parts */
    for (uint32_t ci = 0; ci < w->n_chunks; ci++) {
        hs_weight_chunk *ch = &w->chunks[ci];
        ch->group0 = (uint32_t)(ci * per);
        ch->ngroups = (uint32_t)(ngroups - ch->group0 < per ? ngroups - ch->group0 : per);
        ch->q_bytes = ch->ngroups * gq;
        ch->s_bytes = ch->ngroups * gs;
        ch->s_off = ch->s_bytes ? align_up(ch->q_bytes, align) : 0;
        const uint64_t bytes = ch->s_bytes ? ch->s_off + align_up(ch->s_bytes, 16) : ch->q_bytes;
        stage = calloc(1, bytes);
        if (!stage) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_weight_create: out of memory (%llu bytes)",
                         (unsigned long long)bytes);
            goto fail;
        }
        for (uint32_t gi = 0; gi < ch->ngroups; gi++) {
            uint32_t *q = stage + gi * gq / 4;
            uint32_t *s = L.qs ? stage + (ch->s_off + gi * gs) / 4 : NULL;
            for (uint32_t i = 0; i < w->g && part < count; i++) {
                const uint8_t *src = (const uint8_t *)data[part] + (uint64_t)part_row * row_bytes;
                hs_quant_pack_row(type, src, cols, w->g, i, q, s);
                if (++part_row == rows[part]) {
                    part++;
                    part_row = 0;
                }
            }
        }
        HS_TRY(hs_vk_buffer_create(hs_ops_vk(ops), bytes, HS_MEM_DEVICE, &ch->buf));
        HS_TRY(hs_vk_buffer_upload(ch->buf, 0, stage, bytes));
        free(stage);
        stage = NULL;
        w->device_bytes += bytes;
    }
    *out = w;
    return HS_OK;
fail:
    free(stage);
    hs_weight_destroy(w);
    return st;
}

/* ---- operands ---- */

/* A caller's tensor binding, bound at its offset aligned down to
 * minStorageBufferOffsetAlignment; `elem` is the remainder in 4-byte elements. */
typedef struct hs_window {
    hs_vk_binding bind;
    uint32_t elem;
} hs_window;

static hs_status make_window(const hs_vk_caps *c, const char *op, const char *name, hs_vk_binding b, uint64_t bytes,
                             hs_window *out) {
    return hs_op_bind(c, op, name, &b, 0, bytes, 4, &out->bind, &out->elem);
}

/* b from `by` bytes further on (a range shrinks by as much). */
static hs_vk_binding shifted(hs_vk_binding b, uint64_t by) {
    return (hs_vk_binding){b.buf, b.offset + by, b.range ? (b.range > by ? b.range - by : 1) : 0};
}

static bool overlap(hs_vk_binding a, uint64_t an, hs_vk_binding b, uint64_t bn) {
    return a.buf == b.buf && a.offset < b.offset + bn && b.offset < a.offset + an;
}

/* ---- matmul ---- */

/* A chunk's two weight bindings: the quant plane, and the scale plane (or the
 * quant plane again for types without one, so the binding stays valid),
 * padded to whole 16-byte texels. */
static hs_vk_binding chunk_quants(const hs_weight_chunk *ch) { return (hs_vk_binding){ch->buf, 0, ch->q_bytes}; }
static hs_vk_binding chunk_scales(const hs_weight_chunk *ch) {
    return ch->s_bytes ? (hs_vk_binding){ch->buf, ch->s_off, align_up(ch->s_bytes, 16)} : chunk_quants(ch);
}

/* Activations through uniform buffers (the tuning's choice; vec4 loads from a
 * 16-byte aligned x only): each dispatch binds a window of x, at most 64 KiB
 * and maxUniformBufferRange, holding whole columns after the offset's
 * alignment. Returns the columns per window, 0 when x cannot go through
 * uniform buffers. */
static uint64_t ux_bytes(const hs_vk_caps *c) {
    return c->max_uniform_range < 65536 ? c->max_uniform_range & ~(uint64_t)15 : 65536;
}

static uint32_t ux_window_cols(const hs_ops *ops, const hs_window *wx, bool xvec4, uint32_t x_stride) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint64_t align = c->min_uniform_offset_align ? c->min_uniform_offset_align : 1;
    const uint64_t win = ux_bytes(c);
    if (!hs_ops_tuning(ops)->uniform_x || !xvec4 || wx->bind.offset % 16 || win <= align) return 0;
    const uint64_t cols = (win - (align - 1)) / ((uint64_t)x_stride * 4);
    return cols > 65536 ? 65536 : (uint32_t)cols;
}

/* The uniform window of columns j0 .. j1-1 of x (ux_window_cols), with the
 * element offset of column j0 in it. */
static hs_vk_binding ux_window(const hs_ops *ops, const hs_window *wx, uint32_t x_stride, uint32_t j0,
                               uint32_t j1, uint32_t *x_off) {
    const uint64_t at = wx->bind.offset + ((uint64_t)wx->elem + (uint64_t)j0 * x_stride) * 4;
    return hs_op_window_aligned(wx->bind.buf, at, (uint64_t)(j1 - j0) * x_stride * 4, 4,
                                hs_ops_caps(ops)->min_uniform_offset_align, x_off);
}

/* The vec4 count of the shaders' uniform x array (spec constant 7). */
static uint32_t ux_vec4(const hs_ops *ops) { return (uint32_t)(ux_bytes(hs_ops_caps(ops)) / 16); }

bool hs_matmul_splits(const hs_ops *ops, const hs_weight *w, uint32_t n, const hs_matmul_opts *opt) {
    const uint32_t split_n = hs_ops_tuning(ops)->split_n;
    return opt && opt->prologue != HS_MATMUL_PLAIN && opt->scratch.buf && split_n && n >= split_n &&
           !hs_matmul_act_q8(w, opt);
}

/* The windows a product's activations are read through: x (x_bytes) and the
 * RMSNorm gain of cols floats (norm; the x window again without one), and
 * whether both, with x_stride, allow vec4 loads. */
static hs_status x_windows(const hs_vk_caps *c, uint32_t cols, hs_vk_binding x, uint64_t x_bytes,
                           uint32_t x_stride, const hs_vk_binding *norm, hs_window *wx, hs_window *wg,
                           bool *vec4) {
    static const char *op = "hs_op_matmul";
    hs_status st = make_window(c, op, "x", x, x_bytes, wx);
    if (st != HS_OK) return st;
    *wg = *wx;
    if (norm && (st = make_window(c, op, "norm", *norm, (uint64_t)cols * 4, wg))) return st;
    *vec4 = cols % 4 == 0 && wx->elem % 4 == 0 && x_stride % 4 == 0 && (!norm || wg->elem % 4 == 0);
    return HS_OK;
}

static hs_status product(hs_ops *ops, hs_vk_seq *seq, const hs_weight *w, hs_vk_binding x, uint32_t n,
                         hs_vk_binding y, const hs_matmul_opts *opt, bool x8);

/* Words per column of x8 (matmul_pro.comp, OUT_Q8): 20 per 32-element block. */
static uint32_t x8_words(const hs_weight *w) { return w->cols / 32 * 20; }

/* 4-byte words between columns of a product's x: the 8-bit form (x8), or f32
 * [gate | up] with SwiGLU, else f32 x. */
static uint32_t x_words(const hs_weight *w, const hs_matmul_opts *opt, bool x8) {
    return x8 ? x8_words(w) : opt->prologue == HS_MATMUL_SWIGLU ? 2 * w->cols : w->cols;
}

bool hs_matmul_act_q8(const hs_weight *w, const hs_matmul_opts *opt) {
    return w && opt && opt->act_q8 && w->type == HS_TYPE_Q4_1;
}

/* The bytes one binding of a column batch may span: maxStorageBufferRange
 * less the slack of aligning its offset. */
static uint64_t batch_room(const hs_vk_caps *c) {
    const uint64_t align = c->min_storage_offset_align ? c->min_storage_offset_align : 1;
    return c->max_storage_buffer_range > align ? c->max_storage_buffer_range - align : 0;
}

/* One matmul_pro pass: out = the prologue of x per column (one workgroup
 * each), as f32 or (x8) in the 8-bit form; prologue 3 (x8 only) is x8n, the
 * 8-bit form of x * norm with each block's sum of squares (q8x.glsl). */
enum { PRO_X8N = 3 };
static hs_status pro_pass(hs_ops *ops, hs_vk_seq *seq, const char *op, uint32_t lanes, uint32_t cols,
                          uint32_t prologue, hs_vk_binding x, uint32_t x_stride, uint32_t n,
                          const hs_vk_binding *norm, float eps, hs_vk_binding out, bool x8) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint64_t o_col = (uint64_t)(x8 ? cols / 32 * 20 : cols) * 4;
    const uint64_t x_bytes = (uint64_t)n * x_stride * 4, o_bytes = n * o_col;
    hs_window wx, wo, wg;
    bool xvec4;
    hs_status st;
    /* Columns past maxStorageBufferRange: consecutive batches that fit (columns are independent). */
    const uint64_t room = batch_room(c);
    const uint64_t fit = room / ((uint64_t)x_stride * 4 > o_col ? (uint64_t)x_stride * 4 : o_col);
    if (n > 1 && fit >= 1 && fit < n && (x_bytes > room || o_bytes > room)) {
        if (overlap(out, o_bytes, x, x_bytes))
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: scratch overlaps x", op);
        for (uint32_t j = 0; j < n; j += (uint32_t)fit) {
            const uint32_t nb = n - j < fit ? n - j : (uint32_t)fit;
            if ((st = pro_pass(ops, seq, op, lanes, cols, prologue, shifted(x, (uint64_t)j * x_stride * 4),
                               x_stride, nb, norm, eps, shifted(out, j * o_col), x8)) != HS_OK)
                return st;
        }
        return HS_OK;
    }
    if ((st = x_windows(c, cols, x, x_bytes, x_stride, norm, &wx, &wg, &xvec4)) != HS_OK) return st;
    if ((st = make_window(c, op, x8 ? "x8" : "scratch", out, o_bytes, &wo)) != HS_OK) return st;
    if (overlap(out, o_bytes, x, x_bytes)) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: scratch overlaps x", op);
    if (x8 && wo.elem % 4) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: x8 output is not 16-byte aligned", op);
    if (prologue == PRO_X8N && !xvec4)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: x and norm must be 16-byte aligned for x8n", op);
    xvec4 = xvec4 && wo.elem % 4 == 0;
    const bool sg = hs_ops_subgroup(ops) > 1;
    /* activations through uniform buffers: windows of whole columns */
    const uint32_t ux_cols = ux_window_cols(ops, &wx, xvec4, x_stride);
    const bool ux = ux_cols > 0;
    /* the SPIR-V of each variant, indexed by sg | ux << 1 | x8 << 2 */
#define HS_PRO(V)                                                                                            \
    { "matmul_pro" #V, hs_spv_matmul_pro##V, &hs_spv_matmul_pro##V##_size }
    static const struct {
        const char *name;
        const uint32_t *code;
        const size_t *size;
    } pros[8] = {HS_PRO(),    HS_PRO(_sg),    HS_PRO(_ux),    HS_PRO(_sg_ux),
                 HS_PRO(_q8), HS_PRO(_q8_sg), HS_PRO(_q8_ux), HS_PRO(_q8_sg_ux)};
#undef HS_PRO
    const unsigned variant = (sg ? 1u : 0u) | (ux ? 2u : 0u) | (x8 ? 4u : 0u);
    hs_vk_pipeline_desc d = {.name = pros[variant].name,
                             .code = pros[variant].code,
                             .code_size = *pros[variant].size,
                             .n_bindings = 5,
                             .write_mask = 1u << 3,
                             .uniform_mask = ux ? 1u << 2 : 0u,
                             .push_size = sizeof(hs_matmul_push),
                             .n_spec = 8,
                             .spec = {lanes, 1, 1, 1, prologue, 0, xvec4 ? 1u : 0u, ux ? ux_vec4(ops) : 1u},
                             .wg_size = {lanes, 1, 1}};
    hs_vk_pipeline *pipe = NULL;
    if ((st = hs_ops_pipeline(ops, &d, &pipe)) != HS_OK) return st;
    const uint32_t max_gy = c->max_wg_count[1] ? c->max_wg_count[1] : 65535;
    const uint32_t step = ux && ux_cols < max_gy ? ux_cols : max_gy;
    hs_vk_binding binds[5] = {wx.bind, wx.bind, wx.bind, wo.bind, wg.bind};
    for (uint32_t j0 = 0; j0 < n; j0 += step) {
        const uint32_t gy = n - j0 < step ? n - j0 : step;
        uint32_t x_off = wx.elem, xcol0 = 0;
        if (ux) {
            xcol0 = j0;
            binds[2] = ux_window(ops, &wx, x_stride, j0, j0 + gy, &x_off);
        }
        hs_matmul_push pc = {.cols = cols,
                             .n = n,
                             .col0 = j0,
                             .x_stride = x_stride,
                             .x_off = x_off,
                             .y_off = x8 ? wo.elem / 4 : wo.elem,
                             .g_off = wg.elem,
                             .eps = eps,
                             .y_stride = x8 ? cols / 32 * 5 : cols,
                             .xcol0 = xcol0};
        if ((st = hs_vk_seq_dispatch(seq, pipe, binds, 5, &pc, 1, gy, 1)) != HS_OK) return st;
    }
    return HS_OK;
}

/* The split prologue: matmul_pro writes x' = prologue(x) into opt->scratch,
 * as f32 or (x8) in the 8-bit form, then the product reads it. */
static hs_status split_prologue(hs_ops *ops, hs_vk_seq *seq, const hs_weight *w, hs_vk_binding x, uint32_t n,
                                hs_vk_binding y, const hs_matmul_opts *opt, bool x8) {
    static const char *op = "hs_op_matmul";
    const uint64_t s_bytes = (uint64_t)n * (x8 ? x8_words(w) : w->cols) * 4;
    const uint64_t y_bytes = ((uint64_t)(n - 1) * (opt->y_stride ? opt->y_stride : w->rows) + w->rows) * 4;
    if (overlap(opt->scratch, s_bytes, y, y_bytes) ||
        (opt->residual && overlap(opt->scratch, s_bytes, opt->res, y_bytes)) ||
        (opt->q8_out.buf && overlap(opt->scratch, s_bytes, opt->q8_out, (uint64_t)n * (w->rows / 32) * 80)))
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: scratch overlaps x, y, res or q8_out", op);
    hs_status st =
        pro_pass(ops, seq, op, w->lanes, w->cols, (uint32_t)opt->prologue, x, x_words(w, opt, false), n,
                 opt->prologue == HS_MATMUL_RMSNORM ? &opt->norm : NULL, opt->eps, opt->scratch, x8);
    if (st != HS_OK) return st;
    hs_matmul_opts o = *opt;
    o.prologue = HS_MATMUL_PLAIN;
    o.scratch = (hs_vk_binding){0};
    return x8 ? product(ops, seq, w, opt->scratch, n, y, &o, true)
              : hs_op_matmul(ops, seq, w, opt->scratch, n, y, &o);
}

hs_status hs_op_q8_norm(hs_ops *ops, hs_vk_seq *seq, hs_vk_binding x, uint32_t n, uint32_t cols,
                        hs_vk_binding norm, hs_vk_binding out) {
    static const char *op = "hs_op_q8_norm";
    if (!ops || !seq) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: missing ops or seq", op);
    if (n == 0 || cols == 0 || cols % 32)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: n = %u, cols = %u (a positive multiple of 32)", op, n, cols);
    return pro_pass(ops, seq, op, matmul_lanes(ops), cols, PRO_X8N, x, cols, n, &norm, 0.0f, out, true);
}

/* Checks a product's rope_kv (the shape of a stacked Q/K/V weight, no other epilogue, and
 * hs_op_rope_kv's own checks on y) and says in out whether and how the write can be fused. */
static hs_status rope_kv_check(const hs_ops *ops, const hs_weight *w, uint32_t n, hs_vk_binding y,
                               const hs_matmul_opts *opt, hs_rope_kv_bind *out) {
    static const char *op = "hs_op_matmul";
    const hs_matmul_rope_kv *rk = opt->rope_kv;
    if (!rk->kv || !rk->rp)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: rope_kv needs a KV cache and RoPE parameters", op);
    const uint64_t slots = (uint64_t)rk->n_head + 2ull * rk->kv->n_kv_head;
    if (opt->residual || opt->q8_out.buf || opt->swiglu_q8.buf || opt->prologue == HS_MATMUL_SWIGLU ||
        (opt->y_stride && opt->y_stride != w->rows) || w->rows != slots * rk->kv->head_dim)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "%s: rope_kv needs rows (%u) = (n_head %u + 2 n_kv %u) x head_dim %u, no residual, "
                       "q8_out, swiglu_q8 or SwiGLU prologue, and y_stride = rows",
                       op, w->rows, rk->n_head, rk->kv->n_kv_head, rk->kv->head_dim);
    const hs_vk_binding yb = {y.buf, y.offset, (uint64_t)n * w->rows * 4};
    return hs_rope_kv_fused(ops, op, &yb, rk->pos, rk->rows, rk->q_out, rk->kv, n, rk->n_head, rk->rp, out);
}

/* Whether the product writes rope_kv in its epilogue, given the write's own verdict (rb, from
 * rope_kv_check): on 8-bit activations, one weight chunk of whole even row groups, one batch
 * (not split into column batches, its x8 scratch too) and the tuning's consent. */
static bool rope_fused(const hs_ops *ops, const hs_weight *w, uint32_t n, const hs_matmul_opts *opt,
                       bool batched, const hs_rope_kv_bind *rb) {
    const hs_vk_caps *c = hs_ops_caps(ops);
    return rb->fused && hs_matmul_act_q8(w, opt) && !hs_ops_tuning(ops)->rope_pass && w->n_chunks == 1 &&
           w->g % 2 == 0 && c->max_storage_buffers >= 13 && !batched &&
           (!opt->scratch.buf || (uint64_t)n * x8_words(w) * 4 <= batch_room(c));
}

hs_status hs_op_matmul(hs_ops *ops, hs_vk_seq *seq, const hs_weight *w, hs_vk_binding x, uint32_t n,
                       hs_vk_binding y, const hs_matmul_opts *opt) {
    static const char *op = "hs_op_matmul";
    if (!ops || !seq || !w) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: missing ops, seq or weight", op);
    if (n == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: n is 0", op);
    const hs_matmul_opts none = {0};
    if (!opt) opt = &none;
    if (opt->prologue != HS_MATMUL_PLAIN && opt->prologue != HS_MATMUL_RMSNORM && opt->prologue != HS_MATMUL_SWIGLU)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: unknown prologue %d", op, (int)opt->prologue);
    if (w->lanes != matmul_lanes(ops))
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: the weight was made for another device", op);

    const hs_vk_caps *c = hs_ops_caps(ops);
    if (opt->x_q8 && (!hs_matmul_act_q8(w, opt) || opt->prologue == HS_MATMUL_SWIGLU))
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: x_q8 needs act_q8, a q4_1 weight and no SwiGLU prologue", op);
    if (opt->swiglu_q8.buf) {
        if (w->rows % 64 || opt->residual || opt->q8_out.buf || opt->prologue == HS_MATMUL_SWIGLU ||
            (opt->y_stride && opt->y_stride != w->rows) || opt->swiglu_q8.offset % 16)
            return HS_FAIL(
                HS_ERR_INVALID_ARG,
                "%s: swiglu_q8 needs rows (%u) = 2 x a multiple of 32, no residual, q8_out or SwiGLU "
                "prologue, y_stride = rows and a 16-byte aligned output",
                op, w->rows);
    }
    if (opt->q8_out.buf) {
        if (!opt->q8_norm.buf) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: q8_out needs q8_norm", op);
        if (opt->q8_out.offset % 16 || opt->q8_norm.offset % 16)
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: q8_out and q8_norm must be 16-byte aligned", op);
        if (w->rows % 32 || (opt->y_stride && opt->y_stride != w->rows))
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "%s: q8_out needs rows (%u) in whole 32-row blocks and y_stride = rows", op,
                           w->rows);
    }
    const uint32_t x_stride = x_words(w, opt, opt->x_q8);
    const uint32_t y_stride = opt->y_stride ? opt->y_stride : w->rows;
    if (y_stride < w->rows)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: y_stride %u is less than the %u rows", op, y_stride, w->rows);
    const uint64_t x_bytes = (uint64_t)n * x_stride * 4;
    const uint64_t y_bytes = ((uint64_t)(n - 1) * y_stride + w->rows) * 4;
    hs_status st;
    /* A batch whose activations pass maxStorageBufferRange (every row's
     * logits of a tree, say) runs as consecutive batches that fit: columns
     * are independent and batch-invariant, so the results are bitwise the
     * same. */
    const uint64_t room = batch_room(c);
    const uint64_t col_bytes = (uint64_t)(x_stride > y_stride ? x_stride : y_stride) * 4;
    const uint64_t fit = room / col_bytes;
    const bool batched = n > 1 && fit >= 1 && fit < n && (x_bytes > room || y_bytes > room);
    if (opt->rope_kv) {
        hs_rope_kv_bind rb;
        if ((st = rope_kv_check(ops, w, n, y, opt, &rb)) != HS_OK) return st;
        if (!rope_fused(ops, w, n, opt, batched, &rb)) {
            /* The product into y, then the pass: the bits the fused epilogue writes. */
            const hs_matmul_rope_kv *rk = opt->rope_kv;
            hs_matmul_opts o = *opt;
            o.rope_kv = NULL;
            if ((st = hs_op_matmul(ops, seq, w, x, n, y, &o)) != HS_OK) return st;
            const hs_vk_binding yb = {y.buf, y.offset, y_bytes};
            return hs_op_rope_kv(ops, seq, &yb, rk->pos, rk->rows, rk->q_out, rk->kv, n, rk->n_head, rk->rp);
        }
    }
    if (batched) {
        if (overlap(x, x_bytes, y, y_bytes)) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: y overlaps x", op);
        for (uint32_t j = 0; j < n; j += (uint32_t)fit) {
            const uint32_t nb = n - j < fit ? n - j : (uint32_t)fit;
            const uint64_t xs = (uint64_t)j * x_stride * 4, ys = (uint64_t)j * y_stride * 4;
            hs_matmul_opts o = *opt;
            if (o.residual) o.res = shifted(o.res, ys);
            /* the scratch keeps the unsplit layout: x8 columns packed, f32 x' columns of cols floats */
            if (o.scratch.buf)
                o.scratch =
                    shifted(o.scratch, (uint64_t)j * (hs_matmul_act_q8(w, opt) ? x8_words(w) : w->cols) * 4);
            if (o.q8_out.buf) o.q8_out = shifted(o.q8_out, (uint64_t)j * (w->rows / 32) * 80);
            if (o.swiglu_q8.buf) o.swiglu_q8 = shifted(o.swiglu_q8, (uint64_t)j * (w->rows / 64) * 80);
            const hs_vk_binding xj = shifted(x, xs), yj = shifted(y, ys);
            if ((st = hs_op_matmul(ops, seq, w, xj, nb, yj, &o)) != HS_OK) return st;
        }
        return HS_OK;
    }
    if (opt->q8_out.buf) {
        const uint64_t q_bytes = (uint64_t)n * (w->rows / 32) * 80;
        if (overlap(opt->q8_out, q_bytes, x, x_bytes) || overlap(opt->q8_out, q_bytes, y, y_bytes) ||
            (opt->residual && overlap(opt->q8_out, q_bytes, opt->res, y_bytes)) ||
            (opt->scratch.buf && overlap(opt->q8_out, q_bytes, opt->scratch, (uint64_t)n * w->cols * 4)))
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: q8_out overlaps x, y, res or scratch", op);
        /* Fused into the epilogue of products on 8-bit activations whose workgroups own whole 32-row
         * blocks; otherwise the product, then the pass: the same bits. */
        if (!hs_matmul_act_q8(w, opt) || w->g % 32) {
            hs_matmul_opts o = *opt;
            o.q8_out = o.q8_norm = (hs_vk_binding){0};
            if ((st = hs_op_matmul(ops, seq, w, x, n, y, &o)) != HS_OK) return st;
            return hs_op_q8_norm(ops, seq, (hs_vk_binding){y.buf, y.offset, y_bytes}, n, w->rows,
                                 opt->q8_norm, opt->q8_out);
        }
    }
    if (opt->swiglu_q8.buf) {
        const uint32_t ff = w->rows / 2;
        const uint64_t q_bytes = (uint64_t)n * (ff / 32) * 80;
        if (overlap(opt->swiglu_q8, q_bytes, x, x_bytes) || overlap(opt->swiglu_q8, q_bytes, y, y_bytes) ||
            (opt->scratch.buf && overlap(opt->swiglu_q8, q_bytes, opt->scratch, (uint64_t)n * w->cols * 4)))
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: swiglu_q8 overlaps x, y or scratch", op);
        /* Fused where one workgroup can own a gate group and its up group (8-bit activations, whole
         * 32-row blocks, one chunk); otherwise the product into y, then the pass. */
        if (!hs_matmul_act_q8(w, opt) || w->g % 32 || ff % w->g || w->n_chunks != 1) {
            hs_matmul_opts o = *opt;
            o.swiglu_q8 = (hs_vk_binding){0};
            if ((st = hs_op_matmul(ops, seq, w, x, n, y, &o)) != HS_OK) return st;
            return pro_pass(ops, seq, op, w->lanes, ff, HS_MATMUL_SWIGLU,
                            (hs_vk_binding){y.buf, y.offset, y_bytes}, w->rows, n, NULL, 0.0f, opt->swiglu_q8,
                            true);
        }
        /* fused: on as any product on 8-bit activations; product() computes gate and up rows together */
    }
    if (opt->x_q8) return product(ops, seq, w, x, n, y, opt, true);
    if (hs_matmul_act_q8(w, opt)) {
        if (!opt->scratch.buf || opt->scratch.offset % 16)
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "%s: act_q8 needs a scratch buffer at a 16-byte aligned offset", op);
        return split_prologue(ops, seq, w, x, n, y, opt, true);
    }
    if (hs_matmul_splits(ops, w, n, opt)) return split_prologue(ops, seq, w, x, n, y, opt, false);
    return product(ops, seq, w, x, n, y, opt, false);
}

/* n spread evenly over the fewest tiles of at most cmax (n = 5 with 4: two
 * tiles of 3, the surplus column redoing column n-1), so a batch of a few
 * columns computes few surplus ones; spreads wider than HS_MM_EXACT_COLS take
 * cmax (a prompt of 37 tokens with 16: three tiles of 16). */
uint32_t hs_matmul_tile_cols(uint32_t n, uint32_t cmax) {
    if (cmax == 0) cmax = 1;
    const uint32_t n_tiles = (n + cmax - 1) / cmax;
    const uint32_t cw = n_tiles ? (n + n_tiles - 1) / n_tiles : 1;
    return cw > HS_MM_EXACT_COLS ? cmax : cw;
}

/* The product itself, on x (x8: the 8-bit form of split_prologue, or x8n
 * with the RMSNorm prologue; with q8_out, x8 products also write x8n of y). */
static hs_status product(hs_ops *ops, hs_vk_seq *seq, const hs_weight *w, hs_vk_binding x, uint32_t n,
                         hs_vk_binding y, const hs_matmul_opts *opt, bool x8) {
    static const char *op = "hs_op_matmul";
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint32_t x_stride = x_words(w, opt, x8);
    const uint32_t y_stride = opt->y_stride ? opt->y_stride : w->rows;
    const uint64_t x_bytes = (uint64_t)n * x_stride * 4;
    const uint64_t y_bytes = ((uint64_t)(n - 1) * y_stride + w->rows) * 4;
    hs_window wx, wy, wg, wr, wq;
    hs_status st;
    bool xvec4;
    const bool norm_in = !x8 && opt->prologue == HS_MATMUL_RMSNORM; /* x8n carries the norm's gain in x */
    if ((st = x_windows(c, w->cols, x, x_bytes, x_stride, norm_in ? &opt->norm : NULL, &wx, &wg, &xvec4)) !=
        HS_OK)
        return st;
    if (x8 && !xvec4) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: x8 is not 16-byte aligned", op);
    if ((st = make_window(c, op, "y", y, y_bytes, &wy)) != HS_OK) return st;
    if (overlap(x, x_bytes, y, y_bytes)) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: y overlaps x", op);
    const bool q8o = x8 && opt->q8_out.buf, pair = x8 && opt->swiglu_q8.buf;
    /* rope_kv reaches here only where hs_op_matmul found the write fusable */
    hs_rope_kv_bind rb = {0};
    if (opt->rope_kv && (!x8 || (st = rope_kv_check(ops, w, n, y, opt, &rb)) != HS_OK || !rb.fused))
        return x8 && st != HS_OK ? st : HS_FAIL(HS_ERR_INVALID_ARG, "%s: rope_kv cannot be fused here", op);
    const bool rope = rb.fused;
    wq = wy;
    if (pair) {
        if ((st = make_window(c, op, "swiglu_q8", opt->swiglu_q8, (uint64_t)n * (w->rows / 64) * 80, &wq)) !=
            HS_OK)
            return st;
        if (wq.elem % 4) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: swiglu_q8 must be 16-byte aligned", op);
    }
    if (q8o) {
        const uint64_t q_bytes = (uint64_t)n * (w->rows / 32) * 80;
        if ((st = make_window(c, op, "q8_norm", opt->q8_norm, (uint64_t)w->rows * 4, &wg)) != HS_OK ||
            (st = make_window(c, op, "q8_out", opt->q8_out, q_bytes, &wq)) != HS_OK)
            return st;
        if (wg.elem % 4 || wq.elem % 4)
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: q8_norm and q8_out must be 16-byte aligned", op);
    }
    wr = wx;
    if (opt->residual) {
        if ((st = make_window(c, op, "res", opt->res, y_bytes, &wr)) != HS_OK) return st;
        if (overlap(opt->res, y_bytes, y, y_bytes) && opt->res.offset != y.offset)
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: res partially overlaps y (only the very same range is allowed)", op);
        if (overlap(opt->res, y_bytes, x, x_bytes)) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: res overlaps x", op);
    }

    const bool sg = hs_ops_subgroup(ops) > 1;
    /* Columns per workgroup (hs_matmul_tile_cols): at most the tuning's.
     * Products on 8-bit activations take the tuning's x8_cols where it has
     * one, but no more columns than one uniform window holds (a model's wide
     * rows would otherwise send its activations through storage buffers), and
     * never fewer than matmul_cols_per_wg. */
    const hs_tuning *tn = hs_ops_tuning(ops);
    const uint32_t fit = ux_window_cols(ops, &wx, xvec4, x_stride); /* columns per uniform window */
    const uint32_t cols = clamp_u32(tn->matmul_cols_per_wg, 1, HS_TUNING_MAX_COLS);
    uint32_t cmax = cols;
    if (x8 && tn->x8_cols) {
        cmax = clamp_u32(tn->x8_cols, 1, HS_TUNING_MAX_X8_COLS);
        if (fit && fit < cmax) cmax = fit > cols ? fit : cols;
    }
    const uint32_t cw = hs_matmul_tile_cols(n, cmax);
    const uint32_t rw = w->rl;
    const uint32_t tiles = (n + cw - 1) / cw, max_gy = c->max_wg_count[1] ? c->max_wg_count[1] : 65535;

    /* activations through uniform buffers: windows of whole tiles */
    const uint32_t ux_tiles = fit / cw;
    const bool ux = ux_tiles > 0;
    const uint32_t step = ux && ux_tiles < max_gy ? ux_tiles : max_gy;

    const bool tx = hs_op_texel_loads(ops); /* the weights through texel buffers */
    char name[32];
    snprintf(name, sizeof name, "matmul_%s%s%s%s%s", type_suffix(w->type),
             rope ? (rb.f16 ? "_x8rh" : "_x8r") : x8 ? "_x8" : "",
             sg ? "_sg" : "", tx ? "_tx" : "", ux ? "_ux" : "");
    hs_vk_pipeline_desc d = {.name = name,
                             .n_bindings = rope ? 13 : x8 ? 7 : 6, /* 6: x8n out; 7..12: rope_kv */
                             .write_mask = 1u << 3 | (x8 ? 1u << 6 : 0u) | (rope ? 7u << 10 : 0u),
                             .texel_mask = tx ? 3u : 0u,
                             .uniform_mask = ux ? 1u << 2 : 0u,
                             .push_size = sizeof(hs_matmul_push),
                             .n_spec = 8,
                             .spec = {w->lanes, w->rl, rw, cw, (uint32_t)opt->prologue,
                                      (opt->residual ? 1u : 0u) | (q8o ? 2u : 0u) | (pair ? 4u : 0u) |
                                          (rope ? 8u : 0u),
                                      xvec4 ? 1u : 0u, ux ? ux_vec4(ops) : 1u},
                             .wg_size = {w->lanes, 1, 1}};
    /* the SPIR-V of each variant, indexed by sg | tx << 1 | ux << 2 */
#define HS_MM_SET(T)                                                                                         \
    {                                                                                                        \
        const uint32_t *const code[8] = {hs_spv_matmul_##T,         hs_spv_matmul_##T##_sg,                  \
                                         hs_spv_matmul_##T##_tx,    hs_spv_matmul_##T##_sg_tx,               \
                                         hs_spv_matmul_##T##_ux,    hs_spv_matmul_##T##_sg_ux,               \
                                         hs_spv_matmul_##T##_tx_ux, hs_spv_matmul_##T##_sg_tx_ux};           \
        const size_t size[8] = {hs_spv_matmul_##T##_size,       hs_spv_matmul_##T##_sg_size,                 \
                                hs_spv_matmul_##T##_tx_size,    hs_spv_matmul_##T##_sg_tx_size,              \
                                hs_spv_matmul_##T##_ux_size,    hs_spv_matmul_##T##_sg_ux_size,              \
                                hs_spv_matmul_##T##_tx_ux_size, hs_spv_matmul_##T##_sg_tx_ux_size};          \
        d.code = code[variant];                                                                              \
        d.code_size = size[variant];                                                                         \
    }
#define HS_MM_CODE(E, T)                                                                                     \
    case HS_TYPE_##E: HS_MM_SET(T) break;
    const unsigned variant = (sg ? 1u : 0u) | (tx ? 2u : 0u) | (ux ? 4u : 0u);
    if (rope && rb.f16)
        HS_MM_SET(q4_1_x8rh)
    else if (rope)
        HS_MM_SET(q4_1_x8r)
    else if (x8) /* q4_1 only: hs_matmul_act_q8 */
        HS_MM_SET(q4_1_x8)
    else
        switch (w->type) {
            HS_MM_CODE(F32, f32)
            HS_MM_CODE(F16, f16)
            HS_MM_CODE(Q4_0, q4_0)
            HS_MM_CODE(Q4_1, q4_1)
            HS_MM_CODE(Q8_0, q8_0)
            HS_MM_CODE(Q4_K, q4_K)
            HS_MM_CODE(Q6_K, q6_K)
        }
#undef HS_MM_CODE
#undef HS_MM_SET
    hs_vk_pipeline *pipe = NULL;
    if ((st = hs_ops_pipeline(ops, &d, &pipe)) != HS_OK) return st;

    for (uint32_t ci = 0; ci < w->n_chunks; ci++) {
        const hs_weight_chunk *ch = &w->chunks[ci];
        hs_vk_binding binds[13] = {
            chunk_quants(ch), chunk_scales(ch), wx.bind, wy.bind, wg.bind, wr.bind, wq.bind,
            rb.pos,           rb.rows,          rb.freqs, rb.q_out, rb.k,    rb.v,
        };
        for (uint32_t t0 = 0; t0 < tiles; t0 += step) {
            const uint32_t gy = tiles - t0 < step ? tiles - t0 : step;
            uint32_t x_off = wx.elem, xcol0 = 0;
            if (ux) { /* columns t0 cw .. min((t0 + gy) cw, n) - 1 */
                xcol0 = t0 * cw;
                binds[2] =
                    ux_window(ops, &wx, x_stride, xcol0, (t0 + gy) * cw < n ? (t0 + gy) * cw : n, &x_off);
            }
            hs_matmul_push pc = {.rows = pair ? w->rows / 2 : w->rows,
                                 .cols = w->cols,
                                 .n = n,
                                 .nblk = w->nblk,
                                 .group0 = ch->group0,
                                 .col0 = t0 * cw,
                                 .x_stride = x_stride,
                                 .x_off = x_off,
                                 .y_off = wy.elem,
                                 .g_off = wg.elem,
                                 .r_off = wr.elem,
                                 .eps = opt->eps,
                                 .y_stride = y_stride,
                                 .xcol0 = xcol0,
                                 .q_off = wq.elem / 4,
                                 .pair = pair ? ch->ngroups / 2 : 0,
                                 .rp_pos_off = rb.pos_off,
                                 .rp_rows_off = rb.rows_off,
                                 .rp_f_off = rb.f_off,
                                 .rp_q_off = rb.q_off,
                                 .rp_k_off = rb.k_off,
                                 .rp_v_off = rb.v_off};
            if (rope) {
                const hs_matmul_rope_kv *rk = opt->rope_kv;
                pc.rp_n_ctx = rk->kv->n_ctx;
                pc.rp_head_dim = rk->kv->head_dim;
                pc.rp_n_head = rk->n_head;
                pc.rp_n_kv = rk->kv->n_kv_head;
                pc.rp_n_rot = rk->rp->n_rot;
                pc.rp_freq_scale = rk->rp->freq_scale;
            }
            const uint32_t gx = (pair ? ch->ngroups / 2 : ch->ngroups) * (w->rl / rw);
            if ((st = hs_vk_seq_dispatch(seq, pipe, binds, d.n_bindings, &pc, gx, gy, 1)) != HS_OK) return st;
        }
    }
    return HS_OK;
}

/* ---- get_rows ---- */

hs_status hs_op_get_rows(hs_ops *ops, hs_vk_seq *seq, const hs_weight *table, hs_vk_binding ids, uint32_t n,
                         hs_vk_binding out) {
    static const char *op = "hs_op_get_rows";
    if (!ops || !seq || !table) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: missing ops, seq or table", op);
    if (n == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: n is 0", op);
    const hs_vk_caps *c = hs_ops_caps(ops);
    const uint64_t out_bytes = (uint64_t)n * table->cols * 4;
    hs_window wi, wo;
    hs_status st;
    if ((st = make_window(c, op, "ids", ids, (uint64_t)n * 4, &wi)) != HS_OK) return st;
    if ((st = make_window(c, op, "out", out, out_bytes, &wo)) != HS_OK) return st;
    if (overlap(ids, (uint64_t)n * 4, out, out_bytes)) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: out overlaps ids", op);

    const uint32_t wgs = hs_op_clamp_wg(c, HS_GET_ROWS_WG);
    char name[32];
    snprintf(name, sizeof name, "get_rows_%s", type_suffix(table->type));
    hs_vk_pipeline_desc d = {.name = name,
                             .n_bindings = 4,
                             .write_mask = 1u << 3,
                             .push_size = sizeof(hs_get_rows_push),
                             .n_spec = 2,
                             .spec = {wgs, table->g},
                             .wg_size = {wgs, 1, 1}};
#define HS_GR_CODE(E, T)                                                                           \
    case HS_TYPE_##E:                                                                              \
        d.code = hs_spv_get_rows_##T;                                                              \
        d.code_size = hs_spv_get_rows_##T##_size;                                                  \
        break;
    switch (table->type) {
        HS_GR_CODE(F32, f32)
        HS_GR_CODE(F16, f16)
        HS_GR_CODE(Q4_0, q4_0)
        HS_GR_CODE(Q4_1, q4_1)
        HS_GR_CODE(Q8_0, q8_0)
        HS_GR_CODE(Q4_K, q4_K)
        HS_GR_CODE(Q6_K, q6_K)
    }
#undef HS_GR_CODE
    hs_vk_pipeline *pipe = NULL;
    if ((st = hs_ops_pipeline(ops, &d, &pipe)) != HS_OK) return st;

    const uint32_t max_gx = c->max_wg_count[0] ? c->max_wg_count[0] : 65535;
    for (uint32_t ci = 0; ci < table->n_chunks; ci++) {
        const hs_weight_chunk *ch = &table->chunks[ci];
        hs_vk_binding binds[4] = {
            chunk_quants(ch),
            chunk_scales(ch),
            wi.bind,
            wo.bind,
        };
        for (uint32_t t0 = 0; t0 < n; t0 += max_gx) {
            const uint32_t gx = n - t0 < max_gx ? n - t0 : max_gx;
            hs_get_rows_push pc = {.rows = table->rows,
                                   .cols = table->cols,
                                   .n = gx,
                                   .nblk = table->nblk,
                                   .group0 = ch->group0,
                                   .ngroups = ch->ngroups,
                                   .tok0 = t0,
                                   .ids_off = wi.elem,
                                   .out_off = wo.elem,
                                   .zero_invalid = ci == 0};
            if ((st = hs_vk_seq_dispatch(seq, pipe, binds, 4, &pc, gx, 1, 1)) != HS_OK) return st;
        }
    }
    return HS_OK;
}
