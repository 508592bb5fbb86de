/* ref_matmul — plain-C reference of the weight products (runtime/op_matmul.h)
 * and random GGUF weights for the tests. The reference works in double from
 * the weights hs_dequantize_row gives (bitwise the device's weights), so the
 * only difference to the device is the device's f32 rounding.
 */
#ifndef HS_REF_MATMUL_H
#define HS_REF_MATMUL_H

#include <stdint.h>

#include "op_matmul.h"
#include "testutil.h"

/* y [n][rows] = (res +) W x' with W [rows][cols] dequantized, x [n][x_stride]
 * (x_stride = 2 cols for SwiGLU: [gate | up]), x' per prologue (norm: g
 * [cols], eps), all in double. res may be NULL. */
void ref_matmul(const float *w, uint32_t rows, uint32_t cols, const float *x, uint32_t n,
                hs_matmul_prologue prologue, const float *g, float eps, const float *res, double *y);

/* ref_matmul on 8-bit activations (hs_matmul_opts.act_q8): x' rounded per
 * 32-element block to d * round-half-even(x' / d), d = max |x'| / 127. */
void ref_matmul_q8(const float *w, uint32_t rows, uint32_t cols, const float *x, uint32_t n,
                   hs_matmul_prologue prologue, const float *g, float eps, const float *res, double *y);

/* The RMSNorm product on x8n (hs_matmul_opts.x_q8 with HS_MATMUL_RMSNORM):
 * h * g rounded per block as ref_matmul_q8 rounds x', the product, then
 * scaled by 1 / sqrt(mean(h^2) + eps). h: [n][cols]. */
void ref_matmul_q8n(const float *w, uint32_t rows, uint32_t cols, const float *h, uint32_t n, const float *g,
                    float eps, double *y);

/* Random GGUF data for a [rows][cols] weight of type t (malloc'ed; free()).
 * f32/f16: uniform [-1, 1); q8_0/q4_0/q4_1: uniform [-1, 1) quantized with
 * hs_quantize_row; q4_K/q6_K: random quants and sub-block scales with small
 * positive f16 super-block scales. */
void *ref_random_weight(hs_rng *r, hs_type t, uint32_t rows, uint32_t cols);

/* W [rows][cols] as floats (malloc'ed), via hs_dequantize_row. */
float *ref_dequantize(hs_type t, const void *data, uint32_t rows, uint32_t cols);

/* Every weight type the products and the row gather support, for tests that
 * sweep them; k-quants (q4_K, q6_K) need cols to be a multiple of 256. */
#define REF_N_WEIGHT_TYPES 7
extern const hs_type ref_weight_types[REF_N_WEIGHT_TYPES];
bool ref_is_k_quant(hs_type t);

/* Normalised mean squared error of a against a double reference. */
double ref_nmse(const float *a, const double *ref, uint64_t n);

#endif
