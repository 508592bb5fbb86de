/* hx_calib: records, replay and search for HeteroSpec calibration (hx_calib.h). */
#include "hx_calib.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "stb_ds.h"

hs_status hs_hx_round_copy(const hs_tree *t, const int32_t *lookup, uint32_t n_lookup, uint32_t match,
                           hs_hx_round *r) {
    memset(r, 0, sizeof *r);
    if (n_lookup > HS_LOOKUP_MAX_LEN) n_lookup = HS_LOOKUP_MAX_LEN;
    if (n_lookup) memcpy(r->lookup, lookup, sizeof *lookup * n_lookup);
    r->n_lookup = n_lookup;
    r->lookup_match = match;
    r->nodes = malloc(sizeof *r->nodes * t->n);
    if (!r->nodes) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_hx_round_copy: out of memory");
    memcpy(r->nodes, t->nodes, sizeof *r->nodes * t->n);
    r->n = t->n;
    r->ctx = t->ctx;
    for (uint32_t i = 0; i < HS_TREE_MAX_DEPTH; i++)
        r->truth[i] = -1;
    return HS_OK;
}

void hs_hx_round_set_store(hs_hx_round *r, const int32_t *tokens, const uint8_t *conf, uint32_t n) {
    if (n > HS_LOOKUP_MAX_LEN) n = HS_LOOKUP_MAX_LEN;
    if (n) {
        memcpy(r->store, tokens, sizeof *tokens * n);
        memcpy(r->store_conf, conf, sizeof *conf * n);
    }
    r->n_store = n;
}

hs_status hs_hx_text_rounds(const int32_t *prompt, uint32_t n_prompt, const int32_t *ids, uint32_t n_gen,
                            const hs_ngram *store, hs_hx_round **out) {
    int32_t *hist = malloc(sizeof *hist * ((size_t)n_prompt + n_gen + 1));
    if (!hist) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_hx_text_rounds: out of memory");
    if (n_prompt) memcpy(hist, prompt, sizeof *hist * n_prompt);
    if (n_gen) memcpy(hist + n_prompt, ids, sizeof *hist * n_gen);
    for (uint32_t p = 0; p + 1 < n_gen; p++) { /* no round after the last token: nothing is left to decide */
        hs_hx_round r;
        memset(&r, 0, sizeof r);
        r.nodes = calloc(1, sizeof *r.nodes);
        if (!r.nodes) {
            free(hist);
            return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_hx_text_rounds: out of memory");
        }
        r.nodes[0] = (hs_tree_node){.token = ids[p], .parent = -1, .entropy = -1.0f, .slot = 0}; /* a root */
        r.n = 1;
        r.ctx = n_prompt + p;
        r.first = p == 0;
        const uint32_t n_hist = n_prompt + p + 1; /* the root included */
        r.n_lookup = hs_lookup(hist, n_hist, 1, HS_LOOKUP_MAX_LEN, r.lookup, &r.lookup_match);
        if (store) r.n_store = hs_ngram_chain(store, hist, n_hist, HS_LOOKUP_MAX_LEN, r.store, r.store_conf);
        hs_hx_round_set_truth(&r, ids, n_gen, p);
        stbds_arrput(*out, r);
    }
    free(hist);
    return HS_OK;
}

void hs_hx_round_free(hs_hx_round *r) {
    free(r->nodes);
    memset(r, 0, sizeof *r);
}

void hs_hx_round_set_truth(hs_hx_round *r, const int32_t *ids, uint32_t n_ids, uint32_t pos) {
    for (uint32_t i = 0; i < HS_TREE_MAX_DEPTH; i++)
        r->truth[i] = pos + 1 + i < n_ids ? ids[pos + 1 + i] : -1;
}

void hs_hx_recorder_observe(void *user, const hs_spec_round_info *info) {
    hs_hx_recorder *rec = user;
    hs_hx_round r;
    if (rec->st != HS_OK) return;
    rec->st = hs_hx_round_copy(info->tree, info->lookup, info->n_lookup, info->lookup_match, &r);
    if (rec->st != HS_OK) return;
    hs_hx_round_set_store(&r, info->store, info->store_conf, info->n_store);
    r.first = rec->next_pos == 0;
    stbds_arrput(rec->rounds, r);
    stbds_arrput(rec->pos, rec->next_pos);
    rec->next_pos += info->len; /* the accepted drafts and the bonus: the next root */
}

void hs_hx_recorder_start(hs_hx_recorder *r) {
    r->next_pos = 0;
    r->first = (uint32_t)stbds_arrlen(r->rounds);
}

hs_status hs_hx_recorder_finish(hs_hx_recorder *r, const int32_t *ids, uint32_t n_gen) {
    for (ptrdiff_t i = r->first; r->st == HS_OK && i < stbds_arrlen(r->rounds); i++)
        hs_hx_round_set_truth(&r->rounds[i], ids, n_gen, r->pos[i]);
    return r->st;
}

void hs_hx_rounds_free(hs_hx_round **rounds) {
    for (ptrdiff_t i = 0; i < stbds_arrlen(*rounds); i++)
        hs_hx_round_free(&(*rounds)[i]);
    stbds_arrfree(*rounds);
}

void hs_hx_recorder_free(hs_hx_recorder *r) {
    hs_hx_rounds_free(&r->rounds);
    stbds_arrfree(r->pos);
    memset(r, 0, sizeof *r);
}

/* Whether node v's path spells the truth (the root always does). */
static bool on_truth(const hs_hx_round *r, uint32_t v) {
    for (; v != 0; v = (uint32_t)r->nodes[v].parent) {
        const hs_tree_node *x = &r->nodes[v];
        if (x->depth > HS_TREE_MAX_DEPTH || x->token != r->truth[x->depth - 1]) return false;
    }
    return true;
}

hs_status hs_hx_round_records(const hs_hx_round *r, hs_hx_record **out) {
    for (uint32_t v = 1; v < r->n; v++) {
        const hs_tree_node *x = &r->nodes[v];
        if (!(x->src & HS_NODE_HEAD) || x->depth > HS_TREE_MAX_DEPTH || r->truth[x->depth - 1] < 0 ||
            !on_truth(r, (uint32_t)x->parent))
            continue;
        hs_hx_record rec = {.q = x->q,
                            .parent_ent = x->parent_ent,
                            .path_ent = x->path_ent,
                            .depth = x->depth,
                            .accepted = x->token == r->truth[x->depth - 1]};
        if (rec.accepted && x->slot >= 0 && x->n_children > 0 && x->depth < HS_TREE_MAX_DEPTH &&
            r->truth[x->depth] >= 0) {
            rec.children_tried = true;
            for (uint32_t c = x->first_child; c < x->first_child + x->n_children; c++)
                rec.child_accepted = rec.child_accepted || r->nodes[c].token == r->truth[x->depth];
        }
        stbds_arrput(*out, rec);
    }
    return HS_OK;
}

/* The records of one chain (match 0: the store's, with conf). */
static void chain_records(const hs_hx_round *r, const int32_t *chain, const uint8_t *conf, uint32_t n,
                          uint32_t match, hs_hx_lookup_record **out) {
    /* The chain as it would be merged: whether the head proposed each token
     * is read off the recorded tree (a child of the chain's previous node). */
    int32_t cur = 0;
    for (uint32_t i = 0; i < n && i < HS_TREE_MAX_DEPTH && r->truth[i] >= 0; i++) {
        int32_t c = -1;
        for (uint32_t v = (uint32_t)cur + 1; cur >= 0 && v < r->n && c < 0; v++)
            if (r->nodes[v].parent == cur && (r->nodes[v].src & HS_NODE_HEAD) && r->nodes[v].token == chain[i])
                c = (int32_t)v;
        const hs_hx_lookup_record rec = {.match = match,
                                         .pos = i,
                                         .conf = conf ? conf[i] : 0,
                                         .head = c >= 0,
                                         .accepted = chain[i] == r->truth[i]};
        stbds_arrput(*out, rec);
        if (!rec.accepted) break;
        cur = c; /* -1: below a lookup-only node the head proposed nothing */
    }
}

hs_status hs_hx_round_lookup_records(const hs_hx_round *r, hs_hx_lookup_record **out) {
    chain_records(r, r->lookup, NULL, r->n_lookup, r->lookup_match, out);
    chain_records(r, r->store, r->store_conf, r->n_store, 0, out);
    return HS_OK;
}

double hs_hx_replay_tps(const hs_hx_replay_result *r) { return r->time_s > 0 ? r->tokens / r->time_s : 0; }
double hs_hx_replay_speedup(const hs_hx_replay_result *r) {
    return r->time_s > 0 ? r->plain_s / r->time_s : 0;
}

bool hs_hx_speculation_pays(const hs_hx_replay_result *r) {
    return hs_hx_replay_speedup(r) > 1.0; /* 0 for a replay of nothing */
}

/* A plain decoding step after ctx rows: the measured step, plus what the
 * context adds to a one-token pass. */
static double plain_at(const hs_hx_cost *c, uint32_t ctx) {
    const double t1 = hs_hx_t_verify(c, 1);
    return (c->t_plain > 0 ? c->t_plain : t1) + hs_hx_t_verify_at(c, 1, ctx) - t1;
}

double hs_hx_chain_bound(const hs_hx_cost *c, uint32_t ctx, double a, bool head, uint32_t max_d,
                         uint32_t *best_d) {
    double best = 0, e = 0, p = 1;
    uint32_t arg = 0;
    for (uint32_t d = 0; d <= max_d; d++) {
        if (d) {
            p *= a;
            e += p; /* expected accepted of d drafted */
        }
        double t = hs_hx_t_verify_at(c, d + 1, ctx) + e * c->t_head;
        if (hs_hx_eager(c, HS_TREE_EAGER_MAX, d + 1) && hs_hx_t_verify_all_at(c, d + 1, ctx) < t)
            t = hs_hx_t_verify_all_at(c, d + 1, ctx); /* every head in the pass */
        if (head) t += hs_hx_t_head_round(c, false) + (d > 1 ? (d - 1) * hs_hx_t_draft(c, 1) : 0);
        const double s = (1 + e) * plain_at(c, ctx) / t;
        if (s > best) {
            best = s;
            arg = d;
        }
    }
    if (best_d) *best_d = arg;
    return best;
}

double hs_hx_chain_needs(const hs_hx_cost *c, uint32_t ctx, double speedup, bool head, uint32_t max_d) {
    if (hs_hx_chain_bound(c, ctx, 1.0, head, max_d, NULL) < speedup) return 2.0;
    double lo = 0, hi = 1; /* the bound rises with a */
    while (hi - lo > 1e-4) {
        const double mid = 0.5 * (lo + hi);
        if (hs_hx_chain_bound(c, ctx, mid, head, max_d, NULL) >= speedup)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

/* Adds one replayed round: its decided tokens, modelled time and verified nodes. */
static void tally(hs_hx_replay_result *out, const hs_hx_cost *c, uint32_t ctx, double tokens, double time,
                  double verified) {
    out->tokens += tokens;
    out->time_s += time;
    out->plain_s += tokens * plain_at(c, ctx);
    out->verified += verified;
    out->rounds++;
}

/* Adds the recorded children of recorded node `rec` under replay node `at`. */
static void copy_children(const hs_hx_round *r, uint32_t rec, hs_tree *t, uint32_t at, uint32_t *rec_of) {
    const hs_tree_node *x = &r->nodes[rec];
    hs_tree_node *p = &t->nodes[at];
    p->entropy = x->entropy;
    p->first_child = t->n;
    p->n_children = x->n_children;
    for (uint32_t c = 0; c < x->n_children; c++) {
        hs_tree_node n = r->nodes[x->first_child + c];
        n.parent = (int32_t)at;
        n.slot = -1;
        n.entropy = -1.0f;
        n.first_child = n.n_children = 0;
        n.src = HS_NODE_HEAD; /* the replay merges the lookup chain itself */
        n.match = n.lpos = 0;
        rec_of[t->n] = x->first_child + c;
        t->nodes[t->n++] = n;
    }
}

hs_status hs_hx_replay(const hs_tree_policy *p, const hs_hx_cost *cost, const hs_hx_round *rounds, uint32_t n,
                       hs_hx_replay_result *out) {
    hs_status st = HS_OK;
    memset(out, 0, sizeof *out);
    uint32_t cap = 1;
    for (uint32_t i = 0; i < n; i++)
        if (rounds[i].n > cap) cap = rounds[i].n;
    cap += HS_LOOKUP_MAX_LEN;
    hs_tree t = {0};
    uint32_t *rec_of = malloc(sizeof *rec_of * cap), *sel = malloc(sizeof *sel * cap);
    uint32_t *list_nodes = malloc(sizeof *list_nodes * (cap + 1)), *path = malloc(sizeof *path * (cap + 1));
    int32_t *list_tok = malloc(sizeof *list_tok * (cap + 1));
    int32_t *list_par = malloc(sizeof *list_par * (cap + 1));
    if (!rec_of || !sel || !list_nodes || !path || !list_tok || !list_par) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_hx_replay: out of memory");
        goto fail;
    }
    HS_TRY(hs_tree_init(&t, cap));
    uint32_t rest_left = 0;
    /* The replayed generation: the context of its last round and the one it reached. */
    uint32_t last_ctx = 0, reached = 0;
    for (uint32_t i = 0; i < n; i++) {
        const hs_hx_round *r = &rounds[i];
        if (r->first) {
            hs_tree_feedback_reset(&t);
            rest_left = 0;
        } else if (r->ctx > last_ctx && r->ctx < reached) {
            out->skipped++; /* the replay already decided this round's root */
            continue;
        }
        last_ctx = r->ctx;
        if (rest_left) {
            reached = r->ctx + 1;
            rest_left--;
            tally(out, cost, r->ctx, 1, hs_hx_t_head_round(cost, true) + hs_hx_t_verify_at(cost, 1, r->ctx),
                  1);
            out->rest_rounds++;
            if (p->observe) { /* a round that verified the root alone */
                const uint32_t zero = 0;
                const int32_t none = -1;
                p->observe(p, &t, &zero, &none, 1, &zero, 1);
            }
            continue;
        }
        hs_tree_reset(&t, r->nodes[0].token);
        t.ctx = r->ctx;
        rec_of[0] = 0;
        /* Without a head: no consume, no Top-K of the root, only the lookup's nodes. */
        if (r->nodes[0].n_children && !p->headless) copy_children(r, 0, &t, 0, rec_of);
        double time = p->headless ? 0 : hs_hx_t_head_round(cost, false);
        const uint32_t n_lk = p->lookup && r->lookup_match >= (p->lookup_min ? p->lookup_min : 1)
                                  ? (r->n_lookup < p->lookup ? r->n_lookup : p->lookup)
                                  : 0;
        const bool no_draft = n_lk && p->lookup_nodraft && r->lookup_match >= p->lookup_nodraft;
        for (uint32_t level = 1; level < HS_TREE_MAX_DEPTH && !no_draft; level++) {
            const uint32_t w = p->expand(p, &t, level, sel, cap);
            if (w == 0) break;
            time += hs_hx_t_draft(cost, w);
            for (uint32_t k = 0; k < w; k++) {
                const uint32_t v = sel[k], rec = rec_of[v];
                t.nodes[v].slot = 1; /* drafted */
                if (r->nodes[rec].slot >= 0 && r->nodes[rec].n_children &&
                    t.n + r->nodes[rec].n_children <= cap)
                    copy_children(r, rec, &t, v, rec_of);
                else
                    out->unknown++;
            }
        }
        if (n_lk)
            HS_TRY(hs_tree_add_lookup(&t, r->lookup, n_lk, r->lookup_match));
        else if (p->store_len && r->n_store)
            HS_TRY(hs_tree_add_store(&t, r->store, r->store_conf,
                                     r->n_store < p->store_len ? r->n_store : p->store_len));
        const uint32_t ns = p->select(p, &t, sel, cap);
        /* Every head in the pass, none after (where the cost has it measured). */
        const bool eager = hs_hx_eager(cost, p->eager, ns + 1) && hs_tree_eager(p, &t, sel, ns);
        time += eager ? hs_hx_t_verify_all_at(cost, ns + 1, r->ctx) : hs_hx_t_verify_at(cost, ns + 1, r->ctx);
        if (ns == 0 && !p->headless) rest_left = p->rest;
        /* Walk the truth down the selected nodes. */
        uint8_t *in = calloc(t.n, 1);
        if (!in) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_hx_replay: out of memory");
            goto fail;
        }
        for (uint32_t k = 0; k < ns; k++)
            in[sel[k]] = 1;
        uint32_t cur = 0, acc = 0;
        for (bool more = true; more && acc < HS_TREE_MAX_DEPTH && r->truth[acc] >= 0;) {
            more = false;
            for (uint32_t c = cur + 1; c < t.n; c++)
                if (in[c] && t.nodes[c].parent == (int32_t)cur && t.nodes[c].token == r->truth[acc]) {
                    in[c] = 2; /* on the accepted path */
                    cur = c;
                    acc++;
                    more = true;
                    break;
                }
        }
        /* The verification list as the generation makes it, and its path, where something reads them:
         * the output heads the walk computes past the root (hs_tree_heads_k from each accepted entry no
         * earlier product covered), and the feedback. */
        const bool list = acc > 0 || p->observe;
        const hs_status vs = list ? hs_tree_verify_list(&t, sel, ns, list_tok, list_par, list_nodes) : HS_OK;
        if (list && vs == HS_OK) {
            uint32_t len = 0;
            for (uint32_t k = 0; k <= ns; k++)
                if (k == 0 || in[list_nodes[k]] == 2) path[len++] = k;
            for (uint32_t k = 1, end = 0; k < len && !eager; k++)
                if (path[k] >= end) {
                    const uint32_t h = hs_tree_heads_k(list_par, ns + 1, path[k], p->heads);
                    time += hs_hx_t_heads(cost, h);
                    end = path[k] + h;
                }
            if (p->observe) p->observe(p, &t, list_nodes, list_par, ns + 1, path, len);
        }
        free(in);
        if (vs != HS_OK) {
            st = vs;
            goto fail;
        }
        tally(out, cost, r->ctx, acc + 1, time, ns + 1);
        reached = r->ctx + acc + 1;
    }
fail:
    hs_tree_free(&t);
    free(rec_of);
    free(sel);
    free(list_nodes);
    free(path);
    free(list_tok);
    free(list_par);
    return st;
}

/* m->rest by replays, if one beats *best (updated). */
static hs_status search_rest(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n,
                             hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    static const uint32_t rests[] = {0, 1, 2, 3, 4, 6, 8, 12, 16};
    const uint32_t rest0 = m->rest;
    const hs_tree_policy p = hs_heterospec_policy(m);
    for (uint32_t i = 0; i < sizeof rests / sizeof *rests; i++) {
        if (rests[i] == rest0) continue;
        hs_tree_policy q = p;
        q.rest = rests[i];
        hs_hx_replay_result r;
        HS_TRY(hs_hx_replay(&q, &m->cost, rounds, n, &r));
        if (hs_hx_replay_tps(&r) > hs_hx_replay_tps(best) * (1 + 1e-6)) {
            *best = r;
            m->rest = rests[i];
        }
    }
fail:
    return st;
}

/* Per-stratum prune and depth_cap by coordinate search (passes over the
 * strata), if a setting beats *best (updated). */
static hs_status search_strata(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n, int passes,
                               hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    static const float prunes[] = {0.0f, 0.02f, 0.05f, 0.1f, 0.2f, 0.35f, 0.5f};
    const hs_tree_policy p = hs_heterospec_policy(m); /* reads the strata of *m as they change */
    for (int pass = 0; pass < passes; pass++)
        for (uint32_t b = 0; b < m->n_strata; b++) {
            hs_hx_stratum *s = &m->s[b];
            float best_prune = s->prune;
            uint32_t best_cap = s->depth_cap;
            for (uint32_t cap = 1; cap <= m->max_depth; cap++)
                for (uint32_t i = 0; i < sizeof prunes / sizeof prunes[0]; i++) {
                    s->depth_cap = cap;
                    s->prune = prunes[i];
                    hs_hx_replay_result r;
                    HS_TRY(hs_hx_replay(&p, &m->cost, rounds, n, &r));
                    if (hs_hx_replay_tps(&r) > hs_hx_replay_tps(best) * (1 + 1e-6)) {
                        *best = r;
                        best_prune = prunes[i];
                        best_cap = cap;
                    }
                }
            s->prune = best_prune;
            s->depth_cap = best_cap;
        }
fail:
    return st;
}

/* Replays the policy of *trial; keeps it as *m (and its replay as *best) if it beats *best. */
static hs_status try_model(hs_hx_model *m, const hs_hx_model *trial, const hs_hx_round *rounds, uint32_t n,
                           hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    const hs_tree_policy q = hs_heterospec_policy(trial);
    hs_hx_replay_result r;
    HS_TRY(hs_hx_replay(&q, &trial->cost, rounds, n, &r));
    if (hs_hx_replay_tps(&r) > hs_hx_replay_tps(best) * (1 + 1e-6)) {
        *best = r;
        *m = *trial;
    }
fail:
    return st;
}

/* The n-gram store's chain length (0: off), if one beats *best (updated);
 * only where the rounds recorded store chains. */
static hs_status search_store(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n, hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    static const uint32_t lens[] = {0, 1, 2, 3, 4, 6, 8, 12, 16};
    bool any = false;
    for (uint32_t i = 0; i < n && !any; i++)
        any = rounds[i].n_store > 0;
    for (uint32_t a = 0; any && a < sizeof lens / sizeof *lens; a++) {
        hs_hx_model t = *m;
        t.lookup.store_len = lens[a];
        HS_TRY(try_model(m, &t, rounds, n, best));
    }
fail:
    return st;
}

/* The lookup's chain length and shortest match, then the match that skips
 * drafting, if a setting beats *best (updated). */
static hs_status search_lookup(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n,
                               hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    static const uint32_t lens[] = {0, 2, 3, 4, 6, 8, 12, 16}, mins[] = {1, 2, 3, 4},
                          nodrafts[] = {0, 2, 3, 4, 6, 8};
    for (uint32_t a = 0; a < sizeof lens / sizeof *lens; a++)
        for (uint32_t b = 0; b < sizeof mins / sizeof *mins; b++) {
            hs_hx_model t = *m;
            t.lookup.max_len = lens[a];
            t.lookup.min_match = mins[b];
            HS_TRY(try_model(m, &t, rounds, n, best));
        }
    for (uint32_t c = 0; m->lookup.max_len && c < sizeof nodrafts / sizeof *nodrafts; c++) {
        hs_hx_model t = *m;
        t.lookup.nodraft = nodrafts[c];
        HS_TRY(try_model(m, &t, rounds, n, best));
    }
    HS_TRY(search_store(m, rounds, n, best));
fail:
    return st;
}

/* The feedback's prior and decay (prior 0: off), if a setting beats *best (updated). */
static hs_status search_feedback(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n,
                                 hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    static const float priors[] = {0, 1, 2, 4, 8, 16}, decays[] = {0.5f, 0.7f, 0.8f, 0.9f, 0.95f};
    for (uint32_t a = 0; a < sizeof priors / sizeof *priors; a++)
        for (uint32_t b = 0; b < (priors[a] > 0 ? sizeof decays / sizeof *decays : 1); b++) {
            hs_hx_model t = *m;
            t.fb_prior = priors[a];
            t.fb_decay = decays[b];
            HS_TRY(try_model(m, &t, rounds, n, best));
        }
fail:
    return st;
}

/* The output heads computed at once along a chain (hs_tree_policy.heads), then the largest list whose
 * pass computes every head (hs_tree_policy.eager; where the cost has it measured), if a setting beats
 * *best. */
static hs_status search_heads(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n, hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    static const uint32_t ks[] = {1, 2, 4, 8}, eagers[] = {0, 2, 3, 4, 5, 6, 8};
    for (uint32_t a = 0; a < sizeof ks / sizeof *ks; a++) {
        hs_hx_model t = *m;
        t.heads = ks[a];
        HS_TRY(try_model(m, &t, rounds, n, best));
    }
    for (uint32_t a = 0; m->cost.n_verify_all && a < sizeof eagers / sizeof *eagers; a++) {
        hs_hx_model t = *m;
        t.eager = eagers[a];
        HS_TRY(try_model(m, &t, rounds, n, best));
    }
fail:
    return st;
}

hs_status hs_hx_search(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n, hs_hx_replay_result *out) {
    hs_status st = HS_OK;
    m->headless = false; /* the policy with the head (hs_hx_search_headless tunes the other) */
    const hs_tree_policy p = hs_heterospec_policy(m);
    hs_hx_replay_result best;
    HS_TRY(hs_hx_replay(&p, &m->cost, rounds, n, &best));
    HS_TRY(search_heads(m, rounds, n, &best));
    HS_TRY(search_strata(m, rounds, n, 2, &best));
    HS_TRY(search_rest(m, rounds, n, &best));
    HS_TRY(search_lookup(m, rounds, n, &best));
    HS_TRY(search_feedback(m, rounds, n, &best));
    /* The strata and rest again, with the lookup's nodes in the trees and the feedback. */
    HS_TRY(search_strata(m, rounds, n, 1, &best));
    HS_TRY(search_rest(m, rounds, n, &best));
    HS_TRY(search_heads(m, rounds, n, &best));
    *out = best;
fail:
    return st;
}

/* The headless policy's context lookup: chains of up to `lens` tokens after matches of 1 .. 4. */
static hs_status search_headless_lookup(hs_hx_model *h, const hs_hx_round *rounds, uint32_t n,
                                        hs_hx_replay_result *best) {
    hs_status st = HS_OK;
    static const uint32_t lens[] = {0, 1, 2, 3, 4, 6, 8, 12, 16};
    for (uint32_t a = 0; a < sizeof lens / sizeof *lens; a++)
        for (uint32_t b = 1; b <= 4; b++) {
            hs_hx_model t = *h;
            t.headless_len = lens[a];
            t.headless_min = b;
            HS_TRY(try_model(h, &t, rounds, n, best));
        }
fail:
    return st;
}

hs_status hs_hx_search_headless(const hs_hx_model *m, const hs_hx_round *rounds, uint32_t n, hs_hx_model *h,
                                hs_hx_replay_result *out) {
    hs_status st = HS_OK;
    *h = *m;
    h->headless = true;
    /* m's feedback was tuned for the policy with the head: this one starts from the built-in feedback
     * and searches its own, so what it chooses does not depend on the head. */
    hs_hx_model d;
    hs_hx_model_default(&d);
    h->fb_prior = d.fb_prior;
    h->fb_decay = d.fb_decay;
    const hs_tree_policy p = hs_heterospec_policy(h);
    HS_TRY(hs_hx_replay(&p, &h->cost, rounds, n, out));
    HS_TRY(search_heads(h, rounds, n, out));
    HS_TRY(search_headless_lookup(h, rounds, n, out));
    HS_TRY(search_store(h, rounds, n, out));
    HS_TRY(search_feedback(h, rounds, n, out));
    /* The lookup's once more, with the store's chains where it has none, and the feedback. */
    HS_TRY(search_headless_lookup(h, rounds, n, out));
    HS_TRY(search_heads(h, rounds, n, out));
fail:
    return st;
}

void hs_hx_take_headless(hs_hx_model *m, const hs_hx_model *h, bool chosen) {
    m->headless_len = h->headless_len;
    m->headless_min = h->headless_min;
    if (!chosen) return;
    m->headless = true;
    m->lookup.store_len = h->lookup.store_len;
    m->fb_prior = h->fb_prior;
    m->fb_decay = h->fb_decay;
    m->heads = h->heads;
    m->eager = h->eager;
}

bool hs_hx_prefer_headless(const hs_hx_replay_result *with_head, const hs_hx_replay_result *headless) {
    return hs_hx_replay_speedup(headless) > hs_hx_replay_speedup(with_head) * (1 + 1e-6);
}

/* The floors on path probability hs_hx_search_eagle2 tries (0: none). */
static const float eagle2_p_mins[] = {0.0f, 0.05f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f, 0.7f};

/* How far setting s goes toward faster decoding on every group: 2 with
 * every group at g->want or faster, 1 with every group faster than plain
 * decoding, else 0 (and 0 without groups). */
static int eagle2_tier(const hs_hx_eagle2_setting *s, const hs_hx_groups *g) {
    if (!g || !g->n) return 0;
    return s->worst >= g->want ? 2 : s->worst > 1.0 ? 1 : 0;
}

/* Whether setting x beats y (hs_hx_search_eagle2's order): the tier, then
 * tokens per modelled second. */
static bool eagle2_better(const hs_hx_eagle2_setting *x, const hs_hx_eagle2_setting *y,
                          const hs_hx_groups *g) {
    const int tx = eagle2_tier(x, g), ty = eagle2_tier(y, g);
    if (tx != ty) return tx > ty;
    return hs_hx_replay_tps(&x->replay) > hs_hx_replay_tps(&y->replay);
}

static void replay_add(hs_hx_replay_result *to, const hs_hx_replay_result *r) {
    to->tokens += r->tokens;
    to->time_s += r->time_s;
    to->verified += r->verified;
    to->rounds += r->rounds;
    to->unknown += r->unknown;
    to->rest_rounds += r->rest_rounds;
    to->plain_s += r->plain_s;
    to->skipped += r->skipped;
}

/* Replays p (group by group, the sum the whole replay). It becomes *out
 * (may be NULL) when it beats it in hs_hx_search_eagle2's order, and *fast
 * (may be NULL) when it has more tokens per modelled second; either all zero:
 * nothing yet. */
static hs_status try_eagle2(const hs_tree_policy *p, const hs_hx_cost *cost, const hs_hx_round *rounds,
                            uint32_t n, const hs_hx_groups *g, hs_hx_eagle2_setting *out,
                            hs_hx_eagle2_setting *fast) {
    hs_status st = HS_OK;
    hs_hx_eagle2_setting s = {.policy = *p, .worst = INFINITY};
    if (g && g->n) {
        for (uint32_t k = 0; k < g->n; k++) {
            hs_hx_replay_result r;
            HS_TRY(hs_hx_replay_group(p, cost, rounds, g, k, &r));
            replay_add(&s.replay, &r);
            if (hs_hx_replay_speedup(&r) < s.worst) {
                s.worst = hs_hx_replay_speedup(&r);
                s.worst_group = k;
            }
        }
    } else {
        HS_TRY(hs_hx_replay(p, cost, rounds, n, &s.replay));
    }
    if (out && (out->replay.time_s == 0 || eagle2_better(&s, out, g))) *out = s;
    if (fast && (fast->replay.time_s == 0 || hs_hx_replay_tps(&s.replay) > hs_hx_replay_tps(&fast->replay)))
        *fast = s;
fail:
    return st;
}

hs_status hs_hx_replay_group(const hs_tree_policy *p, const hs_hx_cost *cost, const hs_hx_round *rounds,
                             const hs_hx_groups *g, uint32_t k, hs_hx_replay_result *out) {
    const uint32_t lo = k ? g->ends[k - 1] : 0;
    return hs_hx_replay(p, cost, rounds + lo, g->ends[k] - lo, out);
}

/* Whether two settings of the grid are the same (the fields the grid sets). */
static bool same_grid_setting(const hs_tree_policy *a, const hs_tree_policy *b) {
    return a->top_k == b->top_k && a->depth == b->depth && a->total == b->total && a->eager == b->eager &&
           a->p_min == b->p_min;
}

/* Rest rounds after a round that verified nothing, from grid setting `from`
 * with every floor above 0 (only a floor makes such rounds: without one, rest
 * changes nothing), each tried for *out and *fast as try_eagle2 does. */
static hs_status try_rests(const hs_tree_policy *from, const hs_hx_cost *cost, const hs_hx_round *rounds,
                           uint32_t n, const hs_hx_groups *g, hs_hx_eagle2_setting *out,
                           hs_hx_eagle2_setting *fast) {
    hs_status st = HS_OK;
    static const uint32_t rests[] = {1, 2, 3, 4, 6, 8};
    for (uint32_t f = 1; f < sizeof eagle2_p_mins / sizeof *eagle2_p_mins; f++)
        for (uint32_t r = 0; r < sizeof rests / sizeof *rests; r++) {
            hs_tree_policy p = *from;
            p.p_min = eagle2_p_mins[f];
            p.rest = rests[r];
            HS_TRY(try_eagle2(&p, cost, rounds, n, g, out, fast));
        }
fail:
    return st;
}

hs_status hs_hx_search_eagle2(const hs_hx_cost *cost, const hs_hx_round *rounds, uint32_t n,
                              const hs_hx_groups *groups, hs_hx_eagle2_setting *out,
                              hs_hx_eagle2_setting *fastest) {
    hs_status st = HS_OK;
    static const uint32_t ks[] = {1, 2, 4, 8, 10}, ds[] = {1, 2, 3, 4, 5, 6}, ns[] = {1, 2, 4, 8, 16, 32, 60};
    const uint32_t n_p = sizeof eagle2_p_mins / sizeof *eagle2_p_mins;
    hs_hx_eagle2_setting fast = {0};
    memset(out, 0, sizeof *out);
    if (groups && groups->n) {
        if (groups->ends[groups->n - 1] != n)
            return HS_FAIL(HS_ERR_INVALID_ARG, "hs_hx_search_eagle2: the groups end at round %u of %u",
                           groups->ends[groups->n - 1], n);
        for (uint32_t k = 0; k < groups->n; k++) {
            const uint32_t lo = k ? groups->ends[k - 1] : 0;
            if (groups->ends[k] <= lo || !rounds[lo].first)
                return HS_FAIL(HS_ERR_INVALID_ARG,
                               "hs_hx_search_eagle2: group %u is empty or does not start a generation", k);
        }
    }
    for (uint32_t a = 0; a < sizeof ks / sizeof *ks; a++)
        for (uint32_t b = 0; b < sizeof ds / sizeof *ds; b++)
            for (uint32_t c = 0; c < sizeof ns / sizeof *ns; c++) {
                /* Each setting also with every head in the pass, where its lists are short enough. */
                const uint32_t list = ns[c] + 1;
                for (uint32_t e = 0; e < (hs_hx_eager(cost, HS_TREE_EAGER_MAX, list) ? 2 : 1); e++)
                    for (uint32_t f = 0; f < n_p; f++) {
                        hs_tree_policy p = hs_tree_eagle2(ks[a], ds[b], ns[c]);
                        p.eager = e ? list : 0;
                        p.p_min = eagle2_p_mins[f];
                        HS_TRY(try_eagle2(&p, cost, rounds, n, groups, out, &fast));
                    }
            }
    /* Rest rounds from the best grid setting for *out, and from the fastest for *fastest when that is
     * another, so that each is what a search of its own would find. */
    const hs_tree_policy grid = out->policy, grid_fast = fast.policy;
    const bool one = same_grid_setting(&grid, &grid_fast);
    HS_TRY(try_rests(&grid, cost, rounds, n, groups, out, one ? &fast : NULL));
    if (fastest && !one) HS_TRY(try_rests(&grid_fast, cost, rounds, n, groups, NULL, &fast));
    if (fastest) *fastest = fast;
fail:
    return st;
}
