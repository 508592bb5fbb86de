/* ref_select: plain-C argmax and Top-K (see ref_select.h). */
#include "ref_select.h"

#include <math.h>
#include <string.h>

void hs_ref_argmax(const float *x, uint32_t n, uint32_t vocab, uint32_t *out) {
    for (uint32_t r = 0; r < n; r++) {
        const float *row = x + (size_t)r * vocab;
        uint32_t best = 0;
        for (uint32_t i = 1; i < vocab; i++)
            if (row[i] > row[best]) best = i;
        out[r] = best;
    }
}

static void topk_row(const float *row, uint32_t vocab, uint32_t k, double t, hs_ref_topk *o) {
    memset(o, 0, sizeof *o);
    /* Selection by insertion into a sorted list; strict > keeps the earlier
     * (lower) id in front of an equal value. */
    uint32_t cnt = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        if (cnt == k && !(row[i] > row[o->ids[k - 1]])) continue;
        uint32_t pos = cnt < k ? cnt++ : k - 1;
        while (pos > 0 && row[o->ids[pos - 1]] < row[i]) {
            o->ids[pos] = o->ids[pos - 1];
            pos--;
        }
        o->ids[pos] = i;
    }
    double m = row[o->ids[0]];
    double total = 0;
    for (uint32_t i = 0; i < vocab; i++)
        total += exp(((double)row[i] - m) / t);
    /* The tail as the sum over the other ids, not total - top (no cancellation). */
    double tail = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        int in_top = 0;
        for (uint32_t j = 0; j < k && !in_top; j++)
            in_top = o->ids[j] == i;
        if (!in_top) tail += exp(((double)row[i] - m) / t);
    }
    double h = 0;
    for (uint32_t j = 0; j < k; j++) {
        double q = exp(((double)row[o->ids[j]] - m) / t) / total;
        o->probs[j] = q;
        if (q > 0) h -= q * log(q);
    }
    o->tail = tail / total;
    if (o->tail > 0) h -= o->tail * log(o->tail);
    o->entropy = h / log((double)k + 1.0);
    o->max_logit = m;
    o->lse = m / t + log(total);
}

void hs_ref_topk_rows(const float *x, uint32_t n, uint32_t vocab, uint32_t k, float temperature,
                      hs_ref_topk *out) {
    for (uint32_t r = 0; r < n; r++)
        topk_row(x + (size_t)r * vocab, vocab, k, temperature, &out[r]);
}
