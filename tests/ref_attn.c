/* ref_attn: references of tree mask, tree attention and KV compaction. */
#include "ref_attn.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

void ref_tree_mask(const int32_t *parents, uint32_t n, uint32_t *mask, int32_t *depth) {
    const uint32_t words = hs_attn_mask_words(n);
    memset(mask, 0, (size_t)n * words * 4);
    for (uint32_t i = 0; i < n; i++) {
        int32_t d = 0;
        int64_t j = i;
        for (;;) {
            mask[(size_t)i * words + (uint32_t)j / 32] |= 1u << (j % 32);
            int32_t p = parents[j];
            if (p < 0 || p >= j) break;
            j = p;
            d++;
        }
        depth[i] = d;
    }
}

static double cache_at(const void *c, hs_type type, size_t idx) {
    if (type == HS_TYPE_F16) return hs_test_f16_to_f32(((const uint16_t *)c)[idx]);
    return ((const float *)c)[idx];
}

void ref_attention(const float *q, const void *k, const void *v, hs_type type, uint32_t n_ctx,
                   uint32_t n_kv_head, uint32_t head_dim, uint32_t n_head, uint32_t n_prefix, uint32_t n_used,
                   const uint32_t *mask, uint32_t n, float scale, float *out) {
    const uint32_t words = hs_attn_mask_words(n), group = n_head / n_kv_head;
    if (n_prefix > n_ctx) n_prefix = n_ctx;
    if (n_used > n) n_used = n;
    if (n_used > n_ctx - n_prefix) n_used = n_ctx - n_prefix;
    uint32_t *rows = malloc(sizeof(uint32_t) * (n_prefix + n_used + 1));
    double *sc = malloc(sizeof(double) * (n_prefix + n_used + 1));
    double *acc = malloc(sizeof(double) * head_dim);
    for (uint32_t i = 0; i < n; i++) {
        uint32_t nv = 0;
        if (i < n_used) {
            for (uint32_t r = 0; r < n_prefix; r++)
                rows[nv++] = r;
            for (uint32_t j = 0; j < n_used; j++)
                if (mask[(size_t)i * words + j / 32] >> (j % 32) & 1u) rows[nv++] = n_prefix + j;
        }
        for (uint32_t h = 0; h < n_head; h++) {
            const float *qh = q + ((size_t)i * n_head + h) * head_dim;
            float *oh = out + ((size_t)i * n_head + h) * head_dim;
            const uint32_t kvh = h / group;
            double mx = -INFINITY;
            for (uint32_t t = 0; t < nv; t++) {
                size_t base = ((size_t)rows[t] * n_kv_head + kvh) * head_dim;
                double s = 0;
                for (uint32_t d = 0; d < head_dim; d++)
                    s += (double)qh[d] * cache_at(k, type, base + d);
                sc[t] = s * scale;
                if (sc[t] > mx) mx = sc[t];
            }
            double sum = 0;
            memset(acc, 0, sizeof(double) * head_dim);
            for (uint32_t t = 0; t < nv; t++) {
                double p = exp(sc[t] - mx);
                sum += p;
                size_t base = ((size_t)rows[t] * n_kv_head + kvh) * head_dim;
                for (uint32_t d = 0; d < head_dim; d++)
                    acc[d] += p * cache_at(v, type, base + d);
            }
            for (uint32_t d = 0; d < head_dim; d++)
                oh[d] = nv ? (float)(acc[d] / sum) : 0.0f;
        }
    }
    free(rows);
    free(sc);
    free(acc);
}

void ref_kv_gather(void *cache, size_t row_bytes, uint32_t n_layers, size_t layer_stride, uint32_t n_ctx,
                   uint32_t dst_base, uint32_t m, uint32_t cap, const uint32_t *src) {
    if (m > cap) m = cap;
    for (uint32_t l = 0; l < n_layers; l++) {
        uint8_t *base = (uint8_t *)cache + (size_t)l * layer_stride;
        for (uint32_t i = 0; i < m; i++) {
            if (dst_base >= n_ctx || i >= n_ctx - dst_base || src[i] >= n_ctx) continue;
            memmove(base + (size_t)(dst_base + i) * row_bytes, base + (size_t)src[i] * row_bytes, row_bytes);
        }
    }
}
