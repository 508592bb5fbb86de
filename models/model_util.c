/* model_util: shared weight loading of the architectures (model_util.h). */
#include "model_util.h"

hs_status hs_model_matrix(const hs_gguf *g, const char *name, uint32_t rows, uint32_t cols,
                          const hs_gguf_tensor **out) {
    const hs_gguf_tensor *t = hs_gguf_find_tensor(g, name);
    if (!t) return HS_FAIL(HS_ERR_FORMAT, "%s: tensor %s missing", hs_gguf_name(g), name);
    if (t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1)
        return HS_FAIL(HS_ERR_FORMAT, "%s: tensor %s has shape [%lld, %lld, %lld, %lld], expected [%u, %u]",
                       hs_gguf_name(g), name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], cols, rows);
    if (!hs_type_supported(t->type))
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE,
                       "%s: tensor %s has type %s, which heterospec cannot compute with", hs_gguf_name(g),
                       name, hs_ggml_type_get(t->type) ? hs_ggml_type_get(t->type)->name : "?");
    *out = t;
    return HS_OK;
}

hs_status hs_model_load_matrix(hs_ops *ops, const hs_gguf *g, const char *name, uint32_t rows, uint32_t cols,
                               hs_weight **out, uint64_t *bytes) {
    hs_status st = HS_OK;
    const hs_gguf_tensor *t = NULL;
    HS_TRY(hs_model_matrix(g, name, rows, cols, &t));
    HS_TRY(hs_weight_create(ops, (hs_type)t->type, rows, cols, t->data, out));
    *bytes += hs_weight_device_bytes(*out);
fail:
    return st;
}

uint32_t hs_model_bucket(uint32_t n, uint32_t limit) {
    uint32_t cap = 1;
    while (cap < n) cap *= 2;
    return cap < limit ? cap : limit;
}

uint32_t hs_model_tree_bucket(uint32_t n, uint32_t limit) {
    if (n > HS_MODEL_EXACT_BUCKETS) return hs_model_bucket(n, limit);
    const uint32_t cap = n ? n : 1;
    return cap < limit ? cap : limit;
}
