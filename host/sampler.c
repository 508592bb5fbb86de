/* sampler — see sampler.h. The chain works on a candidate list {logit, id} built from a penalised copy of
 * the logits; top-k and top-p leave it sorted (logit descending, then id ascending, a total order, so the
 * result never depends on the sorting algorithm), min-p filters it in place, and the final softmax writes
 * a full-vocabulary probability array that the draw walks in id order. */
#include "sampler.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef struct hs_cand {
    float logit;
    int32_t id;
} hs_cand;

struct hs_sampler {
    hs_sampler_params p;
    int32_t n_vocab;
    uint64_t rng[4]; /* xoshiro256** state */
    int32_t *hist;   /* (repeat_last_n) ring buffer of accepted tokens, oldest at hist_head */
    int32_t hist_len, hist_head;
    int32_t *counts; /* (n_vocab) occurrences of each token in hist; NULL when repeat_last_n == 0 */
    float *work;     /* (n_vocab) penalised logits */
    hs_cand *cand;   /* (n_vocab) candidates still in the running */
    float *probs;    /* (n_vocab) scratch distribution of hs_sampler_sample */
};

/* ---- generator: splitmix64 seeding, xoshiro256** (Blackman & Vigna, public domain reference) ---- */

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t s[4]) {
    const uint64_t result = rotl(s[1] * 5, 7) * 9;
    const uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

static void rng_seed(uint64_t s[4], uint64_t seed) {
    /* splitmix64 never yields four zero words in a row, so the xoshiro state is never all zero. */
    uint64_t x = seed;
    for (int i = 0; i < 4; i++)
        s[i] = splitmix64(&x);
}

double hs_sampler_uniform(hs_sampler *s) {
    HS_ASSERT(s);
    return (double)(xoshiro_next(s->rng) >> 11) * 0x1.0p-53;
}

/* ---- parameters ---- */

hs_sampler_params hs_sampler_default_params(void) {
    return (hs_sampler_params){
        .temperature = 0.8f,
        .top_k = 40,
        .top_p = 0.95f,
        .min_p = 0.05f,
        .repeat_penalty = 1.0f,
        .repeat_last_n = 64,
        .frequency_penalty = 0.0f,
        .presence_penalty = 0.0f,
        .seed = 0,
    };
}

/* Largest accepted history window: far beyond any context length, small enough that the ring buffer
 * cannot be an accidental multi-gigabyte allocation. */
#define HS_SAMPLER_MAX_LAST_N (1 << 24)

hs_status hs_sampler_params_validate(const hs_sampler_params *p) {
    if (!p) return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: parameters are NULL");
    if (isnan(p->temperature))
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: temperature is NaN (<= 0 selects greedy)");
    if (isinf(p->temperature) && p->temperature > 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: temperature is +inf");
    if (!(p->top_p > 0.0f && p->top_p <= 1.0f))
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: top_p must be in (0, 1] (1 disables it), got %g",
                       (double)p->top_p);
    if (!(p->min_p >= 0.0f && p->min_p <= 1.0f))
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: min_p must be in [0, 1] (0 disables it), got %g",
                       (double)p->min_p);
    if (!(p->repeat_penalty > 0.0f) || isinf(p->repeat_penalty))
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "sampler: repeat_penalty must be finite and > 0 (1 disables it), got %g",
                       (double)p->repeat_penalty);
    if (p->repeat_last_n < 0 || p->repeat_last_n > HS_SAMPLER_MAX_LAST_N)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "sampler: repeat_last_n must be in [0, %d] (0 disables penalties), got %d",
                       HS_SAMPLER_MAX_LAST_N, (int)p->repeat_last_n);
    if (!isfinite(p->frequency_penalty))
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: frequency_penalty must be finite, got %g",
                       (double)p->frequency_penalty);
    if (!isfinite(p->presence_penalty))
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: presence_penalty must be finite, got %g",
                       (double)p->presence_penalty);
    return HS_OK;
}

/* ---- lifetime ---- */

hs_status hs_sampler_create(const hs_sampler_params *p, int32_t n_vocab, hs_sampler **out) {
    hs_status st = HS_OK;
    hs_sampler *s = NULL;
    if (!out) return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: out is NULL");
    *out = NULL;
    HS_TRY(hs_sampler_params_validate(p));
    if (n_vocab <= 0) {
        st = HS_FAIL(HS_ERR_INVALID_ARG, "sampler: n_vocab must be > 0, got %d", (int)n_vocab);
        goto fail;
    }
    s = calloc(1, sizeof *s);
    if (!s) goto oom;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->work = malloc((size_t)n_vocab * sizeof *s->work);
    s->cand = malloc((size_t)n_vocab * sizeof *s->cand);
    s->probs = malloc((size_t)n_vocab * sizeof *s->probs);
    if (!s->work || !s->cand || !s->probs) goto oom;
    if (p->repeat_last_n > 0) {
        s->hist = malloc((size_t)p->repeat_last_n * sizeof *s->hist);
        s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
        if (!s->hist || !s->counts) goto oom;
    }
    hs_sampler_reset(s);
    *out = s;
    return HS_OK;
oom:
    st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "sampler: out of memory for a vocabulary of %d tokens",
                 (int)n_vocab);
fail:
    hs_sampler_destroy(s);
    return st;
}

void hs_sampler_destroy(hs_sampler *s) {
    if (!s) return;
    free(s->hist);
    free(s->counts);
    free(s->work);
    free(s->cand);
    free(s->probs);
    free(s);
}

void hs_sampler_reset(hs_sampler *s) {
    HS_ASSERT(s);
    s->hist_len = 0;
    s->hist_head = 0;
    if (s->counts) memset(s->counts, 0, (size_t)s->n_vocab * sizeof *s->counts);
    rng_seed(s->rng, s->p.seed);
}

bool hs_sampler_is_greedy(const hs_sampler *s) { return s && s->p.temperature <= 0.0f; }

hs_status hs_sampler_accept(hs_sampler *s, int32_t token) {
    if (!s) return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: accept on a NULL sampler");
    if (token < 0 || token >= s->n_vocab)
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: accepted token %d is outside the vocabulary [0, %d)",
                       (int)token, (int)s->n_vocab);
    const int32_t cap = s->p.repeat_last_n;
    if (cap == 0) return HS_OK;
    if (s->hist_len == cap) {
        /* Full: the newest token replaces the oldest, which leaves the window. */
        s->counts[s->hist[s->hist_head]]--;
        s->hist[s->hist_head] = token;
        s->hist_head = (s->hist_head + 1) % cap;
    } else {
        s->hist[(s->hist_head + s->hist_len) % cap] = token;
        s->hist_len++;
    }
    s->counts[token]++;
    return HS_OK;
}

/* ---- the chain ---- */

static hs_status check_call(const hs_sampler *s, const void *arr, int32_t n, const void *out,
                            const char *fn) {
    if (!s) return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: %s on a NULL sampler", fn);
    if (!arr || !out) return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: %s with a NULL array", fn);
    if (n != s->n_vocab)
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: %s got %d values but the sampler was made for %d", fn,
                       (int)n, (int)s->n_vocab);
    return HS_OK;
}

/* Copies the logits into s->work, rejecting NaN and +inf, and applies the penalties. */
static hs_status load_logits(hs_sampler *s, const float *logits) {
    const int32_t n = s->n_vocab;
    for (int32_t i = 0; i < n; i++) {
        float l = logits[i];
        if (isnan(l) || (isinf(l) && l > 0))
            return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: logit of token %d is %s", (int)i,
                           isnan(l) ? "NaN" : "+inf");
        s->work[i] = l;
    }
    const hs_sampler_params *p = &s->p;
    bool penalties = p->repeat_last_n > 0 && (p->repeat_penalty != 1.0f || p->frequency_penalty != 0.0f ||
                                              p->presence_penalty != 0.0f);
    if (penalties && s->hist_len > 0) {
        for (int32_t i = 0; i < n; i++) {
            int32_t c = s->counts[i];
            if (c == 0) continue;
            float l = s->work[i];
            /* Dividing a negative logit would raise its probability, hence llama.cpp's multiply. */
            l = l <= 0.0f ? l * p->repeat_penalty : l / p->repeat_penalty;
            l -= (float)c * p->frequency_penalty + p->presence_penalty;
            if (isnan(l) || (isinf(l) && l > 0))
                return HS_FAIL(
                    HS_ERR_INVALID_ARG,
                    "sampler: penalties turned the logit %g of token %d into %s (penalties too large)",
                    (double)s->work[i], (int)i, isnan(l) ? "NaN" : "+inf");
            s->work[i] = l;
        }
    }
    for (int32_t i = 0; i < n; i++)
        if (s->work[i] != -INFINITY) return HS_OK;
    return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: all %d logits are -inf%s", (int)n,
                   penalties && s->hist_len > 0 ? " after penalties" : "");
}

/* Greedy: the largest penalised logit, the lowest id among equals. */
static int32_t argmax(const float *l, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (l[i] > l[best]) best = i;
    return best;
}

/* True when a ranks before b: larger logit, or equal logit and lower id. */
static bool cand_before(hs_cand a, hs_cand b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

static int cand_cmp(const void *pa, const void *pb) {
    hs_cand a = *(const hs_cand *)pa, b = *(const hs_cand *)pb;
    if (cand_before(a, b)) return -1;
    if (cand_before(b, a)) return 1;
    return 0;
}

/* Restores the heap below i in c[0..k): a parent ranks after its children, so c[0] is the worst. */
static void sift_down(hs_cand *c, int32_t k, int32_t i) {
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, w = i;
        if (l < k && cand_before(c[w], c[l])) w = l;
        if (r < k && cand_before(c[w], c[r])) w = r;
        if (w == i) return;
        hs_cand t = c[i];
        c[i] = c[w];
        c[w] = t;
        i = w;
    }
}

/* Top-k: a heap of the k best seen so far over c[0..k), each later candidate that ranks before the worst
 * of them replaces it; O(n log k). c[0..k) ends up sorted. */
static void select_top_k(hs_cand *c, int32_t n, int32_t k) {
    for (int32_t i = k / 2 - 1; i >= 0; i--)
        sift_down(c, k, i);
    for (int32_t j = k; j < n; j++) {
        if (!cand_before(c[j], c[0])) continue;
        c[0] = c[j];
        sift_down(c, k, 0);
    }
    qsort(c, (size_t)k, sizeof *c, cand_cmp);
}

/* Moves the candidates with logit > thr to the front (any order); returns how many there are. */
static int32_t partition_above(hs_cand *c, int32_t n, float thr) {
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        if (c[i].logit > thr) {
            hs_cand t = c[m];
            c[m] = c[i];
            c[i] = t;
            m++;
        }
    }
    return m;
}

/* Walks the sorted c[0..m) accumulating probabilities (softmax over all n with the given max and
 * normaliser); returns the kept count, or 0 if top_p was not reached inside c[0..m). */
static int32_t top_p_walk(const hs_cand *c, int32_t m, float max, double total, float top_p) {
    double cum = 0.0;
    for (int32_t i = 0; i < m; i++) {
        cum += exp((double)c[i].logit - (double)max) / total;
        if (cum >= (double)top_p) return i + 1;
    }
    return 0;
}

/* Top-p over c[0..n). Leaves the kept prefix sorted and returns its length. Unsorted input is not sorted
 * whole: the candidates within a margin of the maximum are sorted first, and since every one of them
 * ranks before every candidate outside, their sorted order is the prefix of the full order. Only when the
 * margin does not hold top_p of the mass is it widened, finally to everything. */
static int32_t apply_top_p(hs_cand *c, int32_t n, bool sorted, float top_p) {
    float max = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += exp((double)c[i].logit - (double)max);
    if (!sorted) {
        static const float margins[] = {8.0f, 16.0f, 32.0f};
        for (size_t j = 0; j < sizeof margins / sizeof margins[0]; j++) {
            int32_t m = partition_above(c, n, max - margins[j]);
            if (m == n) break;
            qsort(c, (size_t)m, sizeof *c, cand_cmp);
            int32_t kept = top_p_walk(c, m, max, total, top_p);
            if (kept) return kept;
        }
        qsort(c, (size_t)n, sizeof *c, cand_cmp);
    }
    int32_t kept = top_p_walk(c, n, max, total, top_p);
    return kept ? kept : n; /* rounding kept the sum just under top_p: keep everything */
}

/* Min-p: keeps logit >= max + log(min_p), i.e. probability >= min_p * the largest (llama.cpp's test). */
static int32_t apply_min_p(hs_cand *c, int32_t n, float min_p) {
    float max = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    const float thr = max + logf(min_p);
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++)
        if (c[i].logit >= thr) c[m++] = c[i];
    return m;
}

/* Runs the chain on the current s->work and writes the final distribution to probs. */
static void chain_probs(hs_sampler *s, float *probs) {
    const hs_sampler_params *p = &s->p;
    const int32_t nv = s->n_vocab;
    memset(probs, 0, (size_t)nv * sizeof *probs);
    if (p->temperature <= 0.0f) {
        probs[argmax(s->work, nv)] = 1.0f;
        return;
    }
    hs_cand *c = s->cand;
    int32_t n = 0;
    for (int32_t i = 0; i < nv; i++)
        if (s->work[i] != -INFINITY) c[n++] = (hs_cand){s->work[i], i};
    bool sorted = false;
    if (p->top_k > 0 && p->top_k < n) {
        select_top_k(c, n, p->top_k);
        n = p->top_k;
        sorted = true;
    }
    if (p->top_p < 1.0f) {
        n = apply_top_p(c, n, sorted, p->top_p);
        sorted = true;
    }
    if (p->min_p > 0.0f) n = apply_min_p(c, n, p->min_p);
    /* Temperature, then softmax: exp((l - max) / T), summed in double. A division, not a multiplication
     * by 1/T, so that a tiny T gives 0 / T = 0 for the maximum rather than 0 * inf = NaN. */
    float max = c[0].logit;
    for (int32_t i = 1; i < n; i++)
        if (c[i].logit > max) max = c[i].logit;
    const double t = (double)p->temperature;
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += exp(((double)c[i].logit - (double)max) / t);
    for (int32_t i = 0; i < n; i++)
        probs[c[i].id] = (float)(exp(((double)c[i].logit - (double)max) / t) / total);
}

hs_status hs_sampler_probs(hs_sampler *s, const float *logits, int32_t n_vocab, float *probs) {
    hs_status st = check_call(s, logits, n_vocab, probs, "hs_sampler_probs");
    if (st != HS_OK) return st;
    st = load_logits(s, logits);
    if (st != HS_OK) return st;
    chain_probs(s, probs);
    return HS_OK;
}

/* Inverse CDF in id order: the first token whose cumulative weight exceeds u * total. Needs a positive
 * total; the last positive entry catches a u that rounding pushed past the end. */
static int32_t draw(const float *w, int32_t n, double u) {
    double total = 0.0;
    for (int32_t i = 0; i < n; i++)
        total += (double)w[i];
    const double target = u * total;
    double cum = 0.0;
    int32_t last = -1;
    for (int32_t i = 0; i < n; i++) {
        if (w[i] <= 0.0f) continue;
        cum += (double)w[i];
        last = i;
        if (target < cum) return i;
    }
    return last;
}

hs_status hs_sampler_sample(hs_sampler *s, const float *logits, int32_t n_vocab, int32_t *token) {
    hs_status st = check_call(s, logits, n_vocab, token, "hs_sampler_sample");
    if (st != HS_OK) return st;
    st = load_logits(s, logits);
    if (st != HS_OK) return st;
    if (s->p.temperature <= 0.0f) {
        *token = argmax(s->work, n_vocab);
        return HS_OK;
    }
    chain_probs(s, s->probs);
    *token = draw(s->probs, n_vocab, hs_sampler_uniform(s));
    return HS_OK;
}

hs_status hs_sampler_sample_probs(hs_sampler *s, const float *probs, int32_t n, int32_t *token) {
    if (!s) return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: hs_sampler_sample_probs on a NULL sampler");
    if (!probs || !token)
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: hs_sampler_sample_probs with a NULL array");
    if (n <= 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: hs_sampler_sample_probs needs n > 0, got %d", (int)n);
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) {
        if (!isfinite(probs[i]) || probs[i] < 0.0f)
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "sampler: probability of token %d is %g (must be finite and >= 0)", (int)i,
                           (double)probs[i]);
        total += (double)probs[i];
    }
    if (!(total > 0.0))
        return HS_FAIL(HS_ERR_INVALID_ARG, "sampler: the %d probabilities sum to zero", (int)n);
    *token = draw(probs, n, hs_sampler_uniform(s));
    return HS_OK;
}
