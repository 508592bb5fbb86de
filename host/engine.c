/* engine: prompt processing and autoregressive decoding (see engine.h). */
#include "engine.h"

#include <stdlib.h>
#include <string.h>

#include "hs_bench_ops.h"

/* Largest prompt batch (the model's default max_batch; less when the model's is smaller). */
#define HS_ENGINE_PROMPT_BATCH 512u

hs_gen_params hs_gen_default_params(void) {
    hs_gen_params p = {.n_predict = 128, .sp = hs_sampler_default_params()};
    p.sp.temperature = 0.0f;
    return p;
}

bool hs_engine_is_end(const hs_tok *tok, int32_t id) {
    return id == hs_tok_eos(tok) || hs_tok_token_type(tok, id) == HS_TOK_TYPE_CONTROL;
}

void hs_gen_result_free(hs_gen_result *r) {
    if (!r) return;
    free(r->ids);
    r->ids = NULL;
    r->n_gen = 0;
}

hs_status hs_engine_check_fit(const hs_llama *m, size_t n_prompt, uint32_t n_predict) {
    if (n_prompt == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "the prompt is empty and the model adds no BOS token");
    if (n_prompt + (size_t)n_predict > hs_llama_n_ctx(m))
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "prompt (%zu tokens) + %u to generate exceed the context of %u (use -c)",
                       n_prompt, n_predict, hs_llama_n_ctx(m));
    return HS_OK;
}

/* Appends a decided token; returns false when generation stops there. */
static bool emit(const hs_tok *tok, const hs_gen_params *p, hs_gen_result *out, int32_t id) {
    if (hs_engine_is_end(tok, id)) {
        out->stop = HS_GEN_STOP_END;
        return false;
    }
    out->ids[out->n_gen++] = id;
    if (p->on_token && !p->on_token(p->user, id)) {
        out->stop = HS_GEN_STOP_CALLER;
        return false;
    }
    return out->n_gen < p->n_predict;
}

/* The token the target chooses after its last eval: the device's argmax when
 * greedy, else a draw from the sampler; fed to the sampler's history. */
static hs_status choose(hs_sampler *smp, const float *logits, const uint32_t *amax, uint32_t n_vocab,
                        int32_t *next) {
    hs_status st = HS_OK;
    if (hs_sampler_is_greedy(smp))
        *next = (int32_t)amax[0];
    else
        HS_TRY(hs_sampler_sample(smp, logits, (int32_t)n_vocab, next));
    HS_TRY(hs_sampler_accept(smp, *next));
fail:
    return st;
}

hs_status hs_engine_generate(hs_llama *m, const hs_tok *tok, const int32_t *prompt, size_t n_prompt,
                             const hs_gen_params *p, hs_gen_result *out) {
    hs_status st = HS_OK;
    hs_sampler *smp = NULL;
    memset(out, 0, sizeof *out);
    const uint32_t n_vocab = hs_llama_cfg(m)->n_vocab;
    HS_TRY(hs_engine_check_fit(m, n_prompt, p->n_predict));
    HS_TRY(hs_sampler_create(&p->sp, (int32_t)n_vocab, &smp));
    out->ids = malloc(sizeof *out->ids * ((size_t)p->n_predict + 1));
    if (!out->ids) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_engine_generate: out of memory");
        goto fail;
    }
    out->n_prompt = (uint32_t)n_prompt;
    out->stop = HS_GEN_STOP_LIMIT;
    hs_llama_reset(m);
    if (p->spec) {
        hs_spec_reset(p->spec);
        hs_spec_set_prompt(p->spec, n_prompt);
    }

    /* The prompt in batches; only the last token's logits are needed. With a
     * head, each chunk's taps are consumed with the tokens after them (the
     * last one's is the first generated token). */
    double t0 = hs_now_s();
    const float *logits = NULL;
    const uint32_t *amax = NULL;
    int32_t next = 0;
    const uint32_t batch = hs_llama_max_batch(m), chunk = batch < HS_ENGINE_PROMPT_BATCH ? batch : HS_ENGINE_PROMPT_BATCH;
    for (size_t done = 0; done < n_prompt;) {
        uint32_t n = (uint32_t)(n_prompt - done < chunk ? n_prompt - done : chunk);
        HS_TRY(hs_llama_eval(m, prompt + done, n, NULL, true, true, &logits, &amax));
        done += n;
        if (done == n_prompt) {
            for (size_t i = 0; i < n_prompt; i++) HS_TRY(hs_sampler_accept(smp, prompt[i]));
            HS_TRY(choose(smp, logits, amax, n_vocab, &next));
        }
        if (p->spec)
            HS_TRY(hs_spec_consume_prompt(p->spec, prompt + done - n, n,
                                          done == n_prompt ? next : prompt[done]));
    }
    out->prompt_s = hs_now_s() - t0;

    /* One token per target pass, or a speculative round's tokens per pass. */
    double t1 = hs_now_s();
    int32_t round[HS_SPEC_MAX_LEN + 1];
    for (bool more = p->n_predict > 0 && emit(tok, p, out, next); more;) {
        if (p->spec) {
            uint32_t k;
            HS_TRY(hs_spec_round(p->spec, smp, next, p->n_predict - out->n_gen, round, &k));
            for (uint32_t i = 0; i < k && more; i++) more = emit(tok, p, out, round[i]);
            next = round[k - 1];
        } else {
            HS_TRY(hs_llama_eval(m, &next, 1, NULL, true, true, &logits, &amax));
            HS_TRY(choose(smp, logits, amax, n_vocab, &next));
            more = emit(tok, p, out, next);
        }
        out->target_passes++;
    }
    out->gen_s = hs_now_s() - t1;
    if (p->spec) out->spec = *hs_spec_stats_get(p->spec);
    hs_sampler_destroy(smp);
    return HS_OK;
fail:
    hs_sampler_destroy(smp);
    hs_gen_result_free(out);
    return st;
}
