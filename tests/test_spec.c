/* Exactness of speculative decoding (DESIGN.md section 3) on stories260K
 * with its committed draft head: greedy output equals plain greedy output
 * token for token for every method and tree setting (also when the context
 * fills up inside a round, at the token limit and at the end token), and
 * sampled output has the plain sampler's distribution (a two-sample
 * chi-square test over many seeds, per generated position). HeteroSpec
 * (host/heterospec) runs with fixed models, so its trees do not depend on a
 * calibration. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "hs_cli.h"
#include "hx_calib.h"
#include "tok_gguf.h"
#include "stb_ds.h"
#include "testutil.h"

typedef struct spec_env {
    hs_test_env base;
    hs_gguf *g, *hg;
    hs_tok *tok;
    hs_llama *m;
    hs_eagle3 *head;
    char head_path[1200];
} spec_env;

static hs_status load_pair(spec_env *e, uint32_t n_ctx, hs_llama **m, hs_eagle3 **head) {
    hs_status st = HS_OK;
    hs_eagle3_config hc;
    HS_TRY(hs_eagle3_config_read(e->hg, &hc));
    hs_llama_options opt = {.n_ctx = n_ctx, .max_batch = 128, .taps = true, .custom_taps = true};
    memcpy(opt.tap_layers, hc.tap_layers, sizeof opt.tap_layers);
    HS_TRY(hs_llama_load(e->base.ops, e->g, &opt, m));
    hs_eagle3_options ho = {.top_k = 10};
    HS_TRY(hs_eagle3_load(e->base.ops, e->hg, *m, &ho, head));
fail:
    return st;
}

static int setup(void **state) {
    if (hs_test_setup(state)) return -1;
    spec_env *e = calloc(1, sizeof *e);
    e->base = *(hs_test_env *)*state;
    free(*state);
    *state = e;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    if (hs_gguf_open(path, &e->g) != HS_OK || hs_tok_from_gguf(e->g, &e->tok) != HS_OK ||
        hs_cli_head_find(e->g, e->head_path, sizeof e->head_path) != HS_OK ||
        hs_gguf_open(e->head_path, &e->hg) != HS_OK || load_pair(e, 512, &e->m, &e->head) != HS_OK) {
        fprintf(stderr, "setup: %s\n", hs_last_error());
        return -1;
    }
    return 0;
}

static int teardown(void **state) {
    spec_env *e = *state;
    hs_eagle3_destroy(e->head);
    hs_llama_destroy(e->m);
    hs_tok_destroy(e->tok);
    hs_gguf_close(e->hg);
    hs_gguf_close(e->g);
    hs_test_env *base = malloc(sizeof *base);
    *base = e->base;
    free(e);
    *state = base;
    return hs_test_teardown(state);
}

/* The methods every exactness test runs (parsed as the CLI parses them). */
static const char *const methods[][4] = {
    /* method, depth, top-k, tree-size or static shape */
    {"chain", "1", NULL, NULL},
    {"chain", "3", NULL, NULL},
    {"chain", "7", NULL, NULL},
    {"static", NULL, NULL, "3,2,1"},
    {"static", NULL, NULL, "1,1,1,1,1,1,1,1"},
    {"eagle2", "5", "10", "60"},
    {"eagle2", "3", "4", "8"},
    {"eagle2", "6", "2", "16"},
};
#define N_METHODS (sizeof methods / sizeof methods[0])

static hs_tree_policy policy_of(size_t i) {
    hs_cli_spec s;
    hs_cli_spec_defaults(&s);
    s.method = methods[i][0];
    if (methods[i][1]) s.depth = atoi(methods[i][1]);
    if (methods[i][2]) s.top_k = atoi(methods[i][2]);
    if (methods[i][3] && !strcmp(s.method, "static"))
        s.tree = methods[i][3];
    else if (methods[i][3])
        s.tree_size = atoi(methods[i][3]);
    hs_tree_policy p;
    HS_CHECK(hs_cli_spec_policy(&s, &p));
    return p;
}

/* HeteroSpec models for the exactness tests: the built-in defaults with a
 * flat verification cost (large trees, deep where the head is sure), two
 * entropy strata with a steep one (small trees, often none), that with
 * rest 2 (after a round without candidates, two plain rounds whose head
 * consumes are cache-only), and the first with the head's nodes worth
 * nothing and the context lookup's 0.9 (lookup chains only). All have the
 * lookup on (the defaults' chains of 8). */
#define N_HX 4
static void hx_model(int which, hs_hx_model *m) {
    hs_hx_model_default(m);
    if (which == 3) { /* the context lookup alone: the head's nodes are worth nothing */
        hx_model(0, m);
        m->s[0].map_p[1] = 0.0f;
        m->lookup.min_match = 1;
        for (uint32_t mb = 0; mb < HS_HX_LK_MATCH; mb++)
            for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
                for (uint32_t h = 0; h < HS_HX_LK_COLS; h++)
                    m->lookup.accept[mb][pb][h] = 0.9f;
        return;
    }
    m->cost.n_verify = HS_HX_MAX_N;
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        m->cost.t_verify[n] = 1.0 + (which ? 0.3 : 0.001) * (n - 1);
    if (which) {
        m->n_strata = 2;
        m->s[0].hi = 0.5f;
        m->s[1] = m->s[0];
        m->s[1].lo = 0.5f;
        m->s[1].hi = INFINITY;
        m->s[1].map_p[1] = 0.3f;
        m->s[1].look = 0.2f;
        m->s[0].look = 0.9f;
    }
    if (which == 2) m->rest = 2;
}

static void gen(hs_llama *m, const hs_tok *tok, hs_spec *spec, const int32_t *prompt, size_t np, uint32_t n,
                const hs_sampler_params *sp, hs_gen_result *r) {
    hs_gen_params p = hs_gen_default_params();
    p.n_predict = n;
    if (sp) p.sp = *sp;
    p.spec = spec;
    HS_CHECK(hs_engine_generate(m, tok, prompt, np, &p, r));
}

static void assert_same(const hs_gen_result *a, const hs_gen_result *b, const char *what) {
    if (a->n_gen != b->n_gen || a->stop != b->stop)
        fail_msg("%s: %u tokens (stop %d), plain %u (stop %d)", what, b->n_gen, b->stop, a->n_gen, a->stop);
    for (uint32_t i = 0; i < a->n_gen; i++)
        if (a->ids[i] != b->ids[i]) fail_msg("%s: token %u is %d, plain %d", what, i, b->ids[i], a->ids[i]);
}

/* Several prompts, every method, long enough for many rounds; the head must
 * get tokens accepted (else compaction would go untested). */
static void test_greedy_equals_plain(void **state) {
    spec_env *e = *state;
    const int32_t prompts[][6] = {{1}, {1, 403, 407}, {1, 68, 401, 259, 400, 266}, {1, 80, 87, 79}};
    const size_t lens[] = {1, 3, 6, 4};
    uint64_t accepted = 0, moved = 0, rested = 0, accepted_rest = 0, lookup_acc = 0, lookup_only = 0,
             lookup_headless = 0, batched_saved = 0;
    /* And a prompt longer than the batch (two chunks, each consumed by the
     * head): BOS and the two golden stories' tokens, 199 in all. */
    int32_t longp[200];
    longp[0] = 1;
    const int n1 = hs_test_golden_ids(1, "greedy_generated_ids", longp + 1, 199);
    assert_true(n1 > 100 &&
                hs_test_golden_ids(4, "greedy_generated_ids", longp + 1 + n1, 199 - n1) == 199 - n1);
    for (size_t pi = 0; pi <= sizeof lens / sizeof lens[0]; pi++) {
        const bool is_long = pi == sizeof lens / sizeof lens[0];
        const int32_t *prompt = is_long ? longp : prompts[pi];
        const size_t np = is_long ? 200 : lens[pi];
        hs_gen_result ref;
        gen(e->m, e->tok, NULL, prompt, np, 200, NULL, &ref);
        for (size_t mi = 0; mi < N_METHODS; mi++) {
            hs_tree_policy pol = policy_of(mi);
            hs_spec *spec;
            HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
            hs_gen_result r;
            gen(e->m, e->tok, spec, prompt, np, 200, NULL, &r);
            char what[96];
            snprintf(what, sizeof what, "prompt %zu, %s %s/%s/%s", pi, methods[mi][0], methods[mi][1],
                     methods[mi][2], methods[mi][3]);
            assert_same(&ref, &r, what);
            accepted += r.spec.accepted;
            if (r.spec.verified > r.spec.rounds * 2) moved++;
            hs_gen_result_free(&r);
            hs_spec_destroy(spec);
        }
        for (int hi = 0; hi < N_HX; hi++) {
            hs_hx_model hm;
            hx_model(hi, &hm);
            const hs_tree_policy pol = hs_heterospec_policy(&hm);
            hs_spec *spec;
            HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
            hs_gen_result r;
            gen(e->m, e->tok, spec, prompt, np, 200, NULL, &r);
            char what[96];
            snprintf(what, sizeof what, "prompt %zu, heterospec model %d", pi, hi);
            assert_same(&ref, &r, what);
            if (hi != 2 && r.spec.rest_rounds)
                fail_msg("%s: %u rest rounds without rest", what, r.spec.rest_rounds);
            if (hi == 2) {
                rested += r.spec.rest_rounds;
                accepted_rest += r.spec.accepted;
            }
            lookup_acc += r.spec.lookup_accepted;
            if (hi == 3) {
                lookup_only += r.spec.lookup_only_accepted;
                if (r.spec.accepted != r.spec.lookup_accepted)
                    fail_msg("%s: %llu accepted, %llu of them lookup nodes", what,
                             (unsigned long long)r.spec.accepted, (unsigned long long)r.spec.lookup_accepted);
            }
            accepted += r.spec.accepted;
            if (r.spec.verified > r.spec.rounds * 2) moved++;
            hs_gen_result_free(&r);
            hs_spec_destroy(spec);
        }
        /* Prompt lookup decoding without the head (chains of 4 after 2+ tokens, of 8 after 1+),
         * and HeteroSpec without it (model 3 headless: given the head, it must not use it). */
        hs_hx_model hl;
        hx_model(3, &hl);
        hl.headless = true;
        for (int li = 0; li < 3; li++) {
            hs_tree_policy pol = li == 2 ? hs_heterospec_policy(&hl)
                                 : li    ? hs_tree_lookup(8, 1)
                                         : hs_tree_lookup(4, 2);
            pol.heads = li == 0 ? 1 : li == 1 ? 8 : 0; /* output heads one at a time, 8 and 4 at once */
            hs_spec *spec;
            HS_CHECK(hs_spec_create(e->m, li == 2 ? e->head : NULL, &pol, &spec));
            hs_gen_result r;
            gen(e->m, e->tok, spec, prompt, np, 200, NULL, &r);
            char what[96];
            snprintf(what, sizeof what, "prompt %zu, %s %u/%u without a head", pi, pol.name, pol.lookup,
                     pol.lookup_min);
            assert_same(&ref, &r, what);
            if (r.spec.accepted != r.spec.lookup_only_accepted || r.spec.head_rows || r.spec.draft_steps)
                fail_msg("%s: %llu accepted, %llu lookup-only, %llu head rows", what,
                         (unsigned long long)r.spec.accepted, (unsigned long long)r.spec.lookup_only_accepted,
                         (unsigned long long)r.spec.head_rows);
            lookup_headless += r.spec.accepted;
            /* One head product per accepted node, or fewer computing at least as many rows. */
            if (li == 0 ? r.spec.head_calls != r.spec.accepted
                        : r.spec.head_calls > r.spec.accepted || r.spec.head_calls_rows < r.spec.accepted)
                fail_msg("%s, heads %u: %llu accepted, %llu head products of %llu rows", what, pol.heads,
                         (unsigned long long)r.spec.accepted, (unsigned long long)r.spec.head_calls,
                         (unsigned long long)r.spec.head_calls_rows);
            if (li) batched_saved += r.spec.accepted - r.spec.head_calls;
            hs_gen_result_free(&r);
            hs_spec_destroy(spec);
        }
        hs_gen_result_free(&ref);
    }
    if (lookup_headless < 100)
        fail_msg("lookup without a head: %llu tokens accepted", (unsigned long long)lookup_headless);
    if (batched_saved < 20)
        fail_msg("heads at once saved only %llu products", (unsigned long long)batched_saved);
    /* Only the lookup drafts without a head. */
    const hs_tree_policy chain = hs_tree_chain(2);
    hs_spec *none = NULL;
    assert_int_equal(hs_spec_create(e->m, NULL, &chain, &none), HS_ERR_INVALID_ARG);
    assert_null(none);
    if (accepted < 100) fail_msg("the head got only %llu tokens accepted", (unsigned long long)accepted);
    assert_true(moved > 0);
    /* Rest happened, and drafting resumed after it. */
    if (rested < 10 || accepted_rest < 10)
        fail_msg("rest 2: %llu rest rounds, %llu tokens accepted", (unsigned long long)rested,
                 (unsigned long long)accepted_rest);
    /* The lookup's chains were verified and accepted, also where the head had none. */
    if (lookup_acc < 100 || lookup_only < 20)
        fail_msg("context lookup: %llu accepted, %llu only the lookup proposed",
                 (unsigned long long)lookup_acc, (unsigned long long)lookup_only);
}

/* The drafting time a generation reports is its rounds' (the head's consume
 * of each round's kept rows, drafting, the policy): the prompt's consume is
 * part of the prefill, so a generation that runs no round reports none. */
static void test_draft_time_is_the_rounds(void **state) {
    spec_env *e = *state;
    const int32_t prompt[] = {1, 403, 407};
    for (uint32_t n = 1; n <= 8; n += 7) {
        const hs_tree_policy pol = hs_tree_chain(2);
        hs_spec *spec;
        HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
        hs_gen_result r;
        gen(e->m, e->tok, spec, prompt, 3, n, NULL, &r);
        if (n == 1 && (r.spec.rounds != 0 || r.spec.draft_s != 0 || r.spec.verify_s != 0))
            fail_msg("one token, %u rounds: draft %g s, verify %g s (the prompt's consume is prefill)",
                     r.spec.rounds, r.spec.draft_s, r.spec.verify_s);
        if (n > 1 && (r.spec.rounds == 0 || !(r.spec.draft_s > 0) || !(r.spec.verify_s > 0)))
            fail_msg("%u tokens, %u rounds: draft %g s, verify %g s", n, r.spec.rounds, r.spec.draft_s,
                     r.spec.verify_s);
        hs_gen_result_free(&r);
        hs_spec_destroy(spec);
    }
}

/* Recording at every root (hs_tree_record, calibrate's default, through
 * calibrate's recorder): plain decoding's output, one token per round with
 * every level drafted. EAGLE-2, a chain and HeteroSpec (with the head, with
 * rest, and without it, drafting from the context lookup) replayed inside
 * those trees (hs_hx_replay) have exactly the rounds and accepted tokens of
 * generations with them. */
static void test_record_replays_generation(void **state) {
    spec_env *e = *state;
    const int32_t prompt[] = {1, 403, 407};
    enum { N = 120, K = 4, D = 4 };
    hs_gen_result ref;
    gen(e->m, e->tok, NULL, prompt, 3, N, NULL, &ref);
    hs_tree_policy rp = hs_tree_record(K, D);
    rp.lookup = HS_LOOKUP_MAX_LEN;
    rp.lookup_min = 1;
    hs_spec *spec;
    HS_CHECK(hs_spec_create(e->m, e->head, &rp, &spec));
    hs_hx_recorder lg = {.st = HS_OK}; /* as calibrate records */
    hs_spec_set_observer(spec, hs_hx_recorder_observe, &lg);
    hs_hx_recorder_start(&lg);
    hs_gen_result r;
    gen(e->m, e->tok, spec, prompt, 3, N, NULL, &r);
    HS_CHECK(hs_hx_recorder_finish(&lg, r.ids, r.n_gen));
    assert_same(&ref, &r, "recording at every root");
    const uint32_t n = (uint32_t)stbds_arrlen(lg.rounds);
    if (n != r.n_gen - 1 || r.spec.rounds != n || r.spec.verified != n || r.spec.accepted != 0 ||
        r.spec.draft_steps > (uint64_t)n * D || r.spec.draft_steps < (uint64_t)(n - D - 2) * D) /* (the last
                                                                 * rounds draft no deeper than the answer) */
        fail_msg("recording: %u rounds for %u tokens, %llu verified, %llu accepted, %llu draft levels", n,
                 r.n_gen, (unsigned long long)r.spec.verified, (unsigned long long)r.spec.accepted,
                 (unsigned long long)r.spec.draft_steps);
    for (uint32_t i = 0; i < n; i++)
        assert_true(lg.pos[i] == i && lg.rounds[i].ctx == 3 + i && lg.rounds[i].first == (i == 0) &&
                    lg.rounds[i].truth[0] == r.ids[i + 1]);
    hs_hx_model hl;
    hx_model(3, &hl);
    hl.headless = true;
    hl.headless_len = 8;
    hl.headless_min = 1;
    hs_hx_model h0, h2; /* HeteroSpec with the head: model 0, and model 2 (rest 2) */
    hx_model(0, &h0);
    hx_model(2, &h2);
    h0.max_width = h2.max_width = K;
    h0.max_depth = h2.max_depth = D;
    const hs_tree_policy replayed[] = {hs_tree_eagle2(K, D, 8),   hs_tree_eagle2(2, 3, 3), hs_tree_chain(3),
                                       hs_heterospec_policy(&hl), hs_heterospec_policy(&h0),
                                       hs_heterospec_policy(&h2)};
    for (size_t i = 0; i < sizeof replayed / sizeof *replayed; i++) {
        hs_spec *sp;
        HS_CHECK(hs_spec_create(e->m, e->head, &replayed[i], &sp));
        hs_gen_result g;
        gen(e->m, e->tok, sp, prompt, 3, N, NULL, &g);
        assert_same(&ref, &g, replayed[i].name);
        hs_hx_replay_result rr;
        HS_CHECK(hs_hx_replay(&replayed[i], &hl.cost, lg.rounds, n, &rr));
        /* The last round's last token: accepted in the replay, the bonus in generation. */
        const double last = rr.tokens - rr.rounds - (double)g.spec.accepted;
        if (rr.rounds != g.spec.rounds || last < 0 || last > 1) /* (unknown: the last rounds drafted less) */
            fail_msg("%s %u/%u/%u: replay %.0f rounds, %.0f accepted (%.0f nodes never drafted); generation %u "
                     "rounds, %llu accepted",
                     replayed[i].name, replayed[i].top_k, replayed[i].depth, replayed[i].total, rr.rounds,
                     rr.tokens - rr.rounds, rr.unknown, g.spec.rounds, (unsigned long long)g.spec.accepted);
        print_message("%s: %u rounds, %llu accepted, replayed alike\n", replayed[i].name, g.spec.rounds,
                      (unsigned long long)g.spec.accepted);
        if (i == 0) { /* the recorder under rounds that accept several tokens: each root's place */
            hs_hx_recorder l2 = {.st = HS_OK};
            hs_spec_set_observer(sp, hs_hx_recorder_observe, &l2);
            hs_hx_recorder_start(&l2);
            hs_gen_result g2;
            gen(e->m, e->tok, sp, prompt, 3, N, NULL, &g2);
            HS_CHECK(hs_hx_recorder_finish(&l2, g2.ids, g2.n_gen));
            assert_int_equal(stbds_arrlen(l2.rounds), g2.spec.rounds);
            for (ptrdiff_t k = 0; k < stbds_arrlen(l2.rounds); k++)
                assert_true(l2.rounds[k].nodes[0].token == g2.ids[l2.pos[k]] &&
                            l2.rounds[k].ctx == 3 + l2.pos[k] && (k == 0 || l2.pos[k] > l2.pos[k - 1]));
            hs_hx_recorder_free(&l2);
            hs_gen_result_free(&g2);
        }
        hs_gen_result_free(&g);
        hs_spec_destroy(sp);
    }
    hs_hx_recorder_free(&lg);
    hs_gen_result_free(&r);
    hs_gen_result_free(&ref);
    hs_spec_destroy(spec);
}

/* A context that ends inside rounds: trees must shrink to what fits, and the
 * output still equals plain decoding's up to the last token that fits. */
static void test_context_fills_in_a_round(void **state) {
    spec_env *e = *state;
    const int32_t prompt[] = {1, 403, 407};
    for (uint32_t n_ctx = 40; n_ctx <= 43; n_ctx++) {
        hs_llama *m;
        hs_eagle3 *head;
        HS_CHECK(load_pair(e, n_ctx, &m, &head));
        const uint32_t n = n_ctx - 3;
        hs_gen_result ref;
        gen(m, e->tok, NULL, prompt, 3, n, NULL, &ref);
        for (size_t mi = 0; mi < N_METHODS; mi++) {
            hs_tree_policy pol = policy_of(mi);
            hs_spec *spec;
            HS_CHECK(hs_spec_create(m, head, &pol, &spec));
            hs_gen_result r;
            gen(m, e->tok, spec, prompt, 3, n, NULL, &r);
            assert_same(&ref, &r, methods[mi][0]);
            hs_gen_result_free(&r);
            hs_spec_destroy(spec);
        }
        hs_gen_result_free(&ref);
        hs_eagle3_destroy(head);
        hs_llama_destroy(m);
    }
}

/* Token limits that end inside a round, and the end token (stories260K's
 * greedy story from BOS ends with EOS after 345 tokens). */
static void test_limits_and_end(void **state) {
    spec_env *e = *state;
    const int32_t bos[] = {1};
    const uint32_t limits[] = {1, 2, 3, 5, 8, 400};
    for (size_t li = 0; li < sizeof limits / sizeof limits[0]; li++) {
        hs_gen_result ref;
        gen(e->m, e->tok, NULL, bos, 1, limits[li], NULL, &ref);
        if (limits[li] == 400) assert_int_equal(ref.stop, HS_GEN_STOP_END);
        for (size_t mi = 0; mi < N_METHODS; mi++) {
            hs_tree_policy pol = policy_of(mi);
            hs_spec *spec;
            HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
            hs_gen_result r;
            gen(e->m, e->tok, spec, bos, 1, limits[li], NULL, &r);
            assert_same(&ref, &r, methods[mi][0]);
            hs_gen_result_free(&r);
            hs_spec_destroy(spec);
        }
        hs_gen_result_free(&ref);
    }
}

/* Upper tail of chi-square with dof degrees of freedom, as a standard normal
 * z score (Wilson-Hilferty). */
static double chi2_z(double stat, double dof) {
    const double c = 2.0 / (9.0 * dof);
    return (cbrt(stat / dof) - (1.0 - c)) / sqrt(c);
}

/* Two-sample chi-square statistic of equal-size histograms a, b over n_bins:
 * bins with fewer than 10 counts together are pooled. */
static double two_sample_chi2(const uint32_t *a, const uint32_t *b, uint32_t n_bins, uint32_t *dof_out) {
    double stat = 0, pa = 0, pb = 0;
    uint32_t bins = 0;
    for (uint32_t i = 0; i < n_bins; i++) {
        if (a[i] + b[i] < 10) {
            pa += a[i];
            pb += b[i];
            continue;
        }
        stat += ((double)a[i] - b[i]) * ((double)a[i] - b[i]) / (a[i] + b[i]);
        bins++;
    }
    if (pa + pb > 0) {
        stat += (pa - pb) * (pa - pb) / (pa + pb);
        bins++;
    }
    *dof_out = bins > 1 ? bins - 1 : 1;
    return stat;
}

/* hs_spec_prepare records every graph a round of the policy can ask for: on a
 * target and head of their own, after it, greedy and sampled generations from
 * BOS (a one-token prompt, whose graphs a round also uses) record nothing new
 * in either, for every method and HeteroSpec model. */
static void test_prepare_covers_rounds(void **state) {
    spec_env *e = *state;
    hs_llama *m;
    hs_eagle3 *head;
    HS_CHECK(load_pair(e, 512, &m, &head));
    const int32_t bos = 1;
    for (size_t k = 0; k < N_METHODS + N_HX + 1; k++) {
        hs_tree_policy pol;
        hs_hx_model hm;
        if (k < N_METHODS) {
            pol = policy_of(k);
        } else if (k == N_METHODS + N_HX) { /* lists of up to 4: every head in the pass; longer: not */
            pol = hs_tree_eagle2(2, 2, 5);
            pol.eager = 4;
        } else {
            hx_model((int)(k - N_METHODS), &hm);
            pol = hs_heterospec_policy(&hm);
        }
        hs_spec *spec;
        HS_CHECK(hs_spec_create(m, head, &pol, &spec));
        HS_CHECK(hs_spec_prepare(spec));
        const uint32_t tg = hs_llama_graph_count(m), hg = hs_eagle3_graph_count(head);
        for (uint32_t seed = 0; seed < 4; seed++) {
            hs_sampler_params sp = hs_sampler_default_params();
            sp.temperature = seed ? 1.0f : 0.0f;
            sp.seed = seed;
            hs_gen_result r;
            gen(m, e->tok, spec, &bos, 1, 120, &sp, &r);
            hs_gen_result_free(&r);
            if (hs_llama_graph_count(m) != tg || hs_eagle3_graph_count(head) != hg)
                fail_msg("policy %zu, seed %u: %u graphs of the target and %u of the head recorded after", k,
                         seed, hs_llama_graph_count(m) - tg, hs_eagle3_graph_count(head) - hg);
        }
        hs_spec_destroy(spec);
    }
    hs_eagle3_destroy(head);
    hs_llama_destroy(m);
}

/* Sampling at temperature 1 (no filters) and with llama.cpp's default
 * filters: for each of the first generated positions after the prompt's,
 * the token histogram over many seeds under speculation must match plain
 * sampling's, per position (z <= 4.5) and over all four together (z <= 4).
 * A biased acceptance rule that accepts a child with probability min(1, 1.5
 * p(x) / mass) fails it (measured: z 4.9, 4.9, 4.4, 2.1, together 8.1). */
/* HeteroSpec with the n-gram store (without the head, as calibration may
 * choose): greedy output equals plain decoding with a store of the model's
 * own outputs (whose chains get accepted) and with one of random text
 * (whose chains get rejected); with the lookup off every accepted token is
 * the store's. A replay of the same policy at every root of the answer
 * (hs_hx_text_rounds, as calibration tunes this policy) has exactly the
 * generation's rounds and accepted tokens. */
static void test_store_equals_plain(void **state) {
    spec_env *e = *state;
    const int32_t prompts[][4] = {{1}, {1, 403, 407}, {1, 80, 87, 79}};
    const size_t lens[] = {1, 3, 4};
    enum { NP = 3, N = 120 };
    hs_gen_result ref[NP];
    int32_t *own = NULL, *noise = NULL;
    hs_rng rng;
    hs_rng_seed(&rng, 11);
    for (int pi = 0; pi < NP; pi++) {
        gen(e->m, e->tok, NULL, prompts[pi], lens[pi], N, NULL, &ref[pi]);
        for (uint32_t i = 0; i < ref[pi].n_gen; i++) {
            stbds_arrput(own, ref[pi].ids[i]);
            stbds_arrput(noise, (int32_t)(hs_rng_u32(&rng) % hs_llama_cfg(e->m)->n_vocab));
        }
        stbds_arrput(own, -1);
        stbds_arrput(noise, -1);
    }
    const uint32_t nv = hs_llama_cfg(e->m)->n_vocab;
    hs_ngram *stores[2] = {NULL, NULL};
    HS_CHECK(hs_ngram_build(own, (uint64_t)stbds_arrlen(own), 4, 1, nv, 0, &stores[0]));
    HS_CHECK(hs_ngram_build(noise, (uint64_t)stbds_arrlen(noise), 2, 1, nv, 0, &stores[1]));
    uint64_t acc[2] = {0, 0}, ver[2] = {0, 0};
    for (int si = 0; si < 2; si++)
        for (int li = 0; li < 2; li++) /* li 0: the store alone; 1: with the context lookup */
            for (int pi = 0; pi < NP; pi++) {
                hs_hx_model hl;
                hx_model(3, &hl);
                hl.headless = true;
                hl.headless_len = li ? 8 : 0;
                hl.headless_min = 2;
                hl.lookup.store_len = 4;
                for (uint32_t cb = 0; cb < HS_NGRAM_CONF; cb++)
                    for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
                        for (uint32_t h = 0; h < HS_HX_LK_COLS; h++)
                            hl.lookup.store_accept[cb][pb][h] = 0.9f;
                const hs_tree_policy pol = hs_heterospec_policy(&hl);
                hs_spec *spec;
                HS_CHECK(hs_spec_create(e->m, NULL, &pol, &spec));
                hs_spec_set_store(spec, stores[si]);
                hs_gen_result r;
                gen(e->m, e->tok, spec, prompts[pi], lens[pi], N, NULL, &r);
                char what[96];
                snprintf(what, sizeof what, "prompt %d, %s store, lookup %s", pi, si ? "noise" : "own",
                         li ? "on" : "off");
                assert_same(&ref[pi], &r, what);
                if (!li && r.spec.accepted != r.spec.store_accepted)
                    fail_msg("%s: %llu accepted, %llu of them the store's", what,
                             (unsigned long long)r.spec.accepted, (unsigned long long)r.spec.store_accepted);
                if (!li && r.spec.verified != r.spec.store_verified + r.spec.rounds)
                    fail_msg("%s: %llu verified in %u rounds, %llu of them the store's", what,
                             (unsigned long long)r.spec.verified, r.spec.rounds,
                             (unsigned long long)r.spec.store_verified);
                acc[si] += r.spec.store_accepted;
                ver[si] += r.spec.store_verified;
                hs_hx_round *text = NULL;
                HS_CHECK(hs_hx_text_rounds(prompts[pi], (uint32_t)lens[pi], r.ids, r.n_gen, stores[si], &text));
                assert_int_equal(stbds_arrlen(text), r.n_gen - 1);
                for (ptrdiff_t i = 0; i < stbds_arrlen(text); i++) /* root ids[i] after the prompt and ids[0 .. i) */
                    assert_true(text[i].ctx == lens[pi] + (size_t)i && text[i].first == (i == 0) &&
                                text[i].n == 1 && text[i].nodes[0].token == r.ids[i] &&
                                text[i].truth[0] == r.ids[i + 1]);
                hs_hx_replay_result rr;
                HS_CHECK(hs_hx_replay(&pol, &hl.cost, text, (uint32_t)stbds_arrlen(text), &rr));
                /* The last round's last token: accepted in the replay, the bonus in generation. */
                const double last = rr.tokens - rr.rounds - (double)r.spec.accepted;
                if (rr.rounds != r.spec.rounds || last < 0 || last > 1)
                    fail_msg("%s: replay %.0f rounds, %.0f accepted; generation %u rounds, %llu accepted", what,
                             rr.rounds, rr.tokens - rr.rounds, r.spec.rounds, (unsigned long long)r.spec.accepted);
                hs_hx_rounds_free(&text);
                hs_gen_result_free(&r);
                hs_spec_destroy(spec);
            }
    /* The own store's chains mostly hold, the noise's mostly fail; both were tried. */
    if (acc[0] < 150 || ver[1] < 100 || acc[1] * 4 > ver[1])
        fail_msg("store chains: own %llu of %llu accepted, noise %llu of %llu", (unsigned long long)acc[0],
                 (unsigned long long)ver[0], (unsigned long long)acc[1], (unsigned long long)ver[1]);
    print_message("store chains: own %llu of %llu accepted, noise %llu of %llu\n", (unsigned long long)acc[0],
                  (unsigned long long)ver[0], (unsigned long long)acc[1], (unsigned long long)ver[1]);
    for (int pi = 0; pi < NP; pi++)
        hs_gen_result_free(&ref[pi]);
    hs_ngram_free(stores[0]);
    hs_ngram_free(stores[1]);
    stbds_arrfree(own);
    stbds_arrfree(noise);
}

/* hs_tree_policy.eager (every output head of a short list in the target's
 * pass) changes no token: greedy generations equal plain decoding, and
 * sampled ones (t = 1, the same seeds) equal those that compute the heads
 * on demand, token for token, since a row's logits are bitwise the same.
 * Lists within eager run no head product after the pass; a policy whose
 * lists are sometimes longer runs both kinds of rounds in one generation. */
static void test_eager_same_tokens(void **state) {
    spec_env *e = *state;
    const int32_t prompts[][4] = {{1}, {1, 68, 401, 259}};
    const size_t lens[] = {1, 4};
    uint64_t eager_rounds = 0, mixed_heads = 0, mixed_eager = 0;
    for (int pc = 0; pc < 3; pc++) {
        /* A chain, a lookup chain of 1 .. 4 tokens (lists of 2 .. 3 eager, longer ones not), a tree. */
        hs_tree_policy pol = pc == 0   ? hs_tree_chain(3)
                             : pc == 1 ? hs_tree_lookup(4, 1)
                                       : hs_tree_eagle2(2, 2, 3);
        const uint32_t eager = pc == 0 ? 4 : pc == 1 ? 3 : 4;
        for (size_t pi = 0; pi < sizeof lens / sizeof lens[0]; pi++)
            for (uint32_t seed = 0; seed < 4; seed++) {
                hs_sampler_params sp = hs_sampler_default_params();
                sp.temperature = seed ? 1.0f : 0.0f;
                sp.seed = seed;
                hs_gen_result r[2], ref;
                for (int ea = 0; ea < 2; ea++) {
                    pol.eager = ea ? eager : 0;
                    hs_spec *spec;
                    HS_CHECK(hs_spec_create(e->m, pol.headless ? NULL : e->head, &pol, &spec));
                    gen(e->m, e->tok, spec, prompts[pi], lens[pi], 96, &sp, &r[ea]);
                    hs_spec_destroy(spec);
                }
                char what[96];
                snprintf(what, sizeof what, "%s, prompt %zu, seed %u, eager %u", pol.name, pi, seed, eager);
                assert_same(&r[0], &r[1], what);
                if (!seed) {
                    gen(e->m, e->tok, NULL, prompts[pi], lens[pi], 96, NULL, &ref);
                    assert_same(&ref, &r[1], what);
                    hs_gen_result_free(&ref);
                }
                if (r[0].spec.eager_rounds) fail_msg("%s: eager rounds with eager 0", what);
                if (pc != 1 && r[1].spec.head_calls)
                    fail_msg("%s: %llu head products after the pass although every list is eager", what,
                             (unsigned long long)r[1].spec.head_calls);
                eager_rounds += r[1].spec.eager_rounds;
                if (pc == 1) {
                    mixed_heads += r[1].spec.head_calls;
                    mixed_eager += r[1].spec.eager_rounds;
                }
                hs_gen_result_free(&r[0]);
                hs_gen_result_free(&r[1]);
            }
    }
    if (eager_rounds < 100 || !mixed_heads || !mixed_eager)
        fail_msg("%llu eager rounds; the mixed policy: %llu head products, %llu eager rounds",
                 (unsigned long long)eager_rounds, (unsigned long long)mixed_heads,
                 (unsigned long long)mixed_eager);
    /* Beyond the target's exact buckets: refused. */
    hs_tree_policy big = hs_tree_chain(3);
    big.eager = HS_TREE_EAGER_MAX + 1;
    hs_spec *none = NULL;
    assert_int_equal(hs_spec_create(e->m, e->head, &big, &none), HS_ERR_INVALID_ARG);
    assert_null(none);
    assert_non_null(strstr(hs_last_error(), "eager"));
}

static void test_sampling_distribution(void **state) {
    spec_env *e = *state;
    enum { SEEDS = 1000, POS = 4 };
    const int32_t open_prompt[] = {1, 385, 328, 432, 261}; /* "One day, a": open continuations */
    /* For the lookup: a story's first 48 tokens, then its first 12 again, so
     * the context suggests the story's 13th token on. */
    int32_t rep_prompt[1 + 48 + 12];
    rep_prompt[0] = 1;
    assert_int_equal(hs_test_golden_ids(1, "greedy_generated_ids", rep_prompt + 1, 48), 48);
    memcpy(rep_prompt + 49, rep_prompt + 1, 12 * sizeof *rep_prompt);
    const char *const which[] = {"eagle2",           "chain",           "heterospec",
                                 "heterospec rest 1", "heterospec lookup", "heterospec store"};
    hs_sampler_params sps[6] = {hs_sampler_default_params(), hs_sampler_default_params(),
                                hs_sampler_default_params(), hs_sampler_default_params(),
                                hs_sampler_default_params(), hs_sampler_default_params()};
    sps[0].top_k = 0;
    sps[0].top_p = 1.0f;
    sps[0].min_p = 0.0f;
    sps[0].temperature = 1.0f;
    sps[1].temperature = 1.0f;
    sps[2] = sps[0];
    sps[3] = sps[0];
    sps[4] = sps[0];
    sps[5] = sps[0];
    hs_hx_model hm, hr, hl, hst;
    hx_model(0, &hm);
    hx_model(3, &hl);
    /* Rest under sampling: a milder slope than model 2's, so that rounds
     * with candidates and rest rounds mix within the first POS tokens. */
    hx_model(2, &hr);
    for (uint32_t n = 1; n <= HS_HX_MAX_N; n++)
        hr.cost.t_verify[n] = 1.0 + 0.08 * (n - 1);
    hr.rest = 1;
    /* The store: the open prompt's greedy continuation, so its chains are
     * likely enough to be accepted often and rejected often (headless, the
     * lookup off: the store's candidates alone). */
    hx_model(3, &hst);
    hst.headless = true;
    hst.headless_len = 0;
    hst.lookup.store_len = 3;
    for (uint32_t cb = 0; cb < HS_NGRAM_CONF; cb++)
        for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
            for (uint32_t h = 0; h < HS_HX_LK_COLS; h++)
                hst.lookup.store_accept[cb][pb][h] = 0.9f;
    hs_ngram *store = NULL;
    {
        hs_gen_result g;
        gen(e->m, e->tok, NULL, open_prompt, sizeof open_prompt / sizeof *open_prompt, 40, NULL, &g);
        int32_t seq[64];
        const uint32_t ns = g.n_gen < 40 ? g.n_gen : 40;
        memcpy(seq, open_prompt, sizeof open_prompt);
        memcpy(seq + 5, g.ids, sizeof *seq * ns);
        HS_CHECK(hs_ngram_build(seq, 5 + ns, 3, 1, hs_llama_cfg(e->m)->n_vocab, 0, &store));
        hs_gen_result_free(&g);
    }
    for (int cfg = 0; cfg < 6; cfg++) {
        const int32_t *prompt = cfg == 4 ? rep_prompt : open_prompt;
        const size_t np =
            cfg == 4 ? sizeof rep_prompt / sizeof *rep_prompt : sizeof open_prompt / sizeof *open_prompt;
        static uint32_t plain[POS][512], spec_h[POS][512];
        memset(plain, 0, sizeof plain);
        memset(spec_h, 0, sizeof spec_h);
        hs_tree_policy pol = cfg == 0   ? hs_tree_eagle2(4, 3, 12)
                             : cfg == 1 ? hs_tree_chain(4)
                             : cfg == 2 ? hs_heterospec_policy(&hm)
                             : cfg == 3 ? hs_heterospec_policy(&hr)
                             : cfg == 4 ? hs_heterospec_policy(&hl)
                                        : hs_heterospec_policy(&hst);
        hs_spec *spec;
        HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
        if (cfg == 5) hs_spec_set_store(spec, store);
        uint64_t accepted = 0, rested = 0, lookup_only = 0, from_store = 0;
        const uint32_t seeds = cfg == 5 ? SEEDS / 2 : SEEDS; /* the store's chains are accepted often */
        for (uint32_t seed = 0; seed < seeds; seed++) {
            hs_sampler_params sp = sps[cfg];
            sp.seed = seed;
            hs_gen_result a, b;
            gen(e->m, e->tok, NULL, prompt, np, POS + 1, &sp, &a);
            sp.seed = seed + 1000003u; /* independent draws for the other sample */
            gen(e->m, e->tok, spec, prompt, np, POS + 1, &sp, &b);
            accepted += b.spec.accepted;
            lookup_only += b.spec.lookup_only_accepted;
            from_store += b.spec.store_accepted;
            rested += b.spec.rest_rounds;
            for (uint32_t k = 1; k <= POS; k++) {
                if (k < a.n_gen) plain[k - 1][a.ids[k]]++;
                if (k < b.n_gen) spec_h[k - 1][b.ids[k]]++;
            }
            hs_gen_result_free(&a);
            hs_gen_result_free(&b);
        }
        hs_spec_destroy(spec);
        /* Drafts were accepted, so acceptance was exercised (and with rest, rest rounds sampled). */
        if (accepted <= (cfg == 3 ? seeds / 8 : seeds / 2) || (cfg == 3 && rested < seeds / 4) ||
            (cfg == 4 && lookup_only < seeds / 2) || (cfg == 5 && from_store != accepted))
            fail_msg("%s: %llu tokens accepted (%llu only the lookup proposed), %llu rest rounds over %d "
                     "seeds",
                     which[cfg], (unsigned long long)accepted, (unsigned long long)lookup_only,
                     (unsigned long long)rested, seeds);
        /* Each position alone, and all together (sum of the statistics and
         * of the degrees of freedom). */
        double worst = 0, all = 0;
        uint32_t all_dof = 0;
        char report[320] = "";
        for (int k = 0; k < POS; k++) {
            uint32_t dof;
            const double stat = two_sample_chi2(plain[k], spec_h[k], 512, &dof), z = chi2_z(stat, dof);
            all += stat;
            all_dof += dof;
            if (z > worst) worst = z;
            snprintf(report + strlen(report), sizeof report - strlen(report), " %d: z %.1f (dof %u)", k + 1,
                     z, dof);
        }
        const double z_all = chi2_z(all, all_dof);
        snprintf(report + strlen(report), sizeof report - strlen(report), "; together z %.1f", z_all);
        fprintf(stderr, "sampling %s, filters %d:%s (%llu accepted, %llu lookup-only, %llu rest rounds)\n",
                which[cfg], cfg == 1, report, (unsigned long long)accepted, (unsigned long long)lookup_only,
                (unsigned long long)rested);
        if (worst > 4.5 || z_all > 4.0)
            fail_msg("%s, filters %d: speculative tokens differ from plain sampling:%s", which[cfg], cfg == 1,
                     report);
    }
    hs_ngram_free(store);
}

/* ---- SmolLM2-135M-Instruct (Q4_1) with its head, on benchmark prompts ---- */

static int setup_smollm2(void **state) {
    if (hs_test_setup(state)) return -1;
    spec_env *e = calloc(1, sizeof *e);
    e->base = *(hs_test_env *)*state;
    free(*state);
    *state = e;
    char path[1024];
    if (!hs_test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof path)) {
        fprintf(stderr, "setup: SmolLM2-135M-Instruct.Q4_1.gguf not found (tools/fetch_model.sh smollm2)\n");
        return -1;
    }
    if (hs_gguf_open(path, &e->g) != HS_OK || hs_tok_from_gguf(e->g, &e->tok) != HS_OK ||
        hs_cli_head_find(e->g, e->head_path, sizeof e->head_path) != HS_OK ||
        hs_gguf_open(e->head_path, &e->hg) != HS_OK || load_pair(e, 1024, &e->m, &e->head) != HS_OK) {
        fprintf(stderr, "setup: %s\n", hs_last_error());
        return -1;
    }
    return 0;
}

/* The first turn of question `index` (0-based) of a benchmark set, through
 * the chat template. */
static void bench_prompt(spec_env *e, const char *set, int index, int32_t **ids, size_t *n) {
    char path[1024], *all = NULL;
    snprintf(path, sizeof path, "%s/data/bench/%s/question.jsonl", hs_test_shared_dir(), set);
    HS_CHECK(hs_cli_read_text(path, &all));
    char *line = all;
    for (int i = 0; i < index && line; i++)
        line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
    assert_non_null(line);
    char *end = strchr(line, '\n');
    if (end) *end = '\0';
    cJSON *j = cJSON_Parse(line);
    const cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "turns"), 0);
    assert_true(cJSON_IsString(t0));
    HS_CHECK(hs_cli_prompt_ids(e->g, e->tok, t0->valuestring, true, NULL, ids, n));
    cJSON_Delete(j);
    free(all);
}

static void test_smollm2_greedy_equals_plain(void **state) {
    spec_env *e = *state;
    const char *const sets[] = {"mt_bench", "gsm8k"};
    const char *const trees[][4] = {{"eagle2", "5", "10", "60"},
                                    {"eagle2", "3", "4", "8"},
                                    {"chain", "4", NULL, NULL},
                                    {"static", NULL, NULL, "3,2,1"}};
    uint64_t accepted = 0;
    /* Question 1 of mt_bench with the two EAGLE-2 trees, question 2 of gsm8k
     * with the chain and the static tree (each tree size is a new graph and
     * new pipelines on lavapipe: this group dominates the suite's time). */
    for (int si = 0; si < 2; si++) {
        int32_t *ids;
        size_t n;
        bench_prompt(e, sets[si], si, &ids, &n);
        hs_gen_result ref;
        gen(e->m, e->tok, NULL, ids, n, 16, NULL, &ref);
        for (int ti = 2 * si; ti < 2 * si + 2; ti++) {
            hs_cli_spec s;
            hs_cli_spec_defaults(&s);
            s.method = trees[ti][0];
            if (trees[ti][1]) s.depth = atoi(trees[ti][1]);
            if (trees[ti][2]) s.top_k = atoi(trees[ti][2]);
            if (trees[ti][3] && !strcmp(s.method, "static"))
                s.tree = trees[ti][3];
            else if (trees[ti][3])
                s.tree_size = atoi(trees[ti][3]);
            hs_tree_policy pol;
            HS_CHECK(hs_cli_spec_policy(&s, &pol));
            hs_spec *spec;
            HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
            hs_gen_result r;
            /* EAGLE's defaults verify 61 tokens a round (about 1 s here): 8 tokens,
             * checked against the first 8 of plain decoding's 16 */
            const uint32_t n_tok = ti == 0 ? 8 : 16;
            gen(e->m, e->tok, spec, ids, n, n_tok, NULL, &r);
            char what[96];
            snprintf(what, sizeof what, "%s question %d, %s", sets[si], si + 1, trees[ti][0]);
            hs_gen_result prefix = ref;
            if (prefix.n_gen > n_tok) {
                prefix.n_gen = n_tok;
                prefix.stop = HS_GEN_STOP_LIMIT;
            }
            assert_same(&prefix, &r, what);
            accepted += r.spec.accepted;
            hs_gen_result_free(&r);
            hs_spec_destroy(spec);
        }
        /* And HeteroSpec (large trees where the head is sure) on gsm8k. */
        if (si == 1) {
            hs_hx_model hm;
            hx_model(0, &hm);
            const hs_tree_policy pol = hs_heterospec_policy(&hm);
            hs_spec *spec;
            HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
            hs_gen_result r;
            gen(e->m, e->tok, spec, ids, n, 16, NULL, &r);
            assert_same(&ref, &r, "gsm8k question 2, heterospec");
            accepted += r.spec.accepted;
            hs_gen_result_free(&r);
            hs_spec_destroy(spec);
        }
        hs_gen_result_free(&ref);
        free(ids);
    }
    if (accepted < 6) fail_msg("the SmolLM2 head got only %llu tokens accepted", (unsigned long long)accepted);
}

/* The window a policy gets (hs_spec_window_of): the policy's own, none for
 * HS_HEAD_WINDOW_ALL, and by default three quarters of the head's training
 * rows, or none when its file does not record them or there is no head. */
static void test_head_window_default(void **state) {
    (void)state;
    hs_eagle3_config c = {.n_rows_train = 512};
    hs_tree_policy p = hs_tree_chain(3);
    assert_int_equal(hs_spec_window_of(&p, &c), 384);
    c.n_rows_train = 576;
    assert_int_equal(hs_spec_window_of(&p, &c), 432);
    c.n_rows_train = 3;
    assert_int_equal(hs_spec_window_of(&p, &c), 3); /* 3 - 0 */
    c.n_rows_train = 0;
    assert_int_equal(hs_spec_window_of(&p, &c), 0);
    assert_int_equal(hs_spec_window_of(&p, NULL), 0);
    c.n_rows_train = 512;
    p.head_window = 100;
    assert_int_equal(hs_spec_window_of(&p, &c), 100);
    assert_int_equal(hs_spec_window_of(&p, NULL), 0);
    p.head_window = HS_HEAD_WINDOW_ALL;
    assert_int_equal(hs_spec_window_of(&p, &c), 0);
}

/* The head's window over the prompt (policy.head_window): the head consumes
 * only the prompt's last W rows, so after a generation its cache holds
 * n_prompt - W rows fewer than without a window, a window at least as long as
 * the prompt changes nothing, and the output equals plain decoding's; by
 * default (0) the spec takes the window hs_spec_window_of gives for the
 * head's recorded training rows, and applies it. */
static void test_head_window(void **state) {
    spec_env *e = *state;
    const int32_t start[] = {1, 68, 401, 259};
    hs_gen_result seed, ref;
    gen(e->m, e->tok, NULL, start, 4, 40, NULL, &seed); /* a 41-token prompt: BOS, 3 tokens, 37 generated */
    int32_t prompt[64];
    memcpy(prompt, start, sizeof start);
    size_t np = 4;
    for (uint32_t i = 0; i < seed.n_gen && np < 41; i++)
        prompt[np++] = seed.ids[i];
    assert_int_equal(np, 41);
    gen(e->m, e->tok, NULL, prompt, np, 48, NULL, &ref);
    /* The last two: the default with the head's own training rows (the committed stories260K head's 576:
     * a window of 432, longer than the prompt), then as if its file said 24 (a window of 18). */
    const uint32_t windows[] = {HS_HEAD_WINDOW_ALL, 1, 16, 41, 200, 0, 0};
    enum { NW = sizeof windows / sizeof windows[0] };
    assert_int_equal(hs_eagle3_cfg(e->head)->n_rows_train, 576); /* its MANIFEST.json's training.args.seq */
    uint32_t n_past[NW], used[NW];
    uint64_t kept[NW];
    for (int wi = 0; wi < NW; wi++) {
        hs_tree_policy pol = hs_tree_chain(3);
        pol.head_window = windows[wi];
        hs_spec *spec;
        /* The loaded head's config, changed for one hs_spec_create (which reads it once) and restored. */
        hs_eagle3_config *hc = (hs_eagle3_config *)hs_eagle3_cfg(e->head), saved = *hc;
        if (wi == NW - 1) hc->n_rows_train = 24;
        HS_CHECK(hs_spec_create(e->m, e->head, &pol, &spec));
        *hc = saved;
        const uint32_t want = windows[wi] == HS_HEAD_WINDOW_ALL ? 0
                              : windows[wi]                    ? windows[wi]
                              : wi == NW - 1                   ? 18
                                  : hs_spec_window_of(&pol, hs_eagle3_cfg(e->head));
        if (hs_spec_head_window(spec) != want)
            fail_msg("policy window %u: the spec's window is %u, expected %u", windows[wi],
                     hs_spec_head_window(spec), want);
        used[wi] = want;
        hs_gen_result r;
        gen(e->m, e->tok, spec, prompt, np, 48, NULL, &r);
        char what[64];
        snprintf(what, sizeof what, "chain of 3, head window %u", windows[wi]);
        assert_same(&ref, &r, what);
        n_past[wi] = hs_eagle3_n_past(e->head);
        kept[wi] = r.spec.accepted + r.spec.rounds; /* positions the rounds kept */
        hs_gen_result_free(&r);
        hs_spec_destroy(spec);
    }
    /* n_past = the prompt rows consumed + the positions the rounds kept (each round's root and accepted
     * drafts); windows as long as the prompt or longer draft as no window does. */
    if (kept[3] != kept[0] || kept[4] != kept[0])
        fail_msg("windows of 41 and 200 rows kept %llu and %llu positions, no window %llu",
                 (unsigned long long)kept[3], (unsigned long long)kept[4], (unsigned long long)kept[0]);
    for (int wi = 0; wi < NW; wi++) {
        const uint32_t consumed = used[wi] && used[wi] < np ? used[wi] : (uint32_t)np;
        if (n_past[wi] != consumed + kept[wi])
            fail_msg("head window %u: the head holds %u rows, expected %u prompt rows + %llu kept", used[wi],
                     n_past[wi], consumed, (unsigned long long)kept[wi]);
    }
    hs_gen_result_free(&seed);
    hs_gen_result_free(&ref);
}

/* `test_spec --sampling` runs the sampling statistics alone (CTest's
 * test_spec_sampling, label "statistical"), the rest without it: the
 * forced-fallback passes of tools/test.sh leave it out, since under them the
 * logits, and so every sample, are bitwise the default pass's. */
int main(int argc, char **argv) {
    const struct CMUnitTest smollm2[] = {
        cmocka_unit_test(test_smollm2_greedy_equals_plain),
    };
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_greedy_equals_plain),  cmocka_unit_test(test_store_equals_plain),
        cmocka_unit_test(test_context_fills_in_a_round), cmocka_unit_test(test_limits_and_end),
        cmocka_unit_test(test_prepare_covers_rounds), cmocka_unit_test(test_record_replays_generation),
        cmocka_unit_test(test_draft_time_is_the_rounds), cmocka_unit_test(test_eager_same_tokens),
        cmocka_unit_test(test_head_window), cmocka_unit_test(test_head_window_default),
    };
    const struct CMUnitTest sampling[] = {
        cmocka_unit_test(test_sampling_distribution),
    };
    if (argc > 1 && !strcmp(argv[1], "--sampling"))
        return hs_test_run_group("spec_sampling", sampling, setup, teardown);
    if (argc > 1) {
        fprintf(stderr, "usage: test_spec [--sampling]\n");
        return 2;
    }
    int failed = hs_test_run_group("spec", tests, setup, teardown);
    return failed + hs_test_run_group("spec_smollm2", smollm2, setup_smollm2, teardown);
}
