/* ref_eagle3 — a plain-C reference of the EAGLE-3 draft head (models/eagle3.h),
 * written from the head's definition, independent of the device code: every
 * activation and the KV cache in double, rows computed one at a time, the
 * attention over an explicit list of visible rows, RoPE (NEOX) angles in
 * double. Tests compare the device's Top-K records with ref_eagle3_topk of
 * these logits.
 *
 * Ownership: the weights are borrowed for the reference's life.
 */
#ifndef HS_REF_EAGLE3_H
#define HS_REF_EAGLE3_H

#include <stdint.h>

#include "op_select.h"

typedef struct ref_eagle3_weights {
    uint32_t dim, n_head, n_kv_head, head_dim, ff, n_vocab, n_draft_vocab, target_dim;
    float eps, rope_base;
    const float *fc;                     /* [dim][3 target_dim] */
    const float *attn_norm;              /* [dim], on the embedding */
    const float *hidden_norm;            /* [dim], on the hidden state */
    const float *ffn_norm, *output_norm; /* [dim] */
    const float *wq;                     /* [n_head head_dim][2 dim] */
    const float *wk, *wv;                /* [n_kv_head head_dim][2 dim] */
    const float *wo;                     /* [dim][n_head head_dim] */
    const float *wgate, *wup;            /* [ff][dim] */
    const float *wdown;                  /* [dim][ff] */
    const float *out;                    /* [n_draft_vocab][dim] */
    const int32_t *d2t;                  /* [n_draft_vocab] */
    const float *embd;                   /* [n_vocab][dim]: the target's token_embd */
} ref_eagle3_weights;

typedef struct ref_eagle3 ref_eagle3;

ref_eagle3 *ref_eagle3_create(const ref_eagle3_weights *w, uint32_t n_ctx, uint32_t max_nodes);
void ref_eagle3_destroy(ref_eagle3 *r);
/* Forgets everything / the drafted nodes, as hs_eagle3_reset / _reset_tree. */
void ref_eagle3_reset(ref_eagle3 *r);
void ref_eagle3_reset_tree(ref_eagle3 *r);
/* n rows: taps feats [n][3 target_dim] with the tokens after them; the last
 * row becomes slot 0. logits [n_draft_vocab] of the last row. */
void ref_eagle3_consume(ref_eagle3 *r, const float *feats, const int32_t *tokens, uint32_t n, double *logits);
/* One tree level of w nodes (parent slots, target tokens) at the next slots;
 * logits [w][n_draft_vocab]. */
void ref_eagle3_draft(ref_eagle3 *r, const uint32_t *parents, const int32_t *tokens, uint32_t w,
                      double *logits);

/* The Top-K record of softmax(logits) over the draft vocabulary, as
 * op_select.h defines it, with target ids (id + d2t[id]); ties to the lower
 * draft id. */
void ref_eagle3_topk(const double *logits, uint32_t n_draft_vocab, uint32_t k, const int32_t *d2t,
                     hs_topk_result *res);
/* softmax(logits) [n_draft_vocab], in double. */
void ref_eagle3_probs(const double *logits, uint32_t n_draft_vocab, double *probs);

#endif
