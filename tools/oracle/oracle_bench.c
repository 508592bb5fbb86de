/* hs-oracle --bench: pp/tg tokens per second measured as llama-bench (llama.cpp
 * tools/llama-bench/llama-bench.cpp) measures them, so heterospec's `bench` numbers and
 * these are comparable:
 *   - one context per test with n_ctx = n_prompt + n_gen, n_batch 2048, n_ubatch 512,
 *     f16 KV cache, flash attention auto (overridable with --kv, --fa, --batch, ...);
 *   - a CPU threadpool attached (poll 50), as llama-bench does;
 *   - warm-up: one full prompt run (pp) or one generated token (tg);
 *   - then `reps` runs, each after clearing the KV cache: pp feeds n_prompt tokens in
 *     n_batch chunks (BOS first if the model adds one, then rand() % n_vocab), tg decodes
 *     n_gen single tokens with a synchronize after each;
 *   - t/s per run = tokens / seconds; reported as mean ± sample standard deviation.
 * See oracle.h for ownership and thread-safety. */
#define _POSIX_C_SOURCE 200809L
#include "oracle.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct bench_test {
    char name[32]; /* "pp512", "tg128" */
    int n_prompt;
    int n_gen;
    uint64_t *ns; /* reps samples */
    double *ts;   /* tokens per second per sample */
    double avg, std;
} bench_test;

static hs_status test_prompt(struct llama_context *ctx, const hs_oracle_session *s, int n_prompt, int n_batch,
                             llama_token *buf) {
    for (int done = 0; done < n_prompt; done += n_batch) {
        int n = n_prompt - done < n_batch ? n_prompt - done : n_batch;
        buf[0] =
            done == 0 && llama_vocab_get_add_bos(s->vocab) ? llama_vocab_bos(s->vocab) : rand() % s->n_vocab;
        for (int i = 1; i < n; i++)
            buf[i] = rand() % s->n_vocab;
        int32_t rc = llama_decode(ctx, llama_batch_get_one(buf, n));
        if (rc != 0)
            return HS_FAIL(HS_ERR_INVALID_ARG, "bench: llama_decode of a %d-token prompt batch failed (%d)",
                           n, rc);
    }
    llama_synchronize(ctx);
    return HS_OK;
}

static hs_status test_gen(struct llama_context *ctx, const hs_oracle_session *s, int n_gen) {
    llama_token tok = llama_vocab_get_add_bos(s->vocab) ? llama_vocab_bos(s->vocab) : rand() % s->n_vocab;
    for (int i = 0; i < n_gen; i++) {
        int32_t rc = llama_decode(ctx, llama_batch_get_one(&tok, 1));
        if (rc != 0)
            return HS_FAIL(HS_ERR_INVALID_ARG, "bench: llama_decode of generated token %d failed (%d)", i,
                           rc);
        llama_synchronize(ctx);
        tok = rand() % s->n_vocab;
    }
    return HS_OK;
}

/* llama-bench's avg and stdev (sample standard deviation, 0 for one sample). */
static void stats(bench_test *t, int n) {
    double sum = 0, sq = 0;
    for (int i = 0; i < n; i++) {
        sum += t->ts[i];
        sq += t->ts[i] * t->ts[i];
    }
    t->avg = sum / n;
    t->std = n > 1 ? sqrt(fmax(0.0, sq / (n - 1) - t->avg * t->avg * n / (n - 1))) : 0.0;
}

static hs_status run_test(const hs_oracle_opts *o, hs_oracle_session *s, bench_test *t) {
    hs_status st = HS_OK;
    struct llama_context *ctx = NULL;
    struct ggml_threadpool *tp = NULL;
    llama_token *buf = malloc((size_t)o->n_batch_bench * sizeof *buf);
    if (!buf) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: token buffer of %d", o->n_batch_bench);
    HS_TRY(hs_oracle_context(o, s, (uint32_t)(t->n_prompt + t->n_gen), (uint32_t)o->n_batch_bench,
                             (uint32_t)o->n_ubatch_bench, 1, GGML_TYPE_F16, LLAMA_FLASH_ATTN_TYPE_AUTO, &ctx));
    if (s->threadpool_fns) {
        struct ggml_threadpool_params tpp = ggml_threadpool_params_default(o->n_threads);
        tpp.poll = 50;
        tp = s->threadpool_new(&tpp);
        if (!tp) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: ggml_threadpool_new(%d threads) failed",
                         o->n_threads);
            goto fail;
        }
        llama_attach_threadpool(ctx, tp, NULL);
    }
    llama_set_n_threads(ctx, o->n_threads, o->n_threads);
    /* warm-up: pipelines compiled, buffers allocated, caches hot */
    if (t->n_prompt) HS_TRY(test_prompt(ctx, s, t->n_prompt, o->n_batch_bench, buf));
    if (t->n_gen) HS_TRY(test_gen(ctx, s, 1));
    for (int r = 0; r < o->reps; r++) {
        llama_memory_clear(llama_get_memory(ctx), false);
        uint64_t t0 = hs_oracle_now_ns();
        if (t->n_prompt) HS_TRY(test_prompt(ctx, s, t->n_prompt, o->n_batch_bench, buf));
        if (t->n_gen) HS_TRY(test_gen(ctx, s, t->n_gen));
        t->ns[r] = hs_oracle_now_ns() - t0;
        t->ts[r] = 1e9 * (double)(t->n_prompt + t->n_gen) / (double)t->ns[r];
        if (o->verbose)
            fprintf(stderr, "hs-oracle: %s run %d/%d: %.2f t/s\n", t->name, r + 1, o->reps, t->ts[r]);
    }
    stats(t, o->reps);
fail:
    if (ctx) llama_free(ctx);
    if (tp) s->threadpool_free(tp);
    free(buf);
    return st;
}

static void fmt_size(char *buf, size_t n, double bytes) {
    if (bytes >= 1024.0 * 1024 * 1024)
        snprintf(buf, n, "%.2f GiB", bytes / (1024.0 * 1024 * 1024));
    else
        snprintf(buf, n, "%.2f MiB", bytes / (1024.0 * 1024));
}

static void fmt_params(char *buf, size_t n, double p) {
    if (p >= 1e9)
        snprintf(buf, n, "%.2f B", p / 1e9);
    else if (p >= 1e6)
        snprintf(buf, n, "%.2f M", p / 1e6);
    else
        snprintf(buf, n, "%.2f K", p / 1e3);
}

static void json_str(const char *s) {
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static void print_json(const hs_oracle_opts *o, const hs_oracle_session *s, const bench_test *t, int n_tests,
                       const char *desc) {
    printf("{\n  \"model\": ");
    json_str(o->model_path);
    printf(",\n  \"model_desc\": ");
    json_str(desc);
    printf(",\n  \"model_size\": %llu,\n  \"model_n_params\": %llu,\n  \"backend\": \"%s\",\n  \"device\": ",
           (unsigned long long)llama_model_size(s->model), (unsigned long long)llama_model_n_params(s->model),
           o->vulkan ? "Vulkan" : "CPU");
    json_str(s->backend_desc);
    printf(",\n  \"llama_cpp\": \"%s\",\n  \"n_threads\": %d,\n  \"n_batch\": %d,\n  \"n_ubatch\": %d,\n",
           llama_version(), o->n_threads, o->n_batch_bench, o->n_ubatch_bench);
    printf("  \"type_kv\": \"%s\",\n  \"flash_attn\": \"%s\",\n  \"tests\": [\n",
           o->kv_type >= 0 ? ggml_type_name((enum ggml_type)o->kv_type) : "f16",
           llama_flash_attn_type_name(o->flash_attn != -2 ? (enum llama_flash_attn_type)o->flash_attn
                                                          : LLAMA_FLASH_ATTN_TYPE_AUTO));
    for (int i = 0; i < n_tests; i++) {
        printf("    {\"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"avg_ts\": %.6f, \"stddev_ts\": "
               "%.6f,\n",
               t[i].name, t[i].n_prompt, t[i].n_gen, t[i].avg, t[i].std);
        printf("     \"samples_ns\": [");
        for (int r = 0; r < o->reps; r++)
            printf(r ? ", %llu" : "%llu", (unsigned long long)t[i].ns[r]);
        printf("],\n     \"samples_ts\": [");
        for (int r = 0; r < o->reps; r++)
            printf(r ? ", %.6f" : "%.6f", t[i].ts[r]);
        printf("]}%s\n", i + 1 < n_tests ? "," : "");
    }
    printf("  ]\n}\n");
}

static void print_table(const hs_oracle_opts *o, const hs_oracle_session *s, const bench_test *t, int n_tests,
                        const char *desc) {
    char size[32], params[32];
    fmt_size(size, sizeof size, (double)llama_model_size(s->model));
    fmt_params(params, sizeof params, (double)llama_model_n_params(s->model));
    printf("device: %s; llama.cpp %s\n\n", s->backend_desc, llama_version());
    printf("| model | size | params | backend | threads | test | t/s |\n");
    printf("| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
    for (int i = 0; i < n_tests; i++)
        printf("| %s | %s | %s | %s | %d | %s | %.2f ± %.2f |\n", desc, size, params,
               o->vulkan ? "Vulkan" : "CPU", o->n_threads, t[i].name, t[i].avg, t[i].std);
}

hs_status hs_oracle_bench(const hs_oracle_opts *o, hs_oracle_session *s) {
    hs_status st = HS_OK;
    bench_test t[2];
    int n = 0;
    memset(t, 0, sizeof t);
    if (o->n_prompt_bench) {
        t[n].n_prompt = o->n_prompt_bench;
        snprintf(t[n++].name, sizeof t[0].name, "pp%d", o->n_prompt_bench);
    }
    if (o->n_gen_bench) {
        t[n].n_gen = o->n_gen_bench;
        snprintf(t[n++].name, sizeof t[0].name, "tg%d", o->n_gen_bench);
    }
    char desc[128];
    llama_model_desc(s->model, desc, sizeof desc);
    for (int i = 0; i < n; i++) {
        t[i].ns = calloc((size_t)o->reps, sizeof *t[i].ns);
        t[i].ts = calloc((size_t)o->reps, sizeof *t[i].ts);
        if (!t[i].ns || !t[i].ts) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "bench: %d samples", o->reps);
            goto fail;
        }
        HS_TRY(run_test(o, s, &t[i]));
    }
    if (o->json)
        print_json(o, s, t, n, desc);
    else
        print_table(o, s, t, n, desc);
fail:
    for (int i = 0; i < 2; i++) {
        free(t[i].ns);
        free(t[i].ts);
    }
    return st;
}
