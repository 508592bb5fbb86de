/* op_common — what every op file needs to bind a caller's tensor: the checks
 * of a binding against what the op touches, and the window a shader sees.
 *
 * A descriptor's offset must be a multiple of minStorageBufferOffsetAlignment,
 * so an op binds a tensor at its offset aligned down and passes the remainder,
 * the slack, to the shader in units of the shader's element (hs_op_bind); the
 * slack counts against maxStorageBufferRange. Ops that split a tensor into
 * windows plan them with hs_ops_max_slack (hs_ops.h) and bind each with
 * hs_op_window. Internal to runtime/op_*.c. */
#ifndef HS_OP_COMMON_H
#define HS_OP_COMMON_H

#include "hs_ops.h"

/* Checks that tensor b (its range, or to the buffer's end) holds `need` bytes
 * starting `at` bytes in, at an offset that is a multiple of `unit` bytes
 * (a power of two). HS_ERR_INVALID_ARG for no buffer or a misaligned offset,
 * HS_ERR_OUT_OF_RANGE for a binding outside its buffer or too short; the
 * message names op and what. */
hs_status hs_op_check(const char *op, const char *what, const hs_vk_binding *b, uint64_t at, uint64_t need,
                      uint32_t unit);

/* hs_op_check, then the binding of those bytes at the offset aligned down
 * (*out) and the slack in units of `unit` bytes (*off), which the shader adds
 * to its indices. HS_ERR_VK_UNSUPPORTED when slack + need exceeds
 * maxStorageBufferRange. */
hs_status hs_op_bind(const hs_vk_caps *c, const char *op, const char *what, const hs_vk_binding *b, uint64_t at,
                     uint64_t need, uint32_t unit, hs_vk_binding *out, uint32_t *off);

/* The binding of `bytes` bytes (at least 4: a range is never empty) at byte
 * `start` of buf, its offset aligned down to `align`, with the slack in units
 * of `unit` bytes in *off; unchecked, for windows already planned to fit. */
hs_vk_binding hs_op_window_aligned(hs_vk_buffer *buf, uint64_t start, uint64_t bytes, uint32_t unit,
                                   uint64_t align, uint32_t *off);
/* hs_op_window_aligned at the storage-buffer alignment, as hs_op_bind does. */
hs_vk_binding hs_op_window(const hs_vk_caps *c, hs_vk_buffer *buf, uint64_t start, uint64_t bytes, uint32_t unit,
                           uint32_t *off);

/* Whether an op reads through uniform texel buffers (RGBA32UI) where it can: the tuning asks for texel loads
 * (lavapipe, where a texel fetch is one gather and a storage-buffer load a loop over the lanes) and the
 * device has them. */
bool hs_op_texel_loads(const hs_ops *ops);
/* The offset alignment of a texel view: minTexelBufferOffsetAlignment, at least one texel (16 bytes). */
uint64_t hs_op_texel_align(const hs_vk_caps *c);
/* How many rows of row_bytes one texel view holds when it starts at `offset` aligned down to
 * hs_op_texel_align (the slack counts against maxTexelBufferElements); 0 if not one. */
uint64_t hs_op_texel_rows(const hs_vk_caps *c, uint64_t offset, uint64_t row_bytes);

/* wg clamped to the device's workgroup limits (x size and invocations), at least 1. */
uint32_t hs_op_clamp_wg(const hs_vk_caps *c, uint32_t wg);

#endif
