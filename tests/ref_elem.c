/* ref_elem: plain-C references of the element-wise, row and RoPE ops. */
#include "ref_elem.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ref_rmsnorm(const float *x, const float *w, float *y, uint32_t n, uint32_t dim, float eps) {
    for (uint32_t r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = y + (size_t)r * dim;
        double ss = 0;
        for (uint32_t i = 0; i < dim; i++)
            ss += (double)xr[i] * xr[i];
        float scale = (float)(1.0 / sqrt(ss / dim + eps));
        for (uint32_t i = 0; i < dim; i++)
            yr[i] = w ? xr[i] * scale * w[i] : xr[i] * scale;
    }
}

void ref_softmax(const float *x, float *y, uint32_t n, uint32_t dim, float scale) {
    for (uint32_t r = 0; r < n; r++) {
        const float *xr = x + (size_t)r * dim;
        float *yr = y + (size_t)r * dim;
        double m = -INFINITY;
        for (uint32_t i = 0; i < dim; i++)
            m = fmax(m, (double)scale * xr[i]);
        double s = 0;
        for (uint32_t i = 0; i < dim; i++)
            s += exp((double)scale * xr[i] - m);
        for (uint32_t i = 0; i < dim; i++)
            yr[i] = (float)(exp((double)scale * xr[i] - m) / s);
    }
}

float ref_gelu(float x) {
    const double a = 0.044715, c = 0.79788456080286535587989211986876;
    double v = x;
    return (float)(0.5 * v * (1.0 + tanh(c * v * (1.0 + a * v * v))));
}

float ref_silu(float x) { return (float)((double)x / (1.0 + exp(-(double)x))); }

void ref_swiglu(const float *gu, float *y, uint32_t n, uint32_t ff) {
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t j = 0; j < ff; j++) {
            const float *g = gu + (size_t)t * 2 * ff;
            y[(size_t)t * ff + j] = ref_silu(g[j]) * g[ff + j];
        }
}

void ref_geglu(const float *gu, float *y, uint32_t n, uint32_t ff) {
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t j = 0; j < ff; j++) {
            const float *g = gu + (size_t)t * 2 * ff;
            y[(size_t)t * ff + j] = ref_gelu(g[j]) * g[ff + j];
        }
}

void ref_rope_cos_sin(const hs_rope_params *rp, int32_t pos, uint32_t i, float *c, float *s) {
    float f = powf(rp->freq_base, -2.0f * (float)i / (float)rp->n_rot);
    float theta = rp->freq_scale * ((float)pos * f);
    *c = cosf(theta);
    *s = sinf(theta);
}

void ref_rope_head(float *x, uint32_t head_dim, int32_t pos, const hs_rope_params *rp) {
    uint32_t half = rp->n_rot / 2;
    (void)head_dim; /* dims >= n_rot pass through */
    for (uint32_t i = 0; i < half; i++) {
        float c, s;
        ref_rope_cos_sin(rp, pos, i, &c, &s);
        uint32_t e0 = rp->mode == HS_ROPE_NEOX ? i : 2 * i;
        uint32_t e1 = rp->mode == HS_ROPE_NEOX ? i + half : 2 * i + 1;
        float x0 = x[e0], x1 = x[e1];
        x[e0] = x0 * c - x1 * s;
        x[e1] = x0 * s + x1 * c;
    }
}

void ref_rope(float *x, const int32_t *pos, uint32_t n, uint32_t n_heads, uint32_t head_dim,
              const hs_rope_params *rp) {
    for (uint32_t t = 0; t < n; t++)
        for (uint32_t h = 0; h < n_heads; h++)
            ref_rope_head(x + ((size_t)t * n_heads + h) * head_dim, head_dim, pos[t], rp);
}

void ref_rope_kv(const float *qkv, const int32_t *pos, const uint32_t *rows, float *q, float *k_cache,
                 float *v_cache, uint32_t n, uint32_t n_head, uint32_t n_kv, uint32_t head_dim,
                 uint32_t n_ctx, const hs_rope_params *rp) {
    size_t hd = head_dim, n_slot = (size_t)n_head + 2 * (size_t)n_kv;
    for (uint32_t t = 0; t < n; t++) {
        const float *in = qkv + (size_t)t * n_slot * hd;
        for (uint32_t h = 0; h < n_head; h++) {
            float *qh = q + ((size_t)t * n_head + h) * hd;
            memcpy(qh, in + h * hd, hd * sizeof(float));
            ref_rope_head(qh, head_dim, pos[t], rp);
        }
        if (rows[t] >= n_ctx) continue;
        for (uint32_t h = 0; h < n_kv; h++) {
            float *kh = k_cache + ((size_t)rows[t] * n_kv + h) * hd;
            float *vh = v_cache + ((size_t)rows[t] * n_kv + h) * hd;
            memcpy(kh, in + (n_head + h) * hd, hd * sizeof(float));
            ref_rope_head(kh, head_dim, pos[t], rp);
            memcpy(vh, in + (n_head + n_kv + h) * hd, hd * sizeof(float));
        }
    }
}
