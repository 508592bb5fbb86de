/* hs_bench_ops — result rows and timing helpers shared by `bench-ops`, and the
 * device line of every benchmark's JSON. */
#ifndef HS_BENCH_OPS_H
#define HS_BENCH_OPS_H

#include <cJSON.h>

#include "hs_ops.h"

#define HS_BENCH_MAX_SAMPLES 32

typedef struct hs_bench_row {
    char op[48], variant[48], param[48], unit[16];
    double mean, std;
    double samples[HS_BENCH_MAX_SAMPLES];
    int n;
} hs_bench_row;

typedef struct hs_bench {
    hs_bench_row *rows;
    int n, cap;
} hs_bench;

double hs_now_s(void);
/* Adds a row; samples are seconds per repetition. With work_per_sample > 0
 * the figure is work / seconds (e.g. GB/s), else microseconds. */
void hs_bench_add(hs_bench *b, const char *op, const char *variant, const char *param, const char *unit,
                  const double *samples, int n, double work_per_sample);
hs_status hs_bench_time_seq(hs_vk_seq *seq, int reps, int inner, double *samples);
/* Benchmarks of the op kernels (host/bench_kernels.c); `only` filters by op name. */
hs_status hs_bench_ops_kernels(hs_ops *ops, hs_bench *b, int reps, const char *only);

/* The device line of benchmark JSON reports: name, driver, vendor, subgroup
 * size, features, memory, limits (a new object for the caller to attach). */
cJSON *hs_bench_device_json(const hs_vk_caps *c);

#endif
