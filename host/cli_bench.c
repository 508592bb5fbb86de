/* `heterospec bench`: llama-bench's tests on one model — pp512 (prompt
 * processing of 512 tokens in one batch) and tg128 (128 decoding steps) —
 * as `| model | size | params | backend | test | t/s |`, mean ± std over
 * repetitions after a warm-up, or JSON with the raw samples (-o json). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "gguf.h"
#include "hs_bench_ops.h"
#include "hs_cli.h"
#include "llama.h"

#define MAX_REPS 32

typedef struct bench_test {
    char name[16];
    int n_prompt, n_gen;
    double samples[MAX_REPS]; /* tokens per second */
    int n;
    double mean, std;
} bench_test;

/* One repetition: n_prompt tokens in one batch, or n_gen single-token steps
 * after a one-token context (as llama-bench's tg). Token ids are arbitrary
 * but valid. */
static hs_status run_once(hs_llama *m, const bench_test *t, double *tps) {
    hs_status st = HS_OK;
    uint32_t V = hs_llama_cfg(m)->n_vocab;
    hs_llama_reset(m);
    if (t->n_prompt) {
        int32_t *toks = malloc(sizeof *toks * (size_t)t->n_prompt);
        if (!toks) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: out of memory");
        for (int i = 0; i < t->n_prompt; i++) toks[i] = (int32_t)((i * 7919u + 13) % V);
        double t0 = hs_now_s();
        st = hs_llama_eval(m, toks, (uint32_t)t->n_prompt, NULL, true, true, NULL, NULL);
        *tps = t->n_prompt / (hs_now_s() - t0);
        free(toks);
        return st;
    }
    int32_t tok = 1;
    const uint32_t *amax;
    double t0 = hs_now_s();
    for (int i = 0; i < t->n_gen; i++) {
        HS_TRY(hs_llama_eval(m, &tok, 1, NULL, true, true, NULL, &amax));
        tok = (int32_t)amax[0];
    }
    *tps = t->n_gen / (hs_now_s() - t0);
fail:
    return st;
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

int hs_cli_bench(int argc, char **argv) {
    const char *model = NULL;
    int reps = 5, pp = 512, tg = 128;
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: heterospec bench -m FILE [-p N] [-n N] [-r REPS] [-o md|json]\n\n"
                   "llama-bench's tests: ppN (N prompt tokens in one batch, default 512) and tgN (N\n"
                   "decoding steps, default 128); t/s as mean ± std over REPS (default 5) after one\n"
                   "warm-up. -p 0 or -n 0 skips a test.\n");
            return 0;
        } else if (!strcmp(o, "-m") && v) model = argv[++i];
        else if (!strcmp(o, "-p") && v) pp = atoi(argv[++i]);
        else if (!strcmp(o, "-n") && v) tg = atoi(argv[++i]);
        else if (!strcmp(o, "-r") && v) reps = atoi(argv[++i]);
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
    if (!model || reps < 1 || reps > MAX_REPS || pp < 0 || tg < 0) {
        fprintf(stderr, "heterospec bench: need -m FILE, 1 <= -r <= %d, -p/-n >= 0 (see --help)\n", MAX_REPS);
        return 2;
    }
    bench_test tests[2];
    int nt = 0;
    if (pp) tests[nt++] = (bench_test){.n_prompt = pp};
    if (tg) tests[nt++] = (bench_test){.n_gen = tg};
    for (int i = 0; i < nt; i++)
        snprintf(tests[i].name, sizeof tests[i].name, tests[i].n_prompt ? "pp%d" : "tg%d",
                 tests[i].n_prompt ? tests[i].n_prompt : tests[i].n_gen);
    hs_gguf *g = NULL;
    hs_vk_ctx *vk = NULL;
    hs_ops *ops = NULL;
    hs_llama *m = NULL;
    int rc = 1;
    if (hs_gguf_open(model, &g) != HS_OK) goto fail;
    hs_vk_ctx_options vo = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&vo, &vk) != HS_OK || hs_ops_create(vk, &ops) != HS_OK) goto fail;
    uint32_t need = (uint32_t)(pp > tg + 1 ? pp : tg + 1);
    hs_llama_options lo = {.n_ctx = need, .max_batch = pp > 0 ? (uint32_t)pp : 1};
    if (hs_llama_load(ops, g, &lo, &m) != HS_OK) goto fail;
    for (int i = 0; i < nt; i++) {
        double tps;
        if (run_once(m, &tests[i], &tps) != HS_OK) goto fail; /* warm-up: pipelines, caches */
        for (int r = 0; r < reps; r++) {
            if (run_once(m, &tests[i], &tests[i].samples[r]) != HS_OK) goto fail;
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
        cJSON_AddNumberToObject(o, "dispatches_per_token", hs_llama_last_dispatches(m));
        const hs_tuning *tu = hs_ops_tuning(ops);
        cJSON *tj = cJSON_AddObjectToObject(o, "tuning");
        cJSON_AddStringToObject(tj, "name", tu->name);
        cJSON_AddNumberToObject(tj, "rows", tu->matvec_rows_per_wg);
        cJSON_AddNumberToObject(tj, "cols", tu->matmul_cols_per_wg);
        cJSON_AddNumberToObject(tj, "reduce", tu->reduce_wg_size);
        cJSON *arr = cJSON_AddArrayToObject(o, "tests");
        for (int i = 0; i < nt; i++) {
            cJSON *t = cJSON_CreateObject();
            cJSON_AddStringToObject(t, "test", tests[i].name);
            cJSON_AddNumberToObject(t, "avg_ts", tests[i].mean);
            cJSON_AddNumberToObject(t, "stddev_ts", tests[i].std);
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
            printf("| %s | %.2f MiB | %.2f M | heterospec Vulkan (%s) | %s | %.2f ± %.2f |\n", name,
                   n_bytes(g) / 1048576.0, n_params(g) / 1e6, c->device_name, tests[i].name, tests[i].mean,
                   tests[i].std);
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
