/* ref_matmul: the weight-product reference and random weights (see ref_matmul.h). */
#include "ref_matmul.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hs_quant.h"

/* x' of one column, in double. */
static void ref_prologue(const float *xj, uint32_t cols, hs_matmul_prologue prologue, const float *g,
                         float eps, double *xp) {
    if (prologue == HS_MATMUL_RMSNORM) {
        double ss = 0;
        for (uint32_t k = 0; k < cols; k++)
            ss += (double)xj[k] * xj[k];
        const double scale = 1.0 / sqrt(ss / cols + eps);
        for (uint32_t k = 0; k < cols; k++)
            xp[k] = xj[k] * scale * g[k];
    } else if (prologue == HS_MATMUL_SWIGLU) {
        for (uint32_t k = 0; k < cols; k++) {
            const double gate = xj[k];
            xp[k] = gate / (1.0 + exp(-gate)) * xj[cols + k];
        }
    } else {
        for (uint32_t k = 0; k < cols; k++)
            xp[k] = xj[k];
    }
}

/* x' rounded as act_q8 rounds it: per 32-element block, d = max |x'| / 127
 * and x' = d * round-half-even(x' / d). */
static void ref_round_q8(double *xp, uint32_t cols) {
    for (uint32_t b = 0; b + 32 <= cols; b += 32) {
        double amax = 0;
        for (uint32_t k = b; k < b + 32; k++)
            amax = fabs(xp[k]) > amax ? fabs(xp[k]) : amax;
        const double d = amax / 127;
        for (uint32_t k = b; k < b + 32; k++)
            xp[k] = d > 0 ? d * nearbyint(xp[k] / d) : 0.0;
    }
}

static void ref_product(const float *w, uint32_t rows, uint32_t cols, const float *x, uint32_t n,
                        hs_matmul_prologue prologue, const float *g, float eps, const float *res, double *y,
                        bool q8) {
    const uint32_t stride = prologue == HS_MATMUL_SWIGLU ? 2 * cols : cols;
    double *xp = malloc(cols * sizeof *xp);
    for (uint32_t j = 0; j < n; j++) {
        ref_prologue(x + (uint64_t)j * stride, cols, prologue, g, eps, xp);
        if (q8) ref_round_q8(xp, cols);
        for (uint32_t r = 0; r < rows; r++) {
            double acc = 0;
            const float *wr = w + (uint64_t)r * cols;
            for (uint32_t k = 0; k < cols; k++) acc += (double)wr[k] * xp[k];
            y[(uint64_t)j * rows + r] = (res ? res[(uint64_t)j * rows + r] : 0.0) + acc;
        }
    }
    free(xp);
}

void ref_matmul(const float *w, uint32_t rows, uint32_t cols, const float *x, uint32_t n,
                hs_matmul_prologue prologue, const float *g, float eps, const float *res, double *y) {
    ref_product(w, rows, cols, x, n, prologue, g, eps, res, y, false);
}

void ref_matmul_q8(const float *w, uint32_t rows, uint32_t cols, const float *x, uint32_t n,
                   hs_matmul_prologue prologue, const float *g, float eps, const float *res, double *y) {
    ref_product(w, rows, cols, x, n, prologue, g, eps, res, y, true);
}

void ref_matmul_q8n(const float *w, uint32_t rows, uint32_t cols, const float *h, uint32_t n, const float *g,
                    float eps, double *y) {
    double *xp = malloc(cols * sizeof *xp);
    for (uint32_t j = 0; j < n; j++) {
        const float *hj = h + (uint64_t)j * cols;
        double ss = 0;
        for (uint32_t k = 0; k < cols; k++) {
            ss += (double)hj[k] * hj[k];
            xp[k] = (double)hj[k] * g[k];
        }
        ref_round_q8(xp, cols);
        const double scale = 1.0 / sqrt(ss / cols + eps);
        for (uint32_t r = 0; r < rows; r++) {
            double acc = 0;
            const float *wr = w + (uint64_t)r * cols;
            for (uint32_t k = 0; k < cols; k++)
                acc += (double)wr[k] * xp[k];
            y[(uint64_t)j * rows + r] = scale * acc;
        }
    }
    free(xp);
}

void *ref_random_weight(hs_rng *r, hs_type t, uint32_t rows, uint32_t cols) {
    const uint64_t bytes = hs_type_row_bytes(t, cols) * rows;
    uint8_t *data = malloc(bytes);
    if (!data) return NULL;
    if (t == HS_TYPE_Q4_K || t == HS_TYPE_Q6_K) {
        for (uint64_t i = 0; i < bytes; i++) data[i] = (uint8_t)hs_rng_u32(r);
        const uint64_t nb = bytes / hs_type_block_bytes(t);
        for (uint64_t b = 0; b < nb; b++) {
            if (t == HS_TYPE_Q4_K) {
                hs_block_q4_K *k = (hs_block_q4_K *)data + b;
                k->d = hs_f32_to_f16(hs_rng_range(r, 0.001f, 0.004f));
                k->dmin = hs_f32_to_f16(hs_rng_range(r, 0.001f, 0.004f));
            } else {
                hs_block_q6_K *k = (hs_block_q6_K *)data + b;
                k->d = hs_f32_to_f16(hs_rng_range(r, 0.0005f, 0.002f));
            }
        }
        return data;
    }
    float *row = malloc(cols * sizeof *row);
    const uint64_t rb = hs_type_row_bytes(t, cols);
    for (uint32_t i = 0; i < rows; i++) {
        hs_rng_fill(r, row, cols, -1.0f, 1.0f);
        if (hs_quantize_row(t, row, data + i * rb, cols) != HS_OK) {
            free(data);
            data = NULL;
            break;
        }
    }
    free(row);
    return data;
}

float *ref_dequantize(hs_type t, const void *data, uint32_t rows, uint32_t cols) {
    float *w = malloc((uint64_t)rows * cols * sizeof *w);
    const uint64_t rb = hs_type_row_bytes(t, cols);
    for (uint32_t i = 0; i < rows; i++)
        if (hs_dequantize_row(t, (const uint8_t *)data + i * rb, w + (uint64_t)i * cols, cols) != HS_OK) {
            free(w);
            return NULL;
        }
    return w;
}

double ref_nmse(const float *a, const double *ref, uint64_t n) {
    double num = 0, den = 0;
    for (uint64_t i = 0; i < n; i++) {
        const double d = (double)a[i] - ref[i];
        num += d * d;
        den += ref[i] * ref[i];
    }
    if (isnan(num)) return INFINITY;
    return den > 0 ? num / den : num;
}

const hs_type ref_weight_types[REF_N_WEIGHT_TYPES] = {HS_TYPE_F32,  HS_TYPE_F16,  HS_TYPE_Q8_0, HS_TYPE_Q4_0,
                                                      HS_TYPE_Q4_1, HS_TYPE_Q4_K, HS_TYPE_Q6_K};

bool ref_is_k_quant(hs_type t) { return t == HS_TYPE_Q4_K || t == HS_TYPE_Q6_K; }
