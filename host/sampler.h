/* sampler — a seeded, reproducible token sampler over a float logits array of the whole vocabulary.
 *
 * The chain is llama.cpp's default order (common/common.h, common_params_sampling::samplers, with the
 * samplers heterospec does not implement left out):
 *
 *   penalties -> top-k -> top-p -> min-p -> temperature -> dist
 *
 *   penalties   over the last repeat_last_n accepted tokens (hs_sampler_accept), llama.cpp semantics:
 *               a token seen c > 0 times gets logit / repeat_penalty if its logit is > 0, else
 *               logit * repeat_penalty, then minus c * frequency_penalty + presence_penalty.
 *   top-k       keeps the k largest logits (k <= 0: off). Equal logits rank lower id first.
 *   top-p       softmax over what is left, sorted descending; keeps the shortest prefix whose probability
 *               reaches top_p (1: off), at least one token.
 *   min-p       keeps tokens whose probability is >= min_p times the largest (0: off).
 *   temperature divides the remaining logits by temperature. temperature <= 0 means greedy: the argmax of
 *               the penalised logits, ties to the lowest id (the filters never remove the argmax).
 *   dist        softmax, then one draw by inverse CDF walking token ids in increasing order with a uniform
 *               number from the sampler's own generator (xoshiro256**, seeded by splitmix64). No rand(), no
 *               platform RNG: the same seed, parameters and inputs give the same tokens everywhere.
 *
 * hs_sampler_probs() writes the distribution that hs_sampler_sample() draws from (after every filter,
 * normalised, zeros for filtered tokens; one-hot in greedy mode). Lossless speculative sampling needs it:
 * accept a draft token x with probability p(x) (hs_sampler_uniform), on rejection zero p(x), renormalise
 * and draw from the residual (hs_sampler_sample_probs).
 *
 * Usage:
 *   hs_sampler_params p = hs_sampler_default_params();     // llama.cpp's defaults, seed 0
 *   p.temperature = 0.7f; p.seed = 1234;
 *   hs_sampler *s;  HS_TRY(hs_sampler_create(&p, n_vocab, &s));
 *   for (...) {
 *       int32_t tok;
 *       HS_TRY(hs_sampler_sample(s, logits, n_vocab, &tok));
 *       HS_TRY(hs_sampler_accept(s, tok));                // feeds the repetition penalties
 *   }
 *   hs_sampler_destroy(s);
 *
 * Randomness: only hs_sampler_sample (when not greedy), hs_sampler_sample_probs and hs_sampler_uniform
 * advance the generator, each by exactly one draw; hs_sampler_probs and greedy sampling do not.
 *
 * Errors: every invalid parameter or input (NaN or +inf logits, all logits -inf, a size that is not the
 * sampler's vocabulary, a token id out of range, a probability array that is negative or sums to zero)
 * returns HS_ERR_INVALID_ARG with a message naming it; nothing is changed then.
 *
 * Ownership: hs_sampler_create gives the sampler to the caller; hs_sampler_destroy accepts NULL. The
 * sampler copies the parameters; logits and probability arrays are borrowed for the call only.
 *
 * Thread-safety: a sampler holds mutable state (history, generator, scratch buffers); use one sampler per
 * thread or lock around it. Distinct samplers are independent.
 */
#ifndef HS_SAMPLER_H
#define HS_SAMPLER_H

#include <stdbool.h>
#include <stdint.h>

#include "hs_status.h"

typedef struct hs_sampler hs_sampler;

typedef struct hs_sampler_params {
    float temperature;       /* <= 0: greedy */
    int32_t top_k;           /* <= 0: off */
    float top_p;             /* in (0, 1]; 1: off */
    float min_p;             /* in [0, 1]; 0: off */
    float repeat_penalty;    /* > 0; 1: off */
    int32_t repeat_last_n;   /* >= 0 tokens of history the penalties look at; 0: penalties off */
    float frequency_penalty; /* subtracted once per occurrence; 0: off */
    float presence_penalty;  /* subtracted once if present; 0: off */
    uint64_t seed;
} hs_sampler_params;

/* llama.cpp's defaults (temperature 0.8, top_k 40, top_p 0.95, min_p 0.05, repeat_penalty 1,
 * repeat_last_n 64, no frequency/presence penalty), seed 0. */
hs_sampler_params hs_sampler_default_params(void);

/* Checks p (HS_ERR_INVALID_ARG with the offending field) without creating anything. */
hs_status hs_sampler_params_validate(const hs_sampler_params *p);

hs_status hs_sampler_create(const hs_sampler_params *p, int32_t n_vocab, hs_sampler **out);
void hs_sampler_destroy(hs_sampler *s);

/* Clears the token history and re-seeds the generator with the seed of the parameters. */
void hs_sampler_reset(hs_sampler *s);

/* Appends a token to the history the penalties look at (a no-op when repeat_last_n is 0). */
hs_status hs_sampler_accept(hs_sampler *s, int32_t token);

/* Writes the final distribution (n_vocab floats, sums to 1, zeros for filtered tokens) for these logits. */
hs_status hs_sampler_probs(hs_sampler *s, const float *logits, int32_t n_vocab, float *probs);

/* Draws one token from the chain for these logits. Does not accept it (call hs_sampler_accept). */
hs_status hs_sampler_sample(hs_sampler *s, const float *logits, int32_t n_vocab, int32_t *token);

/* Draws one token from a given distribution (non-negative weights, normalised or not, finite, positive
 * sum), by the same inverse-CDF walk hs_sampler_sample uses: hs_sampler_sample(logits) and
 * hs_sampler_sample_probs(hs_sampler_probs(logits)) return the same token from the same generator state. */
hs_status hs_sampler_sample_probs(hs_sampler *s, const float *probs, int32_t n, int32_t *token);

/* One uniform number in [0, 1) with 53 random bits from the sampler's generator. */
double hs_sampler_uniform(hs_sampler *s);

/* True when the parameters select greedy decoding (temperature <= 0). */
bool hs_sampler_is_greedy(const hs_sampler *s);

#endif
