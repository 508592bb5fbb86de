/* Tests of the EAGLE-3 draft head (models/eagle3.h) on the real tiny target
 * stories260K (loaded with taps at layers 1, 2, 3) and a random head written
 * here as GGUF (f32 and f16 matrices, a draft vocabulary of 200 of the 512
 * ids with a d2t):
 *   - consume of a prompt (the target's real taps) and four levels of a tree
 *     with mixed parents, then a second round (the target keeps two more
 *     positions, the head consumes them and drafts again), against the plain-C
 *     reference tests/ref_eagle3.c;
 *   - exactness: a consume in chunks equals one consume bitwise; a node
 *     drafted alone equals the same node inside a wider level (another
 *     capacity bucket, other slots); reset_tree and redrafting repeats the
 *     draft bitwise;
 *   - dispatch counts and capacity buckets;
 *   - the fit check (hidden size, dim, vocabulary, taps off, tap layers) and
 *     malformed files (missing keys and tensors, wrong shapes, types, d2t
 *     out of the vocabulary, another architecture), leaving nothing alive;
 *   - bad calls;
 * and the reference scenario again with emulated non-coherent memory and with
 * maxStorageBufferRange forced down to 32 KiB (weights in chunks, the taps
 * gathered in windows, the head's KV cache in 2 windows). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eagle3.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "hs_quant.h"
#include "llama.h"
#include "ref_eagle3.h"
#include "testutil.h"

/* ---- the random head ---- */

enum {
    DIM = 64,
    HEADS = 4,
    KV_HEADS = 2,
    HEAD_DIM = 16,
    FF = 96,
    VOCAB = 512,
    DVOCAB = 200,
    TDIM = 64,
    QD = HEADS * HEAD_DIM,
    KVD = KV_HEADS * HEAD_DIM,
    TOPK = 8,
    MAX_NODES = 24,
};
static const uint32_t k_layers[3] = {1, 2, 3};
/* maxStorageBufferRange of the split group (below): 32 KiB, more where the
 * target's row groups need it (hs_test_split_range; 52 KiB at 16 lanes). */
static unsigned long g_split_range = 32768;

/* One tensor of the head file. */
typedef struct head_tensor {
    const char *name;
    uint32_t rows, cols; /* cols = ne[0]; rows = 1 for vectors */
    bool f16;            /* stored as f16 (values already rounded to f16) */
    float *data;         /* NULL: d2t */
} head_tensor;

enum {
    T_FC,
    T_ATTN_NORM,
    T_HIDDEN_NORM,
    T_Q,
    T_K,
    T_V,
    T_O,
    T_FFN_NORM,
    T_GATE,
    T_UP,
    T_DOWN,
    T_OUT_NORM,
    T_OUT,
    T_D2T,
    N_TENSORS
};
static head_tensor g_t[N_TENSORS] = {
    [T_FC] = {"fc.weight", DIM, 3 * TDIM, true, NULL},
    [T_ATTN_NORM] = {"blk.0.attn_norm.weight", 1, DIM, false, NULL},
    [T_HIDDEN_NORM] = {"blk.0.hidden_norm.weight", 1, DIM, false, NULL},
    [T_Q] = {"blk.0.attn_q.weight", QD, 2 * DIM, true, NULL},
    [T_K] = {"blk.0.attn_k.weight", KVD, 2 * DIM, true, NULL},
    [T_V] = {"blk.0.attn_v.weight", KVD, 2 * DIM, true, NULL},
    [T_O] = {"blk.0.attn_output.weight", DIM, QD, false, NULL},
    [T_FFN_NORM] = {"blk.0.ffn_norm.weight", 1, DIM, false, NULL},
    [T_GATE] = {"blk.0.ffn_gate.weight", FF, DIM, false, NULL},
    [T_UP] = {"blk.0.ffn_up.weight", FF, DIM, false, NULL},
    [T_DOWN] = {"blk.0.ffn_down.weight", DIM, FF, true, NULL},
    [T_OUT_NORM] = {"output_norm.weight", 1, DIM, false, NULL},
    [T_OUT] = {"output.weight", DVOCAB, DIM, true, NULL},
    [T_D2T] = {"d2t", 1, DVOCAB, false, NULL},
};
static int32_t g_d2t[DVOCAB];
static int32_t g_t2d[VOCAB]; /* target id -> draft id, -1 outside */

/* Random weights, once: matrices uniform in +-scale (f16 ones rounded), norm
 * weights in [0.8, 1.2]; output rows larger so that distributions have clear
 * leaders; d2t a sorted choice of 200 of the 512 ids. */
static void make_weights(void) {
    if (g_t[T_FC].data) return;
    hs_rng r;
    hs_rng_seed(&r, 7);
    for (int i = 0; i < T_D2T; i++) {
        head_tensor *t = &g_t[i];
        const size_t n = (size_t)t->rows * t->cols;
        const float s = t->rows == 1 ? 0.0f : (i == T_OUT ? 0.5f : 1.7f / sqrtf((float)t->cols));
        t->data = t->rows == 1 ? hs_test_rand_array(&r, n, 0.8f, 1.2f) : hs_test_rand_array(&r, n, -s, s);
        if (t->f16)
            for (size_t k = 0; k < n; k++)
                t->data[k] = hs_test_f16_to_f32(hs_test_f32_to_f16(t->data[k]));
    }
    for (int i = 0; i < VOCAB; i++)
        g_t2d[i] = -1;
    for (uint32_t i = 0, id = 0; i < DVOCAB; i++, id++) {
        while (hs_rng_u32(&r) % 5 >= 2 && VOCAB - id > DVOCAB - i)
            id++; /* keep ids within the vocabulary */
        g_d2t[i] = (int32_t)id - (int32_t)i;
        g_t2d[id] = (int32_t)i;
    }
}

/* What a head file deviates in, for the malformed-file tests. */
typedef struct head_spec {
    const char *arch;        /* NULL: "eagle3" */
    const char *skip_key;    /* a key left out (full name) */
    const char *skip_tensor; /* a tensor left out */
    const char *wide_tensor; /* a tensor written with 4 more columns */
    const char *f32_tensor;  /* a tensor written as f32 although f16 above */
    uint32_t n_layers;       /* entries of target_layers; 0: 3 */
    uint32_t dim_key;        /* embedding_length written; 0: DIM */
    uint32_t tdim;           /* target_hidden_size; 0: TDIM */
    uint32_t vocab;          /* vocab_size; 0: VOCAB */
    const uint32_t *layers;  /* NULL: k_layers */
    int32_t d2t_last;        /* when nonzero: the last d2t entry */
    bool train_rows_key;     /* write eagle3.train_row_length = train_rows */
    uint32_t train_rows;
} head_spec;

static void write_head(const head_spec *sp, hs_gw *w) {
    make_weights();
    static const head_spec none;
    if (!sp) sp = &none;
    const uint32_t n_layers = sp->n_layers ? sp->n_layers : 3;
    const uint32_t *layers = sp->layers ? sp->layers : k_layers;
    struct {
        const char *key;
        uint32_t type, u;
        float f;
    } keys[] = {
        {"eagle3.embedding_length", HS_GW_UINT32, sp->dim_key ? sp->dim_key : DIM, 0},
        {"eagle3.feed_forward_length", HS_GW_UINT32, FF, 0},
        {"eagle3.attention.head_count", HS_GW_UINT32, HEADS, 0},
        {"eagle3.attention.head_count_kv", HS_GW_UINT32, KV_HEADS, 0},
        {"eagle3.attention.layer_norm_rms_epsilon", HS_GW_FLOAT32, 0, 1e-5f},
        {"eagle3.rope.freq_base", HS_GW_FLOAT32, 0, 10000.0f},
        {"eagle3.context_length", HS_GW_UINT32, 2048, 0},
        {"eagle3.vocab_size", HS_GW_UINT32, sp->vocab ? sp->vocab : VOCAB, 0},
        {"eagle3.draft_vocab_size", HS_GW_UINT32, DVOCAB, 0},
        {"eagle3.target_hidden_size", HS_GW_UINT32, sp->tdim ? sp->tdim : TDIM, 0},
    };
    const size_t n_keys = sizeof keys / sizeof keys[0];
    uint64_t nkv = 3 + sp->train_rows_key; /* architecture, target_layers, target_name, train rows */
    for (size_t i = 0; i < n_keys; i++)
        nkv += !(sp->skip_key && !strcmp(sp->skip_key, keys[i].key));
    if (sp->skip_key && !strcmp(sp->skip_key, "eagle3.target_layers")) nkv--;
    uint64_t nt = 0;
    for (int i = 0; i < N_TENSORS; i++)
        nt += !(sp->skip_tensor && !strcmp(sp->skip_tensor, g_t[i].name));
    hs_gw_init(w);
    hs_gw_header(w, 3, nt, nkv);
    hs_gw_key(w, "general.architecture", HS_GW_STRING);
    hs_gw_str(w, sp->arch ? sp->arch : "eagle3");
    for (size_t i = 0; i < n_keys; i++) {
        if (sp->skip_key && !strcmp(sp->skip_key, keys[i].key)) continue;
        hs_gw_key(w, keys[i].key, keys[i].type);
        if (keys[i].type == HS_GW_UINT32)
            hs_gw_u32(w, keys[i].u);
        else
            hs_gw_f32(w, keys[i].f);
    }
    if (!(sp->skip_key && !strcmp(sp->skip_key, "eagle3.target_layers"))) {
        hs_gw_key(w, "eagle3.target_layers", HS_GW_ARRAY);
        hs_gw_arr(w, HS_GW_INT32, n_layers);
        for (uint32_t i = 0; i < n_layers; i++)
            hs_gw_u32(w, layers[i % 3]);
    }
    hs_gw_key(w, "eagle3.target_name", HS_GW_STRING);
    hs_gw_str(w, "stories260K");
    if (sp->train_rows_key) {
        hs_gw_key(w, "eagle3.train_row_length", HS_GW_UINT32);
        hs_gw_u32(w, sp->train_rows);
    }
    /* Tensor infos, then the data, each at a multiple of 32 bytes. */
    size_t bytes[N_TENSORS];
    uint64_t off = 0;
    for (int i = 0; i < N_TENSORS; i++) {
        const head_tensor *t = &g_t[i];
        if (sp->skip_tensor && !strcmp(sp->skip_tensor, t->name)) continue;
        const bool f16 = t->f16 && !(sp->f32_tensor && !strcmp(sp->f32_tensor, t->name));
        const uint32_t cols = t->cols + (sp->wide_tensor && !strcmp(sp->wide_tensor, t->name) ? 4 : 0);
        const uint64_t dims[2] = {cols, t->rows};
        const uint32_t type = i == T_D2T ? HS_GGML_TYPE_I32 : f16 ? HS_GGML_TYPE_F16 : HS_GGML_TYPE_F32;
        hs_gw_tensor_info(w, t->name, t->rows == 1 ? 1 : 2, dims, type, off);
        bytes[i] = (size_t)t->rows * cols * (f16 ? 2 : 4);
        off += (bytes[i] + 31) / 32 * 32;
    }
    hs_gw_pad(w, 32);
    for (int i = 0; i < N_TENSORS; i++) {
        const head_tensor *t = &g_t[i];
        if (sp->skip_tensor && !strcmp(sp->skip_tensor, t->name)) continue;
        const bool f16 = t->f16 && !(sp->f32_tensor && !strcmp(sp->f32_tensor, t->name));
        const bool wide = sp->wide_tensor && !strcmp(sp->wide_tensor, t->name);
        if (i == T_D2T) {
            for (uint32_t k = 0; k < DVOCAB; k++)
                hs_gw_u32(w, (uint32_t)(k + 1 == DVOCAB && sp->d2t_last ? sp->d2t_last : g_d2t[k]));
            for (uint32_t k = 0; wide && k < 4; k++)
                hs_gw_u32(w, 0);
        } else {
            for (uint32_t rw = 0; rw < t->rows; rw++)
                for (uint32_t c = 0; c < t->cols + (wide ? 4 : 0); c++) {
                    const float v = c < t->cols ? t->data[(size_t)rw * t->cols + c] : 0.0f;
                    if (f16)
                        hs_gw_u16(w, hs_test_f32_to_f16(v));
                    else
                        hs_gw_f32(w, v);
                }
        }
        hs_gw_pad(w, 32);
    }
}

/* ---- fixture: the target with taps, the head, its reference ---- */

typedef struct e3_env {
    hs_test_env base;
    hs_gguf *tg; /* stories260K */
    hs_llama *t; /* with taps at 1, 2, 3 */
    hs_gw hw;    /* the head file */
    hs_gguf *hg;
    hs_eagle3 *h;
    ref_eagle3_weights rw;
    ref_eagle3 *ref;
} e3_env;

/* The head with the file's exact weights (the reference's). */
static hs_eagle3_options head_options(void) {
    return (hs_eagle3_options){.max_nodes = MAX_NODES, .top_k = TOPK, .weights = HS_EAGLE3_WEIGHTS_FILE};
}

static int setup_e3(void **state, unsigned long range, const char *name, const char *value) {
    if (hs_test_setup_env(state, range, name, value)) return -1;
    e3_env *e = calloc(1, sizeof *e);
    e->base = *(hs_test_env *)*state;
    free(*state);
    *state = e;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    hs_llama_options to = {.n_ctx = 512,
                           .max_batch = 64,
                           .taps = true,
                           .custom_taps = true,
                           .tap_layers = {k_layers[0], k_layers[1], k_layers[2]}};
    write_head(NULL, &e->hw);
    const hs_eagle3_options ho = head_options();
    if (hs_gguf_open(path, &e->tg) != HS_OK || hs_llama_load(e->base.ops, e->tg, &to, &e->t) != HS_OK ||
        hs_gguf_open_memory(e->hw.buf, e->hw.len, "head", &e->hg) != HS_OK ||
        hs_eagle3_load(e->base.ops, e->hg, e->t, &ho, &e->h) != HS_OK) {
        fprintf(stderr, "setup: %s\n", hs_last_error());
        return -1;
    }
    const hs_gguf_tensor *emb = hs_gguf_find_tensor(e->tg, "token_embd.weight");
    if (!emb || emb->type != HS_GGML_TYPE_F32) return -1;
    e->rw = (ref_eagle3_weights){.dim = DIM,
                                 .n_head = HEADS,
                                 .n_kv_head = KV_HEADS,
                                 .head_dim = HEAD_DIM,
                                 .ff = FF,
                                 .n_vocab = VOCAB,
                                 .n_draft_vocab = DVOCAB,
                                 .target_dim = TDIM,
                                 .eps = 1e-5f,
                                 .rope_base = 10000.0f,
                                 .fc = g_t[T_FC].data,
                                 .attn_norm = g_t[T_ATTN_NORM].data,
                                 .hidden_norm = g_t[T_HIDDEN_NORM].data,
                                 .ffn_norm = g_t[T_FFN_NORM].data,
                                 .output_norm = g_t[T_OUT_NORM].data,
                                 .wq = g_t[T_Q].data,
                                 .wk = g_t[T_K].data,
                                 .wv = g_t[T_V].data,
                                 .wo = g_t[T_O].data,
                                 .wgate = g_t[T_GATE].data,
                                 .wup = g_t[T_UP].data,
                                 .wdown = g_t[T_DOWN].data,
                                 .out = g_t[T_OUT].data,
                                 .d2t = g_d2t,
                                 .embd = emb->data};
    e->ref = ref_eagle3_create(&e->rw, 512, MAX_NODES);
    return 0;
}

static int setup(void **state) { return setup_e3(state, 0, NULL, NULL); }
static int setup_noncoherent(void **state) { return setup_e3(state, 0, "HS_VK_FORCE_NONCOHERENT", "1"); }
/* token_embd (128 KiB) and the target's taps (64 x 768 bytes) pass 32 KiB,
 * and so does the head's KV cache (512 rows x 128 bytes). */
static int setup_split(void **state) {
    g_split_range = hs_test_split_range(32768, 768); /* the target's ffn_down rows: 172 f32 */
    return g_split_range ? setup_e3(state, g_split_range, NULL, NULL) : -1;
}

static int teardown(void **state) {
    e3_env *e = *state;
    ref_eagle3_destroy(e->ref);
    hs_eagle3_destroy(e->h);
    hs_gguf_close(e->hg);
    hs_gw_free(&e->hw);
    hs_llama_destroy(e->t);
    hs_gguf_close(e->tg);
    hs_test_env *base = malloc(sizeof *base);
    *base = e->base;
    free(e);
    *state = base;
    return hs_test_teardown(state);
}

/* ---- comparing Top-K records ---- */

/* Tolerances against the double reference. The device computes in f32 with
 * its own summation orders: every product is one f32 chain of at most 192
 * terms of O(1) values (relative error a few times 1e-7, growing like the
 * square root of the length), and RMSNorm, attention and softmax add errors
 * of the same order, so a logit of a few units moves by a few ulp (measured
 * here: max logit 2.4e-6, lse 1e-6 at most). A probability moves by p times
 * the logit error (measured 5.5e-7; tail 3e-7, entropy 2.4e-7). The bounds
 * keep a margin of 8 to 40 over these and stay far below what a wrong mask,
 * position or weight half gives (7e-4 and more): 1e-5 for probabilities,
 * tail and entropy, 2e-5 for the max logit and lse. An id may differ from the
 * reference's at the same rank only in a near tie: its reference probability
 * within 1e-5 of the reference's id at that rank. */
#define TOL_P 1e-5
#define TOL_H 1e-5
#define TOL_L 2e-5

static double g_worst;          /* largest probability deviation seen, for the message */
static double g_worst_other[4]; /* tail, entropy, max, lse */

static void check_topk(const hs_topk_result *got, const double *logits, const char *what) {
    hs_topk_result ref;
    ref_eagle3_topk(logits, DVOCAB, TOPK, g_d2t, &ref);
    double p[DVOCAB];
    ref_eagle3_probs(logits, DVOCAB, p);
    assert_int_equal(got->k, TOPK);
    for (uint32_t j = 0; j < TOPK; j++) {
        if (got->ids[j] >= VOCAB || g_t2d[got->ids[j]] < 0)
            fail_msg("%s: rank %u: id %u is not in the draft vocabulary", what, j, got->ids[j]);
        const double pg = p[g_t2d[got->ids[j]]];
        if (got->ids[j] != ref.ids[j] && fabs(pg - ref.probs[j]) > TOL_P)
            fail_msg("%s: rank %u: id %u (reference p %.7f), reference id %u (p %.7f)", what, j, got->ids[j],
                     pg, ref.ids[j], (double)ref.probs[j]);
        const double d = fabs((double)got->probs[j] - pg);
        if (d > TOL_P)
            fail_msg("%s: rank %u id %u: p %.7f, reference %.7f", what, j, got->ids[j], got->probs[j], pg);
        if (d > g_worst) g_worst = d;
    }
    const double dt = fabs((double)got->tail - ref.tail), dh = fabs((double)got->entropy - ref.entropy);
    const double dm = fabs((double)got->max_logit - ref.max_logit), dl = fabs((double)got->lse - ref.lse);
    const double ds[4] = {dt, dh, dm, dl};
    for (int i = 0; i < 4; i++)
        g_worst_other[i] = ds[i] > g_worst_other[i] ? ds[i] : g_worst_other[i];
    if (dt > TOL_P || dh > TOL_H || dm > TOL_L || dl > TOL_L)
        fail_msg("%s: tail %.7f/%.7f entropy %.7f/%.7f max %.7f/%.7f lse %.7f/%.7f (device/reference)", what,
                 got->tail, ref.tail, got->entropy, ref.entropy, got->max_logit, ref.max_logit, got->lse,
                 ref.lse);
}

static void topk_equal(const hs_topk_result *a, const hs_topk_result *b, const char *what) {
    if (a->k != b->k || memcmp(a->ids, b->ids, a->k * 4) || memcmp(a->probs, b->probs, a->k * 4) ||
        memcmp(&a->tail, &b->tail, 4) || memcmp(&a->entropy, &b->entropy, 4) ||
        memcmp(&a->max_logit, &b->max_logit, 4) || memcmp(&a->lse, &b->lse, 4))
        fail_msg("%s: Top-K records differ (ids %u/%u, p %.9g/%.9g, lse %.9g/%.9g)", what, a->ids[0],
                 b->ids[0], a->probs[0], b->probs[0], a->lse, b->lse);
}

/* ---- the target's side of a round ---- */

#define PROMPT 6
static const int32_t k_prompt[PROMPT] = {1, 403, 407, 261, 378, 300};

/* Evaluates the prompt on the target (committed) and returns its bonus token;
 * feats [PROMPT][3][TDIM] receive its taps, next [PROMPT] the token after each
 * position. */
static void target_prompt(e3_env *e, float *feats, int32_t *next) {
    const uint32_t *amax;
    hs_llama_reset(e->t);
    HS_CHECK(hs_llama_eval(e->t, k_prompt, PROMPT, NULL, true, true, NULL, &amax));
    for (int i = 0; i + 1 < PROMPT; i++)
        next[i] = k_prompt[i + 1];
    next[PROMPT - 1] = (int32_t)amax[0];
    HS_CHECK(hs_llama_taps_read(e->t, 0, PROMPT, feats));
}

static const uint32_t k_slots[PROMPT] = {0, 1, 2, 3, 4, 5};

/* ---- against the reference ---- */

/* One tree: level widths 3, 4, 3, 2 with mixed parents; tokens are the
 * parents' top ids (of the device's records, fed to both). */
static void draft_tree_vs_ref(e3_env *e, const hs_topk_result *root, const char *round) {
    static const uint32_t widths[4] = {3, 4, 3, 2};
    static const uint32_t parents[4][4] = {{0, 0, 0}, {1, 1, 2, 3}, {4, 4, 7}, {8, 10}};
    hs_topk_result slots[1 + MAX_NODES];
    slots[0] = *root;
    uint32_t next_slot = 1;
    for (int lv = 0; lv < 4; lv++) {
        const uint32_t w = widths[lv];
        int32_t tokens[4];
        for (uint32_t i = 0; i < w; i++) {
            /* The first node under a parent takes its top id, the next its second, ... */
            uint32_t rank = 0;
            for (uint32_t j = 0; j < i; j++)
                rank += parents[lv][j] == parents[lv][i];
            tokens[i] = (int32_t)slots[parents[lv][i]].ids[rank];
        }
        const hs_topk_result *got;
        HS_CHECK(hs_eagle3_draft(e->h, parents[lv], tokens, w, &got));
        assert_int_equal(hs_eagle3_n_slots(e->h), next_slot + w - 1);
        double logits[4 * DVOCAB];
        ref_eagle3_draft(e->ref, parents[lv], tokens, w, logits);
        for (uint32_t i = 0; i < w; i++) {
            char what[96];
            snprintf(what, sizeof what, "%s level %d node %u (slot %u)", round, lv + 1, i, next_slot + i);
            check_topk(&got[i], logits + (size_t)i * DVOCAB, what);
            slots[next_slot + i] = got[i];
        }
        next_slot += w;
    }
}

static void test_vs_reference(void **state) {
    e3_env *e = *state;
    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    g_worst = 0;
    memset(g_worst_other, 0, sizeof g_worst_other);
    target_prompt(e, feats, next);
    hs_eagle3_reset(e->h);
    ref_eagle3_reset(e->ref);
    const hs_topk_result *root;
    HS_CHECK(hs_eagle3_consume(e->h, k_slots, next, PROMPT, &root));
    assert_int_equal(hs_eagle3_n_past(e->h), PROMPT);
    /* In the split group, token_embd is in row chunks and the taps are
     * gathered in windows: more dispatches than 13. */
    if (hs_ops_caps(e->base.ops)->max_storage_buffer_range <= g_split_range &&
        hs_eagle3_last_dispatches(e->h) <= 13)
        fail_msg("the split group did not split (%u dispatches)", hs_eagle3_last_dispatches(e->h));
    double logits[DVOCAB];
    ref_eagle3_consume(e->ref, feats, next, PROMPT, logits);
    check_topk(root, logits, "prompt root");
    hs_topk_result root1 = *root;
    /* The distribution is not degenerate: the checks above mean something. */
    assert_true(root1.probs[0] < 0.99f && root1.probs[TOPK - 1] > 1e-4f);
    draft_tree_vs_ref(e, &root1, "round 1");

    /* Round 2: the target keeps the bonus and one more token (its top id at
     * the first level); the head consumes both rows from the target's taps of
     * that eval, over the drafted rows, and drafts again. */
    const int32_t keep[2] = {next[PROMPT - 1], (int32_t)root1.ids[0]};
    const uint32_t *amax;
    HS_CHECK(hs_llama_eval(e->t, keep, 2, NULL, true, true, NULL, &amax));
    static float feats2[2 * 3 * TDIM];
    HS_CHECK(hs_llama_taps_read(e->t, 0, 2, feats2));
    const int32_t next2[2] = {keep[1], (int32_t)amax[0]};
    HS_CHECK(hs_eagle3_consume(e->h, k_slots, next2, 2, &root));
    assert_int_equal(hs_eagle3_n_past(e->h), PROMPT + 2);
    assert_int_equal(hs_eagle3_n_slots(e->h), 0);
    ref_eagle3_consume(e->ref, feats2, next2, 2, logits);
    check_topk(root, logits, "round 2 root");
    hs_topk_result root2 = *root;
    draft_tree_vs_ref(e, &root2, "round 2");
    printf(
        "eagle3: largest deviations from the reference: probability %.2e, tail %.2e, entropy %.2e, max logit "
        "%.2e, lse %.2e\n",
        g_worst, g_worst_other[0], g_worst_other[1], g_worst_other[2], g_worst_other[3]);
}

/* ---- exactness ---- */

/* Consumes the prompt in pieces (sizes summing to PROMPT; the first
 * n_cache of them cache-only) and drafts one level of three children of the
 * root; returns root and level. */
static void consume_pieces(e3_env *e, const uint32_t *sizes, uint32_t n_sizes, uint32_t n_cache,
                           hs_topk_result *root, hs_topk_result *level) {
    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    target_prompt(e, feats, next);
    hs_eagle3_reset(e->h);
    const hs_topk_result *r = NULL;
    for (uint32_t i = 0, at = 0; i < n_sizes; at += sizes[i++]) {
        if (i < n_cache)
            HS_CHECK(hs_eagle3_consume_cache(e->h, k_slots + at, next + at, sizes[i]));
        else
            HS_CHECK(hs_eagle3_consume(e->h, k_slots + at, next + at, sizes[i], &r));
    }
    assert_int_equal(hs_eagle3_n_past(e->h), PROMPT);
    *root = *r;
    const uint32_t parents[3] = {0, 0, 0};
    const int32_t tokens[3] = {(int32_t)r->ids[0], (int32_t)r->ids[1], (int32_t)r->ids[2]};
    const hs_topk_result *got;
    HS_CHECK(hs_eagle3_draft(e->h, parents, tokens, 3, &got));
    memcpy(level, got, 3 * sizeof *got);
}

/* The prompt consumed whole, in 2 + 4 rows (the first n_cache[0] pieces
 * cache-only) and in 1 + 3 + 2 rows (the first n_cache[1]): the roots and
 * first levels are bitwise equal; what[] names the two split roots. */
static void pieces_equal_whole(e3_env *e, const uint32_t n_cache[2], const char *const what[2],
                               const char *level_what) {
    hs_topk_result root[3], level[3][3];
    const uint32_t one[1] = {PROMPT}, two[2] = {2, 4}, three[3] = {1, 3, 2};
    consume_pieces(e, one, 1, 0, &root[0], level[0]);
    consume_pieces(e, two, 2, n_cache[0], &root[1], level[1]);
    consume_pieces(e, three, 3, n_cache[1], &root[2], level[2]);
    for (int k = 1; k < 3; k++) {
        topk_equal(&root[k], &root[0], what[k - 1]);
        for (int i = 0; i < 3; i++)
            topk_equal(&level[k][i], &level[0][i], level_what);
    }
}

static void test_chunks(void **state) {
    const uint32_t none[2] = {0, 0};
    const char *const what[2] = {"root, 2 + 4 rows", "root, 1 + 3 + 2 rows"};
    pieces_equal_whole(*state, none, what, "first level after chunks");
}

/* Cache-only consumes write the cache rows full ones write: a root and a
 * level drafted after them are bitwise those of one full consume; drafting
 * right after a cache-only consume is refused; it runs 6 of the 13 ops. */
static void test_cache_consume(void **state) {
    e3_env *e = *state;
    const uint32_t cached[2] = {1, 2};
    const char *const what[2] = {"root after 2 cache-only + 4 rows", "root after 1 + 3 cache-only + 2 rows"};
    pieces_equal_whole(e, cached, what, "first level after cache-only consumes");
    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    target_prompt(e, feats, next);
    hs_eagle3_reset(e->h);
    HS_CHECK(hs_eagle3_consume_cache(e->h, k_slots, next, 5));
    /* (The split group chunks token_embd and the taps: more dispatches.) */
    const uint32_t split_n = hs_ops_tuning(e->base.ops)->split_n;
    if (hs_ops_caps(e->base.ops)->max_storage_buffer_range > g_split_range)
        assert_int_equal(hs_eagle3_last_dispatches(e->h), 6 + 2 * (split_n && 8 >= split_n ? 1u : 0u));
    const uint32_t p0 = 0;
    const hs_topk_result *r;
    assert_int_equal(hs_eagle3_draft(e->h, &p0, next, 1, &r), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "cache-only"));
    assert_int_equal(hs_eagle3_consume_cache(e->h, k_slots, next, 0), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_eagle3_n_past(e->h), 5);
    HS_CHECK(hs_eagle3_consume(e->h, k_slots + 5, next + 5, 1, &r));
    HS_CHECK(hs_eagle3_draft(e->h, &p0, next, 1, &r));
}

/* A node drafted alone (bucket 1, slot 1; its child in bucket 1, slot 2)
 * equals the same node inside a level of five (bucket 8, slot 3; its child
 * among three, bucket 4, slot 7), and reset_tree + redraft repeats both. */
static void test_level_invariance(void **state) {
    e3_env *e = *state;
    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    target_prompt(e, feats, next);
    hs_eagle3_reset(e->h);
    const hs_topk_result *root, *got;
    HS_CHECK(hs_eagle3_consume(e->h, k_slots, next, PROMPT, &root));
    const hs_topk_result r0 = *root;
    const int32_t A = (int32_t)r0.ids[2];
    hs_topk_result alone[2], again[2], wide[2];
    for (int pass = 0; pass < 2; pass++) {
        hs_eagle3_reset_tree(e->h);
        const uint32_t p0 = 0, p1 = 1;
        HS_CHECK(hs_eagle3_draft(e->h, &p0, &A, 1, &got));
        (pass ? again : alone)[0] = got[0];
        const int32_t child = (int32_t)got[0].ids[0];
        HS_CHECK(hs_eagle3_draft(e->h, &p1, &child, 1, &got));
        (pass ? again : alone)[1] = got[0];
    }
    topk_equal(&again[0], &alone[0], "redraft after reset_tree, level 1");
    topk_equal(&again[1], &alone[1], "redraft after reset_tree, level 2");
    hs_eagle3_reset_tree(e->h);
    const uint32_t par1[5] = {0, 0, 0, 0, 0};
    const int32_t tok1[5] = {(int32_t)r0.ids[0], (int32_t)r0.ids[1], A, (int32_t)r0.ids[3],
                             (int32_t)r0.ids[4]};
    HS_CHECK(hs_eagle3_draft(e->h, par1, tok1, 5, &got));
    wide[0] = got[2];
    /* Children of slots 1, 3 (node A) and 5. */
    const uint32_t par2[3] = {1, 3, 5};
    const int32_t tok2[3] = {(int32_t)got[0].ids[0], (int32_t)alone[0].ids[0], (int32_t)got[4].ids[0]};
    HS_CHECK(hs_eagle3_draft(e->h, par2, tok2, 3, &got));
    wide[1] = got[1];
    topk_equal(&wide[0], &alone[0], "node alone vs in a level of five");
    topk_equal(&wide[1], &alone[1], "child alone vs in a level of three");
    /* Siblings see other tokens: their records differ. */
    assert_true(memcmp(got[0].probs, got[1].probs, TOPK * 4) != 0);
}

/* Dispatches per consume and draft level; buckets share graphs. */
static void test_dispatches(void **state) {
    e3_env *e = *state;
    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    target_prompt(e, feats, next);
    hs_eagle3_reset(e->h);
    const hs_topk_result *root, *got;
    uint32_t graphs = 0;
    /* A product with a prologue (4 in the layer, 1 in the output head) adds
     * its x' pass where the tuning splits products of that many columns. */
    const uint32_t split_n = hs_ops_tuning(e->base.ops)->split_n;
#define PRO(cols) (split_n && (cols) >= split_n ? 1u : 0u)
    for (uint32_t n = 5; n <= 6; n++) { /* 5 and 6 rows: one bucket of 8 */
        hs_eagle3_reset(e->h);
        HS_CHECK(hs_eagle3_consume(e->h, k_slots, next, n, &root));
        /* the head runs on the last row only */
        assert_int_equal(hs_eagle3_last_dispatches(e->h), 13 + 4 * PRO(8) + PRO(1));
        if (n == 5) graphs = hs_eagle3_graph_count(e->h);
    }
    assert_int_equal(hs_eagle3_graph_count(e->h), graphs);
    uint32_t parents[MAX_NODES] = {0};
    int32_t tokens[MAX_NODES];
    for (int i = 0; i < MAX_NODES; i++)
        tokens[i] = (int32_t)root->ids[i % TOPK];
    HS_CHECK(hs_eagle3_draft(e->h, parents, tokens, 5, &got));
    assert_int_equal(hs_eagle3_last_dispatches(e->h), 12 + 5 * PRO(8));
#undef PRO
    const uint32_t after5 = hs_eagle3_graph_count(e->h);
    for (uint32_t w = 6; w <= 8; w++) {
        hs_eagle3_reset_tree(e->h);
        HS_CHECK(hs_eagle3_draft(e->h, parents, tokens, w, &got));
    }
    assert_int_equal(hs_eagle3_graph_count(e->h), after5); /* 5..8: one bucket */
    /* A level of the whole tree: the last bucket is max_nodes itself (24). */
    hs_eagle3_reset_tree(e->h);
    HS_CHECK(hs_eagle3_draft(e->h, parents, tokens, MAX_NODES, &got));
    assert_int_equal(hs_eagle3_n_slots(e->h), MAX_NODES);
    assert_true(hs_eagle3_weight_bytes(e->h) > 0);
    assert_int_equal(hs_eagle3_max_nodes(e->h), MAX_NODES);
    assert_int_equal(hs_eagle3_top_k(e->h), TOPK);
}

/* hs_eagle3_prepare records every consume and draft graph up to its sizes:
 * on a head of its own (the group's has graphs from earlier tests), consumes
 * of 1 .. PROMPT rows (full and cache-only) and levels of 1 .. MAX_NODES
 * nodes record nothing new after it, nor does preparing again. */
static void test_prepare(void **state) {
    e3_env *e = *state;
    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    target_prompt(e, feats, next);
    hs_eagle3 *h;
    const hs_eagle3_options ho = head_options();
    HS_CHECK(hs_eagle3_load(e->base.ops, e->hg, e->t, &ho, &h));
    HS_CHECK(hs_eagle3_prepare(h, PROMPT, MAX_NODES));
    const uint32_t graphs = hs_eagle3_graph_count(h);
    HS_CHECK(hs_eagle3_prepare(h, PROMPT, MAX_NODES));
    uint32_t again = hs_eagle3_graph_count(h), first_new = 0;
    const hs_topk_result *root = NULL, *got;
    for (uint32_t n = 1; n <= PROMPT; n++) {
        hs_eagle3_reset(h);
        HS_CHECK(hs_eagle3_consume_cache(h, k_slots, next, n));
        hs_eagle3_reset(h);
        HS_CHECK(hs_eagle3_consume(h, k_slots, next, n, &root));
        if (!first_new && hs_eagle3_graph_count(h) != graphs) first_new = n;
    }
    uint32_t parents[MAX_NODES] = {0};
    int32_t tokens[MAX_NODES];
    for (int i = 0; i < MAX_NODES; i++)
        tokens[i] = (int32_t)root->ids[i % TOPK];
    for (uint32_t w = 1; w <= MAX_NODES; w++) {
        hs_eagle3_reset_tree(h);
        HS_CHECK(hs_eagle3_draft(h, parents, tokens, w, &got));
        if (!first_new && hs_eagle3_graph_count(h) != graphs) first_new = 100 + w;
    }
    hs_eagle3_destroy(h);
    assert_int_equal(again, graphs);
    if (first_new)
        fail_msg("%s of %u recorded a graph the preparation did not", first_new < 100 ? "a consume" : "a level",
                 first_new % 100);
}

/* ---- fit and files ---- */

static void expect_fit_error(const hs_eagle3_config *c, const hs_llama *t, const char *const *needles,
                             int n) {
    assert_int_equal(hs_eagle3_check_target(c, t), HS_ERR_INVALID_ARG);
    for (int i = 0; i < n; i++)
        if (!strstr(hs_last_error(), needles[i]))
            fail_msg("fit error '%s' does not name '%s'", hs_last_error(), needles[i]);
}

static void test_fit(void **state) {
    e3_env *e = *state;
    const hs_eagle3_config *c = hs_eagle3_cfg(e->h);
    HS_CHECK(hs_eagle3_check_target(c, e->t));
    assert_string_equal(c->target_name, "stories260K");
    assert_int_equal(c->head_dim, HEAD_DIM);
    assert_int_equal(c->n_rows_train, 0); /* the file records none */
    hs_eagle3_config bad = *c;
    bad.target_dim = 32;
    expect_fit_error(&bad, e->t, (const char *[]){"hidden size", "32"}, 2);
    bad = *c;
    bad.dim = 32;
    expect_fit_error(&bad, e->t, (const char *[]){"dim: the head's 32"}, 1);
    bad = *c;
    bad.n_vocab = 500;
    expect_fit_error(&bad, e->t, (const char *[]){"vocabulary: the head's 500 ids, the target's 512"}, 1);
    bad = *c;
    bad.tap_layers[2] = 4;
    expect_fit_error(&bad, e->t,
                     (const char *[]){"tap layers: the head reads 1, 2, 4, the target taps 1, 2, 3"}, 1);
    /* Every mismatch at once, each named. */
    bad.n_vocab = 500;
    bad.target_dim = 32;
    expect_fit_error(&bad, e->t, (const char *[]){"hidden size", "vocabulary", "tap layers"}, 3);
    /* Before loading: the sizes alone (hs_cli_head_find picks heads with this). */
    HS_CHECK(hs_eagle3_check_config(c, hs_llama_cfg(e->t)));
    assert_int_equal(hs_eagle3_check_config(&bad, hs_llama_cfg(e->t)), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "vocabulary"));
    bad = *c;
    bad.tap_layers[1] = 5;
    assert_int_equal(hs_eagle3_check_config(&bad, hs_llama_cfg(e->t)), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "tap layer 5: the target has 5 layers"));
    /* A target without taps, and one with EAGLE-3's default layers (2, 2, 2 for 5 layers). */
    hs_llama *plain = NULL, *deflt = NULL;
    hs_llama_options po = {.n_ctx = 64, .max_batch = 8};
    HS_CHECK(hs_llama_load(e->base.ops, e->tg, &po, &plain));
    expect_fit_error(c, plain, (const char *[]){"without taps"}, 1);
    po.taps = true;
    HS_CHECK(hs_llama_load(e->base.ops, e->tg, &po, &deflt));
    expect_fit_error(c, deflt, (const char *[]){"the target taps 2, 2, 2"}, 1);
    /* hs_eagle3_load refuses as check_target does, and leaves nothing alive. */
    const uint64_t mark = hs_vk_live_mark(e->base.vk);
    hs_eagle3 *h = (hs_eagle3 *)1;
    assert_int_equal(hs_eagle3_load(e->base.ops, e->hg, plain, NULL, &h), HS_ERR_INVALID_ARG);
    assert_null(h);
    hs_vk_live_counts left = hs_vk_live_since(e->base.vk, mark);
    assert_int_equal(left.buffers + left.seqs, 0);
    /* A head made for EAGLE-3's default layers fits the default target. */
    hs_gw w;
    const uint32_t dl[3] = {2, 2, 2};
    head_spec sp = {.layers = dl};
    write_head(&sp, &w);
    hs_gguf *g = NULL;
    HS_CHECK(hs_gguf_open_memory(w.buf, w.len, "head-2-2-2", &g));
    HS_CHECK(hs_eagle3_load(e->base.ops, g, deflt, NULL, &h));
    assert_int_equal(hs_eagle3_top_k(h), 10); /* defaults */
    assert_int_equal(hs_eagle3_max_nodes(h), 128);
    hs_eagle3_destroy(h);
    /* The rows it was trained on, when the file records them. */
    hs_gw w2;
    write_head(&(head_spec){.train_rows_key = true, .train_rows = 512}, &w2);
    hs_gguf *g2 = NULL;
    hs_eagle3_config c2;
    HS_CHECK(hs_gguf_open_memory(w2.buf, w2.len, "head-rows", &g2));
    HS_CHECK(hs_eagle3_config_read(g2, &c2));
    assert_int_equal(c2.n_rows_train, 512);
    hs_gguf_close(g2);
    hs_gw_free(&w2);
    /* top_k past the kernel's limit. */
    hs_eagle3_options o = {.top_k = HS_TOPK_MAX_K + 1};
    assert_int_equal(hs_eagle3_load(e->base.ops, g, deflt, &o, &h), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "top_k"));
    hs_gguf_close(g);
    hs_gw_free(&w);
    hs_llama_destroy(plain);
    hs_llama_destroy(deflt);
}

/* Loads a head file with one deviation: the status, a substring of the
 * message, and nothing left alive. */
static void expect_bad_file(e3_env *e, const head_spec *sp, hs_status want, const char *needle) {
    hs_gw w;
    write_head(sp, &w);
    hs_gguf *g = NULL;
    hs_eagle3 *h = (hs_eagle3 *)1;
    hs_eagle3_config c;
    const uint64_t mark = hs_vk_live_mark(e->base.vk);
    hs_status st = hs_gguf_open_memory(w.buf, w.len, "bad-head", &g);
    if (st == HS_OK) st = hs_eagle3_load(e->base.ops, g, e->t, NULL, &h);
    if (st != want || !strstr(hs_last_error(), needle))
        fail_msg("expected %s naming '%s', got %s: %s", hs_status_string(want), needle, hs_status_string(st),
                 hs_last_error());
    assert_null(h);
    if (want == HS_ERR_FORMAT && strstr(needle, "eagle3."))
        assert_int_equal(hs_eagle3_config_read(g, &c), want);
    hs_vk_live_counts left = hs_vk_live_since(e->base.vk, mark);
    assert_int_equal(left.buffers + left.seqs, 0);
    hs_gguf_close(g);
    hs_gw_free(&w);
}

static void test_bad_files(void **state) {
    e3_env *e = *state;
    static const char *required[] = {"eagle3.embedding_length",     "eagle3.feed_forward_length",
                                     "eagle3.attention.head_count", "eagle3.attention.layer_norm_rms_epsilon",
                                     "eagle3.rope.freq_base",       "eagle3.context_length",
                                     "eagle3.vocab_size",           "eagle3.draft_vocab_size",
                                     "eagle3.target_hidden_size",   "eagle3.target_layers"};
    for (size_t i = 0; i < sizeof required / sizeof required[0]; i++) {
        head_spec sp = {.skip_key = required[i]};
        expect_bad_file(e, &sp, HS_ERR_FORMAT, required[i]);
    }
    for (int i = 0; i < N_TENSORS; i++) {
        head_spec sp = {.skip_tensor = g_t[i].name};
        expect_bad_file(e, &sp, HS_ERR_FORMAT, g_t[i].name);
    }
    static const int wide[] = {T_FC, T_Q, T_V, T_O, T_UP, T_DOWN, T_OUT, T_FFN_NORM, T_D2T};
    for (size_t i = 0; i < sizeof wide / sizeof wide[0]; i++) {
        head_spec sp = {.wide_tensor = g_t[wide[i]].name};
        expect_bad_file(e, &sp, HS_ERR_FORMAT, g_t[wide[i]].name);
    }
    expect_bad_file(e, &(head_spec){.arch = "llama"}, HS_ERR_FORMAT, "not an eagle3 draft head");
    expect_bad_file(e, &(head_spec){.n_layers = 2}, HS_ERR_FORMAT, "target_layers has 2 entries");
    expect_bad_file(e, &(head_spec){.d2t_last = 400}, HS_ERR_FORMAT, "d2t maps draft id 199");
    expect_bad_file(e, &(head_spec){.d2t_last = -200}, HS_ERR_FORMAT, "outside the vocabulary");
    expect_bad_file(e, &(head_spec){.f32_tensor = "blk.0.attn_k.weight"}, HS_ERR_UNSUPPORTED_TYPE,
                    "attn_k.weight is f32 but blk.0.attn_q.weight is f16");
    expect_bad_file(e, &(head_spec){.dim_key = 48}, HS_ERR_INVALID_ARG, "dim: the head's 48");
    expect_bad_file(e, &(head_spec){.vocab = 150}, HS_ERR_FORMAT,
                    "draft vocabulary of 200 ids for a vocabulary of 150");
    expect_bad_file(e, &(head_spec){.train_rows_key = true, .train_rows = 0}, HS_ERR_FORMAT,
                    "eagle3.train_row_length 0 is not in [1, context_length 2048]");
    expect_bad_file(e, &(head_spec){.train_rows_key = true, .train_rows = 4096}, HS_ERR_FORMAT,
                    "eagle3.train_row_length 4096");
}

/* Calls the head refuses, each without changing its state. */
static void test_bad_calls(void **state) {
    e3_env *e = *state;
    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    target_prompt(e, feats, next);
    hs_eagle3_reset(e->h);
    const hs_topk_result *r;
    const uint32_t p0 = 0;
    assert_int_equal(hs_eagle3_draft(e->h, &p0, next, 1, &r), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "no root"));
    assert_int_equal(hs_eagle3_consume(e->h, k_slots, next, 0, &r), HS_ERR_INVALID_ARG);
    const uint32_t far = 64; /* the target's max_batch */
    assert_int_equal(hs_eagle3_consume(e->h, &far, next, 1, &r), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "tap slot 64"));
    const int32_t bad_tok = VOCAB;
    assert_int_equal(hs_eagle3_consume(e->h, k_slots, &bad_tok, 1, &r), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_eagle3_n_past(e->h), 0);
    HS_CHECK(hs_eagle3_consume(e->h, k_slots, next, PROMPT, &r));
    const uint32_t p2 = 1; /* not drafted yet */
    assert_int_equal(hs_eagle3_draft(e->h, &p2, next, 1, &r), HS_ERR_INVALID_ARG);
    assert_non_null(strstr(hs_last_error(), "parent slot 1"));
    assert_int_equal(hs_eagle3_draft(e->h, &p0, &bad_tok, 1, &r), HS_ERR_INVALID_ARG);
    uint32_t parents[MAX_NODES + 1] = {0};
    int32_t tokens[MAX_NODES + 1] = {0};
    assert_int_equal(hs_eagle3_draft(e->h, parents, tokens, MAX_NODES + 1, &r), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_eagle3_n_slots(e->h), 0);
    HS_CHECK(hs_eagle3_draft(e->h, parents, tokens, MAX_NODES - 1, &r));
    assert_int_equal(hs_eagle3_draft(e->h, parents, tokens, 2, &r), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_eagle3_n_slots(e->h), MAX_NODES - 1);
    /* The head's context: 512 rows; consuming past it is refused. */
    hs_eagle3_reset(e->h);
    for (int i = 0; i < 8; i++) {
        uint32_t s[64];
        int32_t t[64];
        for (int k = 0; k < 64; k++)
            s[k] = (uint32_t)k % PROMPT, t[k] = next[k % PROMPT];
        HS_CHECK(hs_eagle3_consume(e->h, s, t, 64, &r));
    }
    assert_int_equal(hs_eagle3_consume(e->h, k_slots, next, 1, &r), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_eagle3_draft(e->h, &p0, next, 1, &r), HS_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(hs_last_error(), "context full"));
}

/* ---- the q4_1 head ---- */

/* w rounded through q4_1 (ggml's reference quantizer, then its dequantizer): the
 * weights a head loaded with HS_EAGLE3_WEIGHTS_Q4_1 computes with. */
static float *q4_1_round(const head_tensor *t) {
    const size_t n = (size_t)t->rows * t->cols;
    float *out = malloc(n * sizeof *out);
    uint8_t *blocks = malloc((size_t)t->cols / 32 * 20);
    assert_non_null(out);
    assert_non_null(blocks);
    for (uint32_t r = 0; r < t->rows; r++) {
        HS_CHECK(hs_quantize_row(HS_TYPE_Q4_1, t->data + (size_t)r * t->cols, blocks, t->cols));
        HS_CHECK(hs_dequantize_row(HS_TYPE_Q4_1, blocks, out + (size_t)r * t->cols, t->cols));
    }
    free(blocks);
    return out;
}

/* Largest |p - p_ref| over the K ranks of a record against softmax(logits) of the reference. */
static double topk_deviation(const hs_topk_result *got, const double *logits, const char *what) {
    double p[DVOCAB], worst = 0;
    ref_eagle3_probs(logits, DVOCAB, p);
    for (uint32_t j = 0; j < got->k; j++) {
        if (got->ids[j] >= VOCAB || g_t2d[got->ids[j]] < 0)
            fail_msg("%s: rank %u: id %u is not in the draft vocabulary", what, j, got->ids[j]);
        const double d = fabs((double)got->probs[j] - p[g_t2d[got->ids[j]]]);
        worst = d > worst ? d : worst;
    }
    return worst;
}

/* HS_EAGLE3_WEIGHTS_Q4_1: every matrix quantized at load (cols are whole blocks here), the
 * products on 8-bit activations where the tuning has them. Against the reference with the same
 * q4_1-rounded weights, only the activations' 8-bit rounding separates the two (measured on
 * lavapipe: probabilities within 9.2e-3; without 8-bit activations 1e-6); against the file's
 * exact weights the q4_1 rounding shows too (measured: 4.0e-2), so the bound between them catches
 * a head that kept the file's weights or a wrong block layout. */
#define TOL_Q4_1 2e-2
static void test_quantized(void **state) {
    e3_env *e = *state;
    assert_false(hs_eagle3_quantized(e->h));
    hs_eagle3_options ho = head_options();
    ho.weights = HS_EAGLE3_WEIGHTS_Q4_1;
    hs_eagle3 *q = NULL;
    HS_CHECK(hs_eagle3_load(e->base.ops, e->hg, e->t, &ho, &q));
    assert_true(hs_eagle3_quantized(q));
    assert_true(hs_eagle3_weight_bytes(q) < hs_eagle3_weight_bytes(e->h));
    static const int mats[] = {T_FC, T_Q, T_K, T_V, T_O, T_GATE, T_UP, T_DOWN, T_OUT};
    float *rounded[T_D2T] = {0};
    for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++)
        rounded[mats[i]] = q4_1_round(&g_t[mats[i]]);
    ref_eagle3_weights rw = e->rw;
    rw.fc = rounded[T_FC], rw.wq = rounded[T_Q], rw.wk = rounded[T_K], rw.wv = rounded[T_V];
    rw.wo = rounded[T_O], rw.wgate = rounded[T_GATE], rw.wup = rounded[T_UP], rw.wdown = rounded[T_DOWN];
    rw.out = rounded[T_OUT];
    ref_eagle3 *rq = ref_eagle3_create(&rw, 512, MAX_NODES);

    static float feats[PROMPT * 3 * TDIM];
    int32_t next[PROMPT];
    target_prompt(e, feats, next);
    const hs_topk_result *root;
    HS_CHECK(hs_eagle3_consume(q, k_slots, next, PROMPT, &root));
    const hs_topk_result r0 = *root;
    double lq[DVOCAB], lx[DVOCAB];
    ref_eagle3_consume(rq, feats, next, PROMPT, lq);
    ref_eagle3_reset(e->ref);
    ref_eagle3_consume(e->ref, feats, next, PROMPT, lx);
    double dq = topk_deviation(&r0, lq, "q4_1 root");
    double dx = topk_deviation(&r0, lx, "q4_1 root (exact weights)");
    /* A level of three children of the root, tokens its top three ids. */
    const uint32_t parents[3] = {0, 0, 0};
    const int32_t tokens[3] = {(int32_t)r0.ids[0], (int32_t)r0.ids[1], (int32_t)r0.ids[2]};
    const hs_topk_result *got;
    HS_CHECK(hs_eagle3_draft(q, parents, tokens, 3, &got));
    double lvq[3 * DVOCAB], lvx[3 * DVOCAB];
    ref_eagle3_draft(rq, parents, tokens, 3, lvq);
    ref_eagle3_draft(e->ref, parents, tokens, 3, lvx);
    for (int i = 0; i < 3; i++) {
        const double a = topk_deviation(&got[i], lvq + (size_t)i * DVOCAB, "q4_1 level 1");
        const double b = topk_deviation(&got[i], lvx + (size_t)i * DVOCAB, "q4_1 level 1 (exact weights)");
        dq = a > dq ? a : dq;
        dx = b > dx ? b : dx;
    }
    printf("eagle3 q4_1: largest probability deviation %.2e from the q4_1-rounded reference, %.2e from the "
           "exact one\n", dq, dx);
    if (dq > TOL_Q4_1) fail_msg("q4_1 head: probabilities %.2e from the q4_1-rounded reference", dq);
    if (dx <= TOL_Q4_1)
        fail_msg("q4_1 head: probabilities within %.2e of the exact weights' reference: not quantized?", dx);
    ref_eagle3_destroy(rq);
    for (int i = 0; i < T_D2T; i++)
        free(rounded[i]);
    hs_eagle3_destroy(q);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_vs_reference),  cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_cache_consume), cmocka_unit_test(test_level_invariance),
        cmocka_unit_test(test_dispatches),    cmocka_unit_test(test_fit),
        cmocka_unit_test(test_bad_files),     cmocka_unit_test(test_bad_calls),
        cmocka_unit_test(test_quantized),     cmocka_unit_test(test_prepare),
    };
    const struct CMUnitTest again[] = {
        cmocka_unit_test(test_vs_reference),
        cmocka_unit_test(test_chunks),
        cmocka_unit_test(test_cache_consume),
        cmocka_unit_test(test_level_invariance),
    };
    int fails = hs_test_run_group("eagle3", tests, setup, teardown);
    fails += hs_test_run_group("eagle3_noncoherent", again, setup_noncoherent, teardown);
    fails += hs_test_run_group("eagle3_split", again, setup_split, teardown);
    for (int i = 0; i < T_D2T; i++)
        free(g_t[i].data);
    return fails;
}
