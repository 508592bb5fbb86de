/* ref_elem — plain-C references of the ops in runtime/op_elem.h, written for
 * clarity, in the operation order the shaders use where that matters for
 * rounding (documented per function). All arrays are row-major f32.
 */
#ifndef HS_REF_ELEM_H
#define HS_REF_ELEM_H

#include <stdint.h>

#include "op_elem.h"

/* y [n][dim] = x / sqrt(sum(x^2) / dim + eps) * w (w may be NULL). Sums in double. */
void ref_rmsnorm(const float *x, const float *w, float *y, uint32_t n, uint32_t dim, float eps);
/* y [n][dim] = softmax(scale * x) per row, in double. */
void ref_softmax(const float *x, float *y, uint32_t n, uint32_t dim, float scale);

float ref_gelu(float x); /* tanh approximation, as ggml */
float ref_silu(float x);
/* y [n][ff] = act(gu[t][j]) * gu[t][ff + j] */
void ref_swiglu(const float *gu, float *y, uint32_t n, uint32_t ff);
void ref_geglu(const float *gu, float *y, uint32_t n, uint32_t ff);

/* cos/sin of rotation i of a RoPE at position pos, computed as ggml computes
 * the angle: theta = freq_scale * ((float)pos * powf(freq_base, -2i / n_rot)). */
void ref_rope_cos_sin(const hs_rope_params *rp, int32_t pos, uint32_t i, float *c, float *s);
/* Rotates one head vector x [head_dim] in place. */
void ref_rope_head(float *x, uint32_t head_dim, int32_t pos, const hs_rope_params *rp);
/* x [n][n_heads][head_dim] in place, token t at position pos[t]. */
void ref_rope(float *x, const int32_t *pos, uint32_t n, uint32_t n_heads, uint32_t head_dim,
              const hs_rope_params *rp);
/* The fused op: q [n][n_head][head_dim], and the cache rows rows[t] of
 * k_cache / v_cache [n_ctx][n_kv][head_dim] as f32 (the caller converts for an
 * f16 cache). Rows >= n_ctx are skipped. */
void ref_rope_kv(const float *qkv, const int32_t *pos, const uint32_t *rows, float *q, float *k_cache,
                 float *v_cache, uint32_t n, uint32_t n_head, uint32_t n_kv, uint32_t head_dim,
                 uint32_t n_ctx, const hs_rope_params *rp);

#endif
