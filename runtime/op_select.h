/* op_select — reductions that pick tokens from logits: argmax (greedy
 * decoding and greedy verification) and the Top-K reduction of the draft tree
 * (DESIGN.md sections 2 and 4): per row the K most probable ids of
 * q = softmax(logits / T), their probabilities, the tail mass, the Top-K
 * entropy, the max logit and the log-sum-exp. Only these small arrays go back
 * to the host; the full distribution never does.
 *
 * Every function records one op into a hs_vk_seq (nothing is submitted) and
 * returns HS_ERR_INVALID_ARG / HS_ERR_OUT_OF_RANGE with a message on bad sizes.
 * Logits are f32, row-major [n][vocab], given as hs_vk_binding (buffer, byte
 * offset, range; range 0 = to the end of the buffer). Offsets need only be
 * multiples of 4 bytes: the ops bind the aligned-down offset and pass the rest
 * to the shader. One dispatch per call, one workgroup per row; more dispatches
 * only when the logits pass maxStorageBufferRange or n passes
 * maxComputeWorkGroupCount (split at row boundaries). Where the tuning asks for
 * texel-buffer loads (lavapipe), rows of whole texels (vocab a multiple of 4,
 * 16-byte offsets) are read through a uniform texel buffer (HS_VK_DISABLE_TEXEL_BUFFER
 * keeps storage buffers; the same results). Logits must be finite
 * (argmax: NaN-free); very negative values such as -1e30 work as masks.
 *
 * One row is never split across bindings: it must fit maxStorageBufferRange
 * together with its offset's alignment slack (a row of exactly the range at an
 * aligned offset fits), else HS_ERR_OUT_OF_RANGE names the sizes. Splitting a
 * row would cost a second merge pass for every row, and no vocabulary comes
 * near the 128 MiB (32M logits) that the smallest common range holds.
 *
 * Exactness: ties go to the lower id. Each row is reduced in a fixed order
 * that depends only on positions inside the row (DESIGN.md section 3): a row
 * gives bitwise the same output alone, in a batch of any n, or at any offset.
 * The workgroup size depends on the device, vocab and k only (it widens for
 * long rows, see op_select.c), never on n.
 *
 * A device that runs the Top-K kernel with smaller subgroups than it reported
 * (possible only without VK_EXT_subgroup_size_control) gets a poison record
 * (ids 0xFFFFFFFF, NaN floats) rather than a silently wrong one.
 *
 * ---- Top-K output record (one per row, 2k + 4 words, rows back to back) ----
 *   word [0, k)      ids     uint32, by decreasing probability, ties to the lower id
 *   word [k, 2k)     probs   f32, q_j = exp((l_j - max) / T) / sum_i exp((l_i - max) / T)
 *   word 2k          tail    f32, r = 1 - sum_j q_j, summed from the elements outside
 *                            the top k (precise even when tiny)
 *   word 2k + 1      entropy f32, H_K = -(sum_j q_j log q_j + r log r) / log(k + 1),
 *                            0 log 0 = 0, clamped to [0, 1]
 *   word 2k + 2      max     f32, the largest logit of the row (raw, before 1/T)
 *   word 2k + 3      lse     f32, log sum_i exp(l_i / T), so log q_i = l_i / T - lse
 *                            for any id i (hs_topk_log_prob)
 * hs_topk_unpack reads one record from the downloaded bytes.
 *
 * Ownership: the ops borrow every buffer; nothing is kept after the call except
 * what the sequence records. Thread-safety: as hs_ops (one thread).
 */
#ifndef HS_OP_SELECT_H
#define HS_OP_SELECT_H

#include "hs_ops.h"

/* Largest k of hs_op_topk. */
#define HS_TOPK_MAX_K 32u

/* Words (4 bytes) of one Top-K output record. */
static inline uint32_t hs_topk_record_words(uint32_t k) { return 2u * k + 4u; }
/* Bytes of the Top-K output of n rows. */
static inline uint64_t hs_topk_out_bytes(uint32_t n, uint32_t k) {
    return (uint64_t)n * hs_topk_record_words(k) * 4u;
}

/* out [n] (uint32) = index of the largest value of each row of logits
 * [n][vocab] (f32), ties to the lowest index. n >= 1, 1 <= vocab < 2^32 - 1. */
hs_status hs_op_argmax(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *logits, uint32_t n, uint32_t vocab,
                       const hs_vk_binding *out);

/* Top-K reduction of q = softmax(logits / temperature) for each row of logits
 * [n][vocab] (f32) into out (n records of hs_topk_record_words(k) words, layout
 * above). 1 <= k <= min(vocab, HS_TOPK_MAX_K); temperature finite and > 0. */
hs_status hs_op_topk(hs_ops *ops, hs_vk_seq *seq, const hs_vk_binding *logits, uint32_t n, uint32_t vocab,
                     uint32_t k, float temperature, const hs_vk_binding *out);

/* One row of the Top-K output, unpacked. */
typedef struct hs_topk_result {
    uint32_t k;
    uint32_t ids[HS_TOPK_MAX_K];
    float probs[HS_TOPK_MAX_K];
    float tail;      /* 1 - sum(probs) */
    float entropy;   /* H_K in [0, 1] */
    float max_logit; /* raw */
    float lse;       /* log sum_i exp(l_i / T) */
} hs_topk_result;

/* Unpacks record `row` from the downloaded output of hs_op_topk (k as given
 * to it). records need no particular alignment. */
void hs_topk_unpack(const void *records, uint32_t k, uint32_t row, hs_topk_result *res);

/* log q of an id whose logit is `logit`, from a row's max and lse:
 * (logit - max) / T - (lse - max / T), which keeps the precision of the
 * difference to the max. */
float hs_topk_log_prob(const hs_topk_result *res, float logit, float temperature);

#endif
