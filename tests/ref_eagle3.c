/* ref_eagle3: see ref_eagle3.h. */
#include "ref_eagle3.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct ref_eagle3 {
    const ref_eagle3_weights *w;
    uint32_t n_ctx, max_nodes, n_past, n_slots;
    double *k, *v;    /* [n_ctx][n_kv_head head_dim] */
    double *hidden;   /* [1 + max_nodes][dim] */
    uint32_t *parent; /* [1 + max_nodes] */
    uint32_t *depth;  /* [1 + max_nodes] */
};

ref_eagle3 *ref_eagle3_create(const ref_eagle3_weights *w, uint32_t n_ctx, uint32_t max_nodes) {
    ref_eagle3 *r = calloc(1, sizeof *r);
    const size_t kv_dim = (size_t)w->n_kv_head * w->head_dim;
    r->w = w;
    r->n_ctx = n_ctx;
    r->max_nodes = max_nodes;
    r->k = calloc((size_t)n_ctx * kv_dim, sizeof *r->k);
    r->v = calloc((size_t)n_ctx * kv_dim, sizeof *r->v);
    r->hidden = calloc((1 + (size_t)max_nodes) * w->dim, sizeof *r->hidden);
    r->parent = calloc(1 + (size_t)max_nodes, sizeof *r->parent);
    r->depth = calloc(1 + (size_t)max_nodes, sizeof *r->depth);
    return r;
}

void ref_eagle3_destroy(ref_eagle3 *r) {
    if (!r) return;
    free(r->k), free(r->v), free(r->hidden), free(r->parent), free(r->depth);
    free(r);
}

void ref_eagle3_reset(ref_eagle3 *r) { r->n_past = r->n_slots = 0; }
void ref_eagle3_reset_tree(ref_eagle3 *r) { r->n_slots = 0; }

/* y [rows] = W [rows][cols] x [cols] */
static void matvec(const float *W, uint32_t rows, uint32_t cols, const double *x, double *y) {
    for (uint32_t i = 0; i < rows; i++) {
        double s = 0;
        for (uint32_t j = 0; j < cols; j++)
            s += (double)W[(size_t)i * cols + j] * x[j];
        y[i] = s;
    }
}

static void rmsnorm(const double *x, const float *g, uint32_t n, double eps, double *y) {
    double ss = 0;
    for (uint32_t i = 0; i < n; i++)
        ss += x[i] * x[i];
    const double inv = 1.0 / sqrt(ss / n + eps);
    for (uint32_t i = 0; i < n; i++)
        y[i] = x[i] * inv * g[i];
}

/* NEOX: pairs (i, i + hd/2), theta_i = pos * base^(-2i / hd). */
static void rope_neox(double *x, uint32_t hd, uint32_t pos, double base) {
    for (uint32_t i = 0; i < hd / 2; i++) {
        const double th = pos * pow(base, -2.0 * i / hd), c = cos(th), s = sin(th);
        const double a = x[i], b = x[i + hd / 2];
        x[i] = a * c - b * s;
        x[i + hd / 2] = a * s + b * c;
    }
}

/* One row: x [dim] in (the residual stream) and out (the layer output),
 * token, position, its cache row and the rows it sees (itself last). */
static void row(ref_eagle3 *r, double *x, int32_t token, uint32_t pos, uint32_t cache_row,
                const uint32_t *vis, uint32_t n_vis) {
    const ref_eagle3_weights *w = r->w;
    const uint32_t D = w->dim, hd = w->head_dim, qd = w->n_head * hd, kvd = w->n_kv_head * hd;
    double *u = malloc(sizeof(double) * 2 * D), *e = malloc(sizeof(double) * D);
    double *q = malloc(sizeof(double) * qd), *att = malloc(sizeof(double) * qd);
    double *tmp = malloc(sizeof(double) * (D > w->ff ? D : w->ff) * 2), *sc = malloc(sizeof(double) * n_vis);
    for (uint32_t i = 0; i < D; i++)
        e[i] = w->embd[(size_t)token * D + i];
    rmsnorm(e, w->attn_norm, D, w->eps, u);
    rmsnorm(x, w->hidden_norm, D, w->eps, u + D);
    matvec(w->wq, qd, 2 * D, u, q);
    double *k = r->k + (size_t)cache_row * kvd, *v = r->v + (size_t)cache_row * kvd;
    matvec(w->wk, kvd, 2 * D, u, k);
    matvec(w->wv, kvd, 2 * D, u, v);
    for (uint32_t h = 0; h < w->n_head; h++)
        rope_neox(q + h * hd, hd, pos, w->rope_base);
    for (uint32_t h = 0; h < w->n_kv_head; h++)
        rope_neox(k + h * hd, hd, pos, w->rope_base);
    const uint32_t group = w->n_head / w->n_kv_head;
    for (uint32_t h = 0; h < w->n_head; h++) {
        const uint32_t kh = h / group;
        double mx = -INFINITY, sum = 0;
        for (uint32_t t = 0; t < n_vis; t++) {
            const double *kr = r->k + (size_t)vis[t] * kvd + kh * hd;
            double s = 0;
            for (uint32_t d = 0; d < hd; d++)
                s += q[h * hd + d] * kr[d];
            sc[t] = s / sqrt((double)hd);
            if (sc[t] > mx) mx = sc[t];
        }
        for (uint32_t d = 0; d < hd; d++)
            att[h * hd + d] = 0;
        for (uint32_t t = 0; t < n_vis; t++) {
            const double p = exp(sc[t] - mx), *vr = r->v + (size_t)vis[t] * kvd + kh * hd;
            sum += p;
            for (uint32_t d = 0; d < hd; d++)
                att[h * hd + d] += p * vr[d];
        }
        for (uint32_t d = 0; d < hd; d++)
            att[h * hd + d] /= sum;
    }
    matvec(w->wo, D, qd, att, tmp);
    for (uint32_t i = 0; i < D; i++)
        x[i] += tmp[i];
    rmsnorm(x, w->ffn_norm, D, w->eps, e);
    double *g = tmp, *up = tmp + w->ff;
    matvec(w->wgate, w->ff, D, e, g);
    matvec(w->wup, w->ff, D, e, up);
    for (uint32_t i = 0; i < w->ff; i++)
        g[i] = g[i] / (1.0 + exp(-g[i])) * up[i];
    matvec(w->wdown, D, w->ff, g, e);
    for (uint32_t i = 0; i < D; i++)
        x[i] += e[i];
    free(u), free(e), free(q), free(att), free(tmp), free(sc);
}

static void head_logits(const ref_eagle3 *r, const double *x, double *logits) {
    const ref_eagle3_weights *w = r->w;
    double *n = malloc(sizeof(double) * w->dim);
    rmsnorm(x, w->output_norm, w->dim, w->eps, n);
    matvec(w->out, w->n_draft_vocab, w->dim, n, logits);
    free(n);
}

void ref_eagle3_consume(ref_eagle3 *r, const float *feats, const int32_t *tokens, uint32_t n,
                        double *logits) {
    const ref_eagle3_weights *w = r->w;
    const uint32_t F = 3 * w->target_dim;
    double *f = malloc(sizeof(double) * F), *x = malloc(sizeof(double) * w->dim);
    uint32_t *vis = malloc(sizeof(uint32_t) * (r->n_past + n));
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t j = 0; j < F; j++)
            f[j] = feats[(size_t)i * F + j];
        matvec(w->fc, w->dim, F, f, x);
        const uint32_t at = r->n_past + i;
        for (uint32_t t = 0; t <= at; t++)
            vis[t] = t; /* causal */
        row(r, x, tokens[i], at, at, vis, at + 1);
    }
    memcpy(r->hidden, x, sizeof(double) * w->dim);
    r->n_past += n;
    r->n_slots = 0;
    r->depth[0] = 0;
    head_logits(r, x, logits);
    free(f), free(x), free(vis);
}

void ref_eagle3_draft(ref_eagle3 *r, const uint32_t *parents, const int32_t *tokens, uint32_t w_,
                      double *logits) {
    const ref_eagle3_weights *w = r->w;
    double *x = malloc(sizeof(double) * w->dim);
    uint32_t *vis = malloc(sizeof(uint32_t) * (r->n_past + r->max_nodes + 1));
    const uint32_t first = r->n_slots + 1;
    for (uint32_t i = 0; i < w_; i++) {
        const uint32_t s = first + i, p = parents[i];
        r->parent[s] = p;
        r->depth[s] = r->depth[p] + 1;
        memcpy(x, r->hidden + (size_t)p * w->dim, sizeof(double) * w->dim);
        /* The committed rows, the ancestors' rows (slot a at n_past + a - 1), its own. */
        uint32_t nv = 0;
        for (uint32_t t = 0; t < r->n_past; t++)
            vis[nv++] = t;
        for (uint32_t a = p; a != 0; a = r->parent[a])
            vis[nv++] = r->n_past + a - 1;
        vis[nv++] = r->n_past + s - 1;
        row(r, x, tokens[i], r->n_past - 1 + r->depth[s], r->n_past + s - 1, vis, nv);
        memcpy(r->hidden + (size_t)s * w->dim, x, sizeof(double) * w->dim);
        head_logits(r, x, logits + (size_t)i * w->n_draft_vocab);
    }
    r->n_slots += w_;
    free(x), free(vis);
}

void ref_eagle3_probs(const double *logits, uint32_t V, double *probs) {
    double mx = -INFINITY, sum = 0;
    for (uint32_t i = 0; i < V; i++)
        mx = logits[i] > mx ? logits[i] : mx;
    for (uint32_t i = 0; i < V; i++)
        sum += probs[i] = exp(logits[i] - mx);
    for (uint32_t i = 0; i < V; i++)
        probs[i] /= sum;
}

void ref_eagle3_topk(const double *logits, uint32_t V, uint32_t k, const int32_t *d2t, hs_topk_result *res) {
    double *p = malloc(sizeof(double) * V);
    char *taken = calloc(V, 1);
    ref_eagle3_probs(logits, V, p);
    memset(res, 0, sizeof *res);
    res->k = k;
    double top = 0, h = 0;
    for (uint32_t j = 0; j < k; j++) {
        uint32_t best = V;
        for (uint32_t i = 0; i < V; i++)
            if (!taken[i] && (best == V || p[i] > p[best])) best = i;
        taken[best] = 1;
        res->ids[j] = (uint32_t)((int32_t)best + d2t[best]);
        res->probs[j] = (float)p[best];
        top += p[best];
        if (p[best] > 0) h -= p[best] * log(p[best]);
    }
    double tail = 0, mx = -INFINITY, sum = 0;
    for (uint32_t i = 0; i < V; i++) {
        if (!taken[i]) tail += p[i];
        mx = logits[i] > mx ? logits[i] : mx;
    }
    for (uint32_t i = 0; i < V; i++)
        sum += exp(logits[i] - mx);
    if (tail > 0) h -= tail * log(tail);
    h /= log(k + 1.0);
    res->tail = (float)tail;
    res->entropy = (float)(h < 0 ? 0 : h > 1 ? 1 : h);
    res->max_logit = (float)mx;
    res->lse = (float)(mx + log(sum));
    (void)top;
    free(p), free(taken);
}
