/* tree: the draft tree and the chain, static and EAGLE-2 policies (tree.h). */
#include "tree.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

hs_status hs_tree_init(hs_tree *t, uint32_t cap) {
    memset(t, 0, sizeof *t);
    t->nodes = calloc(cap ? cap : 1, sizeof *t->nodes);
    if (!t->nodes) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_tree_init: out of memory");
    t->cap = cap ? cap : 1;
    hs_tree_feedback_reset(t);
    return HS_OK;
}

void hs_tree_feedback_reset(hs_tree *t) { t->fb = (hs_tree_feedback){.gain = {1.0f, 1.0f}}; }

float hs_tree_gain(const hs_tree *t, int src) { return t->fb.gain[src] > 0 ? t->fb.gain[src] : 1.0f; }

void hs_tree_free(hs_tree *t) {
    free(t->nodes);
    memset(t, 0, sizeof *t);
}

void hs_tree_reset(hs_tree *t, int32_t root_token) {
    t->n = 1;
    t->nodes[0] = (hs_tree_node){.token = root_token, .parent = -1, .entropy = -1.0f, .slot = 0};
}

hs_status hs_tree_add_children(hs_tree *t, uint32_t node, const hs_topk_result *topk) {
    if (node >= t->n) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_tree_add_children: node %u of %u", node, t->n);
    if (t->n + topk->k > t->cap)
        return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_tree_add_children: %u + %u nodes exceed the tree's %u", t->n,
                       topk->k, t->cap);
    hs_tree_node *p = &t->nodes[node];
    p->entropy = topk->entropy;
    p->first_child = t->n;
    p->n_children = topk->k;
    for (uint32_t j = 0; j < topk->k; j++) {
        const float q = topk->probs[j];
        const float lq = q > 0 ? logf(q) : -INFINITY;
        t->nodes[t->n++] = (hs_tree_node){.token = (int32_t)topk->ids[j],
                                          .parent = (int32_t)node,
                                          .depth = p->depth + 1,
                                          .rank = j,
                                          .q = q,
                                          .logq = lq,
                                          .path_logp = p->path_logp + lq,
                                          .path_ent = p->path_ent + topk->entropy,
                                          .parent_ent = topk->entropy,
                                          .entropy = -1.0f,
                                          .slot = -1,
                                          .src = HS_NODE_HEAD};
    }
    return HS_OK;
}

static hs_status add_chain(hs_tree *t, const int32_t *tokens, const uint8_t *conf, uint32_t n, uint32_t match) {
    uint32_t cur = 0;
    const uint8_t m8 = match > 255 ? 255 : (uint8_t)match;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t c = 0;
        for (uint32_t v = cur + 1; v < t->n && !c; v++)
            if (t->nodes[v].parent == (int32_t)cur && t->nodes[v].token == tokens[i]) c = v;
        if (!c) {
            if (t->n == t->cap)
                return HS_FAIL(HS_ERR_OUT_OF_RANGE, "hs_tree_add_lookup/store: the tree's %u nodes are full",
                               t->cap);
            const hs_tree_node *p = &t->nodes[cur];
            c = t->n++;
            t->nodes[c] = (hs_tree_node){.token = tokens[i],
                                         .parent = (int32_t)cur,
                                         .depth = p->depth + 1,
                                         .rank = UINT32_MAX,
                                         .logq = -INFINITY,
                                         .path_logp = -INFINITY,
                                         .path_ent = p->path_ent,
                                         .parent_ent = -1.0f,
                                         .entropy = -1.0f,
                                         .slot = -1};
        }
        t->nodes[c].src |= HS_NODE_LOOKUP;
        t->nodes[c].match = m8;
        t->nodes[c].lpos = (uint8_t)i;
        t->nodes[c].conf = conf ? conf[i] : 0;
        cur = c;
    }
    return HS_OK;
}

hs_status hs_tree_add_lookup(hs_tree *t, const int32_t *tokens, uint32_t n, uint32_t match) {
    return add_chain(t, tokens, NULL, n, match);
}

hs_status hs_tree_add_store(hs_tree *t, const int32_t *tokens, const uint8_t *conf, uint32_t n) {
    return add_chain(t, tokens, conf, n, 0);
}

uint32_t hs_lookup(const int32_t *hist, uint32_t n, uint32_t min_match, uint32_t max_len, int32_t *out,
                   uint32_t *match) {
    *match = 0;
    if (n < 2 || max_len == 0) return 0;
    if (min_match < 1) min_match = 1;
    uint32_t best = 0, best_e = 0;
    /* Latest end first: among equally long matches the most recent wins. */
    for (uint32_t e = n - 1; e-- > 0 && best < HS_LOOKUP_MAX_MATCH;) {
        uint32_t m = 0;
        while (m < HS_LOOKUP_MAX_MATCH && m <= e && hist[e - m] == hist[n - 1 - m])
            m++;
        if (m > best) {
            best = m;
            best_e = e;
        }
    }
    if (best < min_match) return 0;
    /* out[i] is the token after position best_e + i: from hist while inside
     * it, then from the chain itself (period n - 1 - best_e). */
    const uint32_t period = n - 1 - best_e;
    for (uint32_t i = 0; i < max_len; i++)
        out[i] = best_e + 1 + i < n ? hist[best_e + 1 + i] : out[i - period];
    *match = best;
    return max_len;
}

hs_status hs_tree_verify_list(const hs_tree *t, const uint32_t *sel, uint32_t n, int32_t *tokens,
                              int32_t *parents, uint32_t *nodes) {
    hs_status st = HS_OK;
    /* Position of each tree node in the list, -1 when not in it. */
    int32_t *at = malloc(sizeof *at * t->n);
    uint8_t *in = calloc(t->n, 1);
    if (!at || !in) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_tree_verify_list: out of memory");
        goto fail;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (sel[i] == 0 || sel[i] >= t->n || in[sel[i]]) {
            st = HS_FAIL(HS_ERR_INVALID_ARG,
                         "hs_tree_verify_list: selected node %u is the root, repeated or unknown", sel[i]);
            goto fail;
        }
        in[sel[i]] = 1;
    }
    uint32_t k = 0;
    at[0] = 0;
    tokens[0] = t->nodes[0].token;
    parents[0] = -1;
    nodes[0] = 0;
    k = 1;
    /* Increasing node order: a parent is always added before its children. */
    for (uint32_t v = 1; v < t->n; v++) {
        at[v] = -1;
        if (!in[v]) continue;
        const int32_t p = t->nodes[v].parent;
        if (at[p] < 0) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "hs_tree_verify_list: node %u is selected without its parent %d",
                         v, p);
            goto fail;
        }
        at[v] = (int32_t)k;
        tokens[k] = t->nodes[v].token;
        parents[k] = at[p];
        nodes[k] = v;
        k++;
    }
fail:
    free(at);
    free(in);
    return st;
}

/* ---- chain and static ---- */

/* Whether node v belongs to the static tree of p: every node on its path is
 * within its level's branch count. */
static bool static_kept(const hs_tree_policy *p, const hs_tree *t, uint32_t v) {
    for (; v != 0; v = (uint32_t)t->nodes[v].parent) {
        const hs_tree_node *x = &t->nodes[v];
        if (x->depth > p->depth || !(x->src & HS_NODE_HEAD) || x->rank >= p->branch[x->depth - 1])
            return false;
    }
    return true;
}

static uint32_t static_expand(const hs_tree_policy *p, const hs_tree *t, uint32_t level, uint32_t *sel,
                              uint32_t cap) {
    uint32_t w = 0;
    if (level >= p->depth) return 0;
    for (uint32_t v = 1; v < t->n && w < cap; v++)
        if (t->nodes[v].depth == level && t->nodes[v].slot < 0 && static_kept(p, t, v)) sel[w++] = v;
    return w;
}

static uint32_t static_select(const hs_tree_policy *p, const hs_tree *t, uint32_t *sel, uint32_t cap) {
    uint32_t n = 0;
    for (uint32_t v = 1; v < t->n && n < cap; v++)
        if (static_kept(p, t, v)) sel[n++] = v;
    return n;
}

hs_tree_policy hs_tree_static(const uint32_t *branch, uint32_t depth) {
    hs_tree_policy p = {.name = "static", .expand = static_expand, .select = static_select};
    p.depth = depth > HS_TREE_MAX_DEPTH ? HS_TREE_MAX_DEPTH : depth;
    /* Nodes kept per level: the product of the branch counts above it; all
     * are verified, all but the deepest level's are drafted. */
    uint32_t level = 1;
    for (uint32_t d = 0; d < p.depth; d++) {
        p.branch[d] = branch[d];
        level *= branch[d];
        p.max_verify += level;
        if (d + 1 < p.depth) p.max_drafted += level;
    }
    return p;
}

hs_tree_policy hs_tree_chain(uint32_t depth) {
    uint32_t ones[HS_TREE_MAX_DEPTH];
    for (uint32_t d = 0; d < HS_TREE_MAX_DEPTH; d++)
        ones[d] = 1;
    hs_tree_policy p = hs_tree_static(ones, depth);
    p.name = "chain";
    return p;
}

hs_status hs_tree_static_parse(const char *text, hs_tree_policy *out) {
    uint32_t b[HS_TREE_MAX_DEPTH], d = 0;
    const char *s = text;
    while (*s) {
        if (d == HS_TREE_MAX_DEPTH)
            return HS_FAIL(HS_ERR_INVALID_ARG, "static tree '%s': more than %u levels", text,
                           HS_TREE_MAX_DEPTH);
        char *end;
        errno = 0;
        unsigned long v = strtoul(s, &end, 10);
        if (end == s || errno || v == 0 || v > HS_TOPK_MAX_K || (*end && *end != ','))
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "static tree '%s': expected comma-separated children per level, each 1..%u", text,
                           HS_TOPK_MAX_K);
        b[d++] = (uint32_t)v;
        s = *end ? end + 1 : end;
    }
    if (d == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "static tree '%s': no levels", text);
    *out = hs_tree_static(b, d);
    return HS_OK;
}

/* ---- EAGLE-2 ---- */

/* Order of candidates: higher S first, then shallower (a parent before a
 * child of probability 1), then lower index. */
static bool better(const hs_tree *t, uint32_t a, uint32_t b) {
    const hs_tree_node *x = &t->nodes[a], *y = &t->nodes[b];
    if (x->path_logp != y->path_logp) return x->path_logp > y->path_logp;
    if (x->depth != y->depth) return x->depth < y->depth;
    return a < b;
}

/* The candidates matching (depth == level, or any depth when level is 0)
 * whose path probability is at least p_min (0: all), best first, into idx;
 * returns their count. Insertion sort: a tree has a few hundred candidates
 * at most. A floor keeps a selection closed under ancestors: S only falls
 * along a path. */
static uint32_t ranked(const hs_tree *t, uint32_t level, float p_min, uint32_t *idx) {
    const float floor_s = p_min > 0 ? logf(p_min) : -INFINITY;
    uint32_t m = 0;
    for (uint32_t v = 1; v < t->n; v++) {
        if ((level != 0 && t->nodes[v].depth != level) || !(t->nodes[v].src & HS_NODE_HEAD) ||
            t->nodes[v].path_logp < floor_s)
            continue;
        uint32_t i = m++;
        for (; i > 0 && better(t, v, idx[i - 1]); i--)
            idx[i] = idx[i - 1];
        idx[i] = v;
    }
    return m;
}

/* Level `level` drafts the children of depth-`level` nodes, and a node of depth
 * d is verified only with its d - 1 ancestors (a child never outranks its
 * parent: S only falls along a path, ties go to the shallower), so once
 * level >= total no node it adds can be selected: the level is skipped (with
 * total 1, no draft level runs at all). The selection is the same. */
static uint32_t expand_ranked(const hs_tree_policy *p, const hs_tree *t, uint32_t level, uint32_t *sel,
                              uint32_t cap) {
    uint32_t *idx = malloc(sizeof *idx * t->n);
    if (!idx) return 0;
    uint32_t m = ranked(t, level, p->p_min, idx), w = 0;
    for (uint32_t i = 0; i < m && w < p->top_k && w < cap; i++)
        sel[w++] = idx[i];
    free(idx);
    return w;
}

static uint32_t eagle2_expand(const hs_tree_policy *p, const hs_tree *t, uint32_t level, uint32_t *sel,
                              uint32_t cap) {
    return level > p->depth || level >= p->total ? 0 : expand_ranked(p, t, level, sel, cap);
}

static uint32_t eagle2_select(const hs_tree_policy *p, const hs_tree *t, uint32_t *sel, uint32_t cap) {
    uint32_t *idx = malloc(sizeof *idx * t->n);
    uint8_t *in = calloc(t->n, 1);
    uint32_t n = 0;
    if (idx && in) {
        uint32_t m = ranked(t, 0, p->p_min, idx);
        in[0] = 1;
        for (uint32_t i = 0; i < m && n < p->total && n < cap; i++) {
            const uint32_t v = idx[i];
            if (!in[t->nodes[v].parent]) continue; /* keeps the selection closed under ancestors */
            in[v] = 1;
            sel[n++] = v;
        }
    }
    free(idx);
    free(in);
    return n;
}

hs_tree_policy hs_tree_eagle2(uint32_t top_k, uint32_t depth, uint32_t total) {
    hs_tree_policy p = {.name = "eagle2", .expand = eagle2_expand, .select = eagle2_select};
    p.top_k = top_k;
    p.depth = depth >= HS_TREE_MAX_DEPTH ? HS_TREE_MAX_DEPTH - 1 : depth;
    p.total = total;
    p.max_verify = total;
    p.max_drafted = top_k * p.depth;
    return p;
}

/* ---- recording at every root ---- */

static uint32_t record_expand(const hs_tree_policy *p, const hs_tree *t, uint32_t level, uint32_t *sel,
                              uint32_t cap) {
    return level > p->depth ? 0 : expand_ranked(p, t, level, sel, cap);
}

static uint32_t record_select(const hs_tree_policy *p, const hs_tree *t, uint32_t *sel, uint32_t cap) {
    return 0;
}

hs_tree_policy hs_tree_record(uint32_t top_k, uint32_t depth) {
    hs_tree_policy p = {.name = "record", .expand = record_expand, .select = record_select};
    p.top_k = top_k;
    p.depth = depth >= HS_TREE_MAX_DEPTH ? HS_TREE_MAX_DEPTH - 1 : depth;
    p.max_drafted = top_k * p.depth;
    return p;
}

/* ---- context lookup alone ---- */

static uint32_t lookup_expand(const hs_tree_policy *p, const hs_tree *t, uint32_t level, uint32_t *sel,
                              uint32_t cap) {
    return 0;
}

static uint32_t lookup_select(const hs_tree_policy *p, const hs_tree *t, uint32_t *sel, uint32_t cap) {
    uint32_t n = 0;
    for (uint32_t v = 1; v < t->n && n < cap; v++) /* the chain, root side first */
        if (t->nodes[v].src & HS_NODE_LOOKUP) sel[n++] = v;
    return n;
}

hs_tree_policy hs_tree_lookup(uint32_t len, uint32_t min_match) {
    hs_tree_policy p = {.name = "lookup", .expand = lookup_expand, .select = lookup_select};
    p.lookup = len > HS_LOOKUP_MAX_LEN ? HS_LOOKUP_MAX_LEN : len;
    p.lookup_min = min_match ? min_match : 1;
    p.headless = true;
    p.depth = p.lookup;
    p.max_verify = p.lookup;
    return p;
}

bool hs_tree_eager(const hs_tree_policy *p, const hs_tree *t, const uint32_t *sel, uint32_t n) {
    return n >= 1 && n + 1 <= p->eager && (!p->eager_round || p->eager_round(p, t, sel, n));
}

uint32_t hs_tree_heads_max(uint32_t heads) {
    const uint32_t h = heads ? heads : HS_TREE_HEADS_DEFAULT;
    return h < HS_TREE_HEADS_MAX ? h : HS_TREE_HEADS_MAX;
}

uint32_t hs_tree_heads_k(const int32_t *parents, uint32_t n_list, uint32_t cur, uint32_t heads) {
    const uint32_t want = hs_tree_heads_max(heads);
    uint32_t chain = 1, k = 1;
    while (chain < want && cur + chain < n_list && parents[cur + chain] == (int32_t)(cur + chain - 1)) chain++;
    while (2 * k <= chain) k *= 2;
    return k;
}

uint32_t hs_tree_policy_max_verify(const hs_tree_policy *p) { return p->max_verify; }
uint32_t hs_tree_policy_max_drafted(const hs_tree_policy *p) { return p->max_drafted; }
