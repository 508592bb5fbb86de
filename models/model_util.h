/* model_util — what the architectures (llama, eagle3) share when they load a
 * GGUF's weights: a 2-D tensor of the expected shape in a type the kernels
 * compute with, uploaded as a device weight; the capacity buckets of their
 * recorded graphs.
 *
 * Errors: HS_ERR_FORMAT naming the file and tensor for a missing or
 * misshapen tensor, HS_ERR_UNSUPPORTED_TYPE for a type no kernel takes.
 * Ownership: the tensor points into the gguf; the weight is the caller's.
 */
#ifndef HS_MODEL_UTIL_H
#define HS_MODEL_UTIL_H

#include "gguf.h"
#include "hs_ops.h"
#include "op_matmul.h"

/* The tensor `name` of shape [rows][cols] (GGUF ne = {cols, rows}). */
hs_status hs_model_matrix(const hs_gguf *g, const char *name, uint32_t rows, uint32_t cols,
                          const hs_gguf_tensor **out);

/* hs_model_matrix, uploaded; adds its device bytes to *bytes. */
hs_status hs_model_load_matrix(hs_ops *ops, const hs_gguf *g, const char *name, uint32_t rows, uint32_t cols,
                               hs_weight **out, uint64_t *bytes);

/* The capacity bucket of a batch of n: the next power of two, at most limit.
 * Graphs are recorded per bucket, so batches of changing size reuse a few. */
uint32_t hs_model_bucket(uint32_t n, uint32_t limit);
/* The target's verification buckets: n itself up to HS_MODEL_EXACT_BUCKETS
 * (the small trees speculation verifies most, where an inert slot costs the
 * most), else hs_model_bucket. */
#define HS_MODEL_EXACT_BUCKETS 8u
uint32_t hs_model_tree_bucket(uint32_t n, uint32_t limit);

#endif
