/* ref_attn — plain-C references of the ops in runtime/op_attn.h, written for
 * clarity: the tree mask by walking parents, attention in double precision
 * over the visible rows, and KV compaction as the sequential copy the in-place
 * contract describes. Caches are [n_ctx][n_kv_head][head_dim] of f32, or of
 * f16 given as uint16 halves.
 */
#ifndef HS_REF_ATTN_H
#define HS_REF_ATTN_H

#include <stddef.h>
#include <stdint.h>

#include "op_attn.h"

/* mask [n][hs_attn_mask_words(n)], depth [n]; a parent outside [-1, i) counts
 * as -1 (as the shader reads it). */
void ref_tree_mask(const int32_t *parents, uint32_t n, uint32_t *mask, int32_t *depth);

/* out [n][n_head][head_dim]; query i < n_used sees rows [0, n_prefix) and
 * n_prefix + j for mask bits j < n_used; queries >= n_used and queries without
 * a visible row get zeros. n_prefix / n_used are clamped as the shader does.
 * Everything in double, rounded to float at the end. */
void ref_attention(const float *q, const void *k, const void *v, hs_type type, uint32_t n_ctx,
                   uint32_t n_kv_head, uint32_t head_dim, uint32_t n_head, uint32_t n_prefix, uint32_t n_used,
                   const uint32_t *mask, uint32_t n, float scale, float *out);

/* For i < min(m, cap): row dst_base + i := row src[i] in each of the n_layers
 * layers of cache (layer l at byte l * layer_stride), sequentially in i; pairs
 * with a row >= n_ctx are skipped. Apply to k and v separately. */
void ref_kv_gather(void *cache, size_t row_bytes, uint32_t n_layers, size_t layer_stride, uint32_t n_ctx,
                   uint32_t dst_base, uint32_t m, uint32_t cap, const uint32_t *src);

#endif
