/* engine — the generation loop that `generate`, `bench` and `bench-spec` run:
 * the prompt in batches, then either one token per target pass or, with a
 * speculative round (host/spec, DESIGN.md section 2), the tokens a verified
 * tree yields per pass, until the end token or the token limit. The CLI only
 * parses, prints and reports.
 *
 * Usage:
 *   hs_gen_params p = hs_gen_default_params();      // greedy, 128 tokens
 *   hs_gen_result r;
 *   HS_TRY(hs_engine_generate(model, tok, prompt_ids, n_prompt, &p, &r));
 *   ... r.ids[0 .. r.n_gen), r.stop, r.prompt_s, r.gen_s ...
 *   hs_gen_result_free(&r);
 *
 * The model's context (and the head's) is reset first. Greedy decoding takes
 * the argmax the device computes; sampling uses host/sampler with p.sp
 * (seeded, so a run is repeatable). Tokens of the prompt feed the sampler's
 * penalties. Greedy output is the same token for token with or without
 * speculation (DESIGN.md section 3); sampled output has the same distribution.
 *
 * Ownership: the model and tokenizer are borrowed; r.ids is malloc'ed and
 * owned by the caller (hs_gen_result_free). Thread-safety: as the model.
 */
#ifndef HS_ENGINE_H
#define HS_ENGINE_H

#include <stddef.h>
#include <stdint.h>

#include "llama.h"
#include "sampler.h"
#include "spec.h"
#include "tokenizer.h"

/* Called with each new token as soon as it is accepted (streaming); returning
 * false stops the generation (stop reason HS_GEN_STOP_CALLER). */
typedef bool (*hs_gen_token_fn)(void *user, int32_t id);

typedef struct hs_gen_params {
    uint32_t n_predict;   /* most tokens to generate */
    hs_sampler_params sp; /* temperature 0: greedy */
    hs_gen_token_fn on_token; /* NULL: none */
    void *user;
    /* Speculative decoding (NULL: plain): made with hs_spec_create for this
     * model, which must have been loaded with taps. */
    hs_spec *spec;
} hs_gen_params;

typedef enum hs_gen_stop {
    HS_GEN_STOP_LIMIT = 0, /* n_predict tokens generated */
    HS_GEN_STOP_END = 1,   /* the end token (EOS or a control token such as <|im_end|>), not kept */
    HS_GEN_STOP_CALLER = 2,
} hs_gen_stop;

typedef struct hs_gen_result {
    int32_t *ids;            /* generated tokens [n_gen], end token excluded */
    uint32_t n_gen;
    uint32_t n_prompt;
    hs_gen_stop stop;
    uint32_t target_passes;  /* forward passes of the target after the prompt */
    hs_spec_stats spec;      /* speculative rounds (zeros when plain) */
    double prompt_s;         /* prompt processing (wall clock) */
    double gen_s;            /* from the first generated token to the last */
} hs_gen_result;

hs_gen_params hs_gen_default_params(void);

/* True for a token that ends generation: the tokenizer's EOS or any control
 * token (chat templates end a turn with one). */
bool hs_engine_is_end(const hs_tok *tok, int32_t id);

/* HS_ERR_INVALID_ARG for an empty prompt, HS_ERR_OUT_OF_RANGE (with the
 * numbers) when n_prompt + n_predict tokens do not fit the model's context. */
hs_status hs_engine_check_fit(const hs_llama *m, size_t n_prompt, uint32_t n_predict);

/* Generates after prompt[0 .. n_prompt). Errors as hs_engine_check_fit;
 * on failure *out holds nothing to free. */
hs_status hs_engine_generate(hs_llama *m, const hs_tok *tok, const int32_t *prompt, size_t n_prompt,
                             const hs_gen_params *p, hs_gen_result *out);
void hs_gen_result_free(hs_gen_result *r);

#endif
