/* heterospec: the HeteroSpec policy, calibration fitting and files (heterospec.h). */
#include "heterospec.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const feature_names[HS_HX_N_FEATURES] = {"parent_ent", "path_ent", "mean_ent"};

const char *hs_hx_feature_name(hs_hx_feature f) { return f < HS_HX_N_FEATURES ? feature_names[f] : "?"; }

/* ---- values and costs ---- */

static float node_x(hs_hx_feature f, const hs_tree_node *v) {
    switch (f) {
    case HS_HX_PATH_ENT: return v->path_ent;
    case HS_HX_MEAN_ENT: return v->depth ? v->path_ent / (float)v->depth : v->path_ent;
    default: return v->parent_ent;
    }
}

float hs_hx_record_x(hs_hx_feature f, const hs_hx_record *r) {
    const hs_tree_node v = {.parent_ent = r->parent_ent, .path_ent = r->path_ent, .depth = r->depth};
    return node_x(f, &v);
}

static uint32_t stratum_of_x(const hs_hx_model *m, float x) {
    uint32_t b = 0;
    while (b + 1 < m->n_strata && x >= m->s[b].hi)
        b++;
    return b;
}

uint32_t hs_hx_stratum_of(const hs_hx_model *m, const hs_tree_node *v) {
    return stratum_of_x(m, node_x(m->feature, v));
}

float hs_hx_accept(const hs_hx_stratum *s, float q) {
    if (s->n_map == 0) return s->rate;
    if (q <= s->map_q[0]) return s->map_p[0];
    for (uint32_t i = 1; i < s->n_map; i++)
        if (q < s->map_q[i]) {
            const float a = (q - s->map_q[i - 1]) / (s->map_q[i] - s->map_q[i - 1]);
            return s->map_p[i - 1] + a * (s->map_p[i] - s->map_p[i - 1]);
        }
    return s->map_p[s->n_map - 1];
}

/* The table cell of a match length (buckets 1, 2, 3, 4+) and a place in the chain (0, 1, 2, 3+). */
static uint32_t lk_match_bucket(uint32_t match) {
    return match < 1 ? 0 : match > HS_HX_LK_MATCH ? HS_HX_LK_MATCH - 1 : match - 1;
}
static uint32_t lk_pos_bucket(uint32_t pos) { return pos >= HS_HX_LK_POS ? HS_HX_LK_POS - 1 : pos; }

float hs_hx_lookup_accept(const hs_hx_lookup *l, const hs_tree_node *v, bool headless) {
    const uint32_t col = headless ? HS_HX_LK_ANY : (v->src & HS_NODE_HEAD) ? HS_HX_LK_HEAD : HS_HX_LK_ONLY;
    if (v->match == 0) /* the n-gram store's */
        return l->store_accept[v->conf < HS_NGRAM_CONF ? v->conf : HS_NGRAM_CONF - 1][lk_pos_bucket(v->lpos)]
                              [col];
    return l->accept[lk_match_bucket(v->match)][lk_pos_bucket(v->lpos)][col];
}

/* An estimate times the feedback's gain, at most 0.999. */
static float gained(float f, float gain) {
    f *= gain;
    return f < 0.999f ? f : 0.999f;
}

void hs_hx_values(const hs_hx_model *m, const hs_tree *t, float *V) {
    const float gain = hs_tree_gain(t, HS_FB_HEAD), lk_gain = hs_tree_gain(t, HS_FB_LOOKUP);
    V[0] = 1.0f;
    /* Parents precede their children in node order. */
    for (uint32_t v = 1; v < t->n; v++) {
        const hs_tree_node *x = &t->nodes[v];
        float f =
            (x->src & HS_NODE_HEAD) ? gained(hs_hx_accept(&m->s[hs_hx_stratum_of(m, x)], x->q), gain) : 0.0f;
        if (x->src & HS_NODE_LOOKUP) {
            const float g = gained(hs_hx_lookup_accept(&m->lookup, x, m->headless), lk_gain);
            if (g > f) f = g;
        }
        V[v] = V[x->parent] * f;
    }
}

/* table[1 .. n], linear beyond n from its last two entries. */
static double table_at(const double *table, uint32_t n, uint32_t i) {
    if (n == 0) return 0;
    if (i == 0) i = 1;
    if (i <= n) return table[i];
    if (n == 1) return table[1] * i;
    return table[n] + (table[n] - table[n - 1]) * (double)(i - n);
}

double hs_hx_t_verify(const hs_hx_cost *c, uint32_t n) { return table_at(c->t_verify, c->n_verify, n); }
/* A pass timed t0 at ctx0 rows and t1 at ctx1, after ctx rows: linear in ctx
 * (extrapolated beyond ctx1, never below ctx0), at least a quarter of t0. */
static double at_ctx(const hs_hx_cost *c, double t0, double t1, uint32_t ctx) {
    if (c->ctx1 <= c->ctx0 || ctx <= c->ctx0) return t0;
    const double t = t0 + (t1 - t0) * ((double)ctx - c->ctx0) / (c->ctx1 - c->ctx0);
    return t > 0.25 * t0 ? t : 0.25 * t0;
}
double hs_hx_t_verify_at(const hs_hx_cost *c, uint32_t n, uint32_t ctx) {
    return at_ctx(c, hs_hx_t_verify(c, n), table_at(c->t_verify_long, c->n_verify, n), ctx);
}
double hs_hx_t_head_round(const hs_hx_cost *c, bool resting) {
    return (resting && c->t_consume_cache > 0 ? c->t_consume_cache : c->t_consume) + c->t_after_head;
}
double hs_hx_t_draft(const hs_hx_cost *c, uint32_t w) { return w ? table_at(c->t_draft, c->n_draft, w) : 0; }
bool hs_hx_eager(const hs_hx_cost *c, uint32_t eager, uint32_t n) {
    return n >= 2 && n <= eager && n <= c->n_verify_all;
}
double hs_hx_t_verify_all_at(const hs_hx_cost *c, uint32_t n, uint32_t ctx) {
    return n && n <= c->n_verify_all ? at_ctx(c, c->t_verify_all[n], c->t_verify_all_long[n], ctx) : 0;
}
double hs_hx_t_heads(const hs_hx_cost *c, uint32_t k) {
    if (k <= 1) return k ? c->t_head : 0;
    return k <= HS_HX_MAX_HEADS && c->t_heads[k] > 0 ? c->t_heads[k] : k * c->t_head;
}

/* The faster of *a and b into *a (0: unknown, the other's); unless n_apart is NULL (not counted),
 * counted in *n_apart when they differ by more than a quarter, the ratio of the slower to the faster
 * into *worst. */
static void keep_faster(double *a, double b, uint32_t *n_apart, double *worst) {
    if (*a > 0 && b > 0) {
        const double lo = *a < b ? *a : b, hi = *a < b ? b : *a;
        if (n_apart) {
            if (hi > 1.25 * lo) (*n_apart)++;
            if (hi / lo > *worst) *worst = hi / lo;
        }
        *a = lo;
    } else if (b > 0) {
        *a = b;
    }
}

/* keep_faster over table[1 .. n]; entries that repeat the one before in both tables (a capacity bucket's
 * time, filled over its sizes) are one timing, counted once. Downwards, so that table[i - 1] is still a's. */
static void keep_faster_table(double *a, const double *b, uint32_t n, uint32_t *n_apart, double *worst) {
    for (uint32_t i = n; i >= 1; i--) {
        const bool copy = i > 1 && a[i] == a[i - 1] && b[i] == b[i - 1];
        keep_faster(&a[i], b[i], copy ? NULL : n_apart, worst);
    }
}

hs_status hs_hx_cost_keep_faster(hs_hx_cost *c, const hs_hx_cost *o, uint32_t *n_apart, double *worst) {
    if (c->n_verify != o->n_verify || c->n_draft != o->n_draft || c->ctx0 != o->ctx0 || c->ctx1 != o->ctx1 ||
        c->n_verify_all != o->n_verify_all)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "cost: two timings of different shapes (verify %u / %u, draft %u / %u, contexts "
                       "%u-%u / %u-%u, every head %u / %u)",
                       c->n_verify, o->n_verify, c->n_draft, o->n_draft, c->ctx0, c->ctx1, o->ctx0, o->ctx1,
                       c->n_verify_all, o->n_verify_all);
    uint32_t n = 0;
    double w = 1;
    const uint32_t nv = c->n_verify < HS_HX_MAX_N ? c->n_verify : HS_HX_MAX_N;
    const uint32_t nd = c->n_draft < HS_HX_MAX_WIDTH ? c->n_draft : HS_HX_MAX_WIDTH;
    const uint32_t na = c->n_verify_all < HS_TREE_EAGER_MAX ? c->n_verify_all : HS_TREE_EAGER_MAX;
    keep_faster_table(c->t_verify, o->t_verify, nv, &n, &w);
    keep_faster_table(c->t_verify_long, o->t_verify_long, nv, &n, &w);
    keep_faster_table(c->t_draft, o->t_draft, nd, &n, &w);
    keep_faster_table(c->t_verify_all, o->t_verify_all, na, &n, &w);
    keep_faster_table(c->t_verify_all_long, o->t_verify_all_long, na, &n, &w);
    for (uint32_t k = 2; k <= HS_HX_MAX_HEADS; k *= 2)
        keep_faster(&c->t_heads[k], o->t_heads[k], &n, &w);
    keep_faster(&c->t_consume, o->t_consume, &n, &w);
    keep_faster(&c->t_consume_cache, o->t_consume_cache, &n, &w);
    keep_faster(&c->t_plain, o->t_plain, &n, &w);
    keep_faster(&c->t_head, o->t_head, &n, &w);
    /* a difference of two timings, at least 1 us (cli_calibrate): not counted as apart */
    keep_faster(&c->t_after_head, o->t_after_head, NULL, NULL);
    if (n_apart) *n_apart = n;
    if (worst) *worst = w;
    return HS_OK;
}

/* Each doubling of table t (1 .. n) dearer than two of its half: counted in *count, the first said in why. */
static void doubts_doubling(const double *t, uint32_t n, const char *what, uint32_t *count, char *why,
                            size_t size) {
    for (uint32_t k = 1; 2 * k <= n; k *= 2)
        if (t[k] > 0 && t[2 * k] > 2.5 * t[k]) {
            if (!*count && why)
                snprintf(why, size, "%s of %u cost %.2f ms, of %u %.2f ms", what, 2 * k, 1e3 * t[2 * k], k,
                         1e3 * t[k]);
            (*count)++;
        }
}

uint32_t hs_hx_cost_doubts(const hs_hx_cost *c, char *why, size_t size) {
    uint32_t count = 0;
    if (why && size) why[0] = 0;
    const double one[3] = {c->t_plain, c->n_verify ? c->t_verify[1] : 0, c->n_verify_all ? c->t_verify_all[1] : 0};
    double lo = 0, hi = 0;
    for (int i = 0; i < 3; i++)
        if (one[i] > 0) {
            if (lo == 0 || one[i] < lo) lo = one[i];
            if (one[i] > hi) hi = one[i];
        }
    if (lo > 0 && hi > 1.1 * lo) {
        if (why)
            snprintf(why, size, "one-token passes of %.2f ms (a plain step), %.2f (a root alone) and %.2f (with "
                     "every head)", 1e3 * one[0], 1e3 * one[1], 1e3 * one[2]);
        count++;
    }
    double heads[HS_HX_MAX_HEADS + 1] = {0};
    heads[1] = c->t_head;
    for (uint32_t k = 2; k <= HS_HX_MAX_HEADS; k *= 2)
        heads[k] = c->t_heads[k];
    doubts_doubling(heads, HS_HX_MAX_HEADS, "output heads at once", &count, why, size);
    const uint32_t nv = c->n_verify < HS_HX_MAX_N ? c->n_verify : HS_HX_MAX_N;
    const uint32_t na = c->n_verify_all < HS_TREE_EAGER_MAX ? c->n_verify_all : HS_TREE_EAGER_MAX;
    const uint32_t nd = c->n_draft < HS_HX_MAX_WIDTH ? c->n_draft : HS_HX_MAX_WIDTH;
    doubts_doubling(c->t_verify, nv, "verification", &count, why, size);
    if (c->ctx1 > c->ctx0) {
        doubts_doubling(c->t_verify_long, nv, "verification at the longer context", &count, why, size);
        doubts_doubling(c->t_verify_all_long, na, "verification with every head at the longer context", &count,
                        why, size);
    }
    doubts_doubling(c->t_verify_all, na, "verification with every head", &count, why, size);
    doubts_doubling(c->t_draft, nd, "a draft level", &count, why, size);
    return count;
}

/* ---- the policy ---- */

typedef struct cand {
    float v;
    uint32_t depth;
    int32_t node;   /* tree node; -1 for an expected child */
    int32_t parent; /* tree node of the parent (for an expected child: the node drafted) */
} cand;

/* Higher V first, then shallower, then lower node index (expected children last). */
static int cand_cmp(const void *a, const void *b) {
    const cand *x = a, *y = b;
    if (x->v != y->v) return x->v > y->v ? -1 : 1;
    if (x->depth != y->depth) return x->depth < y->depth ? -1 : 1;
    const uint32_t i = x->node < 0 ? UINT32_MAX : (uint32_t)x->node,
                   j = y->node < 0 ? UINT32_MAX : (uint32_t)y->node;
    return i < j ? -1 : i > j;
}

/* Scratch of one decision: V, the candidates, marks, the runs of best_prefix. */
typedef struct work {
    float *V;
    cand *c;
    uint8_t *in, *kept;
    uint32_t *run_of, *run_len; /* per tree node: its run's first node; a first node's run length */
    uint32_t n;                 /* candidates (tree nodes but the root) */
} work;

/* Expected time of the output heads of a run's first L nodes: nodes s, s + 1
 * .. s + L - 1, each the parent of the next, so consecutive in the
 * verification list (hs_tree_verify_list keeps node order). The walk computes
 * them from the first accepted node whose head is missing, k at a time (the
 * largest power of two at most heads and the rest of the run,
 * hs_tree_heads_k), so a product starting at node s + j costs t_heads(k)
 * with probability V(s + j). With heads 1 this is the sum of V t_head. */
static double run_heads(const hs_hx_model *m, const float *V, uint32_t s, uint32_t L) {
    const uint32_t h = hs_tree_heads_max(m->heads);
    double t = 0;
    for (uint32_t j = 0; j < L;) {
        uint32_t k = 1;
        while (2 * k <= h && 2 * k <= L - j) k *= 2;
        t += V[s + j] * hs_hx_t_heads(&m->cost, k);
        j += k;
    }
    return t;
}

/* The best prefix of the sorted candidates c[0 .. n) that stays closed under
 * ancestors (members whose parent is not in are skipped): its length in
 * members taken into *taken (kept[] marks them when non-NULL) and its rate
 * E[tau] / T, with the expected output heads of the accepted nodes in T: a
 * member whose parent is the node just before it extends that node's run and
 * shares its products (run_heads), any other starts a run; an expected child
 * (node -1) is priced V t_head. A prefix whose list m->eager covers
 * (hs_hx_eager) pays t_verify_all instead, with no heads after the pass,
 * where that is cheaper (hx_eager_round decides the same for the round).
 * w's in, run_of and run_len are scratch. */
static double best_prefix(const hs_hx_model *m, const hs_tree *t, work *w, const cand *c, uint32_t n,
                          uint32_t cap, double spent, uint32_t *taken, uint8_t *kept) {
    const hs_hx_cost *k = &m->cost;
    uint8_t *in = w->in;
    memset(in, 0, t->n);
    in[0] = 1;
    double e = 1.0, heads = 0, best = 1.0 / (spent + hs_hx_t_verify_at(k, 1, t->ctx));
    uint32_t n_in = 0, best_n = 0, best_i = 0;
    for (uint32_t i = 0; i < n && n_in < cap; i++) {
        if (!in[c[i].parent]) continue;
        const int32_t v = c[i].node;
        if (v < 0) {
            heads += c[i].v * k->t_head;
        } else {
            in[v] = 1;
            const int32_t p = c[i].parent;
            const uint32_t s = p > 0 && p == v - 1 ? w->run_of[p] : (uint32_t)v;
            w->run_of[v] = s;
            if (s == (uint32_t)v) {
                w->run_len[s] = 1;
                heads += run_heads(m, w->V, s, 1);
            } else {
                heads += run_heads(m, w->V, s, w->run_len[s] + 1) - run_heads(m, w->V, s, w->run_len[s]);
                w->run_len[s]++;
            }
        }
        n_in++;
        e += c[i].v;
        double pass = hs_hx_t_verify_at(k, n_in + 1, t->ctx) + heads;
        if (hs_hx_eager(k, m->eager, n_in + 1) && hs_hx_t_verify_all_at(k, n_in + 1, t->ctx) < pass)
            pass = hs_hx_t_verify_all_at(k, n_in + 1, t->ctx);
        const double r = e / (spent + pass);
        if (r > best) {
            best = r;
            best_n = n_in;
            best_i = i + 1;
        }
    }
    if (kept) {
        memset(in, 0, t->n);
        in[0] = 1;
        for (uint32_t i = 0; i < best_i; i++) {
            kept[i] = in[c[i].parent];
            if (kept[i] && c[i].node >= 0) in[c[i].node] = 1;
        }
    }
    *taken = best_n;
    return best;
}

static void work_free(work *w) {
    free(w->V);
    free(w->c);
    free(w->in);
    free(w->kept);
    free(w->run_of);
    free(w->run_len);
}

static bool work_init(work *w, const hs_hx_model *m, const hs_tree *t, uint32_t extra) {
    memset(w, 0, sizeof *w);
    w->V = malloc(sizeof *w->V * t->n);
    w->c = malloc(sizeof *w->c * (t->n + extra));
    w->in = malloc(t->n);
    w->kept = malloc(t->n + extra);
    w->run_of = malloc(sizeof *w->run_of * t->n);
    w->run_len = malloc(sizeof *w->run_len * t->n);
    if (!w->V || !w->c || !w->in || !w->kept || !w->run_of || !w->run_len) {
        work_free(w);
        return false;
    }
    hs_hx_values(m, t, w->V);
    for (uint32_t v = 1; v < t->n; v++)
        w->c[w->n++] = (cand){
            .v = w->V[v], .depth = t->nodes[v].depth, .node = (int32_t)v, .parent = t->nodes[v].parent};
    return true;
}

/* Time of the round so far: the head's consume and the levels drafted (nodes
 * expanded at depth d were drafted by level d). */
static double spent_time(const hs_hx_model *m, const hs_tree *t) {
    uint32_t width[HS_TREE_MAX_DEPTH + 1] = {0};
    for (uint32_t v = 1; v < t->n; v++)
        if (t->nodes[v].slot >= 0 && t->nodes[v].depth <= HS_TREE_MAX_DEPTH) width[t->nodes[v].depth]++;
    double s = m->headless ? 0 : hs_hx_t_head_round(&m->cost, false);
    for (uint32_t d = 1; d <= HS_TREE_MAX_DEPTH; d++)
        s += hs_hx_t_draft(&m->cost, width[d]);
    return s;
}

static uint32_t verify_cap(const hs_hx_model *m, uint32_t cap) {
    return cap < m->max_verify ? cap : m->max_verify;
}

/* Whether the selection's list (sel[0 .. n), closed under ancestors) runs
 * every output head in the pass: where m->eager covers it and that costs
 * less than the pass with the root's head plus the expected heads after
 * it, the runs priced as best_prefix prices them. */
static bool hx_eager_round(const hs_tree_policy *p, const hs_tree *t, const uint32_t *sel, uint32_t n) {
    const hs_hx_model *m = p->state;
    if (!hs_hx_eager(&m->cost, m->eager, n + 1)) return false;
    float *V = malloc(sizeof *V * t->n);
    uint8_t *in = calloc(t->n, 1);
    bool eager = false;
    if (V && in) {
        hs_hx_values(m, t, V);
        for (uint32_t i = 0; i < n; i++)
            in[sel[i]] = 1;
        /* A run: a selected node whose parent is not the selected node just before it, and the nodes that
         * each continue the one before. */
        double heads = 0;
        for (uint32_t v = 1; v < t->n; v++) {
            if (!in[v] || (t->nodes[v].parent > 0 && t->nodes[v].parent == (int32_t)v - 1 && in[v - 1]))
                continue;
            uint32_t len = 1;
            while (v + len < t->n && in[v + len] && t->nodes[v + len].parent == (int32_t)(v + len - 1))
                len++;
            heads += run_heads(m, V, v, len);
        }
        eager = hs_hx_t_verify_all_at(&m->cost, n + 1, t->ctx) <
                hs_hx_t_verify_at(&m->cost, n + 1, t->ctx) + heads;
    }
    free(V);
    free(in);
    return eager;
}

static uint32_t hx_select(const hs_tree_policy *p, const hs_tree *t, uint32_t *sel, uint32_t cap) {
    const hs_hx_model *m = p->state;
    work w;
    uint32_t n = 0, taken;
    if (work_init(&w, m, t, 0)) {
        qsort(w.c, w.n, sizeof *w.c, cand_cmp);
        best_prefix(m, t, &w, w.c, w.n, verify_cap(m, cap), spent_time(m, t), &taken, w.kept);
        for (uint32_t i = 0; n < taken; i++)
            if (w.kept[i]) sel[n++] = (uint32_t)w.c[i].node;
        work_free(&w);
    }
    return n;
}

static uint32_t hx_expand(const hs_tree_policy *p, const hs_tree *t, uint32_t level, uint32_t *sel,
                          uint32_t cap) {
    const hs_hx_model *m = p->state;
    if (m->headless || level >= m->max_depth) return 0; /* no head, or children deeper than any tree */
    uint32_t wmax = cap < m->max_width ? cap : m->max_width;
    work w;
    uint32_t best_w = 0;
    cand *f = malloc(sizeof *f * (t->n ? t->n : 1)), *kids = malloc(sizeof *kids * (wmax ? wmax : 1));
    cand *all = malloc(sizeof *all * (t->n + wmax));
    if (f && kids && all && work_init(&w, m, t, 0)) {
        /* The frontier: undrafted nodes of this level their stratum lets grow. */
        uint32_t nf = 0;
        for (uint32_t i = 0; i < w.n; i++) {
            const cand *c = &w.c[i];
            const hs_tree_node *v = &t->nodes[c->node];
            const hs_hx_stratum *s = &m->s[hs_hx_stratum_of(m, v)];
            if (v->depth == level && v->slot < 0 && (v->src & HS_NODE_HEAD) && level < s->depth_cap &&
                c->v >= s->prune && c->v > 0)
                f[nf++] = *c;
        }
        qsort(f, nf, sizeof *f, cand_cmp);
        if (wmax > nf) wmax = nf;
        const double spent = spent_time(m, t);
        const uint32_t vcap = verify_cap(m, UINT32_MAX);
        uint32_t taken;
        qsort(w.c, w.n, sizeof *w.c, cand_cmp);
        double best = best_prefix(m, t, &w, w.c, w.n, vcap, spent, &taken, NULL);
        /* Drafting the k best adds, for each, one expected child: kids holds
         * them sorted, merged with the sorted candidates into all. */
        for (uint32_t k = 1; k <= wmax; k++) {
            const hs_tree_node *v = &t->nodes[f[k - 1].node];
            const float look = gained(m->s[hs_hx_stratum_of(m, v)].look, hs_tree_gain(t, HS_FB_HEAD));
            const cand kid = {.v = f[k - 1].v * look,
                              .depth = level + 1,
                              .node = -1,
                              .parent = f[k - 1].node};
            uint32_t i = k - 1;
            for (; i > 0 && cand_cmp(&kid, &kids[i - 1]) < 0; i--)
                kids[i] = kids[i - 1];
            kids[i] = kid;
            uint32_t a = 0, b = 0, n = 0;
            while (a < w.n || b < k)
                all[n++] = b == k || (a < w.n && cand_cmp(&w.c[a], &kids[b]) <= 0) ? w.c[a++] : kids[b++];
            const double r =
                best_prefix(m, t, &w, all, n, vcap, spent + hs_hx_t_draft(&m->cost, k), &taken, NULL);
            if (r > best) {
                best = r;
                best_w = k;
            }
        }
        for (uint32_t k = 0; k < best_w; k++)
            sel[k] = (uint32_t)f[k].node;
        work_free(&w);
    }
    free(f);
    free(kids);
    free(all);
    return best_w;
}

void hs_hx_observe(const hs_tree_policy *p, hs_tree *t, const uint32_t *list_nodes, const int32_t *parents,
                   uint32_t n_list, const uint32_t *path, uint32_t len) {
    const hs_hx_model *m = p->state;
    hs_tree_feedback *fb = &t->fb;
    for (int i = 0; i < HS_FB_SOURCES; i++) {
        fb->pred[i] *= m->fb_decay;
        fb->acc[i] *= m->fb_decay;
    }
    /* Entry i was decided when its parent entry is on the path (path[0 .. len), a few entries). */
    for (uint32_t i = 1; i < n_list; i++) {
        uint32_t k = 0;
        while (k < len && path[k] != (uint32_t)parents[i])
            k++;
        if (k == len) continue;
        const hs_tree_node *x = &t->nodes[list_nodes[i]];
        if (x->src & HS_NODE_HEAD) fb->pred[HS_FB_HEAD] += hs_hx_accept(&m->s[hs_hx_stratum_of(m, x)], x->q);
        if (x->src & HS_NODE_LOOKUP)
            fb->pred[HS_FB_LOOKUP] += hs_hx_lookup_accept(&m->lookup, x, m->headless);
    }
    for (uint32_t k = 1; k < len; k++) {
        const uint8_t src = t->nodes[list_nodes[path[k]]].src;
        fb->acc[HS_FB_HEAD] += (src & HS_NODE_HEAD) != 0;
        fb->acc[HS_FB_LOOKUP] += (src & HS_NODE_LOOKUP) != 0;
    }
    const double hi = HS_HX_FB_MAX_GAIN;
    for (int i = 0; i < HS_FB_SOURCES; i++) {
        const double g = (fb->acc[i] + m->fb_prior) / (fb->pred[i] + m->fb_prior);
        fb->gain[i] = (float)(g > hi ? hi : g < 1 / hi ? 1 / hi : g);
    }
}

hs_tree_policy hs_heterospec_policy(const hs_hx_model *m) {
    hs_tree_policy p = {.name = "heterospec", .expand = hx_expand, .select = hx_select};
    if (m->fb_prior > 0) p.observe = hs_hx_observe;
    p.state = (void *)m;
    p.depth = m->max_depth;
    p.total = m->max_verify;
    p.max_verify = m->max_verify;
    p.max_drafted = m->max_depth * m->max_width;
    p.rest = m->rest;
    p.lookup = m->lookup.max_len;
    p.lookup_min = m->lookup.min_match;
    p.lookup_nodraft = m->lookup.nodraft;
    p.store_len = m->lookup.store_len;
    p.heads = m->heads;
    p.eager = m->eager;
    p.eager_round = hx_eager_round;
    if (m->headless) {
        p.headless = true;
        p.lookup = m->headless_len;
        p.lookup_min = m->headless_min ? m->headless_min : 1;
        p.lookup_nodraft = 0;
        p.max_drafted = 0;
    }
    return p;
}

/* ---- calibration ---- */

static double bern_ll(double acc, double n) {
    if (n <= 0) return 0;
    const double r = acc / n;
    double s = 0;
    if (acc > 0) s += acc * log(r);
    if (n - acc > 0) s += (n - acc) * log(1 - r);
    return s;
}

typedef struct xrec {
    float x;
    uint32_t i; /* record index */
} xrec;

static int xrec_cmp(const void *a, const void *b) {
    const xrec *x = a, *y = b;
    return x->x < y->x ? -1 : x->x > y->x;
}

/* Sum of Bernoulli log-likelihoods of constant rates over the strata cut at
 * sorted positions cut[0 .. B] (cut[0] = 0, cut[B] = n); pre[i]: accepted
 * count of the first i sorted records. */
static double strata_ll(const uint32_t *cut, uint32_t B, const uint32_t *pre) {
    double s = 0;
    for (uint32_t b = 0; b < B; b++)
        s += bern_ll(pre[cut[b + 1]] - pre[cut[b]], cut[b + 1] - cut[b]);
    return s;
}

typedef struct qrec {
    float q;
    bool a;
} qrec;

static int qrec_cmp(const void *a, const void *b) {
    const qrec *x = a, *y = b;
    return x->q < y->q ? -1 : x->q > y->q;
}

/* Isotonic (non-decreasing) acceptance map over q from n records: equal-count
 * bins, smoothed rates, pool-adjacent-violators. */
static void fit_map(qrec *r, uint32_t n, hs_hx_stratum *s) {
    qsort(r, n, sizeof *r, qrec_cmp);
    uint32_t bins = n / 25;
    if (bins > HS_HX_MAP_POINTS) bins = HS_HX_MAP_POINTS;
    if (bins < 1) bins = 1;
    double wq[HS_HX_MAP_POINTS], wa[HS_HX_MAP_POINTS], wn[HS_HX_MAP_POINTS];
    uint32_t nb = 0;
    for (uint32_t b = 0; b < bins; b++) {
        const uint32_t lo = (uint32_t)((uint64_t)n * b / bins), hi = (uint32_t)((uint64_t)n * (b + 1) / bins);
        if (hi <= lo) continue;
        double q = 0, a = 0;
        for (uint32_t i = lo; i < hi; i++) {
            q += r[i].q;
            a += r[i].a;
        }
        wq[nb] = q;
        wa[nb] = a;
        wn[nb] = hi - lo;
        nb++;
        /* Pool while the rate decreases. */
        while (nb > 1 && (wa[nb - 2] + 0.5) / (wn[nb - 2] + 1) > (wa[nb - 1] + 0.5) / (wn[nb - 1] + 1)) {
            wq[nb - 2] += wq[nb - 1];
            wa[nb - 2] += wa[nb - 1];
            wn[nb - 2] += wn[nb - 1];
            nb--;
        }
    }
    s->n_map = nb;
    for (uint32_t b = 0; b < nb; b++) {
        s->map_q[b] = (float)(wq[b] / wn[b]);
        s->map_p[b] = (float)((wa[b] + 0.5) / (wn[b] + 1));
    }
    /* Knots at equal q (ties across bins) would divide by zero when interpolating. */
    uint32_t k = 0;
    for (uint32_t b = 0; b < nb; b++) {
        if (k && s->map_q[b] <= s->map_q[k - 1]) {
            s->map_p[k - 1] = s->map_p[b];
            continue;
        }
        s->map_q[k] = s->map_q[b];
        s->map_p[k] = s->map_p[b];
        k++;
    }
    s->n_map = k;
}

/* Strata edges for one feature: quantile cuts refined edge by edge
 * (coordinate ascent over a grid of positions) to maximise the likelihood of
 * per-stratum constant rates; then each stratum's map, look-ahead and depth
 * cap. */
static hs_status fit_feature(const hs_hx_record *r, uint32_t n, uint32_t B, uint32_t min_rec, hs_hx_feature f,
                             hs_hx_model *m) {
    hs_status st = HS_OK;
    xrec *x = malloc(sizeof *x * n);
    uint32_t *pre = malloc(sizeof *pre * (n + 1));
    qrec *qr = malloc(sizeof *qr * n);
    if (!x || !pre || !qr) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_hx_fit: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++)
        x[i] = (xrec){hs_hx_record_x(f, &r[i]), i};
    qsort(x, n, sizeof *x, xrec_cmp);
    pre[0] = 0;
    for (uint32_t i = 0; i < n; i++)
        pre[i + 1] = pre[i] + r[x[i].i].accepted;
    if (B > n / min_rec) B = n / min_rec;
    if (B < 1) B = 1;
    uint32_t cut[HS_HX_MAX_STRATA + 1];
    for (uint32_t b = 0; b <= B; b++)
        cut[b] = (uint32_t)((uint64_t)n * b / B);
    /* A cut may only sit between different x values. */
    for (int pass = 0; pass < 4 && B > 1; pass++)
        for (uint32_t b = 1; b < B; b++) {
            const uint32_t lo = cut[b - 1] + min_rec, hi = cut[b + 1] - min_rec;
            if (hi < lo) continue;
            uint32_t best = cut[b];
            double best_ll = strata_ll(cut, B, pre);
            const uint32_t steps = 64;
            for (uint32_t s = 0; s <= steps; s++) {
                uint32_t c = lo + (uint32_t)((uint64_t)(hi - lo) * s / steps);
                while (c < hi && c > 0 && x[c].x == x[c - 1].x)
                    c++;
                if (c == 0 || x[c].x == x[c - 1].x) continue;
                cut[b] = c;
                const double ll = strata_ll(cut, B, pre);
                if (ll > best_ll + 1e-9) {
                    best_ll = ll;
                    best = c;
                }
            }
            cut[b] = best;
        }
    /* Strata whose cut fell on equal x values merge into their neighbour. */
    uint32_t k = 1;
    for (uint32_t b = 1; b <= B; b++)
        if (b == B || (cut[b] > cut[k - 1] && x[cut[b]].x != x[cut[b] - 1].x)) cut[k++] = cut[b];
    B = k - 1;
    m->feature = f;
    m->n_strata = B;
    for (uint32_t b = 0; b < B; b++) {
        hs_hx_stratum *s = &m->s[b];
        memset(s, 0, sizeof *s);
        s->lo = b == 0 ? -INFINITY : 0.5f * (x[cut[b] - 1].x + x[cut[b]].x);
        s->hi = b + 1 == B ? INFINITY : 0.5f * (x[cut[b + 1] - 1].x + x[cut[b + 1]].x);
        s->records = cut[b + 1] - cut[b];
        double acc = 0, look_n = 0, look_a = 0;
        uint32_t deepest = 0, deepest_tried = 0;
        for (uint32_t i = cut[b]; i < cut[b + 1]; i++) {
            const hs_hx_record *rr = &r[x[i].i];
            qr[i - cut[b]] = (qrec){rr->q, rr->accepted};
            acc += rr->accepted;
            if (rr->depth > deepest) deepest = rr->depth;
            if (rr->accepted && rr->children_tried) {
                look_n++;
                look_a += rr->child_accepted;
                if (rr->depth > deepest_tried) deepest_tried = rr->depth;
            }
        }
        s->rate = (float)((acc + 0.5) / (s->records + 1));
        s->look = look_n > 0 ? (float)((look_a + 0.5) / (look_n + 1)) : s->rate;
        /* Grow nodes of this stratum no deeper than the data reached. */
        s->depth_cap = (deepest_tried ? deepest_tried : deepest) + 1;
        if (m->max_depth && s->depth_cap > m->max_depth) s->depth_cap = m->max_depth;
        s->prune = 0;
        fit_map(qr, s->records, s);
    }
fail:
    free(x);
    free(pre);
    free(qr);
    return st;
}

static float clampp(float p) { return p < 1e-4f ? 1e-4f : p > 1 - 1e-4f ? 1 - 1e-4f : p; }

double hs_hx_loglik(const hs_hx_model *m, const hs_hx_record *r, uint32_t n) {
    double s = 0;
    for (uint32_t i = 0; i < n; i++) {
        const float p =
            clampp(hs_hx_accept(&m->s[stratum_of_x(m, hs_hx_record_x(m->feature, &r[i]))], r[i].q));
        s += r[i].accepted ? log(p) : log(1 - p);
    }
    return n ? s / n : 0;
}

hs_status hs_hx_fit(const hs_hx_record *r, uint32_t n, const hs_hx_fit_options *opt, hs_hx_model *m) {
    hs_status st = HS_OK;
    const uint32_t B = opt && opt->n_strata ? opt->n_strata : 4,
                   min_rec = opt && opt->min_records ? opt->min_records : 50;
    const int want = opt ? opt->feature : -1;
    if (B > HS_HX_MAX_STRATA)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_hx_fit: %u strata (at most %u)", B, HS_HX_MAX_STRATA);
    if (want >= HS_HX_N_FEATURES) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_hx_fit: feature %d", want);
    if (n < min_rec)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_hx_fit: %u node records, a stratum needs at least %u", n,
                       min_rec);
    hs_hx_model best = *m, trial = *m;
    double best_ll = -INFINITY;
    for (int f = 0; f < HS_HX_N_FEATURES; f++) {
        if (want >= 0 && f != want) continue;
        HS_TRY(fit_feature(r, n, B, min_rec, (hs_hx_feature)f, &trial));
        const double ll = hs_hx_loglik(&trial, r, n);
        if (ll > best_ll) {
            best_ll = ll;
            best = trial;
        }
    }
    *m = best;
fail:
    return st;
}

/* One table (rows x HS_HX_LK_POS x HS_HX_LK_COLS) from counts: each cell's
 * rate shrunk toward its (row, column) rate and that toward the overall rate,
 * with prior weights of a few records each level up. */
static void fit_table(uint32_t rows, const double (*a)[HS_HX_LK_POS][HS_HX_LK_COLS],
                      const double (*c)[HS_HX_LK_POS][HS_HX_LK_COLS], double all_a, double all_n,
                      float (*out)[HS_HX_LK_POS][HS_HX_LK_COLS]) {
    const double w_row = 5, w_all = 10, p_all = (all_a + 1) / (all_n + 2.0);
    for (uint32_t mb = 0; mb < rows; mb++)
        for (uint32_t h = 0; h < HS_HX_LK_COLS; h++) {
            double ra = 0, rc = 0;
            for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++) {
                ra += a[mb][pb][h];
                rc += c[mb][pb][h];
            }
            const double p_row = (ra + w_all * p_all) / (rc + w_all);
            for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
                out[mb][pb][h] = (float)((a[mb][pb][h] + w_row * p_row) / (c[mb][pb][h] + w_row));
        }
}

void hs_hx_fit_lookup(const hs_hx_lookup_record *r, uint32_t n, hs_hx_lookup *l) {
    double a[HS_HX_LK_MATCH][HS_HX_LK_POS][HS_HX_LK_COLS] = {{{0}}};
    double c[HS_HX_LK_MATCH][HS_HX_LK_POS][HS_HX_LK_COLS] = {{{0}}};
    double sa[HS_NGRAM_CONF][HS_HX_LK_POS][HS_HX_LK_COLS] = {{{0}}};
    double sc[HS_NGRAM_CONF][HS_HX_LK_POS][HS_HX_LK_COLS] = {{{0}}};
    double all_a = 0, all_n = 0, st_a = 0, st_n = 0;
    for (uint32_t i = 0; i < n; i++) {
        const uint32_t pb = lk_pos_bucket(r[i].pos), col = r[i].head ? HS_HX_LK_HEAD : HS_HX_LK_ONLY;
        if (r[i].match == 0) { /* the store's */
            const uint32_t cb = r[i].conf < HS_NGRAM_CONF ? r[i].conf : HS_NGRAM_CONF - 1;
            sa[cb][pb][col] += r[i].accepted;
            sc[cb][pb][col]++;
            sa[cb][pb][HS_HX_LK_ANY] += r[i].accepted;
            sc[cb][pb][HS_HX_LK_ANY]++;
            st_a += r[i].accepted;
            st_n++;
            continue;
        }
        const uint32_t mb = lk_match_bucket(r[i].match);
        a[mb][pb][col] += r[i].accepted;
        c[mb][pb][col]++;
        a[mb][pb][HS_HX_LK_ANY] += r[i].accepted;
        c[mb][pb][HS_HX_LK_ANY]++;
        all_a += r[i].accepted;
        all_n++;
    }
    fit_table(HS_HX_LK_MATCH, a, c, all_a, all_n, l->accept);
    fit_table(HS_NGRAM_CONF, sa, sc, st_a, st_n, l->store_accept);
    l->records = (uint32_t)all_n;
    l->store_records = (uint32_t)st_n;
}

void hs_hx_fit_lookup_headless(const hs_hx_lookup_record *r, uint32_t n, hs_hx_lookup *l) {
    if (n == 0) return;
    hs_hx_lookup h;
    hs_hx_fit_lookup(r, n, &h);
    for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++) {
        for (uint32_t mb = 0; h.records && mb < HS_HX_LK_MATCH; mb++)
            l->accept[mb][pb][HS_HX_LK_ANY] = h.accept[mb][pb][HS_HX_LK_ANY];
        for (uint32_t cb = 0; h.store_records && cb < HS_NGRAM_CONF; cb++)
            l->store_accept[cb][pb][HS_HX_LK_ANY] = h.store_accept[cb][pb][HS_HX_LK_ANY];
    }
}

/* ---- files ---- */

static cJSON *pairs(const double *t, uint32_t n) {
    cJSON *a = cJSON_CreateArray();
    for (uint32_t i = 1; i <= n; i++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateNumber(i));
        cJSON_AddItemToArray(p, cJSON_CreateNumber(t[i]));
        cJSON_AddItemToArray(a, p);
    }
    return a;
}

static cJSON *write_table(uint32_t rows, const float (*t)[HS_HX_LK_POS][HS_HX_LK_COLS]) {
    cJSON *la = cJSON_CreateArray();
    for (uint32_t mb = 0; mb < rows; mb++) {
        cJSON *row = cJSON_CreateArray();
        for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++) {
            cJSON *cell = cJSON_CreateArray();
            for (uint32_t h = 0; h < HS_HX_LK_COLS; h++)
                cJSON_AddItemToArray(cell, cJSON_CreateNumber(t[mb][pb][h]));
            cJSON_AddItemToArray(row, cell);
        }
        cJSON_AddItemToArray(la, row);
    }
    return la;
}

/* rows x HS_HX_LK_POS cells of [lookup only, with the head, any] numbers in
 * [0, 1]. Files from before the third column have pairs: their headless
 * policy keeps the value it was tuned with (the first column). */
static bool read_table(const cJSON *la, int rows, float (*out)[HS_HX_LK_POS][HS_HX_LK_COLS]) {
    bool ok = cJSON_IsArray(la) && cJSON_GetArraySize(la) == rows;
    for (int mb = 0; ok && mb < rows; mb++) {
        const cJSON *row = cJSON_GetArrayItem(la, mb);
        ok = cJSON_IsArray(row) && cJSON_GetArraySize(row) == HS_HX_LK_POS;
        for (int pb = 0; ok && pb < HS_HX_LK_POS; pb++) {
            const cJSON *cell = cJSON_GetArrayItem(row, pb);
            const int n = cJSON_IsArray(cell) ? cJSON_GetArraySize(cell) : 0;
            ok = n == HS_HX_LK_COLS || n == 2;
            for (int h = 0; ok && h < n; h++) {
                const cJSON *x = cJSON_GetArrayItem(cell, h);
                ok = cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 1;
                if (ok) out[mb][pb][h] = (float)x->valuedouble;
            }
            if (ok && n == 2) out[mb][pb][HS_HX_LK_ANY] = out[mb][pb][HS_HX_LK_ONLY];
        }
    }
    return ok;
}

cJSON *hs_hx_model_to_json(const hs_hx_model *m) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "kind", "heterospec-calibration");
    cJSON_AddNumberToObject(o, "version", 1);
    cJSON_AddStringToObject(o, "feature", hs_hx_feature_name(m->feature));
    cJSON_AddNumberToObject(o, "max_depth", m->max_depth);
    cJSON_AddNumberToObject(o, "max_width", m->max_width);
    cJSON_AddNumberToObject(o, "max_verify", m->max_verify);
    cJSON_AddNumberToObject(o, "rest", m->rest);
    cJSON_AddNumberToObject(o, "heads", m->heads);
    cJSON_AddNumberToObject(o, "eager", m->eager);
    cJSON_AddBoolToObject(o, "plain", m->plain);
    cJSON *hl = cJSON_AddObjectToObject(o, "headless");
    cJSON_AddBoolToObject(hl, "use", m->headless);
    cJSON_AddNumberToObject(hl, "max_len", m->headless_len);
    cJSON_AddNumberToObject(hl, "min_match", m->headless_min);
    cJSON *sa = cJSON_AddArrayToObject(o, "strata");
    for (uint32_t b = 0; b < m->n_strata; b++) {
        const hs_hx_stratum *s = &m->s[b];
        cJSON *j = cJSON_CreateObject();
        /* JSON has no infinities: the open ends are null. */
        if (isfinite(s->lo))
            cJSON_AddNumberToObject(j, "lo", s->lo);
        else
            cJSON_AddNullToObject(j, "lo");
        if (isfinite(s->hi))
            cJSON_AddNumberToObject(j, "hi", s->hi);
        else
            cJSON_AddNullToObject(j, "hi");
        cJSON_AddNumberToObject(j, "records", s->records);
        cJSON_AddNumberToObject(j, "accept_rate", s->rate);
        cJSON_AddNumberToObject(j, "look", s->look);
        cJSON_AddNumberToObject(j, "depth_cap", s->depth_cap);
        cJSON_AddNumberToObject(j, "prune", s->prune);
        cJSON *map = cJSON_AddArrayToObject(j, "map");
        for (uint32_t i = 0; i < s->n_map; i++) {
            cJSON *p = cJSON_CreateArray();
            cJSON_AddItemToArray(p, cJSON_CreateNumber(s->map_q[i]));
            cJSON_AddItemToArray(p, cJSON_CreateNumber(s->map_p[i]));
            cJSON_AddItemToArray(map, p);
        }
        cJSON_AddItemToArray(sa, j);
    }
    const hs_hx_lookup *l = &m->lookup;
    cJSON *lk = cJSON_AddObjectToObject(o, "lookup");
    cJSON_AddNumberToObject(lk, "max_len", l->max_len);
    cJSON_AddNumberToObject(lk, "min_match", l->min_match);
    cJSON_AddNumberToObject(lk, "nodraft", l->nodraft);
    cJSON_AddNumberToObject(lk, "records", l->records);
    /* accept[match bucket][place bucket] = [lookup only, also the head's, any (the
     * policy without the head)] */
    cJSON_AddItemToObject(lk, "accept", write_table(HS_HX_LK_MATCH, l->accept));
    /* The n-gram store's chain: store_accept[confidence bucket][place bucket] likewise. */
    cJSON_AddNumberToObject(lk, "store_len", l->store_len);
    cJSON_AddNumberToObject(lk, "store_records", l->store_records);
    cJSON_AddItemToObject(lk, "store_accept", write_table(HS_NGRAM_CONF, l->store_accept));
    cJSON *fb = cJSON_AddObjectToObject(o, "feedback");
    cJSON_AddNumberToObject(fb, "prior", m->fb_prior);
    cJSON_AddNumberToObject(fb, "decay", m->fb_decay);
    cJSON *c = cJSON_AddObjectToObject(o, "cost");
    cJSON_AddNumberToObject(c, "t_consume_s", m->cost.t_consume);
    if (m->cost.t_consume_cache > 0) cJSON_AddNumberToObject(c, "t_consume_cache_s", m->cost.t_consume_cache);
    if (m->cost.t_plain > 0) cJSON_AddNumberToObject(c, "t_plain_s", m->cost.t_plain);
    if (m->cost.t_head > 0) cJSON_AddNumberToObject(c, "t_head_s", m->cost.t_head);
    if (m->cost.t_after_head > 0) cJSON_AddNumberToObject(c, "t_after_head_s", m->cost.t_after_head);
    cJSON_AddItemToObject(c, "verify_s", pairs(m->cost.t_verify, m->cost.n_verify));
    if (m->cost.ctx1 > m->cost.ctx0) {
        cJSON_AddNumberToObject(c, "ctx", m->cost.ctx0);
        cJSON_AddNumberToObject(c, "ctx_long", m->cost.ctx1);
        cJSON_AddItemToObject(c, "verify_long_s", pairs(m->cost.t_verify_long, m->cost.n_verify));
    }
    cJSON_AddItemToObject(c, "draft_s", pairs(m->cost.t_draft, m->cost.n_draft));
    if (m->cost.n_verify_all) {
        cJSON_AddItemToObject(c, "verify_all_s", pairs(m->cost.t_verify_all, m->cost.n_verify_all));
        if (m->cost.ctx1 > m->cost.ctx0)
            cJSON_AddItemToObject(c, "verify_all_long_s",
                                  pairs(m->cost.t_verify_all_long, m->cost.n_verify_all));
    }
    if (m->cost.t_heads[2] > 0) { /* [[k, seconds], ...], k = 2, 4 .. */
        cJSON *hs = cJSON_AddArrayToObject(c, "heads_s");
        for (uint32_t k = 2; k <= HS_HX_MAX_HEADS && m->cost.t_heads[k] > 0; k *= 2) {
            cJSON *p = cJSON_CreateArray();
            cJSON_AddItemToArray(p, cJSON_CreateNumber(k));
            cJSON_AddItemToArray(p, cJSON_CreateNumber(m->cost.t_heads[k]));
            cJSON_AddItemToArray(hs, p);
        }
    }
    return o;
}

static hs_status get_num(const cJSON *o, const char *key, double lo, double hi, double *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi))
        return HS_FAIL(HS_ERR_FORMAT, "calibration: \"%s\" must be a number in [%g, %g]", key, lo, hi);
    *out = v->valuedouble;
    return HS_OK;
}

/* An optional number: get_num's where o has the key, else dflt (files from before it). */
static hs_status get_opt_num(const cJSON *o, const char *key, double lo, double hi, double dflt,
                             double *out) {
    if (!cJSON_GetObjectItemCaseSensitive(o, key)) {
        *out = dflt;
        return HS_OK;
    }
    return get_num(o, key, lo, hi, out);
}

/* [[i, seconds], ...] with i = 1, 2, ... in order into t[1 .. n]. */
static hs_status get_table(const cJSON *a, const char *key, uint32_t max, double *t, uint32_t *n) {
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) < 1 || cJSON_GetArraySize(a) > (int)max)
        return HS_FAIL(HS_ERR_FORMAT, "calibration: cost.%s must list 1..%u [n, seconds] pairs", key, max);
    uint32_t i = 0;
    const cJSON *p;
    cJSON_ArrayForEach(p, a) {
        const cJSON *x = cJSON_GetArrayItem(p, 0), *y = cJSON_GetArrayItem(p, 1);
        i++;
        if (!cJSON_IsNumber(x) || !cJSON_IsNumber(y) || x->valuedouble != i || !(y->valuedouble > 0))
            return HS_FAIL(HS_ERR_FORMAT, "calibration: cost.%s entry %u must be [%u, seconds > 0]", key, i,
                           i);
        t[i] = y->valuedouble;
    }
    *n = i;
    return HS_OK;
}

hs_status hs_hx_model_from_json(const cJSON *o, hs_hx_model *m) {
    hs_status st = HS_OK;
    hs_hx_model r = *m;
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(o, "kind");
    if (!cJSON_IsString(kind) || strcmp(kind->valuestring, "heterospec-calibration"))
        return HS_FAIL(HS_ERR_FORMAT, "calibration: \"kind\" is not \"heterospec-calibration\"");
    double d = 0;
    if (cJSON_GetObjectItemCaseSensitive(o, "max_depth")) {
        HS_TRY(get_num(o, "max_depth", 1, HS_TREE_MAX_DEPTH - 1, &d));
        r.max_depth = (uint32_t)d;
        HS_TRY(get_num(o, "max_width", 1, HS_HX_MAX_WIDTH, &d));
        r.max_width = (uint32_t)d;
        HS_TRY(get_num(o, "max_verify", 1, HS_HX_MAX_N - 1, &d));
        r.max_verify = (uint32_t)d;
    }
    HS_TRY(get_opt_num(o, "rest", 0, HS_HX_MAX_REST, r.rest, &d));
    r.rest = (uint32_t)d;
    HS_TRY(get_opt_num(o, "heads", 0, HS_TREE_HEADS_MAX, 0, &d)); /* files before it: the default */
    r.heads = (uint32_t)d;
    HS_TRY(get_opt_num(o, "eager", 0, HS_TREE_EAGER_MAX, 0, &d)); /* files before it: never */
    r.eager = (uint32_t)d;
    const cJSON *plain = cJSON_GetObjectItemCaseSensitive(o, "plain");
    if (plain && !cJSON_IsBool(plain))
        return HS_FAIL(HS_ERR_FORMAT, "calibration: \"plain\" must be true or false");
    if (plain) r.plain = cJSON_IsTrue(plain);
    const cJSON *hl = cJSON_GetObjectItemCaseSensitive(o, "headless");
    if (hl) {
        const cJSON *use = cJSON_GetObjectItemCaseSensitive(hl, "use");
        if (!cJSON_IsBool(use))
            return HS_FAIL(HS_ERR_FORMAT, "calibration: headless.use must be true or false");
        r.headless = cJSON_IsTrue(use);
        HS_TRY(get_num(hl, "max_len", 0, HS_LOOKUP_MAX_LEN, &d));
        r.headless_len = (uint32_t)d;
        HS_TRY(get_num(hl, "min_match", 1, HS_LOOKUP_MAX_MATCH, &d));
        r.headless_min = (uint32_t)d;
    }
    const cJSON *sa = cJSON_GetObjectItemCaseSensitive(o, "strata");
    if (sa) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(o, "feature");
        int fi = -1;
        for (int i = 0; i < HS_HX_N_FEATURES && cJSON_IsString(f); i++)
            if (!strcmp(f->valuestring, feature_names[i])) fi = i;
        if (fi < 0)
            return HS_FAIL(HS_ERR_FORMAT,
                           "calibration: \"feature\" must be parent_ent, path_ent or mean_ent");
        r.feature = (hs_hx_feature)fi;
        const int n = cJSON_GetArraySize(sa);
        if (!cJSON_IsArray(sa) || n < 1 || n > HS_HX_MAX_STRATA)
            return HS_FAIL(HS_ERR_FORMAT, "calibration: \"strata\" must hold 1..%d strata", HS_HX_MAX_STRATA);
        r.n_strata = (uint32_t)n;
        for (int b = 0; b < n; b++) {
            const cJSON *j = cJSON_GetArrayItem(sa, b);
            hs_hx_stratum *s = &r.s[b];
            memset(s, 0, sizeof *s);
            const cJSON *lo = cJSON_GetObjectItemCaseSensitive(j, "lo"),
                        *hi = cJSON_GetObjectItemCaseSensitive(j, "hi");
            s->lo = cJSON_IsNumber(lo) ? (float)lo->valuedouble : -INFINITY;
            s->hi = cJSON_IsNumber(hi) ? (float)hi->valuedouble : INFINITY;
            if ((b == 0) != !cJSON_IsNumber(lo) || (b == n - 1) != !cJSON_IsNumber(hi) ||
                (b > 0 && s->lo != r.s[b - 1].hi))
                return HS_FAIL(
                    HS_ERR_FORMAT,
                    "calibration: stratum %d: edges must follow on (lo null only first, hi null only last)",
                    b);
            HS_TRY(get_num(j, "accept_rate", 0, 1, &d));
            s->rate = (float)d;
            HS_TRY(get_num(j, "look", 0, 1, &d));
            s->look = (float)d;
            HS_TRY(get_num(j, "depth_cap", 1, HS_TREE_MAX_DEPTH, &d));
            s->depth_cap = (uint32_t)d;
            HS_TRY(get_num(j, "prune", 0, 1, &d));
            s->prune = (float)d;
            HS_TRY(get_opt_num(j, "records", 0, 4e9, s->records, &d));
            s->records = (uint32_t)d;
            const cJSON *map = cJSON_GetObjectItemCaseSensitive(j, "map"), *p;
            if (!cJSON_IsArray(map) || cJSON_GetArraySize(map) > HS_HX_MAP_POINTS)
                return HS_FAIL(HS_ERR_FORMAT,
                               "calibration: stratum %d: \"map\" must list at most %d [q, p] knots", b,
                               HS_HX_MAP_POINTS);
            /* Order is checked on the numbers as written: cJSON prints 15 significant digits, which need not
             * be a float's exact value, but rounding keeps the order. */
            double last_q = -1, last_p = -1;
            cJSON_ArrayForEach(p, map) {
                const cJSON *q = cJSON_GetArrayItem(p, 0), *a = cJSON_GetArrayItem(p, 1);
                const uint32_t i = s->n_map;
                if (!cJSON_IsNumber(q) || !cJSON_IsNumber(a) ||
                    !(q->valuedouble >= 0 && q->valuedouble <= 1) ||
                    !(a->valuedouble >= 0 && a->valuedouble <= 1) ||
                    (i && (q->valuedouble <= last_q || a->valuedouble < last_p)))
                    return HS_FAIL(
                        HS_ERR_FORMAT,
                        "calibration: stratum %d map knot %u: q rising, p non-decreasing, both in [0, 1]", b,
                        i);
                s->map_q[i] = (float)q->valuedouble;
                s->map_p[i] = (float)a->valuedouble;
                last_q = q->valuedouble;
                last_p = a->valuedouble;
                s->n_map++;
            }
        }
    }
    const cJSON *lk = cJSON_GetObjectItemCaseSensitive(o, "lookup");
    if (lk) {
        hs_hx_lookup *l = &r.lookup;
        HS_TRY(get_num(lk, "max_len", 0, HS_LOOKUP_MAX_LEN, &d));
        l->max_len = (uint32_t)d;
        HS_TRY(get_num(lk, "min_match", 1, HS_LOOKUP_MAX_MATCH, &d));
        l->min_match = (uint32_t)d;
        HS_TRY(get_num(lk, "nodraft", 0, HS_LOOKUP_MAX_MATCH, &d));
        l->nodraft = (uint32_t)d;
        HS_TRY(get_opt_num(lk, "records", 0, 4e9, 0, &d));
        l->records = (uint32_t)d;
        if (!read_table(cJSON_GetObjectItemCaseSensitive(lk, "accept"), HS_HX_LK_MATCH, l->accept))
            return HS_FAIL(HS_ERR_FORMAT,
                           "calibration: lookup.accept must be %d rows of %d [lookup only, with the head, any] "
                           "triples of numbers in [0, 1]",
                           HS_HX_LK_MATCH, HS_HX_LK_POS);
        /* The n-gram store's (files before it have none: off). */
        l->store_len = l->store_records = 0;
        memset(l->store_accept, 0, sizeof l->store_accept);
        if (cJSON_GetObjectItemCaseSensitive(lk, "store_len")) {
            HS_TRY(get_num(lk, "store_len", 0, HS_LOOKUP_MAX_LEN, &d));
            l->store_len = (uint32_t)d;
            HS_TRY(get_opt_num(lk, "store_records", 0, 4e9, 0, &d));
            l->store_records = (uint32_t)d;
            if (!read_table(cJSON_GetObjectItemCaseSensitive(lk, "store_accept"), HS_NGRAM_CONF,
                            l->store_accept))
                return HS_FAIL(HS_ERR_FORMAT,
                               "calibration: lookup.store_accept must be %d rows of %d [store only, with the "
                               "head, any] triples of numbers in [0, 1]",
                               HS_NGRAM_CONF, HS_HX_LK_POS);
        }
    }
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(o, "feedback");
    if (fb) {
        HS_TRY(get_num(fb, "prior", 0, 1e6, &d));
        r.fb_prior = (float)d;
        HS_TRY(get_num(fb, "decay", 0, 1, &d));
        r.fb_decay = (float)d;
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(o, "cost");
    if (c) {
        HS_TRY(get_num(c, "t_consume_s", 0, 1e3, &r.cost.t_consume));
        HS_TRY(get_opt_num(c, "t_consume_cache_s", 0, 1e3, 0, &r.cost.t_consume_cache));
        HS_TRY(get_opt_num(c, "t_plain_s", 0, 1e3, 0, &r.cost.t_plain));
        HS_TRY(get_opt_num(c, "t_head_s", 0, 1e3, 0, &r.cost.t_head));
        HS_TRY(get_opt_num(c, "t_after_head_s", 0, 1e3, 0, &r.cost.t_after_head));
        HS_TRY(get_table(cJSON_GetObjectItemCaseSensitive(c, "verify_s"), "verify_s", HS_HX_MAX_N,
                         r.cost.t_verify, &r.cost.n_verify));
        r.cost.ctx0 = r.cost.ctx1 = 0;
        if (cJSON_GetObjectItemCaseSensitive(c, "verify_long_s")) {
            uint32_t n_long;
            HS_TRY(get_num(c, "ctx", 0, 1e7, &d));
            r.cost.ctx0 = (uint32_t)d;
            HS_TRY(get_num(c, "ctx_long", r.cost.ctx0 + 1, 1e7, &d));
            r.cost.ctx1 = (uint32_t)d;
            HS_TRY(get_table(cJSON_GetObjectItemCaseSensitive(c, "verify_long_s"), "verify_long_s",
                             HS_HX_MAX_N, r.cost.t_verify_long, &n_long));
            if (n_long != r.cost.n_verify)
                return HS_FAIL(HS_ERR_FORMAT,
                               "calibration: cost.verify_long_s must list as many entries as verify_s (%u)",
                               r.cost.n_verify);
        }
        HS_TRY(get_table(cJSON_GetObjectItemCaseSensitive(c, "draft_s"), "draft_s", HS_HX_MAX_WIDTH,
                         r.cost.t_draft, &r.cost.n_draft));
        r.cost.n_verify_all = 0;
        if (cJSON_GetObjectItemCaseSensitive(c, "verify_all_s")) {
            HS_TRY(get_table(cJSON_GetObjectItemCaseSensitive(c, "verify_all_s"), "verify_all_s",
                             HS_TREE_EAGER_MAX, r.cost.t_verify_all, &r.cost.n_verify_all));
            const cJSON *vl = cJSON_GetObjectItemCaseSensitive(c, "verify_all_long_s");
            if (r.cost.ctx1 > r.cost.ctx0) {
                uint32_t n_long = 0;
                if (vl)
                    HS_TRY(get_table(vl, "verify_all_long_s", HS_TREE_EAGER_MAX, r.cost.t_verify_all_long,
                                     &n_long));
                if (n_long != r.cost.n_verify_all)
                    return HS_FAIL(HS_ERR_FORMAT,
                                   "calibration: cost.verify_all_long_s must list as many entries as "
                                   "verify_all_s (%u)",
                                   r.cost.n_verify_all);
            }
        }
        memset(r.cost.t_heads, 0, sizeof r.cost.t_heads);
        const cJSON *hs = cJSON_GetObjectItemCaseSensitive(c, "heads_s");
        if (hs) { /* [[2, s], [4, s], ...] in order */
            uint32_t k = 2;
            const cJSON *p;
            if (!cJSON_IsArray(hs) || cJSON_GetArraySize(hs) < 1)
                return HS_FAIL(HS_ERR_FORMAT, "calibration: cost.heads_s must list [k, seconds] pairs");
            cJSON_ArrayForEach(p, hs) {
                const cJSON *x = cJSON_GetArrayItem(p, 0), *y = cJSON_GetArrayItem(p, 1);
                if (k > HS_HX_MAX_HEADS || !cJSON_IsNumber(x) || !cJSON_IsNumber(y) || x->valuedouble != k ||
                    !(y->valuedouble > 0 && y->valuedouble <= 1e3))
                    return HS_FAIL(HS_ERR_FORMAT,
                                   "calibration: cost.heads_s entry for k = %u must be [%u, seconds > 0] "
                                   "(k = 2, 4 .. %u)",
                                   k, k, HS_HX_MAX_HEADS);
                r.cost.t_heads[k] = y->valuedouble;
                k *= 2;
            }
        }
    }
    *m = r;
fail:
    return st;
}

void hs_hx_model_default(hs_hx_model *m) {
    memset(m, 0, sizeof *m);
    m->feature = HS_HX_PARENT_ENT;
    m->n_strata = 1;
    /* Acceptance as likely as the draft says, a child as likely as not. */
    m->s[0] = (hs_hx_stratum){.lo = -INFINITY,
                              .hi = INFINITY,
                              .n_map = 2,
                              .map_q = {0, 1},
                              .map_p = {0, 1},
                              .rate = 0.5f,
                              .look = 0.5f,
                              .depth_cap = 6};
    m->max_depth = 6;
    m->max_width = 8;
    m->max_verify = 32;
    /* A GPU-like cost in units of one decoding step: verifying 64 nodes costs
     * two steps, a draft level a tenth of one. */
    m->cost.n_verify = 2;
    m->cost.t_verify[1] = 1.0;
    m->cost.t_verify[2] = 1.0 + 1.0 / 63;
    m->cost.n_draft = 2;
    m->cost.t_draft[1] = 0.1;
    m->cost.t_draft[2] = 0.1 + 0.1 / 63;
    m->cost.t_consume = 0.1;
    /* Context lookup on, valued by a guess (calibration measures it): a
     * chain continuing a longer match is likelier to be right. */
    m->lookup.max_len = 8;
    m->lookup.min_match = 2;
    m->headless_len = 3; /* as --spec lookup */
    m->headless_min = 2;
    /* The guessed maps are what feedback is for. */
    m->fb_prior = 4.0f;
    m->fb_decay = 0.9f;
    for (uint32_t mb = 0; mb < HS_HX_LK_MATCH; mb++)
        for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
            for (uint32_t h = 0; h < HS_HX_LK_COLS; h++)
                m->lookup.accept[mb][pb][h] = 0.3f + 0.15f * (float)mb;
}
