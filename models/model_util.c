/* model_util: what the architectures share (model_util.h). */
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

void hs_model_plan_mlp(const hs_model_mlp_in *in, hs_model_mlp *out) {
    hs_model_mlp p = {
        .wo = {.residual = true, .res = in->h, .scratch = in->xs, .act_q8 = in->act_q8},
        .gu = {.prologue = HS_MATMUL_RMSNORM, .norm = in->ffn_norm, .eps = in->eps, .scratch = in->xs,
               .act_q8 = in->act_q8},
        .down = {.prologue = HS_MATMUL_SWIGLU, .residual = true, .res = in->h, .scratch = in->xs,
                 .act_q8 = in->act_q8},
        .gu_x = in->h,
        .down_x = in->gu_out};
    p.att_q8 = hs_matmul_act_q8(in->wo, &p.wo) && in->head_dim % 32 == 0;
    p.wo.x_q8 = p.att_q8;
    p.att_out = p.wo_x = p.att_q8 ? in->xs : in->att;
    if (in->gu_x8n) {
        p.wo.q8_out = in->xn;
        p.wo.q8_norm = in->ffn_norm;
        p.gu.x_q8 = true;
        p.gu.scratch = (hs_vk_binding){0};
        p.gu_x = in->xn;
        if (in->gu_stacked && in->ff % 32 == 0 && hs_matmul_act_q8(in->wdown, &p.down)) {
            p.gu.swiglu_q8 = in->xs;
            p.down.prologue = HS_MATMUL_PLAIN;
            p.down.x_q8 = true;
            p.down_x = in->xs;
        }
    }
    *out = p;
}
