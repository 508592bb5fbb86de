/* spec: one speculative round (see spec.h). */
#include "spec.h"

#include <stdlib.h>
#include <string.h>

#include "hs_bench_ops.h"
#include "model_util.h"

struct hs_spec {
    hs_llama *target;
    hs_eagle3 *head;
    hs_tree_policy policy;
    hs_tree tree;
    hs_topk_result root_topk; /* the head's Top-K after the root token */
    bool have_root;
    uint32_t rest_left;  /* rounds still to decode plainly (policy.rest) */
    uint32_t window;      /* the head's window over the prompt (hs_spec_window_of; 0: all of it) */
    uint32_t skip_before; /* prompt rows the head does not consume (the window) */
    uint32_t max_verify; /* list entries, root included */
    bool eager;          /* this round's list runs every output head in the pass (hs_tree_eager) */
    /* Scratch: selections, head inputs and the verification list. */
    uint32_t *sel, *parent_slots, *list_nodes, *path;
    int32_t *draft_tokens, *tokens, *parents, *next;
    float *probs;
    /* The sequence: the target's cached tokens, then the root (for the
     * context lookup); hist_cap = the target's context + 1. */
    int32_t *hist;
    uint32_t hist_cap;
    int32_t lookup[HS_LOOKUP_MAX_LEN];
    uint32_t n_lookup, lookup_match;
    const hs_ngram *store;
    int32_t store_chain[HS_LOOKUP_MAX_LEN];
    uint8_t store_conf[HS_LOOKUP_MAX_LEN];
    uint32_t n_store;
    hs_spec_stats stats;
    hs_spec_observer observer;
    void *observer_user;
};

_Static_assert(HS_TREE_HEADS_MAX <= HS_LLAMA_MAX_HEADS, "a walk's heads fit one hs_llama_heads");
_Static_assert(HS_TREE_EAGER_MAX <= HS_MODEL_EXACT_BUCKETS, "an eager list's graph has its own size");

/* Candidates per tree: every expanded node adds the head's K children. */
static uint32_t tree_cap(const hs_spec *s) {
    return 1 + (s->head ? (1 + hs_tree_policy_max_drafted(&s->policy)) * hs_eagle3_top_k(s->head) : 0) +
           (s->policy.lookup || s->policy.store_len ? HS_LOOKUP_MAX_LEN : 0);
}

hs_status hs_spec_create(hs_llama *target, hs_eagle3 *head, const hs_tree_policy *policy, hs_spec **out) {
    hs_status st = HS_OK;
    *out = NULL;
    hs_spec *s = calloc(1, sizeof *s);
    if (!s) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_spec_create: out of memory");
    if (!head && !policy->headless) {
        free(s);
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_spec_create: policy %s needs a draft head (only the context "
                                           "lookup drafts without one)",
                       policy->name ? policy->name : "?");
    }
    if (policy->eager > HS_TREE_EAGER_MAX) {
        free(s);
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_spec_create: policy %s: eager %u (at most %u list entries)",
                       policy->name ? policy->name : "?", policy->eager, HS_TREE_EAGER_MAX);
    }
    s->target = target;
    s->head = policy->headless ? NULL : head;
    s->policy = *policy;
    s->window = hs_spec_window_of(policy, s->head ? hs_eagle3_cfg(s->head) : NULL);
    /* A tree larger than the target's batch is trimmed to it (each round
     * also trims to the context left). */
    const uint32_t want = hs_tree_policy_max_verify(policy) + 1, batch = hs_llama_max_batch(target);
    s->max_verify = want < batch ? want : batch;
    const uint32_t cap = tree_cap(s), v = hs_llama_cfg(target)->n_vocab;
    HS_TRY(hs_tree_init(&s->tree, cap));
    s->sel = malloc(sizeof *s->sel * cap);
    s->parent_slots = malloc(sizeof *s->parent_slots * cap);
    s->draft_tokens = malloc(sizeof *s->draft_tokens * cap);
    s->list_nodes = malloc(sizeof *s->list_nodes * cap);
    /* path and next also carry a prompt chunk's slots and tokens. */
    const uint32_t rows = cap > batch ? cap : batch;
    s->path = malloc(sizeof *s->path * rows);
    s->tokens = malloc(sizeof *s->tokens * cap);
    s->parents = malloc(sizeof *s->parents * cap);
    s->next = malloc(sizeof *s->next * rows);
    s->probs = malloc(sizeof *s->probs * v);
    s->hist_cap = hs_llama_n_ctx(target) + 1;
    s->hist = malloc(sizeof *s->hist * s->hist_cap);
    if (!s->sel || !s->parent_slots || !s->draft_tokens || !s->list_nodes || !s->path || !s->tokens ||
        !s->parents || !s->next || !s->probs || !s->hist) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_spec_create: out of memory");
        goto fail;
    }
    *out = s;
    return HS_OK;
fail:
    hs_spec_destroy(s);
    return st;
}

void hs_spec_destroy(hs_spec *s) {
    if (!s) return;
    hs_tree_free(&s->tree);
    free(s->sel);
    free(s->parent_slots);
    free(s->draft_tokens);
    free(s->list_nodes);
    free(s->path);
    free(s->tokens);
    free(s->parents);
    free(s->next);
    free(s->probs);
    free(s->hist);
    free(s);
}

void hs_spec_reset(hs_spec *s) {
    if (s->head) hs_eagle3_reset(s->head);
    s->have_root = false;
    s->skip_before = 0;
    s->rest_left = 0;
    hs_tree_feedback_reset(&s->tree);
    memset(&s->stats, 0, sizeof s->stats);
}

const hs_spec_stats *hs_spec_stats_get(const hs_spec *s) { return &s->stats; }

void hs_spec_set_store(hs_spec *s, const hs_ngram *store) { s->store = store; }

uint32_t hs_spec_window_of(const hs_tree_policy *p, const hs_eagle3_config *c) {
    if (!c || p->head_window == HS_HEAD_WINDOW_ALL) return 0;
    if (p->head_window) return p->head_window;
    return c->n_rows_train - c->n_rows_train / 4;
}

uint32_t hs_spec_head_window(const hs_spec *s) { return s->window; }

void hs_spec_set_prompt(hs_spec *s, size_t n_prompt) {
    const uint32_t w = s->window;
    s->skip_before = w && n_prompt > w ? (uint32_t)(n_prompt - w) : 0;
}

hs_status hs_spec_prepare(hs_spec *s) {
    hs_status st = HS_OK;
    HS_TRY(hs_llama_prepare_tree(s->target, s->max_verify));
    if (s->policy.eager > 1)
        HS_TRY(hs_llama_prepare_tree_all(s->target,
                                         s->policy.eager < s->max_verify ? s->policy.eager : s->max_verify));
    /* A round's consume keeps the accepted path (at most the list); a level
     * drafts at most what the policy drafts in all. */
    if (s->head) HS_TRY(hs_eagle3_prepare(s->head, s->max_verify, hs_tree_policy_max_drafted(&s->policy)));
fail:
    return st;
}

void hs_spec_set_observer(hs_spec *s, hs_spec_observer fn, void *user) {
    s->observer = fn;
    s->observer_user = user;
}

/* Full consume (the next root's Top-K), or cache-only while resting. */
static hs_status consume(hs_spec *s, const uint32_t *slots, const int32_t *next, uint32_t n) {
    hs_status st = HS_OK;
    const hs_topk_result *root;
    if (!s->head) return HS_OK; /* the lookup alone: nothing to consume */
    if (s->rest_left) {
        HS_TRY(hs_eagle3_consume_cache(s->head, slots, next, n));
        s->have_root = false;
    } else {
        HS_TRY(hs_eagle3_consume(s->head, slots, next, n, &root));
        s->root_topk = *root;
        s->have_root = true;
    }
fail:
    return st;
}

hs_status hs_spec_consume_prompt(hs_spec *s, const int32_t *chunk, uint32_t n, int32_t after) {
    if (n == 0 || n > hs_llama_max_batch(s->target))
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_spec_consume_prompt: %u rows (the target's batch limit is %u)",
                       n, hs_llama_max_batch(s->target));
    /* The target has cached the chunk: it ends at n_past. */
    const uint32_t at = hs_llama_n_past(s->target);
    if (at < n || at > s->hist_cap)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "hs_spec_consume_prompt: the target holds %u rows, not the %u-row chunk", at, n);
    memcpy(s->hist + at - n, chunk, sizeof *chunk * n);
    /* Rows before the head's window (hs_spec_set_prompt) are cached by the
     * target and seen by the lookup, not consumed by the head. */
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (at - n + i < s->skip_before) continue;
        s->path[k] = i;
        s->next[k++] = i + 1 < n ? chunk[i + 1] : after;
    }
    s->rest_left = 0;
    return k ? consume(s, s->path, s->next, k) : HS_OK;
}

/* Grows the tree from the root level by level; returns the verification
 * list size (root included) in *n_list. room: cache rows left. Without a
 * draft distribution (resting) the list is the root alone. */
static hs_status draft(hs_spec *s, int32_t root, uint32_t max_new, uint32_t room, uint32_t *n_list) {
    hs_status st = HS_OK;
    hs_tree *t = &s->tree;
    const hs_tree_policy *p = &s->policy;
    hs_tree_reset(t, root);
    s->eager = false;
    t->ctx = hs_llama_n_past(s->target);
    /* Deepest useful node: max_new - 1 drafts plus the bonus. */
    const uint32_t max_useful = max_new - 1, max_depth = s->have_root ? max_useful : 0;
    /* The context lookup (from the cached tokens and the root). */
    s->n_lookup = s->lookup_match = s->n_store = 0;
    if (max_useful > 0 && t->ctx < s->hist_cap) {
        s->hist[t->ctx] = root;
        if (p->lookup) {
            const uint32_t len = p->lookup < max_useful ? p->lookup : max_useful;
            const uint32_t want = len > HS_LOOKUP_MAX_LEN ? HS_LOOKUP_MAX_LEN : len;
            s->n_lookup = hs_lookup(s->hist, t->ctx + 1, p->lookup_min, want, s->lookup, &s->lookup_match);
        }
        /* The store's chain: where the lookup matched nothing, and in every
         * round an observer records (calibration keeps both chains). */
        if (p->store_len && s->store && (!s->n_lookup || s->observer)) {
            const uint32_t len = p->store_len < max_useful ? p->store_len : max_useful;
            const uint32_t want = len > HS_LOOKUP_MAX_LEN ? HS_LOOKUP_MAX_LEN : len;
            s->n_store = hs_ngram_chain(s->store, s->hist, t->ctx + 1, want, s->store_chain, s->store_conf);
        }
    }
    const bool no_draft = p->lookup_nodraft && s->n_lookup && s->lookup_match >= p->lookup_nodraft;
    if (max_depth > 0) HS_TRY(hs_tree_add_children(t, 0, &s->root_topk));
    if (s->head) hs_eagle3_reset_tree(s->head);
    for (uint32_t level = 1; level < max_depth && !no_draft; level++) {
        /* Head slots: as many as its tree and its cache have left. */
        const uint32_t used = hs_eagle3_n_slots(s->head), max_nodes = hs_eagle3_max_nodes(s->head);
        uint32_t cap = room > used ? room - used : 0;
        if (cap > max_nodes - used) cap = max_nodes - used;
        const uint32_t tcap = (t->cap - t->n) / hs_eagle3_top_k(s->head);
        if (cap > tcap) cap = tcap;
        const uint32_t w = cap ? p->expand(p, t, level, s->sel, cap) : 0;
        if (w == 0) break;
        for (uint32_t i = 0; i < w; i++) {
            const hs_tree_node *v = &t->nodes[s->sel[i]];
            s->parent_slots[i] = (uint32_t)t->nodes[v->parent].slot;
            s->draft_tokens[i] = v->token;
        }
        const hs_topk_result *topk;
        HS_TRY(hs_eagle3_draft(s->head, s->parent_slots, s->draft_tokens, w, &topk));
        for (uint32_t i = 0; i < w; i++) {
            t->nodes[s->sel[i]].slot = (int32_t)(used + 1 + i);
            HS_TRY(hs_tree_add_children(t, s->sel[i], &topk[i]));
        }
        s->stats.draft_steps++;
        s->stats.head_rows += w;
    }
    if (s->n_lookup) HS_TRY(hs_tree_add_lookup(t, s->lookup, s->n_lookup, s->lookup_match));
    else if (s->n_store) HS_TRY(hs_tree_add_store(t, s->store_chain, s->store_conf, s->n_store));
    /* Candidates to verify: what fits the batch and the cache, no deeper
     * than useful (dropping the deepest keeps the set closed under ancestors). */
    uint32_t vcap = s->max_verify - 1;
    if (room - 1 < vcap) vcap = room - 1;
    uint32_t n = t->n > 1 && max_useful > 0 && vcap > 0 ? p->select(p, t, s->sel, vcap) : 0, k = 0;
    for (uint32_t i = 0; i < n; i++)
        if (t->nodes[s->sel[i]].depth <= max_useful) s->sel[k++] = s->sel[i];
    HS_TRY(hs_tree_verify_list(t, s->sel, k, s->tokens, s->parents, s->list_nodes));
    *n_list = k + 1;
    s->eager = hs_tree_eager(p, t, s->sel, k);
fail:
    return st;
}

/* Lossless acceptance at one node (DESIGN.md section 3): probs is the
 * target's distribution there; children are list entries c with parents[c]
 * == cur, tried in order. Returns the accepted child, or -1 with *bonus drawn
 * from the residual. */
static hs_status sample_step(hs_spec *s, hs_sampler *smp, uint32_t cur, uint32_t n_list, int32_t *child,
                             int32_t *bonus) {
    hs_status st = HS_OK;
    float *p = s->probs;
    double mass = 1.0, best = -1.0;
    int32_t last = -1;
    *child = -1;
    for (uint32_t c = cur + 1; c < n_list; c++) {
        if (s->parents[c] != (int32_t)cur) continue;
        const int32_t x = s->tokens[c];
        const double px = p[x];
        if (mass > 0 && hs_sampler_uniform(smp) * mass < px) {
            *child = (int32_t)c;
            return HS_OK;
        }
        mass -= px;
        p[x] = 0.0f;
        if (px > best) {
            best = px;
            last = x;
        }
    }
    double rest = 0;
    for (int32_t i = 0; i < (int32_t)hs_llama_cfg(s->target)->n_vocab; i++)
        rest += p[i];
    if (rest > 0)
        HS_TRY(hs_sampler_sample_probs(smp, p, (int32_t)hs_llama_cfg(s->target)->n_vocab, bonus));
    else
        *bonus = last; /* rounding left no residual (a measure-zero event): the likeliest rejected child */
fail:
    return st;
}

hs_status hs_spec_round(hs_spec *s, hs_sampler *smp, int32_t root, uint32_t max_new, int32_t *out,
                        uint32_t *n_out) {
    hs_status st = HS_OK;
    *n_out = 0;
    if (s->head && !s->have_root && !s->rest_left)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_spec_round: the head has consumed nothing yet");
    const bool resting = s->head && !s->have_root;
    if (max_new == 0) return HS_FAIL(HS_ERR_INVALID_ARG, "hs_spec_round: max_new is 0");
    const uint32_t n_vocab = hs_llama_cfg(s->target)->n_vocab;
    const uint32_t room = hs_llama_n_ctx(s->target) - hs_llama_n_past(s->target);
    if (room == 0) return HS_FAIL(HS_ERR_OUT_OF_RANGE, "context full: %u tokens", hs_llama_n_ctx(s->target));
    if (max_new > HS_SPEC_MAX_LEN + 1) max_new = HS_SPEC_MAX_LEN + 1;

    for (int i = 0; i < HS_FB_SOURCES && s->policy.observe; i++)
        s->stats.fb_gain_sum[i] += hs_tree_gain(&s->tree, i);
    double t0 = hs_now_s();
    uint32_t n_list;
    HS_TRY(draft(s, root, max_new, room, &n_list));
    double t1 = hs_now_s();
    s->stats.draft_s += t1 - t0;

    /* The target's pass over the list computes the output head of the root
     * only; the walk asks for each further node's as it reaches it, with
     * those of the chain after it (policy.heads). A list the policy makes
     * eager (hs_tree_eager) gets every entry's head in the pass instead.
     * have_*: the heads computed so far, of entries have0 .. have0 + have_n - 1. */
    const bool greedy = hs_sampler_is_greedy(smp);
    uint32_t have0 = 0, have_n = 1, root_amax, heads_amax[HS_TREE_HEADS_MAX];
    const uint32_t *have_amax = &root_amax;
    const float *have_logits = NULL;
    if (s->eager) {
        HS_TRY(hs_llama_eval(s->target, s->tokens, n_list, s->parents, false, false,
                             greedy ? NULL : &have_logits, &have_amax));
        have_n = n_list;
        s->stats.eager_rounds++;
    } else {
        HS_TRY(hs_llama_eval_tree(s->target, s->tokens, n_list, s->parents, greedy ? NULL : &have_logits,
                                  &root_amax));
    }
    /* Walk down from the root. */
    uint32_t len = 0, cur = 0;
    s->path[len++] = 0;
    int32_t bonus;
    for (;;) {
        if (cur < have0 || cur >= have0 + have_n) {
            const uint32_t k = hs_tree_heads_k(s->parents, n_list, cur, s->policy.heads);
            HS_TRY(hs_llama_heads(s->target, cur, k, greedy ? NULL : &have_logits, heads_amax));
            s->stats.head_calls++;
            s->stats.head_calls_rows += k;
            have_amax = heads_amax;
            have0 = cur;
            have_n = k;
        }
        const uint32_t amax = have_amax[cur - have0];
        const float *logits = greedy ? NULL : have_logits + (size_t)(cur - have0) * n_vocab;
        int32_t child = -1;
        if (greedy) {
            bonus = (int32_t)amax;
            for (uint32_t c = cur + 1; c < n_list && child < 0; c++)
                if (s->parents[c] == (int32_t)cur && s->tokens[c] == bonus) child = (int32_t)c;
        } else {
            HS_TRY(hs_sampler_probs(smp, logits, (int32_t)n_vocab, s->probs));
            HS_TRY(sample_step(s, smp, cur, n_list, &child, &bonus));
        }
        if (child < 0) break;
        cur = (uint32_t)child;
        s->path[len++] = cur;
        out[(*n_out)++] = s->tokens[cur];
        HS_TRY(hs_sampler_accept(smp, s->tokens[cur]));
    }
    out[(*n_out)++] = bonus;
    HS_TRY(hs_sampler_accept(smp, bonus));
    /* The kept tokens (root and accepted drafts) extend the sequence. */
    const uint32_t at = hs_llama_n_past(s->target);
    for (uint32_t i = 0; i < len && at + i < s->hist_cap; i++)
        s->hist[at + i] = s->tokens[s->path[i]];
    HS_TRY(hs_llama_accept(s->target, s->path, len));
    double t2 = hs_now_s();
    s->stats.verify_s += t2 - t1;
    if (s->policy.observe)
        s->policy.observe(&s->policy, &s->tree, s->list_nodes, s->parents, n_list, s->path, len);
    if (s->observer) {
        const hs_spec_round_info info = {.tree = &s->tree,
                                         .list_nodes = s->list_nodes,
                                         .parents = s->parents,
                                         .n_list = n_list,
                                         .path = s->path,
                                         .len = len,
                                         .greedy = greedy,
                                         .lookup = s->lookup,
                                         .n_lookup = s->n_lookup,
                                         .lookup_match = s->lookup_match,
                                         .store = s->store_chain,
                                         .store_conf = s->store_conf,
                                         .n_store = s->n_store};
        s->observer(s->observer_user, &info);
    }

    /* The head consumes the kept positions: each with the token after it;
     * cache-only while the policy rests (this round verified no candidate,
     * or it was a rest round with more to come). */
    for (uint32_t i = 0; i + 1 < len; i++)
        s->next[i] = s->tokens[s->path[i + 1]];
    s->next[len - 1] = bonus;
    if (resting)
        s->rest_left--;
    else if (n_list == 1)
        s->rest_left = s->policy.rest;
    /* A round's consume is drafting time; the prompt's (hs_spec_consume_prompt) is part of the prefill. */
    const double t3 = hs_now_s();
    HS_TRY(consume(s, s->path, s->next, len));
    s->stats.draft_s += hs_now_s() - t3;

    hs_spec_stats *S = &s->stats;
    S->rounds++;
    S->rest_rounds += resting;
    S->verified += n_list;
    S->drafted += n_list - 1;
    S->accepted += len - 1;
    uint32_t deepest = 0;
    for (uint32_t i = 1; i < n_list; i++) {
        const uint32_t d = s->tree.nodes[s->list_nodes[i]].depth;
        if (d > deepest) deepest = d;
    }
    for (uint32_t d = 1; d <= deepest && d <= HS_SPEC_MAX_LEN; d++)
        S->tried_depth[d - 1]++;
    for (uint32_t d = 1; d < len && d <= HS_SPEC_MAX_LEN; d++)
        S->accept_depth[d - 1]++;
    for (uint32_t i = 1; i < n_list; i++) {
        const hs_tree_node *v = &s->tree.nodes[s->list_nodes[i]];
        S->lookup_verified += (v->src & HS_NODE_LOOKUP) != 0;
        S->store_verified += (v->src & HS_NODE_LOOKUP) && v->match == 0;
    }
    for (uint32_t i = 1; i < len; i++) {
        const hs_tree_node *v = &s->tree.nodes[s->list_nodes[s->path[i]]];
        S->lookup_accepted += (v->src & HS_NODE_LOOKUP) != 0;
        S->lookup_only_accepted += v->src == HS_NODE_LOOKUP;
        S->store_accepted += (v->src & HS_NODE_LOOKUP) && v->match == 0;
    }
fail:
    return st;
}
