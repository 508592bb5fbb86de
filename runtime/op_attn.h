/* op_attn — attention over the KV cache with tree visibility, the tree
 * ancestor mask, and KV-cache compaction: the device side of one speculative
 * round's verification (DESIGN.md section 2, steps 5 and 7).
 *
 * Per round the host uploads small arrays and replays a sequence recorded once:
 *   parents int32 [n]            -> hs_op_tree_mask -> mask [n][words], depth [n]
 *   info {n_prefix, n_used}      -> hs_op_attention (per layer)
 *   rows {dst_base, m, src[cap]} -> hs_op_kv_gather (all layers, one dispatch;
 *                                   one per layer for layers in windows)
 * Only static shapes (capacities, heads, head_dim, n_ctx) are fixed at record
 * time; everything that changes per step is read on the device.
 *
 * Tree layout: node j of the tree (0 <= j < n_used <= n) owns cache row
 * n_prefix + j; parents are topological (parent[i] < i, -1 for a root-level
 * node). Plain decoding is the tree of one node; a chain (parent[i] = i - 1)
 * is causal prompt processing, so both take this same path.
 *
 * Exactness (DESIGN.md section 3): hs_op_attention gives a query bitwise the
 * same output whether it is verified inside a tree or decoded alone after its
 * ancestors were compacted to the rows right after the prefix, and whatever n
 * and the other queries are (see attention.comp). The kernel shape depends
 * only on the device and the model (head_dim, heads), never on n.
 *
 * Cost (lavapipe): one workgroup per (query, block of query heads sharing a
 * KV head); its lanes take the visible keys round-robin, so one dispatch costs
 * about n * n_kv_head * (n_prefix + depth) * head_dim per-lane element loads.
 * lavapipe ends loops after 65535 trips per invocation, which bounds
 * n_prefix + n to about 500k rows (8 lanes); the tests cover 20000.
 *
 * KV-cache layout: as op_elem.h (hs_kv_layer): [n_ctx][n_kv_head][head_dim],
 * f32 or f16. A layer larger than maxStorageBufferRange is bound as up to
 * HS_KV_MAX_CHUNKS windows of rows (hs_kv_split_plan), read and written by
 * _kv4 variants of the kernels that pick a row's window with constant
 * indices; attention still deals keys to lanes by ordinal and merges in lane
 * order (no per-window partial softmax), so its output is bitwise that of an
 * unsplit cache, tree or not. A layer that fits keeps today's kernels.
 * Tensors are hs_vk_binding (buffer, byte offset, range; range 0 =
 * to the end). Offsets: multiples of 4 bytes, except q, out and an f32 cache
 * (16 bytes) and an f16 cache (8 bytes), which are read as vec4; the ops bind
 * the aligned-down offset and pass the rest to the shader.
 *
 * Ownership: the ops borrow every buffer; nothing is kept after the call except
 * what the sequence records. Thread-safety: as hs_ops (one thread).
 */
#ifndef HS_OP_ATTN_H
#define HS_OP_ATTN_H

#include "hs_ops.h"
#include "op_elem.h"

/* uint32 words of the attention info buffer. */
enum {
    HS_ATTN_INFO_N_PREFIX = 0, /* cache rows every query sees */
    HS_ATTN_INFO_N_USED = 1,   /* live tree nodes (queries); clamped to n */
    HS_ATTN_INFO_WORDS = 2,
    /* hs_op_attention_cols only: live queries, apart from the tree's nodes */
    HS_ATTN_INFO_N_LIVE = 2,
    HS_ATTN_INFO_COLS_WORDS = 3,
};

/* uint32 words of the kv_gather rows buffer: {dst_base, m, src[cap]}. */
enum {
    HS_KV_GATHER_DST_BASE = 0,
    HS_KV_GATHER_M = 1,
    HS_KV_GATHER_SRC = 2, /* first of cap source rows */
};

/* Largest head_dim hs_op_attention takes: a lane holds a query head and its
 * accumulator in registers (gemma3 uses 256). */
#define HS_ATTN_MAX_HEAD_DIM 256u

/* uint32 words per mask row for n tree nodes. */
static inline uint32_t hs_attn_mask_words(uint32_t n) { return (n + 31u) / 32u; }

/* Host-side check of a parent array: parent[i] in [-1, i). Returns
 * HS_ERR_INVALID_ARG naming the first bad node. (The shader does not trust
 * it either: an out-of-range parent is read as -1 there.) */
hs_status hs_attn_check_parents(const int32_t *parents, uint32_t n);

/* Ancestor mask of a tree, one dispatch.
 *   parents int32 [n], mask uint32 [n][hs_attn_mask_words(n)], depth int32 [n].
 * Bit j of mask row i is set iff j == i or j is an ancestor of i; depth[i] is
 * the number of ancestors. Unused slots (beyond the live nodes) may hold any
 * parent; their rows are computed but never affect live nodes. */
hs_status hs_op_tree_mask(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *parents, uint32_t n,
                          const hs_vk_binding *mask, const hs_vk_binding *depth);

/* Attention of n queries (capacity) over one layer's KV cache, one dispatch
 * (more only when q/out exceed maxStorageBufferRange or the grid limit).
 *   q    f32 [n][n_head][head_dim] (already rotated)
 *   kv   the layer's cache; head_dim a multiple of 4, <= HS_ATTN_MAX_HEAD_DIM;
 *        n_head a multiple of kv->n_kv_head (grouped-query: head h reads kv
 *        head h / (n_head / n_kv_head))
 *   info uint32 {n_prefix, n_used} (HS_ATTN_INFO_*), read on the device
 *   mask uint32 [n][hs_attn_mask_words(n)] as made by hs_op_tree_mask
 *   out  f32 [n][n_head][head_dim]; must not overlap q
 * Query i < n_used sees cache rows [0, n_prefix) and n_prefix + j for every bit
 * j < n_used set in mask row i: out = softmax(scale q.k) v over them (zeros if
 * none). Queries n_used .. n-1 get zeros. n_prefix and n_used are clamped so
 * no row past n_ctx is read. */
hs_status hs_op_attention(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                          uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask, uint32_t n,
                          float scale, const hs_vk_binding *out);

/* hs_op_attention with the output in the 8-bit form of q4_1 products on 8-bit
 * activations (op_matmul.h, act_q8 and x_q8): [n][n_head head_dim / 32 blocks]
 * of 80 bytes, bitwise what the product's own pass makes of the f32 output,
 * without that pass. head_dim must be a multiple of 32. */
hs_status hs_op_attention_q8(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                             uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask,
                             uint32_t n, float scale, const hs_vk_binding *out);

/* Attention whose queries are not the tree's nodes: a draft head's tree level
 * (models/eagle3) has w new queries that must also see nodes of earlier
 * levels. The tree has n_cols node columns, the call n query rows:
 *   info uint32 {n_prefix, n_used, n_live} (HS_ATTN_INFO_*, read on the
 *        device): n_used <= n_cols tree nodes own cache rows
 *        n_prefix .. n_prefix + n_used - 1; queries 0 .. n_live - 1 are live
 *   mask uint32 [n][hs_attn_mask_words(n_cols)]: row i = what query i sees
 * Query i < min(n_live, n) sees cache rows [0, n_prefix) and n_prefix + j for
 * every bit j < n_used of mask row i; queries past n_live get zeros at once
 * (no key is read). q, kv, out, scale and the clamps as hs_op_attention,
 * which is this op with n_cols = n and n_live = n_used. Same kernel: a query
 * with the same visible rows gives bitwise the same output whatever n, n_cols
 * and n_live are. */
hs_status hs_op_attention_cols(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                               uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask,
                               uint32_t n, uint32_t n_cols, float scale, const hs_vk_binding *out);
/* hs_op_attention_cols with the output in hs_op_attention_q8's 8-bit form. */
hs_status hs_op_attention_cols_q8(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *q, const hs_kv_layer *kv,
                                  uint32_t n_head, const hs_vk_binding *info, const hs_vk_binding *mask,
                                  uint32_t n, uint32_t n_cols, float scale, const hs_vk_binding *out);

/* KV compaction, one dispatch for all layers (one per layer when a layer is
 * bound in windows, see above): for i < m, row dst_base + i :=
 * row src[i] in k and v of every layer (rows buffer uint32 {dst_base, m,
 * src[cap]}, HS_KV_GATHER_*, read on the device; m is clamped to cap; a pair
 * with a row >= n_ctx is skipped).
 *   k, v        layer 0's caches [n_ctx][row_elems] of `type` (f32 or f16);
 *               layer l starts layer_stride bytes after layer 0 in the same
 *               buffer (n_layers = 1: one layer, stride unused)
 *   row_elems   elements of one cache row (n_kv_head * head_dim); the row
 *               must be a multiple of 4 bytes
 * In place is correct when src is increasing and dst_base + i <= src[i] (the
 * accepted path of a tree: rows move towards the prefix) -- see
 * kv_gather.comp. Other overlapping patterns are undefined. */
hs_status hs_op_kv_gather(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *k, const hs_vk_binding *v,
                          hs_type type, uint32_t n_layers, uint64_t layer_stride, uint32_t n_ctx,
                          uint32_t row_elems, const hs_vk_binding *rows, uint32_t cap);

#endif
