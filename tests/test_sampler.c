/* Tests of host/sampler: every filter against hand-computed distributions and against a plain
 * recomputation (ref_probs below: probabilities in double, ranks by counting, no heap, no partition),
 * penalties, greedy ties, the draw against the exact distribution (chi-square and total variation over
 * many draws with fixed seeds, with checks that a wrong filter would exceed the same thresholds), the
 * generator against an independent implementation, reproducibility, and invalid parameters and inputs.
 * No Vulkan device is needed.
 */
#include "testutil.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

/* ---- plain recomputation of the chain ---- */

/* Parameters as the reference sees them: the penalised logits are passed in, so only the filters. */
typedef struct ref_params {
    int top_k;
    double top_p, min_p, temp;
} ref_params;

/* Does token j rank before token i (larger logit, or equal and lower id)? */
static bool ranks_before(const float *l, int j, int i) { return l[j] > l[i] || (l[j] == l[i] && j < i); }

/* order[r] = the token of rank r, rank = the number of tokens ranking before it. O(n^2), once per array. */
static int *ref_order(const float *l, int n) {
    int *order = malloc((size_t)n * sizeof *order);
    assert_non_null(order);
    for (int i = 0; i < n; i++) {
        int rank = 0;
        for (int j = 0; j < n; j++)
            rank += ranks_before(l, j, i);
        order[rank] = i;
    }
    return order;
}

/* The final distribution, straight from the definitions (order from ref_order, or NULL to compute it). */
static void ref_probs_ordered(const float *l, int n, const int *order_in, ref_params p, double *out) {
    bool *keep = calloc((size_t)n, sizeof *keep);
    int *order = order_in ? (int *)order_in : ref_order(l, n);
    assert_non_null(keep);
    for (int r = 0; r < n; r++) {
        int i = order[r];
        keep[i] = isfinite(l[i]) && (p.top_k <= 0 || r < p.top_k);
    }
    if (p.top_p < 1.0) {
        double z = 0, cum = 0;
        for (int i = 0; i < n; i++)
            if (keep[i]) z += exp((double)l[i]);
        bool reached = false;
        for (int r = 0; r < n; r++) {
            int i = order[r];
            if (!keep[i]) continue;
            if (reached) keep[i] = false;
            cum += exp((double)l[i]) / z;
            if (cum >= p.top_p) reached = true;
        }
    }
    if (p.min_p > 0.0) {
        double pmax = 0, z = 0;
        for (int i = 0; i < n; i++)
            if (keep[i]) z += exp((double)l[i]), pmax = fmax(pmax, exp((double)l[i]));
        for (int i = 0; i < n; i++)
            if (keep[i] && exp((double)l[i]) / z < p.min_p * pmax / z) keep[i] = false;
    }
    double z = 0;
    for (int i = 0; i < n; i++)
        out[i] = keep[i] ? exp((double)l[i] / p.temp) : 0.0;
    for (int i = 0; i < n; i++)
        z += out[i];
    for (int i = 0; i < n; i++)
        out[i] /= z;
    free(keep);
    if (!order_in) free(order);
}

static void ref_probs(const float *l, int n, ref_params p, double *out) {
    ref_probs_ordered(l, n, NULL, p, out);
}

static hs_sampler_params params(float temp, int top_k, float top_p, float min_p) {
    hs_sampler_params p = hs_sampler_default_params();
    p.temperature = temp;
    p.top_k = top_k;
    p.top_p = top_p;
    p.min_p = min_p;
    p.repeat_last_n = 0;
    return p;
}

/* Runs hs_sampler_probs with p and compares to want[] within tol, zeros exactly. */
static void check_probs(const hs_sampler_params *p, const float *logits, int n, const double *want,
                        double tol) {
    hs_sampler *s = NULL;
    float *got = malloc((size_t)n * sizeof *got);
    assert_non_null(got);
    HS_CHECK(hs_sampler_create(p, n, &s));
    HS_CHECK(hs_sampler_probs(s, logits, n, got));
    double sum = 0;
    for (int i = 0; i < n; i++) {
        sum += got[i];
        if (want[i] == 0.0 && got[i] != 0.0f)
            fail_msg("token %d: got %g, want 0 (filtered) [k=%d p=%g minp=%g T=%g]", i, (double)got[i],
                     (int)p->top_k, (double)p->top_p, (double)p->min_p, (double)p->temperature);
        if (fabs(got[i] - want[i]) > tol)
            fail_msg("token %d: got %.9g, want %.9g [k=%d p=%g minp=%g T=%g]", i, (double)got[i], want[i],
                     (int)p->top_k, (double)p->top_p, (double)p->min_p, (double)p->temperature);
    }
    assert_true(fabs(sum - 1.0) < 1e-5);
    hs_sampler_destroy(s);
    free(got);
}

/* logits = log(q) for a hand-made distribution q, so every expected value below is arithmetic on q. */
static const double g_q[6] = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};

static void hand_logits(float *l) {
    for (int i = 0; i < 6; i++)
        l[i] = (float)log(g_q[i]);
}

/* ---- filters ---- */

static void test_filters_hand(void **state) {
    (void)state;
    float l[6];
    hand_logits(l);
    /* top-k 3: q0..q2 renormalised by 0.8. */
    double k3[6] = {0.4 / 0.8, 0.25 / 0.8, 0.15 / 0.8, 0, 0, 0};
    hs_sampler_params p = params(1.0f, 3, 1.0f, 0.0f);
    check_probs(&p, l, 6, k3, 1e-6);
    /* top-p 0.6: cumulative 0.4, 0.65 >= 0.6 -> q0, q1 renormalised by 0.65. */
    double p06[6] = {0.4 / 0.65, 0.25 / 0.65, 0, 0, 0, 0};
    p = params(1.0f, 0, 0.6f, 0.0f);
    check_probs(&p, l, 6, p06, 1e-6);
    /* top-p 0.66: 0.65 falls short, the third token reaches 0.8. */
    p = params(1.0f, 0, 0.66f, 0.0f);
    check_probs(&p, l, 6, k3, 1e-6);
    /* min-p 0.2: keep q >= 0.2 * 0.4 = 0.08 -> q0..q3, renormalised by 0.9. */
    double m02[6] = {0.4 / 0.9, 0.25 / 0.9, 0.15 / 0.9, 0.1 / 0.9, 0, 0};
    p = params(1.0f, 0, 1.0f, 0.2f);
    check_probs(&p, l, 6, m02, 1e-6);
    /* temperature 0.5: q^2 renormalised (sum of squares 0.2602). */
    double t05[6];
    for (int i = 0; i < 6; i++)
        t05[i] = g_q[i] * g_q[i] / 0.2602;
    p = params(0.5f, 0, 1.0f, 0.0f);
    check_probs(&p, l, 6, t05, 1e-6);
    /* The chain, in order: top-k 4 -> {.4,.25,.15,.1}/.9; top-p 0.9 over those: cumulative .444, .722,
     * .889, 1.0 -> all four stay; min-p 0.3: keep >= 0.3 * .444 = .133 -> drops q3 (.111); temperature
     * 0.5 on {.4,.25,.15}: squares .16, .0625, .0225 over .245. Applying min-p before top-p, or the
     * temperature before the filters, gives something else. */
    double chain[6] = {0.16 / 0.245, 0.0625 / 0.245, 0.0225 / 0.245, 0, 0, 0};
    p = params(0.5f, 4, 0.9f, 0.3f);
    check_probs(&p, l, 6, chain, 1e-6);
    /* The same by the plain recomputation, for agreement of the two oracles. */
    double ref[6];
    ref_probs(l, 6, (ref_params){4, 0.9, 0.3, 0.5}, ref);
    for (int i = 0; i < 6; i++)
        assert_true(fabs(ref[i] - chain[i]) < 1e-6); /* float logits */
}

/* Random logits of several shapes and many parameter combinations against ref_probs. Sizes above a
 * thousand take the unsorted top-p path with its margins; spread logits make the first margin too short. */
static void test_filters_vs_ref(void **state) {
    (void)state;
    static const int sizes[] = {7, 64, 3000};
    static const float spreads[] = {1.0f, 8.0f, 60.0f};
    static const int ks[] = {0, 1, 5, 40, 64, 5000};
    static const float ps[] = {1.0f, 0.95f, 0.5f, 1e-6f};
    static const float mps[] = {0.0f, 0.05f, 0.3f};
    static const float ts[] = {0.3f, 1.0f, 2.0f};
    hs_rng r;
    hs_rng_seed(&r, 11);
    for (size_t si = 0; si < 3; si++) {
        for (size_t sp = 0; sp < 3; sp++) {
            int n = sizes[si];
            float *l = malloc((size_t)n * sizeof *l);
            double *want = malloc((size_t)n * sizeof *want);
            assert_non_null(l);
            assert_non_null(want);
            hs_rng_fill(&r, l, (size_t)n, -spreads[sp], 0.0f);
            for (int i = 0; i < n; i += 5)
                l[i] = (float)(int)(l[i]); /* equal logits: ties by id */
            int *order = ref_order(l, n);
            for (size_t a = 0; a < 6; a++)
                for (size_t b = 0; b < 4; b++)
                    for (size_t c = 0; c < 3; c++) {
                        size_t d = (a + b + c) % 3; /* one temperature per combination keeps it quick */
                        ref_probs_ordered(l, n, order, (ref_params){ks[a], ps[b], mps[c], ts[d]}, want);
                        hs_sampler_params p = params(ts[d], ks[a], ps[b], mps[c]);
                        check_probs(&p, l, n, want, 2e-6);
                    }
            free(order);
            free(l);
            free(want);
        }
    }
}

/* -inf logits are masked tokens: never kept, never drawn. A tiny top-p keeps exactly the argmax. */
static void test_masked_and_min_keep(void **state) {
    (void)state;
    float l[5] = {-INFINITY, 1.0f, -INFINITY, 0.5f, 1.0f};
    double want[5];
    ref_probs(l, 5, (ref_params){0, 1.0, 0.0, 1.0}, want);
    assert_true(want[0] == 0.0 && want[2] == 0.0);
    hs_sampler_params p = params(1.0f, 0, 1.0f, 0.0f);
    check_probs(&p, l, 5, want, 1e-6);
    double one[5] = {0, 1, 0, 0, 0}; /* tie 1.0 at tokens 1 and 4: the lower id ranks first */
    p = params(1.0f, 0, 1e-6f, 0.0f);
    check_probs(&p, l, 5, one, 0);
    p = params(1.0f, 1, 1.0f, 0.0f);
    check_probs(&p, l, 5, one, 0);
    /* top-k larger than the number of finite logits keeps them all. */
    p = params(1.0f, 4, 1.0f, 0.0f);
    check_probs(&p, l, 5, want, 1e-6);
}

/* ---- penalties ---- */

/* The sampler's probabilities for logits l are softmax(pen): the logits after
 * the penalties the caller worked out by hand (within 1e-6). */
static void expect_probs(hs_sampler *s, const float *l, const double *pen) {
    double want[5], z = 0;
    for (int i = 0; i < 5; i++)
        z += want[i] = exp(pen[i]);
    float got[5];
    HS_CHECK(hs_sampler_probs(s, l, 5, got));
    for (int i = 0; i < 5; i++)
        assert_true(fabs(got[i] - want[i] / z) < 1e-6);
}

static void test_penalties(void **state) {
    (void)state;
    const float l[5] = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f};
    const double plain[5] = {2.0, -1.0, 0.5, 3.0, 0.0};
    hs_sampler_params p = params(1.0f, 0, 1.0f, 0.0f);
    p.repeat_penalty = 2.0f;
    p.frequency_penalty = 0.1f;
    p.presence_penalty = 0.2f;
    p.repeat_last_n = 8;
    hs_sampler *s = NULL;
    HS_CHECK(hs_sampler_create(&p, 5, &s));
    const int32_t hist[] = {0, 1, 0, 4};
    for (int i = 0; i < 4; i++)
        HS_CHECK(hs_sampler_accept(s, hist[i]));
    /* By the rule (llama.cpp): token 0 seen twice, 2 > 0: 2/2 - 2*0.1 - 0.2 = 0.6; token 1 once, -1 <= 0:
     * -1*2 - 0.1 - 0.2 = -2.3; token 4 once, 0 <= 0: 0*2 - 0.3 = -0.3; tokens 2, 3 unchanged. */
    expect_probs(s, l, (const double[5]){0.6, -2.3, 0.5, 3.0, -0.3});
    hs_sampler_destroy(s);

    /* Window of 2: after 0, 1, 0, 2 only {0, 2} count, once each: token 0: 2/2 - 0.3 = 0.7; token 2:
     * 0.5/2 - 0.3 = -0.05; token 1 left the window. */
    p.repeat_last_n = 2;
    HS_CHECK(hs_sampler_create(&p, 5, &s));
    const int32_t hist2[] = {0, 1, 0, 2};
    for (int i = 0; i < 4; i++)
        HS_CHECK(hs_sampler_accept(s, hist2[i]));
    expect_probs(s, l, (const double[5]){0.7, -1.0, -0.05, 3.0, 0.0});
    /* Reset forgets the history: plain softmax. */
    hs_sampler_reset(s);
    expect_probs(s, l, plain);
    hs_sampler_destroy(s);

    /* repeat_last_n 0 switches the penalties off however large they are. */
    p.repeat_last_n = 0;
    p.repeat_penalty = 100.0f;
    HS_CHECK(hs_sampler_create(&p, 5, &s));
    HS_CHECK(hs_sampler_accept(s, 3));
    expect_probs(s, l, plain);
    hs_sampler_destroy(s);
}

/* ---- greedy ---- */

static void test_greedy(void **state) {
    (void)state;
    const float l[5] = {0.5f, 2.0f, -1.0f, 2.0f, 2.0f};
    for (int variant = 0; variant < 2; variant++) {
        hs_sampler_params p = params(variant ? -1.0f : 0.0f, 0, 1.0f, 0.0f);
        p.repeat_last_n = 4;
        p.repeat_penalty = 2.0f;
        hs_sampler *s = NULL, *fresh = NULL;
        HS_CHECK(hs_sampler_create(&p, 5, &s));
        HS_CHECK(hs_sampler_create(&p, 5, &fresh));
        assert_true(hs_sampler_is_greedy(s));
        int32_t tok = -1;
        HS_CHECK(hs_sampler_sample(s, l, 5, &tok));
        assert_int_equal(tok, 1); /* three-way tie at 2.0: lowest id */
        float probs[5];
        HS_CHECK(hs_sampler_probs(s, l, 5, probs));
        for (int i = 0; i < 5; i++)
            assert_true(probs[i] == (i == 1 ? 1.0f : 0.0f));
        /* Penalising token 1 (2 / 2 = 1) moves the argmax to the next of the tie. */
        HS_CHECK(hs_sampler_accept(s, 1));
        HS_CHECK(hs_sampler_sample(s, l, 5, &tok));
        assert_int_equal(tok, 3);
        /* Greedy draws no random numbers. */
        assert_true(hs_sampler_uniform(s) == hs_sampler_uniform(fresh));
        hs_sampler_destroy(s);
        hs_sampler_destroy(fresh);
    }
}

/* ---- draws against the exact distribution ---- */

/* Chi-square of counts against probabilities; +inf when a token with probability 0 was drawn. */
static double chi_square(const long *counts, const double *probs, int n, long draws, int *dof) {
    double chi = 0;
    *dof = -1;
    for (int i = 0; i < n; i++) {
        if (probs[i] == 0.0) {
            if (counts[i]) chi = INFINITY;
            continue;
        }
        double e = (double)draws * probs[i];
        chi += ((double)counts[i] - e) * ((double)counts[i] - e) / e;
        (*dof)++;
    }
    return chi;
}

/* A threshold far in the upper tail of chi-square with dof degrees of freedom (mean dof, standard
 * deviation sqrt(2 dof)): ten standard deviations plus ten. A correct sampler stays below it for every
 * seed with overwhelming probability; the seeds are fixed anyway, so the test is deterministic. */
static double chi_threshold(int dof) { return dof + 10.0 * sqrt(2.0 * dof) + 10.0; }

static void probs_of(const hs_sampler_params *p, const float *l, int n, float *out) {
    hs_sampler *s = NULL;
    HS_CHECK(hs_sampler_create(p, n, &s));
    HS_CHECK(hs_sampler_probs(s, l, n, out));
    hs_sampler_destroy(s);
}

static double tv_distance(const double *a, const double *b, int n) {
    double tv = 0;
    for (int i = 0; i < n; i++)
        tv += fabs(a[i] - b[i]);
    return 0.5 * tv;
}

/* Draws against the exact distribution for three settings, in each of which a different filter decides
 * the result (in one chain at most one of top-k, top-p, min-p can: each keeps a prefix of the same
 * order, and the shortest wins). The same counts are then judged against wrong chains: that filter left
 * out, temperature 1, and the temperature applied before the filters instead of after. Each wrong chain
 * is first checked to differ (TV > 0.02) and must then exceed the threshold, so the test can fail. */
static void test_chi_square(void **state) {
    (void)state;
    enum { N = 12, DRAWS = 100000 };
    /* log of {.3 .2 .1 .08 .06 .05 .04 .04 .04 .04 .03 .02}, ids shuffled, rounded to 4 decimals. */
    const float l[N] = {-2.3026f, -2.9957f, -3.2189f, -1.204f, -3.5066f, -2.8134f,
                        -3.2189f, -1.6094f, -3.2189f, -3.912f, -2.5257f, -3.2189f};
    const float temp = 0.8f;
    const struct {
        int k;
        float p, mp;
    } cfgs[] = {{3, 0.95f, 0.01f}, {10, 0.6f, 0.01f}, {10, 0.95f, 0.25f}};
    const int *order = ref_order(l, N);
    float scaled[N]; /* logits / T: the chain with the temperature first */
    for (int i = 0; i < N; i++)
        scaled[i] = l[i] / temp;
    for (size_t c = 0; c < 3; c++) {
        hs_sampler_params p = params(temp, cfgs[c].k, cfgs[c].p, cfgs[c].mp);
        p.seed = 42 + c;
        float probs_f[N];
        double probs[N], ref[N];
        probs_of(&p, l, N, probs_f);
        ref_probs_ordered(l, N, order, (ref_params){cfgs[c].k, cfgs[c].p, cfgs[c].mp, temp}, ref);
        for (int i = 0; i < N; i++) {
            probs[i] = probs_f[i];
            assert_true(fabs(probs[i] - ref[i]) < 1e-6);
        }
        hs_sampler *s = NULL;
        HS_CHECK(hs_sampler_create(&p, N, &s));
        long counts[N] = {0};
        for (long d = 0; d < DRAWS; d++) {
            int32_t tok = -1;
            HS_CHECK(hs_sampler_sample(s, l, N, &tok));
            assert_true(tok >= 0 && tok < N);
            counts[tok]++;
        }
        hs_sampler_destroy(s);
        int dof;
        double chi = chi_square(counts, probs, N, DRAWS, &dof);
        print_message("setting %zu: chi-square %.2f with %d degrees of freedom (threshold %.1f)\n", c, chi,
                      dof, chi_threshold(dof));
        assert_true(dof >= 2);
        assert_true(chi < chi_threshold(dof));

        ref_params off = {cfgs[c].k, cfgs[c].p, cfgs[c].mp, temp};
        if (c == 0) off.top_k = 0;
        if (c == 1) off.top_p = 1.0;
        if (c == 2) off.min_p = 0.0;
        double wrong[3][N];
        ref_probs_ordered(l, N, order, off, wrong[0]);
        ref_probs_ordered(l, N, order, (ref_params){cfgs[c].k, cfgs[c].p, cfgs[c].mp, 1.0}, wrong[1]);
        ref_probs_ordered(scaled, N, order, (ref_params){cfgs[c].k, cfgs[c].p, cfgs[c].mp, 1.0}, wrong[2]);
        /* Temperature is monotone, so top-k picks the same tokens before or after it: no third case. */
        for (size_t w = 0; w < (c == 0 ? 2u : 3u); w++) {
            assert_true(tv_distance(wrong[w], ref, N) > 0.02);
            int dof_w;
            double chi_w = chi_square(counts, wrong[w], N, DRAWS, &dof_w);
            if (!(chi_w > chi_threshold(dof_w)))
                fail_msg("setting %zu: wrong chain %zu is not detected: chi-square %.2f", c, w, chi_w);
        }
    }
    free((void *)order);
}

/* Total variation on a 512-token vocabulary (stories260K's size) with llama.cpp's default chain. */
static void test_total_variation(void **state) {
    (void)state;
    enum { N = 512, DRAWS = 100000 };
    float l[N];
    hs_rng r;
    hs_rng_seed(&r, 9);
    for (int i = 0; i < N; i++) { /* a few strong candidates over a long flat tail, like real logits */
        float u = hs_rng_uniform(&r);
        l[i] = -6.0f + 8.0f * u * u * u * u;
    }
    hs_sampler_params p = hs_sampler_default_params();
    p.seed = 2024;
    float probs[N];
    probs_of(&p, l, N, probs);
    hs_sampler *s = NULL;
    HS_CHECK(hs_sampler_create(&p, N, &s));
    long counts[N] = {0};
    for (long d = 0; d < DRAWS; d++) {
        int32_t tok = -1;
        HS_CHECK(hs_sampler_sample(s, l, N, &tok));
        HS_CHECK(hs_sampler_accept(s, tok)); /* repeat_last_n 64 with repeat_penalty 1: no effect */
        counts[tok]++;
    }
    hs_sampler_destroy(s);
    int kept = 0;
    double tv = 0;
    for (int i = 0; i < N; i++) {
        kept += probs[i] > 0;
        if (probs[i] == 0.0f) assert_int_equal(counts[i], 0);
        tv += fabs((double)counts[i] / DRAWS - probs[i]);
    }
    tv *= 0.5;
    /* Expected TV of an exact sampler is about 0.5 * sum sqrt(2 p / (pi DRAWS)) <= 0.5 * sqrt(2 kept /
     * (pi DRAWS)) ~ 0.01 for 40 tokens; 0.025 leaves room, and each wrong chain below is farther away. */
    print_message("total variation %.4f over %d kept tokens\n", tv, kept);
    assert_true(kept > 5 && kept <= 40);
    assert_true(tv < 0.025);
    hs_sampler_params wrong[] = {p, p, p};
    wrong[0].top_k = 0;
    wrong[1].temperature = 1.0f;
    wrong[2].top_p = 1.0f;
    wrong[2].min_p = 0.0f;
    for (size_t w = 0; w < 3; w++) {
        float alt[N];
        probs_of(&wrong[w], l, N, alt);
        double tv_alt = 0;
        for (int i = 0; i < N; i++)
            tv_alt += fabs((double)counts[i] / DRAWS - alt[i]);
        if (!(0.5 * tv_alt > 0.025)) fail_msg("wrong chain %zu is not detected: TV %.4f", w, 0.5 * tv_alt);
    }
}

/* hs_sampler_sample(logits) is hs_sampler_sample_probs(hs_sampler_probs(logits)) from the same state. */
static void test_sample_is_draw_from_probs(void **state) {
    (void)state;
    enum { N = 300 };
    hs_sampler_params p = hs_sampler_default_params();
    p.seed = 77;
    p.top_k = 0;
    hs_sampler *a = NULL, *b = NULL;
    HS_CHECK(hs_sampler_create(&p, N, &a));
    HS_CHECK(hs_sampler_create(&p, N, &b));
    hs_rng r;
    hs_rng_seed(&r, 3);
    float l[N], probs[N];
    for (int it = 0; it < 2000; it++) {
        hs_rng_fill(&r, l, N, -5.0f, 5.0f);
        int32_t ta = -1, tb = -2;
        HS_CHECK(hs_sampler_sample(a, l, N, &ta));
        HS_CHECK(hs_sampler_probs(b, l, N, probs));
        HS_CHECK(hs_sampler_sample_probs(b, probs, N, &tb));
        assert_int_equal(ta, tb);
        assert_true(probs[ta] > 0.0f);
    }
    hs_sampler_destroy(a);
    hs_sampler_destroy(b);
}

/* ---- generator and reproducibility ---- */

/* The first uniforms (as 53-bit integers) of splitmix64-seeded xoshiro256**, from an independent Python
 * transcription of the reference C code of Blackman and Vigna (its splitmix64 reproduces the published
 * outputs 6457827717110365317, 3203168211198807973, 9817491932198370423 for seed 1234567). */
static void test_rng_golden(void **state) {
    (void)state;
    static const struct {
        uint64_t seed;
        uint64_t u53[4];
    } cases[] = {
        {0, {5415695640260286ull, 6735350249106120ull, 927921571702396ull, 3752300831360421ull}},
        {0x123456789ABCDEFull,
         {5726619549768349ull, 210576778097103ull, 3461054297436622ull, 972637100557674ull}},
    };
    for (size_t c = 0; c < 2; c++) {
        hs_sampler_params p = hs_sampler_default_params();
        p.seed = cases[c].seed;
        hs_sampler *s = NULL;
        HS_CHECK(hs_sampler_create(&p, 1, &s));
        for (int i = 0; i < 4; i++) {
            double u = hs_sampler_uniform(s);
            assert_true(u >= 0.0 && u < 1.0);
            assert_true((uint64_t)(u * 9007199254740992.0) == cases[c].u53[i]);
        }
        hs_sampler_destroy(s);
    }
}

static void run_sequence(uint64_t seed, int32_t *out, int len) {
    enum { N = 64 };
    hs_sampler_params p = hs_sampler_default_params();
    p.seed = seed;
    p.repeat_penalty = 1.3f;
    p.presence_penalty = 0.2f;
    hs_sampler *s = NULL;
    HS_CHECK(hs_sampler_create(&p, N, &s));
    hs_rng r;
    hs_rng_seed(&r, 1);
    float l[N];
    for (int i = 0; i < len; i++) {
        hs_rng_fill(&r, l, N, -2.0f, 2.0f);
        HS_CHECK(hs_sampler_sample(s, l, N, &out[i]));
        HS_CHECK(hs_sampler_accept(s, out[i]));
    }
    hs_sampler_destroy(s);
}

static void test_reproducible(void **state) {
    (void)state;
    enum { LEN = 500 };
    int32_t a[LEN], b[LEN], c[LEN];
    run_sequence(123, a, LEN);
    run_sequence(123, b, LEN);
    run_sequence(124, c, LEN);
    assert_memory_equal(a, b, sizeof a);
    int differ = 0;
    for (int i = 0; i < LEN; i++)
        differ += a[i] != c[i];
    assert_true(differ > LEN / 4);
}

/* ---- invalid parameters and inputs ---- */

static void expect_invalid(hs_status st, const char *needle) {
    assert_int_equal(st, HS_ERR_INVALID_ARG);
    if (!strstr(hs_last_error(), needle))
        fail_msg("message \"%s\" does not name \"%s\"", hs_last_error(), needle);
}

static void test_invalid_params(void **state) {
    (void)state;
    hs_sampler *s = (hs_sampler *)(uintptr_t)1;
    hs_sampler_params p;
#define BAD(field, value, needle)                                                                            \
    do {                                                                                                     \
        p = hs_sampler_default_params();                                                                     \
        p.field = value;                                                                                     \
        s = (hs_sampler *)(uintptr_t)1;                                                                      \
        expect_invalid(hs_sampler_create(&p, 10, &s), needle);                                               \
        assert_null(s);                                                                                      \
    } while (0)
    BAD(temperature, NAN, "temperature");
    BAD(temperature, INFINITY, "temperature");
    BAD(top_p, 0.0f, "top_p");
    BAD(top_p, 1.5f, "top_p");
    BAD(top_p, NAN, "top_p");
    BAD(min_p, -0.1f, "min_p");
    BAD(min_p, 1.01f, "min_p");
    BAD(min_p, NAN, "min_p");
    BAD(repeat_penalty, 0.0f, "repeat_penalty");
    BAD(repeat_penalty, -1.0f, "repeat_penalty");
    BAD(repeat_penalty, INFINITY, "repeat_penalty");
    BAD(repeat_last_n, -1, "repeat_last_n");
    BAD(frequency_penalty, NAN, "frequency_penalty");
    BAD(presence_penalty, -INFINITY, "presence_penalty");
#undef BAD
    p = hs_sampler_default_params();
    expect_invalid(hs_sampler_create(&p, 0, &s), "n_vocab");
    expect_invalid(hs_sampler_create(NULL, 10, &s), "NULL");
    expect_invalid(hs_sampler_create(&p, 10, NULL), "NULL");
    hs_sampler_destroy(NULL);
}

static void test_invalid_inputs(void **state) {
    (void)state;
    hs_sampler_params p = hs_sampler_default_params();
    p.repeat_penalty = 1e-30f;
    hs_sampler *s = NULL;
    HS_CHECK(hs_sampler_create(&p, 4, &s));
    float l[4] = {0.0f, 1.0f, 2.0f, 3.0f}, probs[4];
    int32_t tok;
    expect_invalid(hs_sampler_sample(s, l, 5, &tok), "made for 4");
    expect_invalid(hs_sampler_probs(s, NULL, 4, probs), "NULL");
    expect_invalid(hs_sampler_sample(s, l, 4, NULL), "NULL");
    l[2] = NAN;
    expect_invalid(hs_sampler_sample(s, l, 4, &tok), "token 2 is NaN");
    l[2] = INFINITY;
    expect_invalid(hs_sampler_probs(s, l, 4, probs), "token 2 is +inf");
    const float all_masked[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY};
    expect_invalid(hs_sampler_sample(s, all_masked, 4, &tok), "-inf");
    expect_invalid(hs_sampler_accept(s, 4), "outside the vocabulary");
    expect_invalid(hs_sampler_accept(s, -1), "outside the vocabulary");
    /* A repeat penalty of 1e-30 divides a positive logit of 1e10 to +inf. */
    l[2] = 2.0f;
    l[3] = 1e10f;
    HS_CHECK(hs_sampler_accept(s, 3));
    expect_invalid(hs_sampler_sample(s, l, 4, &tok), "penalties");
    /* Distributions for hs_sampler_sample_probs. */
    const float neg[3] = {0.5f, -0.1f, 0.6f}, zero[3] = {0, 0, 0}, nan3[3] = {0.5f, NAN, 0.5f};
    expect_invalid(hs_sampler_sample_probs(s, neg, 3, &tok), "token 1");
    expect_invalid(hs_sampler_sample_probs(s, nan3, 3, &tok), "token 1");
    expect_invalid(hs_sampler_sample_probs(s, zero, 3, &tok), "sum to zero");
    expect_invalid(hs_sampler_sample_probs(s, zero, 0, &tok), "n > 0");
    /* Unnormalised weights are fine; a single positive weight is always drawn. */
    const float one[3] = {0, 7.0f, 0};
    HS_CHECK(hs_sampler_sample_probs(s, one, 3, &tok));
    assert_int_equal(tok, 1);
    hs_sampler_destroy(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_filters_hand),
        cmocka_unit_test(test_filters_vs_ref),
        cmocka_unit_test(test_masked_and_min_keep),
        cmocka_unit_test(test_penalties),
        cmocka_unit_test(test_greedy),
        cmocka_unit_test(test_chi_square),
        cmocka_unit_test(test_total_variation),
        cmocka_unit_test(test_sample_is_draw_from_probs),
        cmocka_unit_test(test_rng_golden),
        cmocka_unit_test(test_reproducible),
        cmocka_unit_test(test_invalid_params),
        cmocka_unit_test(test_invalid_inputs),
    };
    return hs_test_run_group("sampler", tests, NULL, NULL);
}
