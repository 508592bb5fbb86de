/* eagle3: the draft head's weights, cache, tree bookkeeping and recorded
 * graphs (see eagle3.h). */
#include "eagle3.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_quant.h"
#include "model_util.h"
#include "op_attn.h"
#include "op_elem.h"
#include "op_matmul.h"

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

#define EAGLE3_DEFAULT_NODES 128u
#define EAGLE3_DEFAULT_TOP_K 10u

/* One recorded graph: a consume or a draft level for a capacity bucket. */
typedef enum eagle3_kind { EAGLE3_CONSUME, EAGLE3_DRAFT, EAGLE3_CONSUME_CACHE } eagle3_kind;
typedef struct eagle3_graph {
    eagle3_kind kind;
    uint32_t cap;
    hs_vk_seq *seq;
} eagle3_graph;

/* Slots of the f32 vectors buffer. */
enum { VEC_ATTN_NORM, VEC_HIDDEN_NORM, VEC_FFN_NORM, VEC_OUTPUT_NORM, VEC_FREQS, VEC_COUNT };

struct hs_eagle3 {
    hs_ops *ops;
    hs_vk_ctx *vk;
    hs_eagle3_config cfg;
    uint32_t n_ctx, max_batch, max_nodes, top_k;
    uint32_t rows;      /* rows of the work buffers: max(max_batch, max_nodes) */
    uint32_t mask_cols; /* mask words per row: hs_attn_mask_words(rows) */
    uint32_t n_past;    /* committed head cache rows */
    uint32_t n_slots;   /* drafted slots (slot 0, the root, not counted) */
    bool have_root;     /* slot 0 holds the last committed row's output (false after a cache-only consume) */
    bool q4_1;          /* float matrices quantized to q4_1 at load (hs_eagle3_weights) */
    bool act_q8;        /* products on 8-bit activations where the weight allows (tuning q8) */

    /* Borrowed from the target. */
    const hs_weight *tok_embd; /* (n_vocab, dim) */
    hs_vk_binding taps;        /* (tap_rows, HS_LLAMA_TAPS, target_dim) */
    uint32_t tap_rows;

    hs_weight *fc;      /* (dim, 3 target_dim) */
    hs_weight *qkv_e;   /* (q_dim + 2 kv_dim, dim): columns [0, dim) of Q, K, V, on rmsnorm(e) */
    hs_weight *qkv_x;   /* (q_dim + 2 kv_dim, dim): columns [dim, 2 dim), on rmsnorm(x) */
    hs_weight *wo;      /* (dim, q_dim) */
    hs_weight *gu;      /* (2 ff, dim): gate, up */
    hs_weight *wdown;   /* (dim, ff) */
    hs_weight *out;     /* (n_draft_vocab, dim) */
    hs_vk_buffer *vecs; /* f32 vectors at multiples of `slot` bytes (VEC_*) */
    uint64_t slot;
    int32_t *d2t; /* (n_draft_vocab): target id = draft id + d2t[draft id] */

    hs_vk_buffer *k_cache, *v_cache; /* (n_ctx, n_kv_head, head_dim) f32 */
    /* Activations for `rows` rows. */
    hs_vk_buffer *fcin;   /* (rows, 3 target_dim): gathered taps */
    hs_vk_buffer *x;      /* (rows, dim): the residual stream */
    hs_vk_buffer *e;      /* (rows, dim): token embeddings */
    hs_vk_buffer *qkv;    /* (rows, q_dim + 2 kv_dim) */
    hs_vk_buffer *q;      /* (rows, q_dim) */
    hs_vk_buffer *att;    /* (rows, q_dim) */
    hs_vk_buffer *gub;    /* (rows, 2 ff) */
    hs_vk_buffer *xs;     /* (rows, max(dim, ff)): the products' split prologue (x') */
    hs_vk_buffer *xn;     /* (rows, dim / 32 blocks of 80 bytes): x8n of x for the hidden half and the
                           * MLP (NULL: dim % 32) */
    hs_vk_buffer *logits; /* (rows, n_draft_vocab) */
    hs_vk_buffer *hidden; /* (1 + max_nodes, dim): each slot's layer output, its children's input */
    /* Host-visible step data, written before each submit at slot-aligned
     * offsets: tokens, pos, rows, ids_a, ids_b (rows each), info, mask. */
    hs_vk_buffer *step;
    uint64_t off_tokens, off_pos, off_rows, off_ids_a, off_ids_b, off_info, off_mask;
    hs_vk_buffer *records; /* (rows) Top-K records, written by the device */

    /* The tree on the host: per slot its depth and its ancestors (and
     * itself) as bits over the mask columns (column j = slot j + 1). */
    uint32_t *depth;         /* (1 + max_nodes) */
    uint32_t *anc;           /* (1 + max_nodes, node_words) */
    uint32_t node_words;     /* hs_attn_mask_words(max_nodes) */
    hs_topk_result *results; /* (rows) */

    eagle3_graph *graphs; /* stb_ds array */
    uint32_t last_dispatches;
    uint64_t weight_bytes;
};

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }
static hs_vk_binding B(hs_vk_buffer *b, uint64_t off, uint64_t bytes) {
    return (hs_vk_binding){b, off, bytes};
}

/* ---- configuration ---- */

hs_status hs_eagle3_config_read(const hs_gguf *g, hs_eagle3_config *c) {
    hs_status st = HS_OK;
    memset(c, 0, sizeof *c);
    const char *arch = NULL;
    HS_TRY(hs_gguf_architecture(g, &arch));
    if (strcmp(arch, "eagle3") != 0)
        return HS_FAIL(HS_ERR_FORMAT, "%s: architecture '%s' is not an eagle3 draft head", hs_gguf_name(g),
                       arch);
    HS_TRY(hs_gguf_get_u32(g, "eagle3.embedding_length", &c->dim));
    HS_TRY(hs_gguf_get_u32(g, "eagle3.feed_forward_length", &c->ff));
    HS_TRY(hs_gguf_get_u32(g, "eagle3.attention.head_count", &c->n_head));
    c->n_kv_head = c->n_head;
    if (hs_gguf_find_key(g, "eagle3.attention.head_count_kv"))
        HS_TRY(hs_gguf_get_u32(g, "eagle3.attention.head_count_kv", &c->n_kv_head));
    HS_TRY(hs_gguf_get_f32(g, "eagle3.attention.layer_norm_rms_epsilon", &c->eps));
    HS_TRY(hs_gguf_get_f32(g, "eagle3.rope.freq_base", &c->rope_base));
    HS_TRY(hs_gguf_get_u32(g, "eagle3.context_length", &c->n_ctx_train));
    HS_TRY(hs_gguf_get_u32(g, "eagle3.vocab_size", &c->n_vocab));
    HS_TRY(hs_gguf_get_u32(g, "eagle3.draft_vocab_size", &c->n_draft_vocab));
    HS_TRY(hs_gguf_get_u32(g, "eagle3.target_hidden_size", &c->target_dim));
    const hs_gguf_value *layers;
    HS_TRY(hs_gguf_get_arr(g, "eagle3.target_layers", HS_GGUF_TYPE_COUNT, &layers));
    if (layers->v.arr.n != HS_LLAMA_TAPS)
        return HS_FAIL(HS_ERR_FORMAT, "%s: eagle3.target_layers has %llu entries, expected %u",
                       hs_gguf_name(g), (unsigned long long)layers->v.arr.n, HS_LLAMA_TAPS);
    for (uint32_t t = 0; t < HS_LLAMA_TAPS; t++)
        HS_TRY(hs_gguf_arr_u32(layers, t, &c->tap_layers[t]));
    if (hs_gguf_find_key(g, "eagle3.train_row_length")) {
        HS_TRY(hs_gguf_get_u32(g, "eagle3.train_row_length", &c->n_rows_train));
        if (c->n_rows_train == 0 || c->n_rows_train > c->n_ctx_train)
            return HS_FAIL(HS_ERR_FORMAT, "%s: eagle3.train_row_length %u is not in [1, context_length %u]",
                           hs_gguf_name(g), c->n_rows_train, c->n_ctx_train);
    }
    if (hs_gguf_find_key(g, "eagle3.target_name")) {
        const char *name;
        HS_TRY(hs_gguf_get_str(g, "eagle3.target_name", &name));
        snprintf(c->target_name, sizeof c->target_name, "%s", name);
    }
    if (c->n_head == 0 || c->n_kv_head == 0 || c->n_head % c->n_kv_head)
        return HS_FAIL(HS_ERR_FORMAT, "%s: bad head counts (heads %u, kv heads %u)", hs_gguf_name(g),
                       c->n_head, c->n_kv_head);
    c->head_dim = c->dim / c->n_head;
    if (hs_gguf_find_key(g, "eagle3.attention.key_length"))
        HS_TRY(hs_gguf_get_u32(g, "eagle3.attention.key_length", &c->head_dim));
    if (c->head_dim == 0 || c->head_dim % 4 || c->head_dim > HS_ATTN_MAX_HEAD_DIM)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: head dimension %u (dim %u, %u heads) is not a multiple of 4 in [4, %u]",
                       hs_gguf_name(g), c->head_dim, c->dim, c->n_head, HS_ATTN_MAX_HEAD_DIM);
    if (c->dim == 0 || c->ff == 0 || c->target_dim == 0)
        return HS_FAIL(HS_ERR_FORMAT,
                       "%s: empty shape (dim %u, feed_forward_length %u, target_hidden_size %u)",
                       hs_gguf_name(g), c->dim, c->ff, c->target_dim);
    if (c->n_draft_vocab == 0 || c->n_draft_vocab > c->n_vocab)
        return HS_FAIL(HS_ERR_FORMAT, "%s: draft vocabulary of %u ids for a vocabulary of %u",
                       hs_gguf_name(g), c->n_draft_vocab, c->n_vocab);
    if (!(c->eps >= 0.0f) || !isfinite(c->eps) || !(c->rope_base > 0.0f) || !isfinite(c->rope_base))
        return HS_FAIL(HS_ERR_FORMAT, "%s: bad epsilon %g or rope.freq_base %g", hs_gguf_name(g),
                       (double)c->eps, (double)c->rope_base);
fail:
    return st;
}

#define MISFIT(...) n += (size_t)snprintf(msg + n, n < cap ? cap - n : 0, __VA_ARGS__)

/* Appends "; what: ..." to msg for every size of the head that does not fit
 * the target's configuration; returns the new length. */
static size_t config_misfits(const hs_eagle3_config *c, const hs_llama_config *t, char *msg, size_t cap,
                             size_t n) {
    if (c->target_dim != t->dim)
        MISFIT("; hidden size: the head was made for target_hidden_size %u, the target has %u", c->target_dim,
               t->dim);
    if (c->dim != t->dim)
        MISFIT("; dim: the head's %u differs from the target's %u (the head shares its token_embd)", c->dim,
               t->dim);
    if (c->n_vocab != t->n_vocab)
        MISFIT("; vocabulary: the head's %u ids, the target's %u", c->n_vocab, t->n_vocab);
    for (uint32_t k = 0; k < HS_LLAMA_TAPS; k++)
        if (c->tap_layers[k] >= t->n_layer)
            MISFIT("; tap layer %u: the target has %u layers", c->tap_layers[k], t->n_layer);
    return n;
}

hs_status hs_eagle3_check_config(const hs_eagle3_config *c, const hs_llama_config *t) {
    char msg[512];
    if (config_misfits(c, t, msg, sizeof msg, 0) == 0) return HS_OK;
    return HS_FAIL(HS_ERR_INVALID_ARG, "eagle3 head does not fit the target%s", msg);
}

hs_status hs_eagle3_check_target(const hs_eagle3_config *c, const hs_llama *target) {
    char msg[512];
    const size_t cap = sizeof msg;
    size_t n = config_misfits(c, hs_llama_cfg(target), msg, cap, 0);
    uint32_t layers[HS_LLAMA_TAPS];
    if (!hs_llama_taps(target, layers).buf) {
        MISFIT("; taps: the target was loaded without taps (hs_llama_options.taps, tap layers %u, %u, %u)",
               c->tap_layers[0], c->tap_layers[1], c->tap_layers[2]);
    } else if (memcmp(layers, c->tap_layers, sizeof layers) != 0) {
        MISFIT("; tap layers: the head reads %u, %u, %u, the target taps %u, %u, %u "
               "(hs_llama_options.custom_taps)",
               c->tap_layers[0], c->tap_layers[1], c->tap_layers[2], layers[0], layers[1], layers[2]);
    }
    if (n == 0) return HS_OK;
    return HS_FAIL(HS_ERR_INVALID_ARG, "eagle3 head does not fit the target%s", msg);
}
#undef MISFIT

/* ---- loading ---- */

/* rows x cols of type (f32, f16 or q8_0) as q4_1 blocks, in a new buffer (*out). */
static hs_status requantize_q4_1(hs_type type, const void *src, uint32_t rows, uint32_t cols, void **out) {
    hs_status st = HS_OK;
    const uint64_t src_rb = hs_type_row_bytes(type, cols), dst_rb = hs_type_row_bytes(HS_TYPE_Q4_1, cols);
    float *row = malloc((size_t)cols * sizeof *row);
    uint8_t *dst = malloc((size_t)rows * dst_rb);
    if (!row || !dst) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_eagle3_load: out of memory");
        goto fail;
    }
    for (uint32_t r = 0; r < rows; r++) {
        HS_TRY(hs_dequantize_row(type, (const uint8_t *)src + r * src_rb, row, cols));
        HS_TRY(hs_quantize_row(HS_TYPE_Q4_1, row, dst + r * dst_rb, cols));
    }
    *out = dst;
    dst = NULL;
fail:
    free(row);
    free(dst);
    return st;
}

/* Matrices of one type, stacked by rows: count tensors (rows[i], cols) of
 * the file, or, with half = 1 or 2, their first or second half of columns
 * (cols = 2 dim in the file, dim in the weight; dim a multiple of the block).
 * With h->q4_1, f32, f16 and q8_0 matrices whose cols are whole q4_1 blocks
 * are quantized to q4_1 here (the 8-bit activation products then apply). */
static hs_status load_stacked(hs_eagle3 *h, const hs_gguf *g, const char *const *names, uint32_t count,
                              const uint32_t *rows, uint32_t cols, int half, hs_weight **out) {
    hs_status st = HS_OK;
    const hs_gguf_tensor *t[3];
    void *part[3] = {NULL, NULL, NULL};
    const uint32_t file_cols = half ? 2 * cols : cols;
    for (uint32_t i = 0; i < count; i++) {
        HS_TRY(hs_model_matrix(g, names[i], rows[i], file_cols, &t[i]));
        if (t[i]->type != t[0]->type)
            return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE,
                           "%s: %s is %s but %s is %s; the head stacks them into one product",
                           hs_gguf_name(g), names[i], hs_type_name((hs_type)t[i]->type), names[0],
                           hs_type_name((hs_type)t[0]->type));
    }
    const hs_type type = (hs_type)t[0]->type;
    if (cols % hs_type_block_elems(type))
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE,
                       "%s: %s of type %s: dim %u is not a multiple of the type's %u-element block, so the "
                       "embedding and hidden halves of its columns cannot be split",
                       hs_gguf_name(g), names[0], hs_type_name(type), cols, hs_type_block_elems(type));
    const bool requant = h->q4_1 && (type == HS_TYPE_F32 || type == HS_TYPE_F16 || type == HS_TYPE_Q8_0) &&
                         cols % hs_type_block_elems(HS_TYPE_Q4_1) == 0;
    const void *data[3];
    for (uint32_t i = 0; i < count; i++) {
        data[i] = t[i]->data;
        if (half) {
            const uint64_t full = hs_type_row_bytes(type, file_cols), rb = hs_type_row_bytes(type, cols);
            uint8_t *p = malloc(rows[i] * rb);
            if (!p) {
                st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_eagle3_load: out of memory");
                goto fail;
            }
            for (uint32_t r = 0; r < rows[i]; r++)
                memcpy(p + r * rb, (const uint8_t *)t[i]->data + r * full + (half == 2 ? rb : 0), rb);
            part[i] = p;
            data[i] = p;
        }
        if (requant) {
            void *q = NULL;
            HS_TRY(requantize_q4_1(type, data[i], rows[i], cols, &q));
            free(part[i]);
            part[i] = q;
            data[i] = q;
        }
    }
    HS_TRY(hs_weight_create_stacked(h->ops, requant ? HS_TYPE_Q4_1 : type, cols, count, rows, data, out));
    h->weight_bytes += hs_weight_device_bytes(*out);
fail:
    for (uint32_t i = 0; i < 3; i++)
        free(part[i]);
    return st;
}

static hs_status upload_vec(hs_eagle3 *h, const hs_gguf *g, const char *name, uint32_t slot_index) {
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, name);
    if (!t) return HS_FAIL(HS_ERR_FORMAT, "%s: tensor %s missing", hs_gguf_name(g), name);
    if (t->type != HS_GGML_TYPE_F32 || hs_gguf_tensor_nelements(t) != h->cfg.dim)
        return HS_FAIL(HS_ERR_FORMAT, "%s: tensor %s must be f32 [%u]", hs_gguf_name(g), name, h->cfg.dim);
    return hs_vk_buffer_upload(h->vecs, h->slot * slot_index, t->data, (uint64_t)h->cfg.dim * 4);
}

static hs_vk_binding vec(const hs_eagle3 *h, uint32_t slot_index, uint32_t n) {
    return B(h->vecs, h->slot * slot_index, (uint64_t)n * 4);
}

/* d2t: i32 [n_draft_vocab], each draft id mapped inside the vocabulary. A
 * head over the whole vocabulary may leave it out (the identity). */
static hs_status load_d2t(hs_eagle3 *h, const hs_gguf *g) {
    const hs_eagle3_config *c = &h->cfg;
    h->d2t = calloc(c->n_draft_vocab, sizeof *h->d2t);
    if (!h->d2t) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_eagle3_load: out of memory");
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, "d2t");
    if (!t) {
        if (c->n_draft_vocab == c->n_vocab) return HS_OK;
        return HS_FAIL(HS_ERR_FORMAT, "%s: tensor d2t missing (draft vocabulary %u of %u ids)",
                       hs_gguf_name(g), c->n_draft_vocab, c->n_vocab);
    }
    if (t->type != HS_GGML_TYPE_I32 || hs_gguf_tensor_nelements(t) != c->n_draft_vocab)
        return HS_FAIL(HS_ERR_FORMAT, "%s: tensor d2t must be i32 [%u]", hs_gguf_name(g), c->n_draft_vocab);
    memcpy(h->d2t, t->data, (size_t)c->n_draft_vocab * 4);
    for (uint32_t i = 0; i < c->n_draft_vocab; i++) {
        const int64_t id = (int64_t)i + h->d2t[i];
        if (id < 0 || id >= c->n_vocab)
            return HS_FAIL(HS_ERR_FORMAT, "%s: d2t maps draft id %u to %lld, outside the vocabulary of %u",
                           hs_gguf_name(g), i, (long long)id, c->n_vocab);
    }
    return HS_OK;
}

static hs_status alloc(hs_eagle3 *h, uint64_t bytes, hs_mem mem, hs_vk_buffer **b) {
    return hs_vk_buffer_create(h->vk, bytes ? bytes : 4, mem, b);
}

hs_status hs_eagle3_load(hs_ops *ops, const hs_gguf *g, hs_llama *target, const hs_eagle3_options *opt,
                         hs_eagle3 **out) {
    hs_status st = HS_OK;
    *out = NULL;
    hs_eagle3 *h = calloc(1, sizeof *h);
    if (!h) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_eagle3_load: out of memory");
    h->ops = ops;
    h->vk = hs_ops_vk(ops);
    HS_TRY(hs_eagle3_config_read(g, &h->cfg));
    HS_TRY(hs_eagle3_check_target(&h->cfg, target));
    const hs_eagle3_config *c = &h->cfg;
    const hs_vk_caps *caps = hs_ops_caps(ops);
    const uint32_t q_dim = c->n_head * c->head_dim, kv_dim = c->n_kv_head * c->head_dim;
    const uint32_t qkv_dim = q_dim + 2 * kv_dim;
    h->n_ctx = opt && opt->n_ctx ? opt->n_ctx : hs_llama_n_ctx(target);
    h->max_batch = opt && opt->max_batch ? opt->max_batch : hs_llama_max_batch(target);
    if (h->max_batch > h->n_ctx) h->max_batch = h->n_ctx;
    h->max_nodes = opt && opt->max_nodes ? opt->max_nodes : EAGLE3_DEFAULT_NODES;
    h->top_k = opt && opt->top_k ? opt->top_k : EAGLE3_DEFAULT_TOP_K;
    {
        const hs_eagle3_weights wsel = opt ? opt->weights : HS_EAGLE3_WEIGHTS_AUTO;
        if (wsel != HS_EAGLE3_WEIGHTS_AUTO && wsel != HS_EAGLE3_WEIGHTS_FILE &&
            wsel != HS_EAGLE3_WEIGHTS_Q4_1) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "hs_eagle3_load: unknown weights choice %d", (int)wsel);
            goto fail;
        }
        h->act_q8 = hs_ops_tuning(ops)->q8_act != 0;
        h->q4_1 = wsel == HS_EAGLE3_WEIGHTS_Q4_1 || (wsel == HS_EAGLE3_WEIGHTS_AUTO && h->act_q8);
    }
    if (h->top_k > HS_TOPK_MAX_K || h->top_k > c->n_draft_vocab) {
        st = HS_FAIL(HS_ERR_INVALID_ARG,
                     "hs_eagle3_load: top_k %u exceeds %u (and the draft vocabulary of %u)", h->top_k,
                     HS_TOPK_MAX_K, c->n_draft_vocab);
        goto fail;
    }
    h->rows = h->max_batch > h->max_nodes ? h->max_batch : h->max_nodes;
    h->mask_cols = hs_attn_mask_words(h->rows);
    h->node_words = hs_attn_mask_words(h->max_nodes);
    h->tok_embd = hs_llama_token_embd(target);
    h->taps = hs_llama_taps(target, NULL);
    h->tap_rows = hs_llama_max_batch(target);

    /* Weights. Q, K and V take u = [rmsnorm(e), rmsnorm(x)] (2 dim): their
     * columns are split into the embedding half and the hidden half, two
     * products with RMSNorm prologues, the second adding to the first. */
    {
        const char *fc_name[1] = {"fc.weight"};
        const uint32_t fc_rows[1] = {c->dim};
        HS_TRY(load_stacked(h, g, fc_name, 1, fc_rows, HS_LLAMA_TAPS * c->target_dim, 0, &h->fc));
        const char *names[3] = {"blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight"};
        const uint32_t rows[3] = {q_dim, kv_dim, kv_dim};
        HS_TRY(load_stacked(h, g, names, 3, rows, c->dim, 1, &h->qkv_e));
        HS_TRY(load_stacked(h, g, names, 3, rows, c->dim, 2, &h->qkv_x));
        const char *gu_names[2] = {"blk.0.ffn_gate.weight", "blk.0.ffn_up.weight"};
        const uint32_t gu_rows[2] = {c->ff, c->ff};
        HS_TRY(load_stacked(h, g, gu_names, 2, gu_rows, c->dim, 0, &h->gu));
    }
    {
        const char *wo_name[1] = {"blk.0.attn_output.weight"}, *down_name[1] = {"blk.0.ffn_down.weight"};
        const char *out_name[1] = {"output.weight"};
        const uint32_t dim_rows[1] = {c->dim}, out_rows[1] = {c->n_draft_vocab};
        HS_TRY(load_stacked(h, g, wo_name, 1, dim_rows, q_dim, 0, &h->wo));
        HS_TRY(load_stacked(h, g, down_name, 1, dim_rows, c->ff, 0, &h->wdown));
        HS_TRY(load_stacked(h, g, out_name, 1, out_rows, c->dim, 0, &h->out));
    }
    HS_TRY(load_d2t(h, g));
    h->slot = align_up((uint64_t)(c->dim > c->head_dim ? c->dim : c->head_dim) * 4,
                       align_up(256, caps->min_storage_offset_align));
    HS_TRY(alloc(h, h->slot * VEC_COUNT, HS_MEM_DEVICE, &h->vecs));
    HS_TRY(upload_vec(h, g, "blk.0.attn_norm.weight", VEC_ATTN_NORM));
    HS_TRY(upload_vec(h, g, "blk.0.hidden_norm.weight", VEC_HIDDEN_NORM));
    HS_TRY(upload_vec(h, g, "blk.0.ffn_norm.weight", VEC_FFN_NORM));
    HS_TRY(upload_vec(h, g, "output_norm.weight", VEC_OUTPUT_NORM));
    {
        hs_rope_params rp = {
            .n_rot = c->head_dim, .mode = HS_ROPE_NEOX, .freq_base = c->rope_base, .freq_scale = 1.0f};
        float freqs[HS_ATTN_MAX_HEAD_DIM / 2];
        hs_rope_freqs(&rp, freqs);
        HS_TRY(hs_vk_buffer_upload(h->vecs, h->slot * VEC_FREQS, freqs, (uint64_t)c->head_dim / 2 * 4));
    }

    /* Cache, activations, step data. */
    HS_TRY(alloc(h, (uint64_t)h->n_ctx * kv_dim * 4, HS_MEM_DEVICE, &h->k_cache));
    HS_TRY(alloc(h, (uint64_t)h->n_ctx * kv_dim * 4, HS_MEM_DEVICE, &h->v_cache));
    const uint64_t R = h->rows;
    HS_TRY(alloc(h, R * HS_LLAMA_TAPS * c->target_dim * 4, HS_MEM_DEVICE, &h->fcin));
    HS_TRY(alloc(h, R * c->dim * 4, HS_MEM_DEVICE, &h->x));
    HS_TRY(alloc(h, R * c->dim * 4, HS_MEM_DEVICE, &h->e));
    HS_TRY(alloc(h, R * qkv_dim * 4, HS_MEM_DEVICE, &h->qkv));
    HS_TRY(alloc(h, R * q_dim * 4, HS_MEM_DEVICE, &h->q));
    HS_TRY(alloc(h, R * q_dim * 4, HS_MEM_DEVICE, &h->att));
    HS_TRY(alloc(h, R * 2 * c->ff * 4, HS_MEM_DEVICE, &h->gub));
    {
        /* The products' x' (f32 or 8-bit blocks, at most 4 bytes a column): the widest x is the
         * MLP's, the residual's or fc's 3 target_dim. */
        uint64_t xs_cols = c->ff > c->dim ? c->ff : c->dim;
        if (xs_cols < HS_LLAMA_TAPS * c->target_dim) xs_cols = HS_LLAMA_TAPS * c->target_dim;
        if (xs_cols < q_dim) xs_cols = q_dim;
        HS_TRY(alloc(h, R * xs_cols * 4, HS_MEM_DEVICE, &h->xs));
    }
    if (c->dim % 32 == 0) HS_TRY(alloc(h, R * (c->dim / 32) * 80, HS_MEM_DEVICE, &h->xn));
    HS_TRY(alloc(h, R * c->n_draft_vocab * 4, HS_MEM_DEVICE, &h->logits));
    HS_TRY(alloc(h, (1ull + h->max_nodes) * c->dim * 4, HS_MEM_DEVICE, &h->hidden));
    const uint64_t arr = align_up(R * 4, h->slot);
    h->off_tokens = 0;
    h->off_pos = arr;
    h->off_rows = 2 * arr;
    h->off_ids_a = 3 * arr;
    h->off_ids_b = 4 * arr;
    h->off_info = 5 * arr;
    h->off_mask = 5 * arr + h->slot;
    HS_TRY(alloc(h, h->off_mask + R * h->mask_cols * 4, HS_MEM_HOST, &h->step));
    HS_TRY(alloc(h, hs_topk_out_bytes(h->rows, h->top_k), HS_MEM_HOST, &h->records));
    h->depth = calloc(1 + h->max_nodes, sizeof *h->depth);
    h->anc = calloc((1 + (size_t)h->max_nodes) * h->node_words, sizeof *h->anc);
    h->results = calloc(h->rows, sizeof *h->results);
    if (!h->depth || !h->anc || !h->results) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_eagle3_load: out of memory");
        goto fail;
    }
    *out = h;
    return HS_OK;
fail:
    hs_eagle3_destroy(h);
    return st;
}

void hs_eagle3_destroy(hs_eagle3 *h) {
    if (!h) return;
    for (ptrdiff_t i = 0; i < stbds_arrlen(h->graphs); i++)
        hs_vk_seq_destroy(h->graphs[i].seq);
    stbds_arrfree(h->graphs);
    hs_weight *w[] = {h->fc, h->qkv_e, h->qkv_x, h->wo, h->gu, h->wdown, h->out};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++)
        hs_weight_destroy(w[i]);
    hs_vk_buffer *bufs[] = {h->vecs, h->k_cache, h->v_cache, h->fcin,   h->x,      h->e,    h->qkv,
                            h->q,    h->att,     h->gub,     h->xs,     h->xn,     h->logits, h->hidden,
                            h->step, h->records};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++)
        hs_vk_buffer_destroy(bufs[i]);
    free(h->d2t);
    free(h->depth);
    free(h->anc);
    free(h->results);
    free(h);
}

const hs_eagle3_config *hs_eagle3_cfg(const hs_eagle3 *h) { return &h->cfg; }
uint32_t hs_eagle3_top_k(const hs_eagle3 *h) { return h->top_k; }
uint32_t hs_eagle3_n_past(const hs_eagle3 *h) { return h->n_past; }
uint32_t hs_eagle3_n_slots(const hs_eagle3 *h) { return h->n_slots; }
uint32_t hs_eagle3_max_nodes(const hs_eagle3 *h) { return h->max_nodes; }
uint32_t hs_eagle3_last_dispatches(const hs_eagle3 *h) { return h->last_dispatches; }
uint64_t hs_eagle3_weight_bytes(const hs_eagle3 *h) { return h->weight_bytes; }

bool hs_eagle3_quantized(const hs_eagle3 *h) { return h->q4_1; }
uint32_t hs_eagle3_graph_count(const hs_eagle3 *h) { return (uint32_t)stbds_arrlen(h->graphs); }
void hs_eagle3_reset(hs_eagle3 *h) {
    h->n_past = 0;
    h->n_slots = 0;
    h->have_root = false;
}
void hs_eagle3_reset_tree(hs_eagle3 *h) { h->n_slots = 0; }

/* ---- graphs ---- */

/* The bindings of the layer's activations for cap rows (rp points at freqs;
 * xn: x8n of x, unbound without the buffer). */
typedef struct layer_io {
    hs_vk_binding x, e, qkv, q, att, gu, xn, pos, rows, info, freqs;
    hs_rope_params rp;
    hs_kv_layer kv;
} layer_io;

static void layer_bindings(hs_eagle3 *h, uint32_t cap, layer_io *out) {
    const hs_eagle3_config *c = &h->cfg;
    const uint32_t q_dim = c->n_head * c->head_dim, kv_dim = c->n_kv_head * c->head_dim;
    const uint64_t n = cap;
    layer_io io = {.x = B(h->x, 0, n * c->dim * 4),
                   .e = B(h->e, 0, n * c->dim * 4),
                   .qkv = B(h->qkv, 0, n * (q_dim + 2 * kv_dim) * 4),
                   .q = B(h->q, 0, n * q_dim * 4),
                   .att = B(h->att, 0, n * q_dim * 4),
                   .gu = B(h->gub, 0, n * 2 * c->ff * 4),
                   .xn = B(h->xn, 0, n * (c->dim / 32) * 80),
                   .pos = B(h->step, h->off_pos, n * 4),
                   .rows = B(h->step, h->off_rows, n * 4),
                   .info = B(h->step, h->off_info, HS_ATTN_INFO_COLS_WORDS * 4),
                   .freqs = vec(h, VEC_FREQS, c->head_dim / 2)};
    const uint64_t cache_bytes = (uint64_t)h->n_ctx * kv_dim * 4;
    io.kv = (hs_kv_layer){.k = B(h->k_cache, 0, cache_bytes),
                          .v = B(h->v_cache, 0, cache_bytes),
                          .type = HS_TYPE_F32,
                          .n_ctx = h->n_ctx,
                          .n_kv_head = c->n_kv_head,
                          .head_dim = c->head_dim};
    *out = io;
    out->rp = (hs_rope_params){.n_rot = c->head_dim,
                               .mode = HS_ROPE_NEOX,
                               .freq_base = c->rope_base,
                               .freq_scale = 1.0f,
                               .freqs = &out->freqs};
}

/* Whether product w can read x8n of its input from xn (on 8-bit activations, with the buffer), as the
 * target's products do (models/llama.c reads_x8n). */
static bool reads_x8n(const hs_eagle3 *h, const hs_weight *w) {
    const hs_matmul_opts o = {.act_q8 = h->act_q8};
    return h->xn && hs_matmul_act_q8(w, &o);
}

/* The layer's first half over cap rows whose residual stream x and
 * embeddings e are in place: Q/K/V, then RoPE with the K/V cache write. All a
 * row's later rows need from it is what this writes to the cache. x8n: the
 * hidden half reads x8n of x from xn (written by the fc product) instead of
 * running its own activation pass; the same bits. */
static hs_status record_qkv(hs_eagle3 *h, hs_vk_seq *s, uint32_t cap, const layer_io *io, bool x8n) {
    hs_status st = HS_OK;
    const hs_eagle3_config *c = &h->cfg;
    hs_ops *ops = h->ops;
    /* qkv = Wqkv [rmsnorm(e) attn_norm, rmsnorm(x) hidden_norm]: the
     * embedding half, then the hidden half added to it. */
    const hs_vk_binding xs = B(h->xs, 0, 0);
    hs_matmul_opts ne = {
        .prologue = HS_MATMUL_RMSNORM, .norm = vec(h, VEC_ATTN_NORM, c->dim), .eps = c->eps, .scratch = xs,
        .act_q8 = h->act_q8};
    HS_TRY(hs_op_matmul(ops, s, h->qkv_e, io->e, cap, io->qkv, &ne));
    hs_matmul_opts nx = {.prologue = HS_MATMUL_RMSNORM,
                         .norm = vec(h, VEC_HIDDEN_NORM, c->dim),
                         .eps = c->eps,
                         .residual = true,
                         .res = io->qkv,
                         .scratch = xs,
                         .act_q8 = h->act_q8};
    hs_vk_binding x = io->x;
    if (x8n) {
        nx.x_q8 = true;
        nx.scratch = (hs_vk_binding){0};
        x = io->xn;
    }
    HS_TRY(hs_op_matmul(ops, s, h->qkv_x, x, cap, io->qkv, &nx));
    HS_TRY(hs_op_rope_kv(ops, s, &io->qkv, &io->pos, &io->rows, &io->q, &io->kv, cap, c->n_head, &io->rp));
fail:
    return st;
}

/* The decoder layer over cap rows whose residual stream x and embeddings e
 * are in place (io: the caller's layer_bindings for cap): Q/K/V, RoPE + KV
 * write, attention (mask over n_cols tree columns), output projection, MLP;
 * x8n as record_qkv. */
static hs_status record_layer(hs_eagle3 *h, hs_vk_seq *s, uint32_t cap, const layer_io *io, uint32_t n_cols,
                              bool x8n) {
    hs_status st = HS_OK;
    const hs_eagle3_config *c = &h->cfg;
    hs_ops *ops = h->ops;
    hs_vk_binding mask = B(h->step, h->off_mask, (uint64_t)cap * hs_attn_mask_words(n_cols) * 4);
    HS_TRY(record_qkv(h, s, cap, io, x8n));
    /* The output projection and the MLP with the target's 8-bit fusions (hs_model_plan_mlp): the
     * fused forms are bitwise the passes they replace, so the drafts do not depend on them. */
    hs_model_mlp mp;
    hs_model_plan_mlp(&(hs_model_mlp_in){.wo = h->wo,
                                         .gu = h->gu,
                                         .wdown = h->wdown,
                                         .gu_stacked = true,
                                         .gu_x8n = reads_x8n(h, h->gu),
                                         .head_dim = c->head_dim,
                                         .ff = c->ff,
                                         .h = io->x,
                                         .att = io->att,
                                         .gu_out = io->gu,
                                         .xs = B(h->xs, 0, 0),
                                         .xn = io->xn,
                                         .ffn_norm = vec(h, VEC_FFN_NORM, c->dim),
                                         .eps = c->eps,
                                         .act_q8 = h->act_q8},
                      &mp);
    HS_TRY((mp.att_q8 ? hs_op_attention_cols_q8 : hs_op_attention_cols)(
        ops, s, &io->q, &io->kv, c->n_head, &io->info, &mask, cap, n_cols, 1.0f / sqrtf((float)c->head_dim),
        &mp.att_out));
    HS_TRY(hs_op_matmul(ops, s, h->wo, mp.wo_x, cap, io->x, &mp.wo));
    HS_TRY(hs_op_matmul(ops, s, h->gu, mp.gu_x, cap, io->gu, &mp.gu));
    HS_TRY(hs_op_matmul(ops, s, h->wdown, mp.down_x, cap, io->x, &mp.down));
fail:
    return st;
}

/* logits [n] = Wout rmsnorm(rows) output_norm, then their Top-K records. */
static hs_status record_head(hs_eagle3 *h, hs_vk_seq *s, hs_vk_binding rows, uint32_t n) {
    hs_status st = HS_OK;
    const hs_eagle3_config *c = &h->cfg;
    hs_vk_binding logits = B(h->logits, 0, (uint64_t)n * c->n_draft_vocab * 4);
    hs_matmul_opts no = {.prologue = HS_MATMUL_RMSNORM,
                         .norm = vec(h, VEC_OUTPUT_NORM, c->dim),
                         .eps = c->eps,
                         .scratch = B(h->xs, 0, 0),
                         .act_q8 = h->act_q8};
    HS_TRY(hs_op_matmul(h->ops, s, h->out, rows, n, logits, &no));
    hs_vk_binding rec = B(h->records, 0, hs_topk_out_bytes(n, h->top_k));
    HS_TRY(hs_op_topk(h->ops, s, &logits, n, c->n_draft_vocab, h->top_k, 1.0f, &rec));
fail:
    return st;
}

/* Consume of cap rows: taps (gathered by slot, ids_a) -> fc -> x; the layer;
 * the last live row (ids_b[0]) -> hidden slot 0 -> its Top-K. A cache-only
 * consume stops after the layer's K/V cache write. */
static hs_status record_consume(hs_eagle3 *h, hs_vk_seq *s, uint32_t cap, bool cache_only) {
    hs_status st = HS_OK;
    const hs_eagle3_config *c = &h->cfg;
    const uint32_t fc_cols = HS_LLAMA_TAPS * c->target_dim;
    hs_vk_binding ids_a = B(h->step, h->off_ids_a, (uint64_t)cap * 4), ids_b = B(h->step, h->off_ids_b, 4);
    hs_vk_binding tokens = B(h->step, h->off_tokens, (uint64_t)cap * 4);
    hs_vk_binding fcin = B(h->fcin, 0, (uint64_t)cap * fc_cols * 4);
    layer_io io;
    layer_bindings(h, cap, &io);
    hs_vk_binding root = B(h->hidden, 0, (uint64_t)c->dim * 4);
    hs_gather_rows taps = {.src = h->taps,
                           .src_rows = h->tap_rows,
                           .src_stride = fc_cols,
                           .dst = fcin,
                           .dst_rows = cap,
                           .dst_stride = fc_cols,
                           .cols = fc_cols,
                           .src_ids = &ids_a};
    HS_TRY(hs_op_gather_rows(h->ops, s, &taps, cap));
    /* On 8-bit activations fc writes x8n of its output for the hidden half's deferred norm. */
    hs_matmul_opts fc = {.scratch = B(h->xs, 0, 0), .act_q8 = h->act_q8};
    const bool x8n = reads_x8n(h, h->qkv_x);
    if (x8n) {
        fc.q8_out = io.xn;
        fc.q8_norm = vec(h, VEC_HIDDEN_NORM, c->dim);
    }
    HS_TRY(hs_op_matmul(h->ops, s, h->fc, fcin, cap, io.x, &fc));
    HS_TRY(hs_op_get_rows(h->ops, s, h->tok_embd, tokens, cap, io.e));
    if (cache_only) return record_qkv(h, s, cap, &io, x8n);
    HS_TRY(record_layer(h, s, cap, &io, cap, x8n));
    hs_gather_rows last = {.src = io.x,
                           .src_rows = cap,
                           .src_stride = c->dim,
                           .dst = root,
                           .dst_rows = 1,
                           .dst_stride = c->dim,
                           .cols = c->dim,
                           .src_ids = &ids_b};
    HS_TRY(hs_op_gather_rows(h->ops, s, &last, 1));
    HS_TRY(record_head(h, s, root, 1));
fail:
    return st;
}

/* A draft level of cap rows: parents' hidden states (ids_a) -> x; the layer
 * (mask over max_nodes tree columns); x -> the new slots (ids_b); Top-K of
 * every row. */
static hs_status record_draft(hs_eagle3 *h, hs_vk_seq *s, uint32_t cap) {
    hs_status st = HS_OK;
    const hs_eagle3_config *c = &h->cfg;
    hs_vk_binding ids_a = B(h->step, h->off_ids_a, (uint64_t)cap * 4);
    hs_vk_binding ids_b = B(h->step, h->off_ids_b, (uint64_t)cap * 4);
    hs_vk_binding tokens = B(h->step, h->off_tokens, (uint64_t)cap * 4);
    layer_io io;
    layer_bindings(h, cap, &io);
    hs_vk_binding hidden = B(h->hidden, 0, (1ull + h->max_nodes) * c->dim * 4);
    hs_gather_rows in = {.src = hidden,
                         .src_rows = 1 + h->max_nodes,
                         .src_stride = c->dim,
                         .dst = io.x,
                         .dst_rows = cap,
                         .dst_stride = c->dim,
                         .cols = c->dim,
                         .src_ids = &ids_a};
    HS_TRY(hs_op_gather_rows(h->ops, s, &in, cap));
    HS_TRY(hs_op_get_rows(h->ops, s, h->tok_embd, tokens, cap, io.e));
    HS_TRY(record_layer(h, s, cap, &io, h->max_nodes, false));
    hs_gather_rows keep = {.src = io.x,
                           .src_rows = cap,
                           .src_stride = c->dim,
                           .dst = hidden,
                           .dst_rows = 1 + h->max_nodes,
                           .dst_stride = c->dim,
                           .cols = c->dim,
                           .dst_ids = &ids_b};
    HS_TRY(hs_op_gather_rows(h->ops, s, &keep, cap));
    HS_TRY(record_head(h, s, io.x, cap));
fail:
    return st;
}

static hs_status get_graph(hs_eagle3 *h, eagle3_kind kind, uint32_t cap, eagle3_graph **out) {
    hs_status st = HS_OK;
    for (ptrdiff_t i = 0; i < stbds_arrlen(h->graphs); i++)
        if (h->graphs[i].kind == kind && h->graphs[i].cap == cap) {
            *out = &h->graphs[i];
            return HS_OK;
        }
    eagle3_graph gr = {.kind = kind, .cap = cap};
    HS_TRY(hs_vk_seq_create(h->vk, &gr.seq));
    st = hs_vk_seq_begin(gr.seq);
    if (st == HS_OK)
        st = kind == EAGLE3_DRAFT ? record_draft(h, gr.seq, cap)
                                  : record_consume(h, gr.seq, cap, kind == EAGLE3_CONSUME_CACHE);
    if (st == HS_OK) st = hs_vk_seq_end(gr.seq);
    if (st != HS_OK) {
        hs_vk_seq_destroy(gr.seq);
        return st;
    }
    stbds_arrput(h->graphs, gr);
    *out = &h->graphs[stbds_arrlen(h->graphs) - 1];
fail:
    return st;
}

/* The capacity buckets of a consume of n rows and of a draft level of w nodes. */
static uint32_t consume_cap(const hs_eagle3 *h, uint32_t n) { return hs_model_bucket(n, h->max_batch); }
static uint32_t draft_cap(const hs_eagle3 *h, uint32_t w) { return hs_model_bucket(w, h->max_nodes); }

hs_status hs_eagle3_prepare(hs_eagle3 *h, uint32_t max_rows, uint32_t max_width) {
    hs_status st = HS_OK;
    eagle3_graph *gr;
    for (uint32_t n = 1; n <= max_rows && n <= h->max_batch; n++) { /* a bucket's later sizes find its graph */
        HS_TRY(get_graph(h, EAGLE3_CONSUME, consume_cap(h, n), &gr));
        HS_TRY(get_graph(h, EAGLE3_CONSUME_CACHE, consume_cap(h, n), &gr));
    }
    for (uint32_t w = 1; w <= max_width && w <= h->max_nodes; w++)
        HS_TRY(get_graph(h, EAGLE3_DRAFT, draft_cap(h, w), &gr));
fail:
    return st;
}

/* Flushes the step data of cap rows (mask rows of `words`), runs the graph and
 * unpacks n Top-K records into h->results with target ids. */
static hs_status run(hs_eagle3 *h, eagle3_kind kind, uint32_t cap, uint32_t words, uint32_t n) {
    hs_status st = HS_OK;
    /* Everything written above -> visible to the graph's dispatches. */
    HS_TRY(hs_vk_buffer_flush(h->step, 0, h->off_mask + (uint64_t)cap * words * 4));
    eagle3_graph *gr;
    HS_TRY(get_graph(h, kind, cap, &gr));
    HS_TRY(hs_vk_seq_submit(gr->seq));
    h->last_dispatches = hs_vk_seq_dispatch_count(gr->seq);
    if (n == 0) return HS_OK; /* a cache-only consume: no records */
    /* The Top-K records -> visible to the host. */
    HS_TRY(hs_vk_buffer_invalidate(h->records, 0, hs_topk_out_bytes(n, h->top_k)));
    const void *rec = hs_vk_buffer_map(h->records);
    for (uint32_t i = 0; i < n; i++) {
        hs_topk_result *r = &h->results[i];
        hs_topk_unpack(rec, h->top_k, i, r);
        for (uint32_t j = 0; j < r->k; j++)
            if (r->ids[j] < h->cfg.n_draft_vocab)
                r->ids[j] = (uint32_t)((int32_t)r->ids[j] + h->d2t[r->ids[j]]);
    }
fail:
    return st;
}

/* ---- consume and draft ---- */

/* The host-written arrays of the step buffer, the mask cleared for cap rows. */
typedef struct step_view {
    int32_t *tok, *pos;
    uint32_t *rows, *ids_a, *ids_b, *info, *mask;
} step_view;

static step_view step_open(hs_eagle3 *h, uint32_t cap, uint32_t words) {
    uint8_t *step = hs_vk_buffer_map(h->step);
    HS_ASSERT(step);
    step_view v = {(int32_t *)(step + h->off_tokens), (int32_t *)(step + h->off_pos),
                   (uint32_t *)(step + h->off_rows),   (uint32_t *)(step + h->off_ids_a),
                   (uint32_t *)(step + h->off_ids_b), (uint32_t *)(step + h->off_info),
                   (uint32_t *)(step + h->off_mask)};
    memset(v.mask, 0, (size_t)cap * words * 4);
    return v;
}

static hs_status consume(hs_eagle3 *h, const uint32_t *tap_slots, const int32_t *next_tokens, uint32_t n,
                         bool cache_only, const char *fn) {
    hs_status st = HS_OK;
    if (n == 0 || n > h->max_batch)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: %u rows (batch limit %u)", fn, n, h->max_batch);
    if ((uint64_t)h->n_past + n > h->n_ctx)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "%s: head context full: %u + %u rows exceed %u", fn, h->n_past, n,
                       h->n_ctx);
    for (uint32_t i = 0; i < n; i++) {
        if (tap_slots[i] >= h->tap_rows)
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: tap slot %u of row %u is past the target's %u", fn,
                           tap_slots[i], i, h->tap_rows);
        if (next_tokens[i] < 0 || (uint32_t)next_tokens[i] >= h->cfg.n_vocab)
            return HS_FAIL(HS_ERR_INVALID_ARG, "%s: token %d of row %u is out of the vocabulary (%u)", fn,
                           next_tokens[i], i, h->cfg.n_vocab);
    }
    /* Rows n .. cap-1 of the bucket are inert: no taps (zeros), token 0, a
     * cache row the KV write skips, and no live query. */
    const uint32_t cap = consume_cap(h, n), words = hs_attn_mask_words(cap);
    const step_view v = step_open(h, cap, words);
    int32_t *tok = v.tok, *pos = v.pos;
    uint32_t *rows = v.rows, *ids_a = v.ids_a, *ids_b = v.ids_b, *info = v.info, *mask = v.mask;
    for (uint32_t i = 0; i < cap; i++) {
        const bool live = i < n;
        tok[i] = live ? next_tokens[i] : 0;
        pos[i] = (int32_t)(h->n_past + (live ? i : 0));
        rows[i] = live ? h->n_past + i : UINT32_MAX;
        ids_a[i] = live ? tap_slots[i] : UINT32_MAX;
        /* Causal: row i sees the committed rows and rows 0 .. i of this call. */
        for (uint32_t j = 0; live && j <= i; j++)
            mask[(size_t)i * words + j / 32] |= 1u << (j % 32);
    }
    ids_b[0] = n - 1;
    info[HS_ATTN_INFO_N_PREFIX] = h->n_past;
    info[HS_ATTN_INFO_N_USED] = n;
    info[HS_ATTN_INFO_N_LIVE] = n;
    HS_TRY(run(h, cache_only ? EAGLE3_CONSUME_CACHE : EAGLE3_CONSUME, cap, words, cache_only ? 0 : 1));
    h->n_past += n;
    h->n_slots = 0;
    h->have_root = !cache_only;
fail:
    return st;
}

hs_status hs_eagle3_consume(hs_eagle3 *h, const uint32_t *tap_slots, const int32_t *next_tokens, uint32_t n,
                            const hs_topk_result **root) {
    hs_status st = HS_OK;
    HS_TRY(consume(h, tap_slots, next_tokens, n, false, "hs_eagle3_consume"));
    if (root) *root = &h->results[0];
fail:
    return st;
}

hs_status hs_eagle3_consume_cache(hs_eagle3 *h, const uint32_t *tap_slots, const int32_t *next_tokens,
                                  uint32_t n) {
    return consume(h, tap_slots, next_tokens, n, true, "hs_eagle3_consume_cache");
}

hs_status hs_eagle3_draft(hs_eagle3 *h, const uint32_t *parent_slots, const int32_t *tokens, uint32_t w,
                          const hs_topk_result **topk) {
    hs_status st = HS_OK;
    if (h->n_past == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_eagle3_draft: nothing consumed yet, so there is no root");
    if (!h->have_root)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "hs_eagle3_draft: the last consume was cache-only, so there is no root output");
    if (w == 0 || w > h->max_nodes - h->n_slots)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_eagle3_draft: %u nodes, but %u of max_nodes %u are drafted", w,
                       h->n_slots, h->max_nodes);
    /* Slot s keeps its K/V at cache row n_past + s - 1. */
    if ((uint64_t)h->n_past + h->n_slots + w > h->n_ctx)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE,
                       "hs_eagle3_draft: head context full: %u rows + %u nodes exceed %u", h->n_past,
                       h->n_slots + w, h->n_ctx);
    const uint32_t first = h->n_slots + 1; /* slot of node 0 */
    for (uint32_t i = 0; i < w; i++) {
        if (parent_slots[i] >= first)
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "hs_eagle3_draft: node %u: parent slot %u is not drafted yet (slots 0 .. %u)", i,
                           parent_slots[i], first - 1);
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= h->cfg.n_vocab)
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "hs_eagle3_draft: token %d of node %u is out of the vocabulary (%u)", tokens[i], i,
                           h->cfg.n_vocab);
    }
    const uint32_t cap = draft_cap(h, w), words = h->node_words;
    const step_view v = step_open(h, cap, words);
    int32_t *tok = v.tok, *pos = v.pos;
    uint32_t *rows = v.rows, *ids_a = v.ids_a, *ids_b = v.ids_b, *info = v.info, *mask = v.mask;
    for (uint32_t i = 0; i < cap; i++) {
        if (i >= w) { /* inert: zeros in, nothing kept, no live query */
            tok[i] = 0;
            pos[i] = (int32_t)h->n_past;
            rows[i] = ids_a[i] = ids_b[i] = UINT32_MAX;
            continue;
        }
        const uint32_t s = first + i, p = parent_slots[i];
        /* Ancestors and self, as columns (slot s is column s - 1; the root,
         * slot 0, is the last committed row, inside the prefix). */
        h->depth[s] = h->depth[p] + 1;
        uint32_t *a = h->anc + (size_t)s * words;
        if (p)
            memcpy(a, h->anc + (size_t)p * words, words * 4);
        else
            memset(a, 0, words * 4);
        a[(s - 1) / 32] |= 1u << ((s - 1) % 32);
        memcpy(mask + (size_t)i * words, a, words * 4);
        tok[i] = tokens[i];
        pos[i] = (int32_t)(h->n_past - 1 + h->depth[s]);
        rows[i] = h->n_past + s - 1;
        ids_a[i] = p;
        ids_b[i] = s;
    }
    info[HS_ATTN_INFO_N_PREFIX] = h->n_past;
    info[HS_ATTN_INFO_N_USED] = h->n_slots + w;
    info[HS_ATTN_INFO_N_LIVE] = w;
    HS_TRY(run(h, EAGLE3_DRAFT, cap, words, w));
    h->n_slots += w;
    if (topk) *topk = h->results;
fail:
    return st;
}
