/* `heterospec bench`: llama-bench's tests on one model — pp512 (prompt
 * processing of 512 tokens in one batch) and tg128 (128 decoding steps) —
 * as `| model | size | params | backend | test | t/s |`, mean ± std over
 * repetitions after a warm-up, or JSON with the raw samples (-o json).
 * -p and -n take lists (-p 1,2,4,8), and -d N runs every test after N
 * tokens of context (llama-bench's depth); with several -p values it also
 * prints the batch cost curve: ms per batch of N tokens and its ratio to
 * N = 1. -v N[,N..] adds vN tests: the pass a speculative round verifies
 * N tree nodes with (a chain tree, every row's logits and argmax read back,
 * nothing committed), with its own cost curve; that is T(N) of DESIGN.md
 * section 4, which ppN (only the last row's logits) underestimates. */
#include <math.h>
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "gguf.h"
#include "hs_bench_ops.h"
#include "hs_cli.h"
#include "llama.h"

#define MAX_REPS 32
#define MAX_TESTS 32

typedef struct bench_test {
    char name[32];
    int n_prompt, n_gen, n_verify;
    double samples[MAX_REPS]; /* tokens per second */
    double head_s[MAX_REPS];  /* vN, N > 1: seconds of one more row's output head (hs_llama_head) */
    int n;
    double mean, std;
} bench_test;

/* Arbitrary but valid token ids. */
static void fill_tokens(int32_t *toks, int n, uint32_t V, uint32_t salt) {
    for (int i = 0; i < n; i++)
        toks[i] = (int32_t)((i * 7919u + salt) % V);
}

/* Verification passes per vN repetition (each re-evaluates the same rows). */
#define VERIFY_PASSES 4

/* One repetition after `depth` tokens of context (evaluated in batches of at
 * most max_batch, not timed): n_prompt tokens in one batch, n_gen
 * single-token steps (as llama-bench's tg, whose context is one token when
 * depth is 0), or VERIFY_PASSES uncommitted verification passes of n_verify
 * chained tokens as speculation runs them (hs_llama_eval_tree: the root's
 * output head only), each followed, when n_verify > 1, by the output head of
 * its last row, timed apart into *head_s (the cost of every node acceptance
 * reaches past the root). */
static hs_status run_once(hs_llama *m, const bench_test *t, int depth, uint32_t max_batch, double *tps,
                          double *head_s) {
    hs_status st = HS_OK;
    uint32_t V = hs_llama_cfg(m)->n_vocab;
    int n_tok = depth > t->n_prompt ? depth : t->n_prompt;
    if (t->n_verify > n_tok) n_tok = t->n_verify;
    int32_t *toks = malloc(sizeof *toks * (size_t)(n_tok > 0 ? n_tok : 1));
    int32_t *parents = malloc(sizeof *parents * (size_t)(t->n_verify > 0 ? t->n_verify : 1));
    if (!toks || !parents) {
        free(toks);
        free(parents);
        return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: out of memory");
    }
    hs_llama_reset(m);
    fill_tokens(toks, depth, V, 101);
    for (int i = 0; i < depth; i += (int)max_batch) {
        uint32_t c = (uint32_t)(depth - i) < max_batch ? (uint32_t)(depth - i) : max_batch;
        HS_TRY(hs_llama_eval(m, toks + i, c, NULL, true, true, NULL, NULL));
    }
    if (t->n_prompt) {
        fill_tokens(toks, t->n_prompt, V, 13);
        double t0 = hs_now_s();
        HS_TRY(hs_llama_eval(m, toks, (uint32_t)t->n_prompt, NULL, true, true, NULL, NULL));
        *tps = t->n_prompt / (hs_now_s() - t0);
        goto fail;
    }
    if (t->n_verify) {
        fill_tokens(toks, t->n_verify, V, 29);
        for (int i = 0; i < t->n_verify; i++)
            parents[i] = i - 1;
        double spent = 0, head = 0;
        uint32_t a;
        for (int r = 0; r < VERIFY_PASSES; r++) {
            double t0 = hs_now_s();
            HS_TRY(hs_llama_eval_tree(m, toks, (uint32_t)t->n_verify, parents, NULL, &a));
            double t1 = hs_now_s();
            if (t->n_verify > 1) HS_TRY(hs_llama_head(m, (uint32_t)t->n_verify - 1, NULL, &a));
            spent += t1 - t0;
            head += hs_now_s() - t1;
        }
        *tps = VERIFY_PASSES * t->n_verify / spent;
        *head_s = head / VERIFY_PASSES;
        goto fail;
    }
    const uint32_t *amax;
    int32_t tok = 1;
    double t0 = hs_now_s();
    for (int i = 0; i < t->n_gen; i++) {
        HS_TRY(hs_llama_eval(m, &tok, 1, NULL, true, true, NULL, &amax));
        tok = (int32_t)amax[0];
    }
    *tps = t->n_gen / (hs_now_s() - t0);
fail:
    free(toks);
    free(parents);
    return st;
}

/* A comma-separated list of integers >= 0 ("512" or "1,2,4,8") into out;
 * the count, or -1 when malformed or longer than max. */
static int parse_list(const char *s, int *out, int max) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > 1 << 20 || n == max || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return n;
}

static void stats(bench_test *t) {
    double s = 0, q = 0;
    for (int i = 0; i < t->n; i++) s += t->samples[i];
    t->mean = s / t->n;
    for (int i = 0; i < t->n; i++) q += (t->samples[i] - t->mean) * (t->samples[i] - t->mean);
    t->std = t->n > 1 ? sqrt(q / (t->n - 1)) : 0;
}

static uint64_t n_params(const hs_gguf *g) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < hs_gguf_n_tensors(g); i++) n += (uint64_t)hs_gguf_tensor_nelements(hs_gguf_tensor_at(g, i));
    return n;
}

static uint64_t n_bytes(const hs_gguf *g) {
    uint64_t n = 0;
    for (uint64_t i = 0; i < hs_gguf_n_tensors(g); i++) n += hs_gguf_tensor_at(g, i)->nbytes;
    return n;
}

/* Mean seconds of one more row's output head over the samples of the v
 * tests with N > 1; 0 when there are none. */
static double head_mean(const bench_test *t, int n) {
    double s = 0;
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int r = 0; t[i].n_verify > 1 && r < t[i].n; r++, k++) s += t[i].head_s[r];
    return k ? s / k : 0;
}

/* Tokens of a pp or v test. */
static int test_tokens(const bench_test *t) { return t->n_prompt ? t->n_prompt : t->n_verify; }

/* ms per pass of n tests (all pp or all v) and their ratio to the first. */
static void print_curve(const char *title, const bench_test *t, int n, int depth) {
    const double ms0 = 1e3 * test_tokens(&t[0]) / t[0].mean;
    printf("\n%s (context %d):\n\n| N |", title, depth);
    for (int i = 0; i < n; i++)
        printf(" %d |", test_tokens(&t[i]));
    printf("\n| --- |");
    for (int i = 0; i < n; i++)
        printf(" ---: |");
    printf("\n| ms per pass |");
    for (int i = 0; i < n; i++)
        printf(" %.1f |", 1e3 * test_tokens(&t[i]) / t[i].mean);
    printf("\n| cost / N=%d |", test_tokens(&t[0]));
    for (int i = 0; i < n; i++)
        printf(" %.2f |", 1e3 * test_tokens(&t[i]) / t[i].mean / ms0);
    printf("\n");
}

int hs_cli_bench(int argc, char **argv) {
    const char *model = NULL;
    int reps = 5, depth = 0, pp[MAX_TESTS] = {512}, tg[MAX_TESTS] = {128}, vf[MAX_TESTS], npp = 1, ntg = 1,
        nvf = 0;
    bool json = false, taps = false;
    hs_type kv_type = HS_CLI_KV_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int kv = hs_cli_kv_option("bench", o, v, &kv_type);
        if (kv < 0) return 2;
        if (kv) {
            i++;
            continue;
        }
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: heterospec bench -m FILE [-p N[,N..]] [-n N[,N..]] [-v N[,N..]] [-d DEPTH] [-r "
                   "REPS] [--taps] "
                   "[--kv-type f16|f32] [-o md|json]\n\n"
                   "llama-bench's tests: ppN (N prompt tokens in one batch, default 512) and tgN (N\n"
                   "decoding steps, default 128); t/s as mean ± std over REPS (default 5) after one\n"
                   "warm-up. -p and -n take lists; 0 skips a test. -d runs every test after DEPTH\n"
                   "tokens of context (default 0). With several -p values, the markdown output adds\n"
                   "the batch cost curve: ms per batch and its ratio to the first -p value\n"
                   "(-p 1,2,4,8,16,32,64 -n 0). -v adds vN tests: the pass that verifies a tree of N\n"
                   "nodes as speculation runs it (the root's logits and argmax, not committed; %d\n"
                   "passes per repetition), with its own curve when -v has several values\n"
                   "(-p 0 -n 0 -v 1,2,4,8,16,32,64), and the cost of the output head of each further\n"
                   "node acceptance reaches (timed after each pass). --taps loads the model as\n"
                   "speculation does (the hidden states of EAGLE-3's three tap layers kept per\n"
                   "position). --kv-type f32 keeps the KV cache in floats (default f16: halves).\n",
                   VERIFY_PASSES);
            return 0;
        } else if (!strcmp(o, "-m") && v) model = argv[++i];
        else if (!strcmp(o, "--taps"))
            taps = true;
        else if (!strcmp(o, "-p") && v)
            npp = parse_list(argv[++i], pp, MAX_TESTS);
        else if (!strcmp(o, "-n") && v)
            ntg = parse_list(argv[++i], tg, MAX_TESTS);
        else if (!strcmp(o, "-v") && v)
            nvf = parse_list(argv[++i], vf, MAX_TESTS);
        else if (!strcmp(o, "-d") && v) {
            if (!hs_cli_int("bench", o, argv[++i], 0, INT_MAX, &depth)) return 2;
        } else if (!strcmp(o, "-r") && v) {
            if (!hs_cli_int("bench", o, argv[++i], INT_MIN, INT_MAX, &reps)) return 2;
        }
        else if (!strcmp(o, "-o") && v) {
            json = !strcmp(argv[++i], "json");
            if (!json && strcmp(argv[i], "md")) {
                fprintf(stderr, "heterospec bench: -o takes md or json\n");
                return 2;
            }
        } else {
            fprintf(stderr, "heterospec bench: unknown option '%s' (see --help)\n", o);
            return 2;
        }
    }
    if (!model || reps < 1 || reps > MAX_REPS || npp < 0 || ntg < 0 || nvf < 0 || depth < 0 ||
        npp + ntg + nvf > MAX_TESTS) {
        fprintf(
            stderr,
            "heterospec bench: need -m FILE, 1 <= -r <= %d, -d >= 0, and -p/-n/-v lists of integers >= 0, "
            "at most %d tests in all "
            "(see --help)\n",
            MAX_REPS, MAX_TESTS);
        return 2;
    }
    bench_test tests[MAX_TESTS];
    int nt = 0, max_pp = 0, max_tg = 0, n_curve = 0, n_vcurve = 0;
    for (int i = 0; i < npp; i++)
        if (pp[i]) {
            tests[nt++] = (bench_test){.n_prompt = pp[i]};
            max_pp = pp[i] > max_pp ? pp[i] : max_pp;
            n_curve++;
        }
    for (int i = 0; i < ntg; i++)
        if (tg[i]) {
            tests[nt++] = (bench_test){.n_gen = tg[i]};
            max_tg = tg[i] > max_tg ? tg[i] : max_tg;
        }
    for (int i = 0; i < nvf; i++)
        if (vf[i]) {
            tests[nt++] = (bench_test){.n_verify = vf[i]};
            max_pp = vf[i] > max_pp ? vf[i] : max_pp;
            n_vcurve++;
        }
    if (!nt) {
        fprintf(stderr, "heterospec bench: every test is skipped (-p 0 -n 0, no -v)\n");
        return 2;
    }
    for (int i = 0; i < nt; i++) {
        const bench_test *t = &tests[i];
        int k = snprintf(tests[i].name, sizeof tests[i].name,
                         t->n_prompt ? "pp%d"
                         : t->n_gen  ? "tg%d"
                                     : "v%d",
                         t->n_prompt ? t->n_prompt
                         : t->n_gen  ? t->n_gen
                                     : t->n_verify);
        if (depth) snprintf(tests[i].name + k, sizeof tests[i].name - (size_t)k, " @ d%d", depth);
    }
    hs_gguf *g = NULL;
    hs_vk_ctx *vk = NULL;
    hs_ops *ops = NULL;
    hs_llama *m = NULL;
    int rc = 1;
    if (hs_gguf_open(model, &g) != HS_OK) goto fail;
    hs_vk_ctx_options vo = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&vo, &vk) != HS_OK || hs_ops_create(vk, &ops) != HS_OK) goto fail;
    uint32_t max_batch = (uint32_t)(max_pp > 0 ? max_pp : 1);
    if (depth > 0 && max_batch < 512) max_batch = 512; /* fills the context in fewer passes */
    hs_llama_options lo = {.n_ctx = (uint32_t)depth + (uint32_t)(max_pp > max_tg + 1 ? max_pp : max_tg + 1),
                           .max_batch = max_batch,
                           .taps = taps,
                           .kv_type = kv_type};
    if (hs_llama_load(ops, g, &lo, &m) != HS_OK) goto fail;
    max_batch = hs_llama_max_batch(m);
    for (int i = 0; i < nt; i++) {
        double tps, hs;
        if (run_once(m, &tests[i], depth, max_batch, &tps, &hs) != HS_OK)
            goto fail; /* warm-up: pipelines, caches */
        for (int r = 0; r < reps; r++) {
            if (run_once(m, &tests[i], depth, max_batch, &tests[i].samples[r], &tests[i].head_s[r]) != HS_OK)
                goto fail;
            tests[i].n++;
        }
        stats(&tests[i]);
    }
    const hs_vk_caps *c = hs_vk_ctx_caps(vk);
    const char *name = strrchr(model, '/') ? strrchr(model, '/') + 1 : model;
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", name);
        cJSON_AddNumberToObject(o, "model_bytes", (double)n_bytes(g));
        cJSON_AddNumberToObject(o, "params", (double)n_params(g));
        cJSON_AddStringToObject(o, "backend", "heterospec-vulkan");
        cJSON_AddStringToObject(o, "device", c->device_name);
        cJSON_AddStringToObject(o, "driver", c->driver_info);
        if (c->host_cpu[0]) cJSON_AddStringToObject(o, "host_cpu", c->host_cpu);
        cJSON_AddNumberToObject(o, "dispatches_per_token", hs_llama_last_dispatches(m));
        cJSON_AddNumberToObject(o, "depth", depth);
        cJSON_AddStringToObject(o, "kv_type", hs_type_name(kv_type));
        const hs_tuning *tu = hs_ops_tuning(ops);
        cJSON *tj = cJSON_AddObjectToObject(o, "tuning");
        cJSON_AddStringToObject(tj, "name", tu->name);
        cJSON_AddNumberToObject(tj, "rows", tu->matvec_rows_per_wg);
        cJSON_AddNumberToObject(tj, "cols", tu->matmul_cols_per_wg);
        cJSON_AddNumberToObject(tj, "reduce", tu->reduce_wg_size);
        cJSON_AddBoolToObject(tj, "texel_weights", tu->texel_weights && c->max_texel_elements);
        cJSON_AddNumberToObject(tj, "split_n", tu->split_n);
        cJSON_AddBoolToObject(tj, "uniform_x", tu->uniform_x);
        cJSON_AddBoolToObject(tj, "q8_act", tu->q8_act);
        cJSON_AddBoolToObject(tj, "rope_pass", tu->rope_pass);
        cJSON_AddNumberToObject(tj, "attn_qb", tu->attn_qb);
        cJSON_AddNumberToObject(tj, "x8_cols", tu->x8_cols);
        cJSON *arr = cJSON_AddArrayToObject(o, "tests");
        for (int i = 0; i < nt; i++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "test", tests[i].name);
            cJSON_AddNumberToObject(t, "n_prompt", tests[i].n_prompt);
            cJSON_AddNumberToObject(t, "n_gen", tests[i].n_gen);
            cJSON_AddNumberToObject(t, "n_verify", tests[i].n_verify);
            cJSON_AddNumberToObject(t, "avg_ts", tests[i].mean);
            cJSON_AddNumberToObject(t, "stddev_ts", tests[i].std);
            if (tests[i].n_verify > 1) cJSON_AddNumberToObject(t, "head_ms", 1e3 * head_mean(&tests[i], 1));
            cJSON *s = cJSON_AddArrayToObject(t, "samples_ts");
            for (int k = 0; k < tests[i].n; k++) cJSON_AddItemToArray(s, cJSON_CreateNumber(tests[i].samples[k]));
            cJSON_AddItemToArray(arr, t);
        }
        char *s = cJSON_Print(o);
        puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        printf("| model | size | params | backend | test | t/s |\n| --- | ---: | ---: | --- | ---: | ---: |\n");
        for (int i = 0; i < nt; i++)
            printf("| %s | %.2f MiB | %.2f M | heterospec Vulkan (%s, KV %s) | %s | %.2f ± %.2f |\n", name,
                   n_bytes(g) / 1048576.0, n_params(g) / 1e6, c->device_name, hs_type_name(kv_type),
                   tests[i].name, tests[i].mean, tests[i].std);
        /* The pp tests come first, in -p order; the v tests last, in -v order. */
        if (n_curve > 1) print_curve("batch cost curve", tests, n_curve, depth);
        if (n_vcurve > 1) print_curve("verification cost curve", tests + nt - n_vcurve, n_vcurve, depth);
        const double hm = head_mean(tests, nt);
        if (hm > 0)
            printf("\nplus %.2f ms per node that acceptance reaches past the root (its output head, "
                   "hs_llama_head)\n",
                   1e3 * hm);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "heterospec bench: %s\n", hs_last_error());
    hs_llama_destroy(m);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
    hs_gguf_close(g);
    return rc;
}
