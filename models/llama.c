/* llama: weights, KV cache and the recorded forward graph. */
#include "llama.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model_util.h"
#include "op_attn.h"
#include "op_matmul.h"
#include "op_select.h"

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

/* A product of several GGUF matrices with the same input, whose outputs lie
 * side by side in one [n][rows] buffer (Q, K, V; gate, up). Consecutive
 * matrices of one type are stacked into one weight (one dispatch); a change of
 * type starts another part, written into its slice of the rows with a strided
 * output (Q4_K_M files keep V, or some FFN matrices, in another type). Every
 * output is the same chain either way, so stacking does not change results. */
#define LLAMA_MAX_PARTS 3
typedef struct llama_proj {
    uint32_t n_parts;
    hs_weight *w[LLAMA_MAX_PARTS];
    uint32_t row0[LLAMA_MAX_PARTS]; /* first output row of each part */
    uint32_t rows;                  /* output rows of all parts */
} llama_proj;

typedef struct llama_layer {
    llama_proj qkv;   /* (q_dim + 2 kv_dim, dim): Q, K, V */
    hs_weight *wo;    /* (dim, q_dim) */
    llama_proj gu;    /* (2 ff, dim): gate, up */
    hs_weight *wdown; /* (dim, ff) */
} llama_layer;

/* One recorded batch shape: the layers over n rows (none for a head-only
 * graph), then the output head over rows out0 .. out0 + n_out - 1 of h, whose
 * logits and argmax land at rows dst0 .. dst0 + n_out - 1. */
typedef struct llama_graph {
    uint32_t n;
    bool layers;
    uint32_t out0, n_out, dst0;
    hs_vk_seq *seq;
} llama_graph;

struct hs_llama {
    hs_ops *ops;
    hs_vk_ctx *vk;
    hs_llama_config cfg;
    uint32_t n_ctx, max_batch, n_past;

    hs_weight *tok_embd; /* (n_vocab, dim) */
    hs_weight *output;   /* (n_vocab, dim); NULL when tied to tok_embd */
    llama_layer *layers; /* (n_layer) */
    /* f32 vectors, each at a multiple of `slot` bytes: attn_norm and ffn_norm
     * per layer, output_norm, then the RoPE frequency table. */
    hs_vk_buffer *vecs;
    uint64_t slot;

    hs_vk_buffer *k_cache, *v_cache; /* (n_layer, n_ctx, n_kv_head, head_dim) of kv_type */
    hs_type kv_type;                  /* HS_TYPE_F32 or HS_TYPE_F16 */
    uint64_t layer_bytes;
    uint32_t kv_windows; /* bindings per layer's cache (hs_kv_split_plan); 1: unsplit */

    /* Activations for max_batch tokens. */
    hs_vk_buffer *h;      /* (max_batch, dim) */
    hs_vk_buffer *qkv;    /* (max_batch, q_dim + 2 kv_dim) */
    hs_vk_buffer *q;      /* (max_batch, q_dim) */
    hs_vk_buffer *att;    /* (max_batch, q_dim) */
    hs_vk_buffer *gu;     /* (max_batch, 2 ff) */
    hs_vk_buffer *xs;     /* (max_batch, max(dim, ff)): the products' split prologue (x') */
    hs_vk_buffer *xn;     /* (max_batch, dim / 32 blocks of 80 bytes): x8n of h, the input of the
                           * RMSNorm products on 8-bit activations (NULL when dim % 32 != 0) */
    hs_vk_buffer *logits; /* (max_batch, n_vocab), host visible */
    hs_vk_buffer *mask;   /* (max_batch, mask words) */
    hs_vk_buffer *depth;  /* (max_batch) */
    hs_vk_buffer *taps;   /* (max_batch, HS_LLAMA_TAPS, dim) when taps are on */
    uint32_t tap_layers[HS_LLAMA_TAPS];
    /* The last eval left uncommitted (a tree): its size and parents, for
     * hs_llama_accept; 0 when there is none. */
    uint32_t pending;
    int32_t *pending_parents; /* (max_batch) */
    hs_vk_seq *gather;        /* recorded KV compaction of hs_llama_accept */
    /* Host-visible step data written before each submit, at `slot`-aligned
     * offsets: tokens, pos, rows, parents (max_batch each), info, argmax.
     * The host writes everything before argmax and the device writes argmax;
     * a slot is a multiple of 256, the largest nonCoherentAtomSize, so the
     * two never share an atom of flush or invalidate. */
    hs_vk_buffer *step;
    uint64_t off_tokens, off_pos, off_rows, off_parents, off_info, off_argmax, off_gather;

    llama_graph *graphs; /* stb_ds array */
    uint32_t last_n;     /* rows of the last eval (hs_llama_head's range); 0 before the first */
    uint32_t last_dispatches;
    uint64_t weight_bytes;
};

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

hs_status hs_llama_config_read(const hs_gguf *g, hs_llama_config *c) {
    hs_status st = HS_OK;
    memset(c, 0, sizeof *c);
    const char *arch = NULL;
    HS_TRY(hs_gguf_architecture(g, &arch));
    if (strcmp(arch, "llama") != 0)
        return HS_FAIL(HS_ERR_FORMAT, "%s: architecture '%s' is not supported by the llama loader",
                       hs_gguf_name(g), arch);
    snprintf(c->arch, sizeof c->arch, "%s", arch);
    char key[128];
#define GET_U32(name, field)                                                                       \
    snprintf(key, sizeof key, "%s." name, arch);                                               \
    HS_TRY(hs_gguf_get_u32(g, key, &c->field))
    GET_U32("embedding_length", dim);
    GET_U32("block_count", n_layer);
    GET_U32("attention.head_count", n_head);
    GET_U32("feed_forward_length", ff);
    GET_U32("context_length", n_ctx_train);
#undef GET_U32
    snprintf(key, sizeof key, "%s.attention.head_count_kv", arch);
    if (hs_gguf_find_key(g, key)) HS_TRY(hs_gguf_get_u32(g, key, &c->n_kv_head));
    else c->n_kv_head = c->n_head;
    snprintf(key, sizeof key, "%s.attention.layer_norm_rms_epsilon", arch);
    HS_TRY(hs_gguf_get_f32(g, key, &c->eps));
    if (c->n_head == 0 || c->dim % c->n_head || c->n_kv_head == 0 || c->n_head % c->n_kv_head)
        return HS_FAIL(HS_ERR_FORMAT, "%s: bad head counts (dim %u, heads %u, kv heads %u)", hs_gguf_name(g),
                       c->dim, c->n_head, c->n_kv_head);
    c->head_dim = c->dim / c->n_head;
    c->n_rot = c->head_dim;
    snprintf(key, sizeof key, "%s.rope.dimension_count", arch);
    if (hs_gguf_find_key(g, key)) HS_TRY(hs_gguf_get_u32(g, key, &c->n_rot));
    c->rope_base = 10000.0f;
    snprintf(key, sizeof key, "%s.rope.freq_base", arch);
    if (hs_gguf_find_key(g, key)) HS_TRY(hs_gguf_get_f32(g, key, &c->rope_base));
    c->rope_scale = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scale_linear", arch);
    if (hs_gguf_find_key(g, key)) {
        float s;
        HS_TRY(hs_gguf_get_f32(g, key, &s));
        if (s > 0) c->rope_scale = 1.0f / s;
    }
    if (c->n_rot == 0 || c->n_rot > c->head_dim || c->n_rot % 2)
        return HS_FAIL(HS_ERR_FORMAT, "%s: rope dimension %u does not fit head_dim %u", hs_gguf_name(g), c->n_rot,
                       c->head_dim);
    c->rope_mode = HS_ROPE_NORMAL; /* llama.cpp's converter permutes Q/K for adjacent pairs */
    const hs_gguf_tensor *emb = hs_gguf_find_tensor(g, "token_embd.weight");
    if (!emb) return HS_FAIL(HS_ERR_FORMAT, "%s: tensor token_embd.weight missing", hs_gguf_name(g));
    if (emb->ne[0] != c->dim)
        return HS_FAIL(HS_ERR_FORMAT, "%s: token_embd.weight has %lld columns, expected dim %u", hs_gguf_name(g),
                       (long long)emb->ne[0], c->dim);
    c->n_vocab = (uint32_t)emb->ne[1];
    c->tied_output = hs_gguf_find_tensor(g, "output.weight") == NULL;
fail:
    return st;
}

/* Loads count matrices (rows[i] x cols) as one llama_proj: runs of one type
 * stacked. */
static hs_status load_proj(hs_llama *m, const hs_gguf *g, const char *const *names, uint32_t count,
                           const uint32_t *rows, uint32_t cols, llama_proj *out) {
    hs_status st = HS_OK;
    const hs_gguf_tensor *t[LLAMA_MAX_PARTS];
    memset(out, 0, sizeof *out);
    for (uint32_t i = 0; i < count; i++)
        HS_TRY(hs_model_matrix(g, names[i], rows[i], cols, &t[i]));
    for (uint32_t i = 0, row = 0; i < count;) {
        uint32_t e = i + 1;
        while (e < count && t[e]->type == t[i]->type) e++;
        const void *data[LLAMA_MAX_PARTS];
        for (uint32_t k = i; k < e; k++) data[k - i] = t[k]->data;
        hs_weight **w = &out->w[out->n_parts];
        if (e - i == 1) HS_TRY(hs_weight_create(m->ops, (hs_type)t[i]->type, rows[i], cols, data[0], w));
        else HS_TRY(hs_weight_create_stacked(m->ops, (hs_type)t[i]->type, cols, e - i, rows + i, data, w));
        m->weight_bytes += hs_weight_device_bytes(*w);
        out->row0[out->n_parts++] = row;
        for (uint32_t k = i; k < e; k++) row += rows[k];
        out->rows = row;
        i = e;
    }
fail:
    return st;
}

static void proj_destroy(llama_proj *p) {
    for (uint32_t i = 0; i < p->n_parts; i++) hs_weight_destroy(p->w[i]);
    memset(p, 0, sizeof *p);
}

/* y[n][p->rows] = the parts' products, each into its slice of the rows. When
 * the first part computes x' (f32) into the scratch buffer, the others read
 * it; with a part on 8-bit activations, each part computes its own. */
static hs_status proj_matmul(hs_ops *ops, hs_vk_seq *s, const llama_proj *p, hs_vk_binding x, uint32_t n,
                             hs_vk_binding y, const hs_matmul_opts *opt) {
    hs_status st = HS_OK;
    bool split = hs_matmul_splits(ops, p->w[0], n, opt);
    for (uint32_t i = 0; i < p->n_parts; i++)
        if (hs_matmul_act_q8(p->w[i], opt)) split = false;
    for (uint32_t i = 0; i < p->n_parts; i++) {
        hs_matmul_opts o = opt ? *opt : (hs_matmul_opts){0};
        if (split && i > 0) {
            x = o.scratch;
            o.prologue = HS_MATMUL_PLAIN;
        }
        const uint64_t skip = (uint64_t)p->row0[i] * 4;
        o.y_stride = p->rows;
        hs_vk_binding yi = {y.buf, y.offset + skip, y.range ? y.range - skip : 0};
        if (o.residual) o.res = (hs_vk_binding){o.res.buf, o.res.offset + skip, o.res.range ? o.res.range - skip : 0};
        HS_TRY(hs_op_matmul(ops, s, p->w[i], x, n, yi, &o));
    }
fail:
    return st;
}

static hs_status upload_vec(hs_llama *m, const hs_gguf *g, const char *name, uint32_t n, uint32_t slot_index) {
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, name);
    if (!t) return HS_FAIL(HS_ERR_FORMAT, "%s: tensor %s missing", hs_gguf_name(g), name);
    if (t->type != HS_GGML_TYPE_F32 || hs_gguf_tensor_nelements(t) != n)
        return HS_FAIL(HS_ERR_FORMAT, "%s: tensor %s must be f32 [%u]", hs_gguf_name(g), name, n);
    return hs_vk_buffer_upload(m->vecs, m->slot * slot_index, t->data, (uint64_t)n * 4);
}

static hs_vk_binding vec_binding(const hs_llama *m, uint32_t slot_index, uint32_t n) {
    return (hs_vk_binding){m->vecs, m->slot * slot_index, (uint64_t)n * 4};
}

static hs_status alloc(hs_llama *m, uint64_t bytes, hs_mem mem, hs_vk_buffer **b) {
    return hs_vk_buffer_create(m->vk, bytes ? bytes : 4, mem, b);
}

hs_status hs_llama_load(hs_ops *ops, const hs_gguf *g, const hs_llama_options *opt, hs_llama **out) {
    hs_status st = HS_OK;
    *out = NULL;
    hs_llama *m = calloc(1, sizeof *m);
    if (!m) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_llama_load: out of memory");
    m->ops = ops;
    m->vk = hs_ops_vk(ops);
    HS_TRY(hs_llama_config_read(g, &m->cfg));
    const hs_llama_config *c = &m->cfg;
    const hs_vk_caps *caps = hs_ops_caps(ops);
    m->n_ctx = opt && opt->n_ctx ? opt->n_ctx : (c->n_ctx_train < 4096 ? c->n_ctx_train : 4096);
    m->max_batch = opt && opt->max_batch ? opt->max_batch : 512;
    if (m->max_batch > m->n_ctx) m->max_batch = m->n_ctx;
    m->kv_type = opt ? opt->kv_type : HS_TYPE_F32;
    if (m->kv_type != HS_TYPE_F32 && m->kv_type != HS_TYPE_F16) {
        st = HS_FAIL(HS_ERR_INVALID_ARG, "hs_llama_load: KV cache type %s (f32 or f16 only)",
                     hs_type_name(m->kv_type));
        goto fail;
    }
    const uint32_t q_dim = c->n_head * c->head_dim, kv_dim = c->n_kv_head * c->head_dim;

    /* Weights. */
    const hs_gguf_tensor *emb;
    HS_TRY(hs_model_matrix(g, "token_embd.weight", c->n_vocab, c->dim, &emb));
    HS_TRY(hs_weight_create(ops, (hs_type)emb->type, c->n_vocab, c->dim, emb->data, &m->tok_embd));
    m->weight_bytes += hs_weight_device_bytes(m->tok_embd);
    if (!c->tied_output) {
        HS_TRY(hs_model_load_matrix(m->ops, g, "output.weight", c->n_vocab, c->dim, &m->output,
                                    &m->weight_bytes));
    }
    /* One slot fits the longest vector and keeps every binding offset aligned. */
    m->slot = align_up((uint64_t)(c->dim > c->n_rot ? c->dim : c->n_rot) * 4,
                       align_up(256, caps->min_storage_offset_align));
    HS_TRY(alloc(m, m->slot * (2ull * c->n_layer + 2), HS_MEM_DEVICE, &m->vecs));
    m->layers = calloc(c->n_layer, sizeof *m->layers);
    if (!m->layers) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_llama_load: out of memory");
        goto fail;
    }
    for (uint32_t l = 0; l < c->n_layer; l++) {
        char n0[64], n1[64], n2[64];
        const char *names[3] = {n0, n1, n2};
        llama_layer *L = &m->layers[l];
        snprintf(n0, sizeof n0, "blk.%u.attn_q.weight", l);
        snprintf(n1, sizeof n1, "blk.%u.attn_k.weight", l);
        snprintf(n2, sizeof n2, "blk.%u.attn_v.weight", l);
        uint32_t qkv_rows[3] = {q_dim, kv_dim, kv_dim};
        HS_TRY(load_proj(m, g, names, 3, qkv_rows, c->dim, &L->qkv));
        snprintf(n0, sizeof n0, "blk.%u.attn_output.weight", l);
        HS_TRY(hs_model_load_matrix(m->ops, g, n0, c->dim, q_dim, &L->wo, &m->weight_bytes));
        snprintf(n0, sizeof n0, "blk.%u.ffn_gate.weight", l);
        snprintf(n1, sizeof n1, "blk.%u.ffn_up.weight", l);
        uint32_t gu_rows[2] = {c->ff, c->ff};
        HS_TRY(load_proj(m, g, names, 2, gu_rows, c->dim, &L->gu));
        snprintf(n0, sizeof n0, "blk.%u.ffn_down.weight", l);
        HS_TRY(hs_model_load_matrix(m->ops, g, n0, c->dim, c->ff, &L->wdown, &m->weight_bytes));
        snprintf(n0, sizeof n0, "blk.%u.attn_norm.weight", l);
        HS_TRY(upload_vec(m, g, n0, c->dim, 2 * l));
        snprintf(n0, sizeof n0, "blk.%u.ffn_norm.weight", l);
        HS_TRY(upload_vec(m, g, n0, c->dim, 2 * l + 1));
    }
    HS_TRY(upload_vec(m, g, "output_norm.weight", c->dim, 2 * c->n_layer));
    {
        hs_rope_params rp = {.n_rot = c->n_rot, .mode = c->rope_mode, .freq_base = c->rope_base,
                             .freq_scale = c->rope_scale};
        float freqs[512];
        hs_rope_freqs(&rp, freqs);
        HS_TRY(hs_vk_buffer_upload(m->vecs, m->slot * (2ull * c->n_layer + 1), freqs, (uint64_t)c->n_rot / 2 * 4));
    }

    /* KV cache: one buffer per K and V, layers back to back at slot-aligned
     * offsets. A layer past maxStorageBufferRange is bound in windows by the
     * KV ops (op_elem.h); planned here so that a context too long for them
     * fails at load, not at the first eval. */
    m->layer_bytes = align_up(hs_type_row_bytes(m->kv_type, (uint64_t)m->n_ctx * kv_dim), m->slot);
    {
        hs_kv_layer kv0 = {
            .type = m->kv_type, .n_ctx = m->n_ctx, .n_kv_head = c->n_kv_head, .head_dim = c->head_dim};
        hs_kv_split sp;
        HS_TRY(hs_kv_split_plan(ops, &kv0, &sp));
        m->kv_windows = sp.chunks;
    }
    HS_TRY(alloc(m, m->layer_bytes * c->n_layer, HS_MEM_DEVICE, &m->k_cache));
    HS_TRY(alloc(m, m->layer_bytes * c->n_layer, HS_MEM_DEVICE, &m->v_cache));

    const uint64_t B = m->max_batch;
    HS_TRY(alloc(m, B * c->dim * 4, HS_MEM_DEVICE, &m->h));
    HS_TRY(alloc(m, B * (q_dim + 2 * kv_dim) * 4, HS_MEM_DEVICE, &m->qkv));
    HS_TRY(alloc(m, B * q_dim * 4, HS_MEM_DEVICE, &m->q));
    HS_TRY(alloc(m, B * q_dim * 4, HS_MEM_DEVICE, &m->att));
    HS_TRY(alloc(m, B * 2 * c->ff * 4, HS_MEM_DEVICE, &m->gu));
    uint32_t xs_cols = c->ff > c->dim ? c->ff : c->dim; /* x' of any product (wo's: q_dim) */
    if (c->n_head * c->head_dim > xs_cols) xs_cols = c->n_head * c->head_dim;
    HS_TRY(alloc(m, B * xs_cols * 4, HS_MEM_DEVICE, &m->xs));
    if (c->dim % 32 == 0) HS_TRY(alloc(m, B * (c->dim / 32) * 80, HS_MEM_DEVICE, &m->xn));
    HS_TRY(alloc(m, B * c->n_vocab * 4, HS_MEM_HOST, &m->logits));
    HS_TRY(alloc(m, B * hs_attn_mask_words((uint32_t)B) * 4, HS_MEM_DEVICE, &m->mask));
    HS_TRY(alloc(m, B * 4, HS_MEM_DEVICE, &m->depth));
    if (opt && opt->taps) {
        for (uint32_t t = 0; t < HS_LLAMA_TAPS; t++) {
            const uint32_t eagle3[HS_LLAMA_TAPS] = {2, c->n_layer / 2, c->n_layer >= 3 ? c->n_layer - 3 : 0};
            m->tap_layers[t] = opt->custom_taps ? opt->tap_layers[t] : eagle3[t];
            if (m->tap_layers[t] >= c->n_layer) {
                st = HS_FAIL(HS_ERR_INVALID_ARG, "tap layer %u: the model has %u layers", m->tap_layers[t],
                             c->n_layer);
                goto fail;
            }
        }
        HS_TRY(alloc(m, B * HS_LLAMA_TAPS * c->dim * 4, HS_MEM_DEVICE, &m->taps));
    }
    m->pending_parents = malloc(B * sizeof *m->pending_parents);
    if (!m->pending_parents) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_llama_load: out of memory");
        goto fail;
    }
    /* Step data; the host writes everything before argmax (and the gather
     * rows after it, in a slot of their own), the device writes argmax. */
    uint64_t arr = align_up(B * 4, m->slot);
    m->off_tokens = 0;
    m->off_pos = arr;
    m->off_rows = 2 * arr;
    m->off_parents = 3 * arr;
    m->off_info = 4 * arr;
    m->off_argmax = 4 * arr + m->slot;
    m->off_gather = 5 * arr + m->slot;
    HS_TRY(alloc(m, m->off_gather + align_up((HS_KV_GATHER_SRC + B) * 4, m->slot), HS_MEM_HOST, &m->step));
    *out = m;
    return HS_OK;
fail:
    hs_llama_destroy(m);
    return st;
}

void hs_llama_destroy(hs_llama *m) {
    if (!m) return;
    for (ptrdiff_t i = 0; i < stbds_arrlen(m->graphs); i++) hs_vk_seq_destroy(m->graphs[i].seq);
    stbds_arrfree(m->graphs);
    hs_vk_seq_destroy(m->gather);
    free(m->pending_parents);
    if (m->layers) {
        for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
            proj_destroy(&m->layers[l].qkv);
            hs_weight_destroy(m->layers[l].wo);
            proj_destroy(&m->layers[l].gu);
            hs_weight_destroy(m->layers[l].wdown);
        }
        free(m->layers);
    }
    hs_weight_destroy(m->tok_embd);
    hs_weight_destroy(m->output);
    hs_vk_buffer *bufs[] = {m->vecs, m->k_cache, m->v_cache, m->h,    m->qkv,   m->q,    m->att, m->gu,
                            m->xs,   m->xn,      m->logits,  m->mask, m->depth, m->step, m->taps};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) hs_vk_buffer_destroy(bufs[i]);
    free(m);
}

const hs_llama_config *hs_llama_cfg(const hs_llama *m) { return &m->cfg; }
uint32_t hs_llama_n_ctx(const hs_llama *m) { return m->n_ctx; }
uint32_t hs_llama_n_past(const hs_llama *m) { return m->n_past; }
uint32_t hs_llama_max_batch(const hs_llama *m) { return m->max_batch; }
const hs_weight *hs_llama_token_embd(const hs_llama *m) { return m->tok_embd; }
void hs_llama_reset(hs_llama *m) {
    m->n_past = 0;
    m->pending = 0;
    m->last_n = 0;
}
uint64_t hs_llama_weight_bytes(const hs_llama *m) { return m->weight_bytes; }
uint32_t hs_llama_last_dispatches(const hs_llama *m) { return m->last_dispatches; }
uint32_t hs_llama_graph_count(const hs_llama *m) {
    return (uint32_t)stbds_arrlen(m->graphs) + (m->gather ? 1u : 0u);
}

hs_vk_binding hs_llama_taps(const hs_llama *m, uint32_t layers[HS_LLAMA_TAPS]) {
    if (layers) memcpy(layers, m->tap_layers, sizeof m->tap_layers);
    return (hs_vk_binding){m->taps, 0, m->taps ? hs_vk_buffer_size(m->taps) : 0};
}

hs_status hs_llama_taps_read(hs_llama *m, uint32_t first, uint32_t n, float *out) {
    if (!m->taps) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_llama_taps_read: the model was loaded without taps");
    const uint64_t row = (uint64_t)HS_LLAMA_TAPS * m->cfg.dim * 4;
    if ((uint64_t)first + n > m->max_batch)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_llama_taps_read: positions %u..%u past the batch limit %u", first,
                       first + n, m->max_batch);
    return hs_vk_buffer_download(m->taps, first * row, out, n * row);
}

static void max_chunks(uint32_t *r, const hs_weight *w) {
    if (w && hs_weight_chunks(w) > *r) *r = hs_weight_chunks(w);
}

hs_llama_split hs_llama_split_info(const hs_llama *m) {
    hs_llama_split r = {.weight_chunks = 1, .kv_windows = m->kv_windows};
    max_chunks(&r.weight_chunks, m->tok_embd);
    max_chunks(&r.weight_chunks, m->output);
    for (uint32_t l = 0; l < m->cfg.n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        max_chunks(&r.weight_chunks, L->wo);
        max_chunks(&r.weight_chunks, L->wdown);
        for (uint32_t p = 0; p < L->qkv.n_parts; p++) max_chunks(&r.weight_chunks, L->qkv.w[p]);
        for (uint32_t p = 0; p < L->gu.n_parts; p++) max_chunks(&r.weight_chunks, L->gu.w[p]);
    }
    return r;
}

static hs_vk_binding B(hs_vk_buffer *b, uint64_t off, uint64_t bytes) { return (hs_vk_binding){b, off, bytes}; }

/* Whether an RMSNorm projection reads x8n of h (hs_matmul_opts.x_q8): every
 * part on 8-bit activations. */
static bool reads_x8n(const hs_llama *m, const llama_proj *p, bool q8) {
    const hs_matmul_opts o = {.act_q8 = q8};
    bool all = m->xn != NULL;
    for (uint32_t i = 0; i < p->n_parts; i++)
        all = all && hs_matmul_act_q8(p->w[i], &o);
    return all;
}

/* Records the layers of the forward pass of n tokens (h = the last layer's output). */
static hs_status record_layers(hs_llama *m, hs_vk_seq *s, uint32_t n) {
    hs_status st = HS_OK;
    const hs_llama_config *c = &m->cfg;
    hs_ops *ops = m->ops;
    const uint32_t q_dim = c->n_head * c->head_dim, kv_dim = c->n_kv_head * c->head_dim;
    const uint32_t qkv_dim = q_dim + 2 * kv_dim;
    hs_vk_binding h = B(m->h, 0, (uint64_t)n * c->dim * 4);
    hs_vk_binding qkv = B(m->qkv, 0, (uint64_t)n * qkv_dim * 4);
    hs_vk_binding q = B(m->q, 0, (uint64_t)n * q_dim * 4);
    hs_vk_binding att = B(m->att, 0, (uint64_t)n * q_dim * 4);
    hs_vk_binding gu = B(m->gu, 0, (uint64_t)n * 2 * c->ff * 4);
    hs_vk_binding xs = B(m->xs, 0, 0);
    const bool q8 = hs_ops_tuning(ops)->q8_act != 0; /* q4_1 products on 8-bit activations */
    hs_vk_binding tokens = B(m->step, m->off_tokens, (uint64_t)n * 4);
    hs_vk_binding pos = B(m->step, m->off_pos, (uint64_t)n * 4);
    hs_vk_binding rows = B(m->step, m->off_rows, (uint64_t)n * 4);
    hs_vk_binding parents = B(m->step, m->off_parents, (uint64_t)n * 4);
    hs_vk_binding info = B(m->step, m->off_info, HS_ATTN_INFO_WORDS * 4);
    hs_vk_binding mask = B(m->mask, 0, (uint64_t)n * hs_attn_mask_words(n) * 4);
    hs_vk_binding depth = B(m->depth, 0, (uint64_t)n * 4);
    hs_vk_binding freqs = vec_binding(m, 2 * c->n_layer + 1, c->n_rot / 2);
    hs_rope_params rp = {.n_rot = c->n_rot, .mode = c->rope_mode, .freq_base = c->rope_base,
                         .freq_scale = c->rope_scale, .freqs = &freqs};

    const hs_vk_binding xn = B(m->xn, 0, (uint64_t)n * (c->dim / 32) * 80);
    bool xn_ready = false; /* x8n of h for the next Q/K/V product is in xn */

    HS_TRY(hs_op_get_rows(ops, s, m->tok_embd, tokens, n, h));
    HS_TRY(hs_op_tree_mask(ops, s, &parents, n, &mask, &depth));
    for (uint32_t l = 0; l < c->n_layer; l++) {
        const llama_layer *L = &m->layers[l];
        /* The input of a tap layer, kept side by side per position. */
        for (uint32_t t = 0; m->taps && t < HS_LLAMA_TAPS; t++)
            if (m->tap_layers[t] == l)
                HS_TRY(hs_vk_seq_copy_rows(s, m->h, 0, (uint64_t)c->dim * 4, m->taps, (uint64_t)t * c->dim * 4,
                                           (uint64_t)HS_LLAMA_TAPS * c->dim * 4, (uint64_t)c->dim * 4, n));
        hs_kv_layer kv = {.k = B(m->k_cache, m->layer_bytes * l, m->layer_bytes),
                          .v = B(m->v_cache, m->layer_bytes * l, m->layer_bytes),
                          .type = m->kv_type, .n_ctx = m->n_ctx, .n_kv_head = c->n_kv_head,
                          .head_dim = c->head_dim};
        /* The RMSNorm products on 8-bit activations read x8n of h (the norm deferred into the product),
         * written by the residual product before them (q8_out; a pass of its own for the first layer). */
        hs_matmul_opts norm_attn = {.prologue = HS_MATMUL_RMSNORM,
                                    .norm = vec_binding(m, 2 * l, c->dim),
                                    .eps = c->eps,
                                    .scratch = xs,
                                    .act_q8 = q8};
        hs_vk_binding qkv_x = h;
        if (reads_x8n(m, &L->qkv, q8)) {
            if (!xn_ready) HS_TRY(hs_op_q8_norm(ops, s, h, n, c->dim, norm_attn.norm, xn));
            norm_attn.x_q8 = true;
            qkv_x = xn;
        }
        if (L->qkv.n_parts == 1) {
            /* One stacked weight: the product rotates Q and K and writes the cache itself where it
             * can (its epilogue), else it runs the RoPE + KV pass after itself. */
            const hs_matmul_rope_kv rk = {
                .pos = &pos, .rows = &rows, .q_out = &q, .kv = &kv, .n_head = c->n_head, .rp = &rp};
            norm_attn.rope_kv = &rk;
            HS_TRY(hs_op_matmul(ops, s, L->qkv.w[0], qkv_x, n, qkv, &norm_attn));
        } else {
            HS_TRY(proj_matmul(ops, s, &L->qkv, qkv_x, n, qkv, &norm_attn));
            HS_TRY(hs_op_rope_kv(ops, s, &qkv, &pos, &rows, &q, &kv, n, c->n_head, &rp));
        }
        /* The output projection and the MLP, with their 8-bit fusions (hs_model_plan_mlp). */
        hs_model_mlp mp;
        hs_model_plan_mlp(&(hs_model_mlp_in){.wo = L->wo,
                                             .gu = L->gu.w[0],
                                             .wdown = L->wdown,
                                             .gu_stacked = L->gu.n_parts == 1,
                                             .gu_x8n = reads_x8n(m, &L->gu, q8),
                                             .head_dim = c->head_dim,
                                             .ff = c->ff,
                                             .h = h,
                                             .att = att,
                                             .gu_out = gu,
                                             .xs = xs,
                                             .xn = xn,
                                             .ffn_norm = vec_binding(m, 2 * l + 1, c->dim),
                                             .eps = c->eps,
                                             .act_q8 = q8},
                          &mp);
        HS_TRY((mp.att_q8 ? hs_op_attention_q8 : hs_op_attention)(
            ops, s, &q, &kv, c->n_head, &info, &mask, n, 1.0f / sqrtf((float)c->head_dim), &mp.att_out));
        HS_TRY(hs_op_matmul(ops, s, L->wo, mp.wo_x, n, h, &mp.wo));
        HS_TRY(proj_matmul(ops, s, &L->gu, mp.gu_x, n, gu, &mp.gu));
        /* down writes x8n of h for the next layer's Q/K/V product. */
        xn_ready = false;
        if (l + 1 < c->n_layer && reads_x8n(m, &m->layers[l + 1].qkv, q8)) {
            mp.down.q8_out = xn;
            mp.down.q8_norm = vec_binding(m, 2 * (l + 1), c->dim);
            xn_ready = true;
        }
        HS_TRY(hs_op_matmul(ops, s, L->wdown, mp.down_x, n, h, &mp.down));
    }
fail:
    return st;
}

/* Records the output norm + head of h's rows gr->out0 .. (logits and argmax
 * at rows gr->dst0 ..). */
static hs_status record_head(hs_llama *m, hs_vk_seq *s, const llama_graph *gr) {
    hs_status st = HS_OK;
    const hs_llama_config *c = &m->cfg;
    const uint64_t dim4 = (uint64_t)c->dim * 4, v4 = (uint64_t)c->n_vocab * 4;
    hs_vk_binding h_out = B(m->h, gr->out0 * dim4, gr->n_out * dim4);
    hs_vk_binding logits = B(m->logits, gr->dst0 * v4, gr->n_out * v4);
    hs_matmul_opts norm_out = {.prologue = HS_MATMUL_RMSNORM,
                               .norm = vec_binding(m, 2 * c->n_layer, c->dim),
                               .eps = c->eps,
                               .scratch = B(m->xs, 0, 0),
                               .act_q8 = hs_ops_tuning(m->ops)->q8_act != 0};
    HS_TRY(hs_op_matmul(m->ops, s, m->output ? m->output : m->tok_embd, h_out, gr->n_out, logits, &norm_out));
    hs_vk_binding amax = B(m->step, m->off_argmax + (uint64_t)gr->dst0 * 4, (uint64_t)gr->n_out * 4);
    HS_TRY(hs_op_argmax(m->ops, s, &logits, gr->n_out, c->n_vocab, &amax));
fail:
    return st;
}

static hs_status record(hs_llama *m, llama_graph *gr) {
    hs_status st = HS_OK;
    HS_TRY(hs_vk_seq_begin(gr->seq));
    if (gr->layers) HS_TRY(record_layers(m, gr->seq, gr->n));
    HS_TRY(record_head(m, gr->seq, gr));
    HS_TRY(hs_vk_seq_end(gr->seq));
fail:
    return st;
}

/* The recorded graph of shape `want` (recorded now if new). */
static hs_status get_graph(hs_llama *m, llama_graph want, llama_graph **out) {
    hs_status st = HS_OK;
    for (ptrdiff_t i = 0; i < stbds_arrlen(m->graphs); i++) {
        const llama_graph *g = &m->graphs[i];
        if (g->n == want.n && g->layers == want.layers && g->out0 == want.out0 && g->n_out == want.n_out &&
            g->dst0 == want.dst0) {
            *out = &m->graphs[i];
            return HS_OK;
        }
    }
    llama_graph gr = want;
    gr.seq = NULL;
    HS_TRY(hs_vk_seq_create(m->vk, &gr.seq));
    st = record(m, &gr);
    if (st != HS_OK) {
        hs_vk_seq_destroy(gr.seq);
        return st;
    }
    stbds_arrput(m->graphs, gr);
    *out = &m->graphs[stbds_arrlen(m->graphs) - 1];
fail:
    return st;
}

/* The KV compaction of hs_llama_accept (rows listed in the step data), recorded once. */
static hs_status record_gather(hs_llama *m) {
    hs_status st = HS_OK;
    if (m->gather) return HS_OK;
    const hs_llama_config *c = &m->cfg;
    const uint64_t all = m->layer_bytes * c->n_layer;
    hs_vk_binding k = B(m->k_cache, 0, all), v = B(m->v_cache, 0, all);
    hs_vk_binding rows = B(m->step, m->off_gather, (HS_KV_GATHER_SRC + (uint64_t)m->max_batch) * 4);
    HS_TRY(hs_vk_seq_create(m->vk, &m->gather));
    st = hs_vk_seq_begin(m->gather);
    if (st == HS_OK)
        st = hs_op_kv_gather(m->ops, m->gather, &k, &v, m->kv_type, c->n_layer, m->layer_bytes, m->n_ctx,
                             c->n_kv_head * c->head_dim, &rows, m->max_batch);
    if (st == HS_OK) st = hs_vk_seq_end(m->gather);
    if (st != HS_OK) {
        hs_vk_seq_destroy(m->gather);
        m->gather = NULL;
    }
fail:
    return st;
}

hs_status hs_llama_accept(hs_llama *m, const uint32_t *nodes, uint32_t n) {
    hs_status st = HS_OK;
    if (n > m->pending)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_llama_accept: %u nodes, but the last tree has %u (or was committed)", n,
                       m->pending);
    bool in_place = true;
    for (uint32_t i = 0; i < n; i++) {
        const int32_t want = i ? (int32_t)nodes[i - 1] : -1;
        if (nodes[i] >= m->pending || m->pending_parents[nodes[i]] != want)
            return HS_FAIL(HS_ERR_INVALID_ARG, "hs_llama_accept: node %u (path position %u) is not %s", nodes[i], i,
                           i ? "a child of the node before it" : "a root-level node of the tree");
        in_place = in_place && nodes[i] == i;
    }
    if (!in_place) {
        /* Rows n_past + nodes[i] -> n_past + i: sources increase and never
         * precede their destination, which hs_op_kv_gather allows in place. */
        uint32_t *g = (uint32_t *)((uint8_t *)hs_vk_buffer_map(m->step) + m->off_gather);
        g[HS_KV_GATHER_DST_BASE] = m->n_past;
        g[HS_KV_GATHER_M] = n;
        for (uint32_t i = 0; i < n; i++) g[HS_KV_GATHER_SRC + i] = m->n_past + nodes[i];
        /* The gather rows just written -> visible to the compaction. */
        HS_TRY(hs_vk_buffer_flush(m->step, m->off_gather, (HS_KV_GATHER_SRC + n) * 4));
        HS_TRY(record_gather(m));
        HS_TRY(hs_vk_seq_submit(m->gather));
    }
    m->n_past += n;
    m->pending = 0;
fail:
    return st;
}

/* Which rows of an eval get the output head. */
typedef enum { OUT_ALL, OUT_LAST, OUT_FIRST } out_rows;

/* The graph of an eval of n rows: all-rows evals (trees) run in a capacity
 * bucket; the head's rows are every slot of the bucket (the inert ones too),
 * the last token's, or the root's; last_only's land at row 0. */
static llama_graph eval_shape(const hs_llama *m, uint32_t n, out_rows out) {
    const uint32_t cap = out == OUT_LAST ? n : hs_model_tree_bucket(n, m->max_batch);
    return (llama_graph){
        .n = cap, .layers = true, .out0 = out == OUT_LAST ? n - 1 : 0, .n_out = out == OUT_ALL ? cap : 1, .dst0 = 0};
}

/* The graph of hs_llama_heads' rows row .. row + k - 1. */
static llama_graph head_shape(uint32_t row, uint32_t k) {
    return (llama_graph){.n = 0, .layers = false, .out0 = row, .n_out = k, .dst0 = row};
}

static hs_status eval(hs_llama *m, const int32_t *tokens, uint32_t n, const int32_t *parents, out_rows out,
                      bool commit, const float **logits, const uint32_t **argmax) {
    hs_status st = HS_OK;
    const hs_llama_config *c = &m->cfg;
    if (n == 0 || n > m->max_batch)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_llama_eval: %u tokens (batch limit %u)", n, m->max_batch);
    if ((uint64_t)m->n_past + n > m->n_ctx)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "context full: %u + %u tokens exceed the context of %u", m->n_past, n,
                       m->n_ctx);
    for (uint32_t i = 0; i < n; i++)
        if (tokens[i] < 0 || (uint32_t)tokens[i] >= c->n_vocab)
            return HS_FAIL(HS_ERR_INVALID_ARG, "token id %d out of the vocabulary (%u)", tokens[i], c->n_vocab);
    if (parents) HS_TRY(hs_attn_check_parents(parents, n));
    /* The slots of the graph past n are inert: token 0, no parent, a cache
     * row the kernels skip, and the attention's used count stops before them. */
    const llama_graph want = eval_shape(m, n, out);
    const uint32_t cap = want.n;
    uint8_t *step = hs_vk_buffer_map(m->step);
    HS_ASSERT(step);
    int32_t *tok = (int32_t *)(step + m->off_tokens), *pos = (int32_t *)(step + m->off_pos);
    uint32_t *rows = (uint32_t *)(step + m->off_rows);
    int32_t *par = (int32_t *)(step + m->off_parents);
    uint32_t *info = (uint32_t *)(step + m->off_info);
    for (uint32_t i = 0; i < n; i++) {
        tok[i] = tokens[i];
        par[i] = parents ? parents[i] : (int32_t)i - 1;
        uint32_t d = 0;
        for (int32_t p = par[i]; p >= 0; p = par[p]) d++;
        pos[i] = (int32_t)(m->n_past + d);
        rows[i] = m->n_past + i;
    }
    for (uint32_t i = n; i < cap; i++) {
        tok[i] = 0;
        par[i] = -1;
        pos[i] = (int32_t)m->n_past;
        rows[i] = UINT32_MAX;
    }
    info[HS_ATTN_INFO_N_PREFIX] = m->n_past;
    info[HS_ATTN_INFO_N_USED] = n;
    /* Tokens, positions, rows, parents and info just written -> visible to
     * the graph's dispatches (one range: they lie back to back before argmax). */
    HS_TRY(hs_vk_buffer_flush(m->step, 0, m->off_info + HS_ATTN_INFO_WORDS * 4));
    llama_graph *gr;
    HS_TRY(get_graph(m, want, &gr));
    HS_TRY(hs_vk_seq_submit(gr->seq));
    m->last_dispatches = hs_vk_seq_dispatch_count(gr->seq);
    m->last_n = n;
    if (commit) {
        m->n_past += n;
        m->pending = 0;
    } else {
        m->pending = n;
        memcpy(m->pending_parents, par, n * sizeof *par);
    }
    /* The output head's logits and argmax rows -> visible to the caller's reads. */
    const uint64_t n_out = out == OUT_ALL ? n : 1;
    if (logits) {
        HS_TRY(hs_vk_buffer_invalidate(m->logits, 0, n_out * c->n_vocab * 4));
        *logits = hs_vk_buffer_map(m->logits);
    }
    if (argmax) {
        HS_TRY(hs_vk_buffer_invalidate(m->step, m->off_argmax, n_out * 4));
        *argmax = (const uint32_t *)(step + m->off_argmax);
    }
fail:
    return st;
}

hs_status hs_llama_eval(hs_llama *m, const int32_t *tokens, uint32_t n, const int32_t *parents, bool last_only,
                        bool commit, const float **logits, const uint32_t **argmax) {
    return eval(m, tokens, n, parents, last_only ? OUT_LAST : OUT_ALL, commit, logits, argmax);
}

hs_status hs_llama_eval_tree(hs_llama *m, const int32_t *tokens, uint32_t n, const int32_t *parents,
                             const float **logits, uint32_t *argmax) {
    hs_status st = HS_OK;
    const uint32_t *amax;
    HS_TRY(eval(m, tokens, n, parents, OUT_FIRST, false, logits, &amax));
    if (argmax) *argmax = amax[0];
fail:
    return st;
}

hs_status hs_llama_heads(hs_llama *m, uint32_t row, uint32_t k, const float **logits, uint32_t *argmax) {
    hs_status st = HS_OK;
    if (k == 0 || k > HS_LLAMA_MAX_HEADS || (k & (k - 1)) || row >= m->last_n || k > m->last_n - row)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "hs_llama_heads: rows %u .. %u, but the last eval had %u rows (and k is 1, 2, 4 .. %u)", row,
                       row + k - 1, m->last_n, HS_LLAMA_MAX_HEADS);
    llama_graph *gr;
    HS_TRY(get_graph(m, head_shape(row, k), &gr));
    HS_TRY(hs_vk_seq_submit(gr->seq));
    const uint64_t v4 = (uint64_t)m->cfg.n_vocab * 4;
    if (logits) {
        HS_TRY(hs_vk_buffer_invalidate(m->logits, row * v4, k * v4));
        *logits = (const float *)hs_vk_buffer_map(m->logits) + (uint64_t)row * m->cfg.n_vocab;
    }
    if (argmax) {
        HS_TRY(hs_vk_buffer_invalidate(m->step, m->off_argmax + (uint64_t)row * 4, (uint64_t)k * 4));
        memcpy(argmax, (const uint8_t *)hs_vk_buffer_map(m->step) + m->off_argmax + (uint64_t)row * 4,
               (size_t)k * 4);
    }
fail:
    return st;
}

hs_status hs_llama_head(hs_llama *m, uint32_t row, const float **logits, uint32_t *argmax) {
    if (row >= m->last_n)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_llama_head: row %u, but the last eval had %u rows", row, m->last_n);
    return hs_llama_heads(m, row, 1, logits, argmax);
}

/* The tree evals of 1 .. max_n rows (clamped to the batch; a bucket's later
 * sizes find its graph) with the output head of `out` rows, and the KV
 * compaction (a path other than the first nodes moves cache rows). */
static hs_status prepare_evals(hs_llama *m, uint32_t max_n, out_rows out) {
    hs_status st = HS_OK;
    llama_graph *gr;
    for (uint32_t n = 1; n <= max_n; n++)
        HS_TRY(get_graph(m, eval_shape(m, n, out), &gr));
    if (max_n > 1) HS_TRY(record_gather(m));
fail:
    return st;
}

hs_status hs_llama_prepare_tree(hs_llama *m, uint32_t max_n) {
    hs_status st = HS_OK;
    llama_graph *gr;
    if (max_n > m->max_batch) max_n = m->max_batch;
    HS_TRY(prepare_evals(m, max_n, OUT_FIRST));
    for (uint32_t row = 1; row < max_n; row++)
        for (uint32_t k = 1; k <= HS_LLAMA_MAX_HEADS && k <= max_n - row; k *= 2)
            HS_TRY(get_graph(m, head_shape(row, k), &gr));
fail:
    return st;
}

hs_status hs_llama_prepare_tree_all(hs_llama *m, uint32_t max_n) {
    return prepare_evals(m, max_n < m->max_batch ? max_n : m->max_batch, OUT_ALL);
}
