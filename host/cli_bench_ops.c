/* `heterospec bench-ops`: per-op figures on the chosen device — the cost data
 * HeteroSpec's device model starts from. Prints a markdown table, or JSON with
 * every sample (--json). Timings come from wall-clock around submit-and-wait of
 * recorded sequences, after a warm-up run, over several repetitions. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cJSON.h>

#include "hs_bench_ops.h"
#include "hs_cli.h"
#include "hs_shaders.h"

double hs_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

void hs_bench_add(hs_bench *b, const char *op, const char *variant, const char *param, const char *unit,
                  const double *samples, int n, double work_per_sample) {
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 32;
        b->rows = realloc(b->rows, sizeof *b->rows * (size_t)b->cap);
        HS_ASSERT(b->rows);
    }
    hs_bench_row *r = &b->rows[b->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->op, sizeof r->op, "%s", op);
    snprintf(r->variant, sizeof r->variant, "%s", variant);
    snprintf(r->param, sizeof r->param, "%s", param);
    snprintf(r->unit, sizeof r->unit, "%s", unit);
    r->n = n < HS_BENCH_MAX_SAMPLES ? n : HS_BENCH_MAX_SAMPLES;
    double sum = 0, sq = 0;
    for (int i = 0; i < r->n; i++) {
        /* A sample is seconds per repetition; the figure is work / time (or the
         * time itself in microseconds when work_per_sample is 0). */
        double v = work_per_sample > 0 ? work_per_sample / samples[i] : samples[i] * 1e6;
        r->samples[i] = v;
        sum += v;
    }
    r->mean = sum / r->n;
    for (int i = 0; i < r->n; i++) sq += (r->samples[i] - r->mean) * (r->samples[i] - r->mean);
    r->std = r->n > 1 ? sqrt(sq / (r->n - 1)) : 0;
}

/* Times `seq` reps times (after one warm-up submit); samples are seconds per
 * submit divided by `inner` (work recorded inner times in the sequence). */
hs_status hs_bench_time_seq(hs_vk_seq *seq, int reps, int inner, double *samples) {
    hs_status st = hs_vk_seq_submit(seq);
    if (st != HS_OK) return st;
    for (int i = 0; i < reps; i++) {
        double t0 = hs_now_s();
        st = hs_vk_seq_submit(seq);
        if (st != HS_OK) return st;
        samples[i] = (hs_now_s() - t0) / inner;
    }
    return HS_OK;
}

/* ---- host memory read bandwidth: a plain read loop over 512 MiB, one thread per core ---- */
typedef struct read_job {
    const uint64_t *p;
    size_t n;
    uint64_t sum;
} read_job;

static void *read_loop(void *arg) {
    read_job *j = arg;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= j->n; i += 4) {
        s0 += j->p[i];
        s1 += j->p[i + 1];
        s2 += j->p[i + 2];
        s3 += j->p[i + 3];
    }
    j->sum = s0 ^ s1 ^ s2 ^ s3;
    return NULL;
}

static void bench_host_read(hs_bench *b, int reps) {
    const size_t bytes = 512ull << 20, n = bytes / 8;
    uint64_t *buf = malloc(bytes);
    if (!buf) return;
    for (size_t i = 0; i < n; i++) buf[i] = i * 0x9E3779B97F4A7C15ull;
    long ncpu = 2;
#ifdef _SC_NPROCESSORS_ONLN
    ncpu = sysconf(_SC_NPROCESSORS_ONLN);
#endif
    if (ncpu < 1) ncpu = 1;
    if (ncpu > 64) ncpu = 64;
    double samples[HS_BENCH_MAX_SAMPLES];
    volatile uint64_t sink = 0;
    for (int r = -1; r < reps; r++) {
        pthread_t th[64];
        read_job jobs[64];
        double t0 = hs_now_s();
        for (long t = 0; t < ncpu; t++) {
            jobs[t] = (read_job){buf + n / ncpu * t, n / ncpu, 0};
            pthread_create(&th[t], NULL, read_loop, &jobs[t]);
        }
        for (long t = 0; t < ncpu; t++) {
            pthread_join(th[t], NULL);
            sink ^= jobs[t].sum;
        }
        if (r >= 0) samples[r] = hs_now_s() - t0;
    }
    (void)sink;
    char param[32];
    snprintf(param, sizeof param, "%ld threads", ncpu);
    hs_bench_add(b, "host memory read", "c loop", param, "GB/s", samples, reps, bytes / 1e9);
    free(buf);
}

/* ---- dispatch overhead and device read bandwidth ---- */
/* Times one pass of a read kernel (read_bw*.comp) over `bytes` of buf, bound
 * in windows of `chunk` bytes, groups workgroups each; samples[reps] in s. */
static hs_status time_read(hs_ops *ops, hs_vk_seq *seq, const hs_vk_pipeline_desc *d, hs_vk_buffer *buf,
                           uint64_t bytes, uint64_t chunk, hs_vk_buffer *out, uint32_t groups, int reps,
                           double *samples) {
    hs_status st = HS_OK;
    hs_vk_pipeline *p = NULL;
    const uint32_t threads = d->spec[0] * groups;
    HS_TRY(hs_ops_pipeline(ops, d, &p));
    HS_TRY(hs_vk_seq_begin(seq));
    for (uint64_t off = 0; off < bytes; off += chunk) {
        const uint64_t n = bytes - off < chunk ? bytes - off : chunk;
        hs_vk_binding bb[2] = {{buf, off, n}, {out, 0, 0}};
        const uint32_t push[2] = {(uint32_t)(n / 16), threads};
        HS_TRY(hs_vk_seq_dispatch(seq, p, bb, 2, push, groups, 1, 1));
    }
    HS_TRY(hs_vk_seq_end(seq));
    HS_TRY(hs_bench_time_seq(seq, reps, 1, samples));
fail:
    return st;
}

static hs_status bench_dispatch(hs_ops *ops, hs_bench *b, int reps) {
    hs_status st = HS_OK;
    hs_vk_ctx *vk = hs_ops_vk(ops);
    hs_vk_buffer *buf = NULL;
    hs_vk_seq *seq = NULL;
    hs_vk_pipeline *p = NULL;
    double samples[HS_BENCH_MAX_SAMPLES];
    HS_TRY(hs_vk_buffer_create(vk, 256, HS_MEM_DEVICE, &buf));
    HS_TRY(hs_vk_seq_create(vk, &seq));
    hs_vk_pipeline_desc d = {.name = "noop", .code = hs_spv_noop, .code_size = hs_spv_noop_size, .n_bindings = 1};
    HS_TRY(hs_ops_pipeline(ops, &d, &p));
    hs_vk_binding bind = {buf, 0, 0};
    /* One dispatch per submit: the cost of a synchronous round trip. */
    HS_TRY(hs_vk_seq_begin(seq));
    HS_TRY(hs_vk_seq_dispatch(seq, p, &bind, 1, NULL, 1, 1, 1));
    HS_TRY(hs_vk_seq_end(seq));
    HS_TRY(hs_bench_time_seq(seq, reps, 1, samples));
    hs_bench_add(b, "dispatch", "noop", "1 per submit", "us", samples, reps, 0);
    /* 100 dispatches in one command buffer, a barrier between each (as a layer chain has). */
    const int inner = 100;
    HS_TRY(hs_vk_seq_begin(seq));
    for (int i = 0; i < inner; i++) {
        HS_TRY(hs_vk_seq_dispatch(seq, p, &bind, 1, NULL, 1, 1, 1));
        hs_vk_seq_barrier(seq);
    }
    HS_TRY(hs_vk_seq_end(seq));
    HS_TRY(hs_bench_time_seq(seq, reps, inner, samples));
    hs_bench_add(b, "dispatch", "noop", "100 per submit, barriers", "us", samples, reps, 0);

    /* Device read bandwidth: 256 MiB streamed by the read kernel (split into
     * bindings within maxStorageBufferRange). */
    hs_vk_buffer_destroy(buf);
    buf = NULL;
    const hs_vk_caps *c = hs_ops_caps(ops);
    uint64_t bytes = 256ull << 20;
    if (bytes > c->max_alloc) bytes = c->max_alloc;
    uint64_t chunk = c->max_storage_buffer_range & ~(uint64_t)255;
    if (chunk > bytes) chunk = bytes;
    HS_TRY(hs_vk_buffer_create(vk, bytes, HS_MEM_DEVICE, &buf));
    HS_TRY(hs_vk_buffer_fill(buf, 0, bytes, 0x12345678u));
    hs_vk_buffer *out = NULL;
    uint32_t wg = 64, groups = 256, threads = wg * groups;
    st = hs_vk_buffer_create(vk, threads * 4, HS_MEM_DEVICE, &out);
    if (st != HS_OK) goto fail;
    hs_vk_pipeline_desc rd = {.name = "read_bw", .code = hs_spv_read_bw, .code_size = hs_spv_read_bw_size,
                              .n_bindings = 2, .write_mask = 2, .push_size = 8, .n_spec = 1,
                              .spec = {wg}, .wg_size = {wg, 1, 1}};
    st = time_read(ops, seq, &rd, buf, bytes, chunk, out, groups, reps, samples);
    if (st == HS_OK) hs_bench_add(b, "device memory read", "uvec4 loop", "256 MiB", "GB/s", samples, reps, bytes / 1e9);
    /* The same through a uniform texel buffer, where the device has one. */
    if (st == HS_OK && c->max_texel_elements) {
        hs_vk_pipeline_desc rt = rd;
        rt.name = "read_bw_texel";
        rt.code = hs_spv_read_bw_texel;
        rt.code_size = hs_spv_read_bw_texel_size;
        rt.texel_mask = 1;
        const uint64_t tchunk = c->max_texel_elements * 16 < bytes ? c->max_texel_elements * 16 : bytes;
        st = time_read(ops, seq, &rt, buf, bytes, tchunk, out, groups, reps, samples);
        if (st == HS_OK)
            hs_bench_add(b, "device memory read", "texel fetch", "256 MiB", "GB/s", samples, reps, bytes / 1e9);
    }
    hs_vk_buffer_destroy(out);
fail:
    hs_vk_seq_destroy(seq);
    hs_vk_buffer_destroy(buf);
    return st;
}

static void print_table(const hs_bench *b, const hs_vk_caps *c) {
    char line[768];
    hs_vk_caps_line(c, line, sizeof line);
    printf("device: %s\n\n", line);
    printf("| op | variant | size | value | unit |\n|---|---|---|---:|---|\n");
    for (int i = 0; i < b->n; i++) {
        const hs_bench_row *r = &b->rows[i];
        printf("| %s | %s | %s | %.2f ± %.2f | %s |\n", r->op, r->variant, r->param, r->mean, r->std, r->unit);
    }
}

/* The device line of benchmark reports (DESIGN.md section 8). */
cJSON *hs_bench_device_json(const hs_vk_caps *c) {
    cJSON *dev = cJSON_CreateObject();
    cJSON_AddStringToObject(dev, "name", c->device_name);
    cJSON_AddStringToObject(dev, "driver", c->driver_name);
    cJSON_AddStringToObject(dev, "driver_info", c->driver_info);
    /* A CPU device's processor: lavapipe has one name on every host. */
    if (c->host_cpu[0]) cJSON_AddStringToObject(dev, "host_cpu", c->host_cpu);
    cJSON_AddStringToObject(dev, "vendor", hs_vk_vendor_name(c->vendor_id));
    cJSON_AddNumberToObject(dev, "vendor_id", c->vendor_id);
    cJSON_AddNumberToObject(dev, "driver_version", c->driver_version);
    cJSON_AddNumberToObject(dev, "subgroup_size", c->subgroup_size);
    cJSON_AddBoolToObject(dev, "subgroup_ops", c->subgroup_ops);
    cJSON_AddBoolToObject(dev, "fp16", c->fp16);
    cJSON_AddBoolToObject(dev, "storage16", c->storage16);
    cJSON_AddBoolToObject(dev, "int8_dot", c->int8_dot);
    cJSON_AddNumberToObject(dev, "device_local_bytes", (double)c->device_local_bytes);
    cJSON_AddNumberToObject(dev, "max_storage_buffer_range", (double)c->max_storage_buffer_range);
    return dev;
}

static void print_json(const hs_bench *b, const hs_vk_caps *c) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddItemToObject(root, "device", hs_bench_device_json(c));
    cJSON *rows = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < b->n; i++) {
        const hs_bench_row *r = &b->rows[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "op", r->op);
        cJSON_AddStringToObject(o, "variant", r->variant);
        cJSON_AddStringToObject(o, "size", r->param);
        cJSON_AddStringToObject(o, "unit", r->unit);
        cJSON_AddNumberToObject(o, "mean", r->mean);
        cJSON_AddNumberToObject(o, "std", r->std);
        cJSON *s = cJSON_AddArrayToObject(o, "samples");
        for (int k = 0; k < r->n; k++) cJSON_AddItemToArray(s, cJSON_CreateNumber(r->samples[k]));
        cJSON_AddItemToArray(rows, o);
    }
    char *txt = cJSON_Print(root);
    puts(txt);
    free(txt);
    cJSON_Delete(root);
}

int hs_cli_bench_ops(int argc, char **argv) {
    bool json = false;
    int reps = 5;
    const char *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: heterospec bench-ops [--json] [-r REPS] [--only OP]\n\n"
                   "Per-op figures on the chosen device (HS_DEVICE): dispatch overhead, host and\n"
                   "device memory read bandwidth, matrix-vector GB/s of weights per quant type,\n"
                   "matrix-matrix GFLOP/s for N = 1..64, and the other ops at model sizes.\n"
                   "  --json       print JSON with every sample instead of the table\n"
                   "  -r REPS      repetitions after one warm-up (default 5, max %d)\n"
                   "  --only OP    run only the benchmarks whose op name contains OP\n",
                   HS_BENCH_MAX_SAMPLES);
            return 0;
        } else if (!strcmp(argv[i], "--json") || !strcmp(argv[i], "-o")) {
            if (!strcmp(argv[i], "-o")) {
                if (i + 1 >= argc || strcmp(argv[i + 1], "json")) {
                    fprintf(stderr, "heterospec bench-ops: -o takes 'json'\n");
                    return 2;
                }
                i++;
            }
            json = true;
        } else if (!strcmp(argv[i], "-r") && i + 1 < argc) {
            if (!hs_cli_int("bench-ops", "-r", argv[++i], 1, HS_BENCH_MAX_SAMPLES, &reps)) return 2;
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else {
            fprintf(stderr, "heterospec bench-ops: unknown option '%s' (see --help)\n", argv[i]);
            return 2;
        }
    }
    hs_vk_ctx *vk = NULL;
    hs_ops *ops = NULL;
    hs_bench b = {0};
    int rc = 1;
    hs_vk_ctx_options opt = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&opt, &vk) != HS_OK || hs_ops_create(vk, &ops) != HS_OK) goto fail;
    if (!only || strstr("host memory read", only)) bench_host_read(&b, reps);
    if ((!only || strstr("dispatch device memory read", only)) && bench_dispatch(ops, &b, reps) != HS_OK) goto fail;
    if (hs_bench_ops_kernels(ops, &b, reps, only) != HS_OK) goto fail;
    if (json) print_json(&b, hs_ops_caps(ops));
    else print_table(&b, hs_ops_caps(ops));
    rc = 0;
fail:
    if (rc) fprintf(stderr, "heterospec bench-ops: %s\n", hs_last_error());
    free(b.rows);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
    return rc;
}
