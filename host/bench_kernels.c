/* Kernel benchmarks of `bench-ops`: weight products per type (GB/s of weights
 * for matrix-vector, GFLOP/s for N columns), and the other ops at the sizes of
 * the default model (SmolLM2-135M: dim 576, 9 heads / 3 KV heads of 64, vocab
 * 49152). Each figure is one sequence holding `inner` dispatches of the op
 * (with barriers, as in a model graph), timed over repetitions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_bench_ops.h"
#include "hs_quant.h"
#include "op_attn.h"
#include "op_elem.h"
#include "op_matmul.h"
#include "op_select.h"

static uint64_t g_rng = 0x243F6A8885A308D3ull;
static float frand(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return (float)((g_rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* Random weights: quantized from random floats where we have a quantizer,
 * else K-quant blocks of random bits with small finite scales. */
static hs_status make_weight(hs_ops *ops, hs_type t, uint32_t rows, uint32_t cols, hs_weight **out) {
    uint64_t row_bytes = hs_type_row_bytes(t, cols);
    uint8_t *data = malloc(row_bytes * rows);
    float *row = malloc(sizeof(float) * cols);
    if (!data || !row) {
        free(data);
        free(row);
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: out of memory");
    }
    for (uint32_t r = 0; r < rows; r++) {
        for (uint32_t c = 0; c < cols; c++) row[c] = frand();
        uint8_t *dst = data + row_bytes * r;
        if (hs_quantize_row(t, row, dst, cols) != HS_OK) {
            for (uint64_t i = 0; i < row_bytes; i++) dst[i] = (uint8_t)(frand() * 127 + 128);
            uint16_t scale = hs_f32_to_f16(0.01f);
            for (uint64_t b = 0; b < row_bytes / hs_type_block_bytes(t); b++) {
                uint8_t *blk = dst + b * hs_type_block_bytes(t);
                /* q4_K: d, dmin first; q6_K: d last. */
                if (t == HS_TYPE_Q4_K) {
                    memcpy(blk, &scale, 2);
                    memcpy(blk + 2, &scale, 2);
                } else if (t == HS_TYPE_Q6_K) {
                    memcpy(blk + 208, &scale, 2);
                }
            }
        }
    }
    hs_error_clear();
    hs_status st = hs_weight_create(ops, t, rows, cols, data, out);
    free(data);
    free(row);
    return st;
}

/* Records `inner` copies of one op (fn) into seq, separated by barriers. */
typedef hs_status (*rec_fn)(hs_ops *ops, hs_vk_seq *seq, void *user);

static hs_status time_op(hs_ops *ops, hs_vk_seq *seq, rec_fn fn, void *user, int inner, int reps,
                         double *samples) {
    hs_status st = hs_vk_seq_begin(seq);
    for (int i = 0; st == HS_OK && i < inner; i++) {
        st = fn(ops, seq, user);
        hs_vk_seq_barrier(seq);
    }
    if (st == HS_OK) st = hs_vk_seq_end(seq);
    if (st == HS_OK) st = hs_bench_time_seq(seq, reps, inner, samples);
    return st;
}

typedef struct mm_args {
    hs_weight *w;
    hs_vk_binding x, y;
    uint32_t n;
    const hs_matmul_opts *opt;
} mm_args;

static hs_status rec_matmul(hs_ops *ops, hs_vk_seq *seq, void *user) {
    mm_args *a = user;
    return hs_op_matmul(ops, seq, a->w, a->x, a->n, a->y, a->opt);
}

static bool wanted(const char *only, const char *op) { return !only || strstr(op, only); }

static hs_status bench_matmul(hs_ops *ops, hs_bench *b, int reps, const char *only) {
    hs_status st = HS_OK;
    hs_vk_ctx *vk = hs_ops_vk(ops);
    hs_vk_seq *seq = NULL;
    hs_vk_buffer *x = NULL, *y = NULL, *yh = NULL, *scratch = NULL, *gain = NULL;
    hs_weight *w = NULL;
    double samples[HS_BENCH_MAX_SAMPLES];
    const uint32_t max_n = 64;
    const hs_type types[] = {HS_TYPE_F32, HS_TYPE_F16, HS_TYPE_Q8_0, HS_TYPE_Q4_0,
                             HS_TYPE_Q4_1, HS_TYPE_Q4_K, HS_TYPE_Q6_K};
    const uint32_t R = 4096, C = 4096;
    HS_TRY(hs_vk_seq_create(vk, &seq));
    HS_TRY(hs_vk_buffer_create(vk, (uint64_t)max_n * C * 4, HS_MEM_DEVICE, &x));
    HS_TRY(hs_vk_buffer_create(vk, (uint64_t)max_n * R * 4, HS_MEM_DEVICE, &y));
    HS_TRY(hs_vk_buffer_fill(x, 0, (uint64_t)max_n * C * 4, 0x3c23d70au)); /* 0.01f */
    if (wanted(only, "matvec")) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            HS_TRY(make_weight(ops, types[t], R, C, &w));
            mm_args a = {w, {x, 0, 0}, {y, 0, 0}, 1, NULL};
            HS_TRY(time_op(ops, seq, rec_matmul, &a, 10, reps, samples));
            /* GB/s of the weights as stored in GGUF (what a model file costs to read). */
            double bytes = (double)hs_type_row_bytes(types[t], C) * R;
            hs_bench_add(b, "matvec", hs_type_name(types[t]), "4096x4096", "GB/s", samples, reps, bytes / 1e9);
            hs_weight_destroy(w);
            w = NULL;
        }
    }
    if (wanted(only, "matmul")) {
        /* q4_1 plain (f32 activations), q4_1 with the model's RMSNorm prologue (a pass of its
         * own where the tuning splits, on 8-bit activations with q8_act: "x8"), f32 */
        const hs_type mt[] = {HS_TYPE_Q4_1, HS_TYPE_Q4_1, HS_TYPE_F32};
        const uint32_t MR = 2048, MC = 2048;
        HS_TRY(hs_vk_buffer_create(vk, (uint64_t)max_n * MC * 4, HS_MEM_DEVICE, &scratch));
        HS_TRY(hs_vk_buffer_create(vk, (uint64_t)MC * 4, HS_MEM_DEVICE, &gain));
        HS_TRY(hs_vk_buffer_fill(gain, 0, (uint64_t)MC * 4, 0x3f800000u)); /* 1.0f */
        /* as the model runs it: 8-bit activations where the tuning takes them (q8_act) */
        const bool q8 = hs_ops_tuning(ops)->q8_act != 0;
        const hs_matmul_opts norm = {.prologue = HS_MATMUL_RMSNORM,
                                     .norm = {gain, 0, 0},
                                     .eps = 1e-5f,
                                     .scratch = {scratch, 0, 0},
                                     .act_q8 = q8};
        for (size_t t = 0; t < 3; t++) {
            HS_TRY(make_weight(ops, mt[t], MR, MC, &w));
            for (uint32_t n = 1; n <= max_n; n *= 2) {
                mm_args a = {w, {x, 0, 0}, {y, 0, 0}, n, t == 1 ? &norm : NULL};
                HS_TRY(time_op(ops, seq, rec_matmul, &a, 4, reps, samples));
                char param[48];
                snprintf(param, sizeof param, "2048x2048, N=%u", n);
                const char *variant = t == 1 ? (q8 ? "q4_1+norm x8" : "q4_1+norm") : hs_type_name(mt[t]);
                hs_bench_add(b, "matmul", variant, param, "GFLOP/s", samples, reps, 2.0 * MR * MC * n / 1e9);
            }
            hs_weight_destroy(w);
            w = NULL;
        }
    }
    if (wanted(only, "head")) {
        /* SmolLM2's output head (the tied q8_0 embedding, 49152 x 576) for the few rows a speculative
         * round asks it for: one at a time (hs_llama_head) or several in one product */
        const uint32_t HR = 49152, HC = 576, max_rows = 8;
        HS_TRY(hs_vk_buffer_create(vk, (uint64_t)max_rows * HR * 4, HS_MEM_DEVICE, &yh));
        HS_TRY(make_weight(ops, HS_TYPE_Q8_0, HR, HC, &w));
        for (uint32_t n = 1; n <= max_rows; n = n < 4 ? n + 1 : 2 * n) {
            mm_args a = {w, {x, 0, 0}, {yh, 0, 0}, n, NULL};
            HS_TRY(time_op(ops, seq, rec_matmul, &a, 4, reps, samples));
            char param[48];
            snprintf(param, sizeof param, "%ux%u, N=%u", HR, HC, n);
            hs_bench_add(b, "head", "q8_0", param, "us", samples, reps, 0);
        }
        hs_weight_destroy(w);
        w = NULL;
    }
fail:
    hs_weight_destroy(w);
    hs_vk_buffer_destroy(x);
    hs_vk_buffer_destroy(y);
    hs_vk_buffer_destroy(yh);
    hs_vk_buffer_destroy(scratch);
    hs_vk_buffer_destroy(gain);
    hs_vk_seq_destroy(seq);
    return st;
}

/* ---- the other ops at SmolLM2-135M sizes ---- */
enum { DIM = 576, N_HEAD = 9, N_KV = 3, HD = 64, VOCAB = 49152, CTX = 1024, TREE = 64 };

typedef struct small_args {
    hs_vk_binding x, y, w, z, pos, rows, mask, depth, info, parents, out;
    hs_kv_layer kv;
    uint32_t n;
} small_args;

static hs_status rec_rmsnorm(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    return hs_op_rmsnorm(o, s, &a->x, &a->w, &a->y, a->n, DIM, 1e-5f);
}
static hs_status rec_softmax(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    return hs_op_softmax(o, s, &a->x, &a->y, a->n, VOCAB, 1.0f);
}
static hs_status rec_argmax(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    return hs_op_argmax(o, s, &a->x, a->n, VOCAB, &a->out);
}
static hs_status rec_topk(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    return hs_op_topk(o, s, &a->x, a->n, VOCAB, 10, 1.0f, &a->out);
}
static hs_status rec_rope_kv(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    hs_rope_params rp = {.n_rot = HD, .mode = HS_ROPE_NEOX, .freq_base = 10000.0f, .freq_scale = 1.0f};
    return hs_op_rope_kv(o, s, &a->x, &a->pos, &a->rows, &a->y, &a->kv, a->n, N_HEAD, &rp);
}
static hs_status rec_attention(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    return hs_op_attention(o, s, &a->x, &a->kv, N_HEAD, &a->info, &a->mask, a->n, 0.125f, &a->y);
}
static hs_status rec_tree_mask(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    return hs_op_tree_mask(o, s, &a->parents, a->n, &a->mask, &a->depth);
}
static hs_status rec_swiglu(hs_ops *o, hs_vk_seq *s, void *u) {
    small_args *a = u;
    return hs_op_swiglu(o, s, &a->x, &a->y, a->n, 1536);
}

static hs_status bench_small(hs_ops *ops, hs_bench *b, int reps, const char *only) {
    hs_status st = HS_OK;
    hs_vk_ctx *vk = hs_ops_vk(ops);
    hs_vk_seq *seq = NULL;
    hs_vk_buffer *bx = NULL, *by = NULL, *bw = NULL, *bk = NULL, *bv = NULL, *bi = NULL, *bo = NULL;
    double samples[HS_BENCH_MAX_SAMPLES];
    const uint64_t act = (uint64_t)TREE * VOCAB * 4;
    HS_TRY(hs_vk_seq_create(vk, &seq));
    HS_TRY(hs_vk_buffer_create(vk, act, HS_MEM_DEVICE, &bx));
    HS_TRY(hs_vk_buffer_create(vk, act, HS_MEM_DEVICE, &by));
    HS_TRY(hs_vk_buffer_create(vk, DIM * 4, HS_MEM_DEVICE, &bw));
    HS_TRY(hs_vk_buffer_create(vk, (uint64_t)CTX * N_KV * HD * 4, HS_MEM_DEVICE, &bk));
    HS_TRY(hs_vk_buffer_create(vk, (uint64_t)CTX * N_KV * HD * 4, HS_MEM_DEVICE, &bv));
    HS_TRY(hs_vk_buffer_create(vk, 64 * 1024, HS_MEM_DEVICE, &bi));
    HS_TRY(hs_vk_buffer_create(vk, 64 * 1024, HS_MEM_DEVICE, &bo));
    {
        float *h = malloc(act);
        if (!h) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: out of memory");
            goto fail;
        }
        for (uint64_t i = 0; i < act / 4; i++) h[i] = frand() * 4.0f;
        st = hs_vk_buffer_upload(bx, 0, h, act);
        free(h);
        if (st != HS_OK) goto fail;
    }
    HS_TRY(hs_vk_buffer_fill(bw, 0, DIM * 4, 0x3f800000u));
    HS_TRY(hs_vk_buffer_fill(bk, 0, (uint64_t)CTX * N_KV * HD * 4, 0x3c23d70au));
    HS_TRY(hs_vk_buffer_fill(bv, 0, (uint64_t)CTX * N_KV * HD * 4, 0x3c23d70au));
    /* Index buffer: positions/rows 0..TREE-1 at word 0, the chain tree's parents
     * (-1, 0, 1, ...) at word 256, attention info {CTX - TREE, TREE} at 512. */
    {
        uint32_t idx[1024] = {0};
        for (uint32_t i = 0; i < TREE; i++) {
            idx[i] = CTX - TREE + i;
            idx[256 + i] = (uint32_t)((int32_t)i - 1);
        }
        idx[512] = CTX - TREE;
        idx[513] = TREE;
        HS_TRY(hs_vk_buffer_upload(bi, 0, idx, sizeof idx));
    }
    small_args a = {.x = {bx, 0, 0}, .y = {by, 0, 0}, .w = {bw, 0, 0}, .pos = {bi, 0, 1024},
                    .rows = {bi, 0, 1024}, .parents = {bi, 1024, 1024}, .info = {bi, 2048, 16},
                    .mask = {bo, 0, 16384}, .depth = {bo, 16384, 1024}, .out = {bo, 32768, 0},
                    .kv = {.k = {bk, 0, 0}, .v = {bv, 0, 0}, .type = HS_TYPE_F32, .n_ctx = CTX,
                           .n_kv_head = N_KV, .head_dim = HD}};
    struct {
        const char *op, *variant;
        rec_fn fn;
        uint32_t n;
        uint32_t prefix; /* attention: rows before the tree (CTX - n when 0 is not meant) */
        hs_type kv;      /* attention: the cache's type */
    } cases[] = {
        {"rmsnorm", "dim 576", rec_rmsnorm, 1, 0, HS_TYPE_F32},
        {"rmsnorm", "dim 576", rec_rmsnorm, TREE, 0, HS_TYPE_F32},
        {"swiglu", "ff 1536", rec_swiglu, 1, 0, HS_TYPE_F32},
        {"rope_kv", "9+3+3 heads x 64", rec_rope_kv, 1, 0, HS_TYPE_F32},
        {"rope_kv", "9+3+3 heads x 64", rec_rope_kv, TREE, 0, HS_TYPE_F32},
        {"tree_mask", "chain", rec_tree_mask, TREE, 0, HS_TYPE_F32},
        {"attention", "ctx 1024, 9/3 heads x 64", rec_attention, 1, CTX - 1, HS_TYPE_F32},
        /* the small trees HeteroSpec verifies */
        {"attention", "ctx 1024, 9/3 heads x 64", rec_attention, 2, CTX - 2, HS_TYPE_F32},
        {"attention", "ctx 1024, 9/3 heads x 64", rec_attention, 4, CTX - 4, HS_TYPE_F32},
        {"attention", "ctx 1024, 9/3 heads x 64", rec_attention, 8, CTX - 8, HS_TYPE_F32},
        {"attention", "ctx 1024, 9/3 heads x 64", rec_attention, TREE, CTX - TREE, HS_TYPE_F32},
        /* the same over an f16 cache (--kv-type f16, the default) */
        {"attention", "ctx 1024 f16, 9/3 heads x 64", rec_attention, 1, CTX - 1, HS_TYPE_F16},
        {"attention", "ctx 1024 f16, 9/3 heads x 64", rec_attention, 2, CTX - 2, HS_TYPE_F16},
        {"attention", "ctx 1024 f16, 9/3 heads x 64", rec_attention, 4, CTX - 4, HS_TYPE_F16},
        {"attention", "ctx 1024 f16, 9/3 heads x 64", rec_attention, 8, CTX - 8, HS_TYPE_F16},
        {"attention", "ctx 1024 f16, 9/3 heads x 64", rec_attention, TREE, CTX - TREE, HS_TYPE_F16},
        /* a tree alone (no prefix): what each query costs whatever its keys */
        {"attention", "tree only, 9/3 heads x 64", rec_attention, 8, 0, HS_TYPE_F32},
        {"attention", "tree only, 9/3 heads x 64", rec_attention, TREE, 0, HS_TYPE_F32},
        {"argmax", "vocab 49152", rec_argmax, 1, 0, HS_TYPE_F32},
        {"softmax", "vocab 49152", rec_softmax, 1, 0, HS_TYPE_F32},
        {"topk", "vocab 49152, k 10", rec_topk, 1, 0, HS_TYPE_F32},
        {"topk", "vocab 49152, k 10", rec_topk, 16, 0, HS_TYPE_F32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (!wanted(only, cases[i].op)) continue;
        a.n = cases[i].n;
        a.kv.type = cases[i].kv;
        if (cases[i].fn == rec_attention) {
            /* n queries over a prefix of the given rows, the tree right after it. */
            uint32_t info[2] = {cases[i].prefix, cases[i].n};
            HS_TRY(hs_vk_buffer_upload(bi, 2048, info, sizeof info));
            /* The mask of a chain of n nodes. */
            uint32_t *mask = calloc((size_t)cases[i].n * hs_attn_mask_words(cases[i].n), 4);
            if (!mask) {
                st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: out of memory");
                goto fail;
            }
            for (uint32_t q = 0; q < cases[i].n; q++)
                for (uint32_t j = 0; j <= q; j++) mask[q * hs_attn_mask_words(cases[i].n) + j / 32] |= 1u << (j % 32);
            st = hs_vk_buffer_upload(bo, 0, mask, (size_t)cases[i].n * hs_attn_mask_words(cases[i].n) * 4);
            free(mask);
            if (st != HS_OK) goto fail;
        }
        HS_TRY(time_op(ops, seq, cases[i].fn, &a, 20, reps, samples));
        char param[48];
        snprintf(param, sizeof param, "N=%u", cases[i].n);
        hs_bench_add(b, cases[i].op, cases[i].variant, param, "us", samples, reps, 0);
    }
fail:
    hs_vk_buffer_destroy(bx);
    hs_vk_buffer_destroy(by);
    hs_vk_buffer_destroy(bw);
    hs_vk_buffer_destroy(bk);
    hs_vk_buffer_destroy(bv);
    hs_vk_buffer_destroy(bi);
    hs_vk_buffer_destroy(bo);
    hs_vk_seq_destroy(seq);
    return st;
}

hs_status hs_bench_ops_kernels(hs_ops *ops, hs_bench *b, int reps, const char *only) {
    hs_status st = bench_matmul(ops, b, reps, only);
    if (st != HS_OK) return st;
    return bench_small(ops, b, reps, only);
}
