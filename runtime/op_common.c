/* op_common: binding checks and windows shared by the op files (op_common.h). */
#include "op_common.h"

hs_status hs_op_check(const char *op, const char *what, const hs_vk_binding *b, uint64_t at, uint64_t need,
                      uint32_t unit) {
    if (!b || !b->buf) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: %s has no buffer", op, what);
    const uint64_t size = hs_vk_buffer_size(b->buf);
    if (b->offset > size || (b->range && b->range > size - b->offset))
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "%s: %s binding (offset %llu, range %llu) is outside its %llu-byte buffer",
                       op, what, (unsigned long long)b->offset, (unsigned long long)b->range,
                       (unsigned long long)size);
    if ((b->offset + at) % unit)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: %s offset %llu is not a multiple of %u bytes", op, what,
                       (unsigned long long)(b->offset + at), unit);
    const uint64_t span = b->range ? b->range : size - b->offset;
    if (at > span || need > span - at)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "%s: %s needs %llu bytes at +%llu but its binding holds %llu", op, what,
                       (unsigned long long)need, (unsigned long long)at, (unsigned long long)span);
    return HS_OK;
}

hs_vk_binding hs_op_window_aligned(hs_vk_buffer *buf, uint64_t start, uint64_t bytes, uint32_t unit,
                                   uint64_t align, uint32_t *off) {
    if (!align) align = 1;
    const uint64_t base = start - start % align;
    *off = (uint32_t)((start - base) / unit);
    return (hs_vk_binding){.buf = buf, .offset = base, .range = start - base + (bytes ? bytes : 4)};
}

hs_vk_binding hs_op_window(const hs_vk_caps *c, hs_vk_buffer *buf, uint64_t start, uint64_t bytes,
                           uint32_t unit, uint32_t *off) {
    return hs_op_window_aligned(buf, start, bytes, unit, c->min_storage_offset_align, off);
}

hs_status hs_op_bind(const hs_vk_caps *c, const char *op, const char *what, const hs_vk_binding *b, uint64_t at,
                     uint64_t need, uint32_t unit, hs_vk_binding *out, uint32_t *off) {
    hs_status st = hs_op_check(op, what, b, at, need, unit);
    if (st != HS_OK) return st;
    const uint64_t start = b->offset + at;
    const uint64_t align = c->min_storage_offset_align ? c->min_storage_offset_align : 1;
    const uint64_t slack = start % align; /* a multiple of unit: both are powers of two */
    if (slack + need > c->max_storage_buffer_range)
        return HS_FAIL(HS_ERR_VK_UNSUPPORTED, "%s: %s spans %llu bytes, over maxStorageBufferRange %llu", op, what,
                       (unsigned long long)(slack + need), (unsigned long long)c->max_storage_buffer_range);
    if (slack / unit > UINT32_MAX) return HS_FAIL(HS_ERR_INVALID_ARG, "%s: %s offset too large", op, what);
    *out = hs_op_window(c, b->buf, start, need, unit, off);
    return HS_OK;
}

uint32_t hs_op_clamp_wg(const hs_vk_caps *c, uint32_t wg) {
    if (wg > c->max_wg_size[0]) wg = c->max_wg_size[0];
    if (wg > c->max_wg_invocations) wg = c->max_wg_invocations;
    return wg ? wg : 1;
}

bool hs_op_texel_loads(const hs_ops *ops) {
    return hs_ops_tuning(ops)->texel_weights && hs_ops_caps(ops)->max_texel_elements > 0;
}

uint64_t hs_op_texel_align(const hs_vk_caps *c) {
    return c->min_texel_offset_align > 16 ? c->min_texel_offset_align : 16;
}

uint64_t hs_op_texel_rows(const hs_vk_caps *c, uint64_t offset, uint64_t row_bytes) {
    const uint64_t texels = c->max_texel_elements * 16, slack = offset % hs_op_texel_align(c);
    return texels > slack ? (texels - slack) / row_bytes : 0;
}
