/* ref_select — plain-C references of runtime/op_select (argmax, Top-K with
 * tail mass and entropy), written for clarity: double precision for every
 * sum, the tail summed directly over the elements outside the top k.
 * Thread-safety: pure functions.
 */
#ifndef HS_REF_SELECT_H
#define HS_REF_SELECT_H

#include <stdint.h>

#define HS_REF_TOPK_MAX_K 32

/* out [n] = index of the largest value of each row of x [n][vocab], ties to the lowest. */
void hs_ref_argmax(const float *x, uint32_t n, uint32_t vocab, uint32_t *out);

/* One row of the Top-K reduction, in double precision. */
typedef struct hs_ref_topk {
    uint32_t ids[HS_REF_TOPK_MAX_K]; /* decreasing probability, ties to the lower id */
    double probs[HS_REF_TOPK_MAX_K];
    double tail;    /* sum of q over the ids outside the top k */
    double entropy; /* -(sum q_j log q_j + tail log tail) / log(k + 1), 0 log 0 = 0 */
    double max_logit;
    double lse; /* log sum_i exp(x_i / T) */
} hs_ref_topk;

/* out [n] = Top-K of q = softmax(x / temperature) per row of x [n][vocab];
 * 1 <= k <= min(vocab, HS_REF_TOPK_MAX_K). */
void hs_ref_topk_rows(const float *x, uint32_t n, uint32_t vocab, uint32_t k, float temperature,
                      hs_ref_topk *out);

#endif
