/* tree — the draft tree of one speculative round and the policies that grow
 * it (DESIGN.md sections 2 and 4): chain, static and EAGLE-2 here; HeteroSpec
 * (host/heterospec) plugs in behind the same interface.
 *
 * The tree is grown level by level by host/spec: node 0 is the root (the
 * token the target sampled last, not yet verified); every node the head
 * expands gets all of its Top-K children as candidates (hs_tree_add_children).
 * A policy only decides
 *   expand: which candidates of the newest level the head drafts next (each
 *           drafted node's own Top-K then adds its children), 0 to stop;
 *   select: which candidates the target verifies (closed under ancestors).
 * Node values for those decisions are on the node: the draft probability q,
 * its rank among its siblings, the path's cumulative log-probability S
 * (EAGLE-2's score) and cumulative Top-K entropy C (HeteroSpec's meta-path
 * entropy), the parent's Top-K entropy.
 *
 * Usage (host/spec does this):
 *   hs_tree_reset(t, root_token);
 *   hs_tree_add_children(t, 0, &root_topk);
 *   for (level = 1; (w = pol->expand(pol, t, level, sel, cap)); level++) {
 *       ... draft sel[0..w) with the head ...
 *       for (i < w) hs_tree_add_children(t, sel[i], &topk[i]);
 *   }
 *   n = pol->select(pol, t, sel, cap);
 *   hs_tree_verify_list(t, sel, n, tokens, parents, nodes);   // root first
 *
 * Ownership: the tree owns its node array; policies are plain structs the
 * caller owns. Thread-safety: one thread.
 */
#ifndef HS_TREE_H
#define HS_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include "hs_status.h"
#include "op_select.h"

/* Deepest tree any policy may build (root at depth 0). */
#define HS_TREE_MAX_DEPTH 32u

typedef struct hs_tree_node {
    int32_t token;                    /* target id */
    int32_t parent;                   /* node index; -1 for the root */
    uint32_t depth;                   /* root 0 */
    uint32_t rank;                    /* 0-based place among its siblings (Top-K order) */
    float q;                          /* draft probability given the parent */
    float logq;                       /* log q */
    float path_logp;                  /* S(v): sum of logq from the root's child down to v */
    float path_ent;                   /* C(v): sum of H_K of v's ancestors (root included) */
    float parent_ent;                 /* H_K of the parent's Top-K */
    float entropy;                    /* H_K of v's own Top-K, once expanded; -1 before */
    int32_t slot;                     /* head slot once expanded (root: 0); -1 before */
    uint32_t first_child, n_children; /* the head's candidates, contiguous */
    uint8_t src;                      /* HS_NODE_HEAD and/or HS_NODE_LOOKUP (the root: 0) */
    uint8_t match;                    /* lookup: the context match the chain continues (tokens, <= 255) */
    uint8_t lpos;                     /* lookup: 0-based place in the chain (its depth - 1) */
    uint8_t conf;                     /* store chain (match 0): the n-gram's confidence bucket */
} hs_tree_node;

/* Where a candidate came from: the head's Top-K of its parent, and/or the
 * context lookup chain (hs_tree_add_lookup). A lookup-only node has q = 0,
 * S = -inf, no Top-K entropy of its own parent (parent_ent -1) and is never
 * drafted by the head; the chain, static and EAGLE-2 policies ignore it. */
#define HS_NODE_HEAD   1u
#define HS_NODE_LOOKUP 2u

/* What a policy learns across the rounds of one sequence from how its
 * drafts fared (HeteroSpec's acceptance feedback, host/heterospec), per
 * source of candidates (HS_FB_HEAD, HS_FB_LOOKUP): decayed sums over the
 * decided candidates of the acceptances it predicted and of those that
 * happened, and the factor it applies to its estimates. */
enum { HS_FB_HEAD = 0, HS_FB_LOOKUP = 1, HS_FB_SOURCES = 2 };
typedef struct hs_tree_feedback {
    double pred[HS_FB_SOURCES], acc[HS_FB_SOURCES];
    float gain[HS_FB_SOURCES]; /* 1 (or 0, a zeroed tree's): the calibrated estimates as they are */
} hs_tree_feedback;

typedef struct hs_tree {
    hs_tree_node *nodes;
    uint32_t n, cap;
    /* Context rows before the root (the target's n_past when the round
     * starts; host/spec sets it): verification costs more with a longer
     * context, and a cost-aware policy reads it. hs_tree_reset keeps it. */
    uint32_t ctx;
    /* The policy's feedback (hs_tree_policy.observe); hs_tree_reset keeps it,
     * hs_tree_init and hs_tree_feedback_reset start it afresh (gain 1). */
    hs_tree_feedback fb;
} hs_tree;

hs_status hs_tree_init(hs_tree *t, uint32_t cap);
void hs_tree_free(hs_tree *t);
/* Starts a tree whose root carries token. */
void hs_tree_reset(hs_tree *t, int32_t root_token);
/* Forgets the feedback of earlier rounds (a new sequence). */
void hs_tree_feedback_reset(hs_tree *t);
/* The feedback's gain for source src (a zeroed tree's 0 counts as 1). */
float hs_tree_gain(const hs_tree *t, int src);
/* Adds the Top-K of an expanded node as its children (target ids, in Top-K
 * order), and records its entropy. HS_ERR_OUT_OF_RANGE when the tree is full. */
hs_status hs_tree_add_children(hs_tree *t, uint32_t node, const hs_topk_result *topk);

/* Merges a lookup chain (tokens[0 .. n): the tokens the context suggests
 * after the root, continuing a match of `match` tokens) into the tree: from
 * the root down, a child with the chain's token (one the head proposed, or
 * an earlier lookup node) is marked HS_NODE_LOOKUP, else a lookup-only node
 * is appended; the chain continues below it. Call it after the head's last
 * draft level (the head's Top-K children of a node stay contiguous).
 * HS_ERR_OUT_OF_RANGE when the tree is full. */
hs_status hs_tree_add_lookup(hs_tree *t, const int32_t *tokens, uint32_t n, uint32_t match);
/* The same for a chain of the n-gram store (host/ngram; used when the
 * context has no match): HS_NODE_LOOKUP nodes with match 0 and conf[i]. */
hs_status hs_tree_add_store(hs_tree *t, const int32_t *tokens, const uint8_t *conf, uint32_t n);

/* The verification list: root at index 0, then the selected nodes in
 * increasing node order (parents precede children). tokens/parents/nodes get
 * n + 1 entries: the verify eval's tokens, its parent indices (into the list)
 * and which tree node each entry is. HS_ERR_INVALID_ARG when the selection is
 * not closed under ancestors or repeats a node. */
hs_status hs_tree_verify_list(const hs_tree *t, const uint32_t *sel, uint32_t n, int32_t *tokens,
                              int32_t *parents, uint32_t *nodes);

/* hs_tree_policy.head_window: the head consumes every prompt row. */
#define HS_HEAD_WINDOW_ALL UINT32_MAX

typedef struct hs_tree_policy hs_tree_policy;
struct hs_tree_policy {
    const char *name;
    /* Nodes to draft at this level (all of depth == level, unexpanded), at
     * most cap; 0 stops drafting. */
    uint32_t (*expand)(const hs_tree_policy *p, const hs_tree *t, uint32_t level, uint32_t *sel,
                       uint32_t cap);
    /* Candidates to verify (root excluded), at most cap. */
    uint32_t (*select)(const hs_tree_policy *p, const hs_tree *t, uint32_t *sel, uint32_t cap);
    /* Settings of the built-in policies. */
    uint32_t depth;                     /* chain/static/eagle2: deepest drafted token */
    uint32_t top_k;                     /* eagle2: nodes expanded per level */
    uint32_t total;                     /* eagle2: most verified candidates */
    /* eagle2: a floor on a candidate's path probability exp(S) (llama.cpp's
     * --draft-p-min, over the path): candidates below it are neither drafted
     * nor verified, so a round whose best draft is unlikely verifies the root
     * alone (and rest rounds may follow); 0: off. */
    float p_min;
    uint32_t branch[HS_TREE_MAX_DEPTH]; /* static: children kept per node at depth d + 1 */
    void *state;                        /* for other policies */
    /* After a round that verified no candidate, this many rounds decode
     * plainly while the head only fills its cache (hs_eagle3_consume_cache:
     * no draft distribution, about a fifth of a consume's cost); 0: every
     * round consumes fully and may draft. */
    uint32_t rest;
    /* The head's window over the prompt (host/spec, hs_spec_set_prompt): it
     * consumes only the prompt's last head_window rows, its own positions
     * counted from there, as a training row cut to its length keeps the end of
     * a long prompt (tools/hs_train: fit_rows). 0: the head's default
     * (hs_spec_window_of: three quarters of the rows it was trained on, the
     * whole prompt when its file does not record them); HS_HEAD_WINDOW_ALL:
     * the whole prompt. Changes the drafts only, never the output. */
    uint32_t head_window;
    /* Bounds every policy declares, for sizing buffers: the most candidates
     * it verifies (root excluded) and the most nodes it drafts per tree. */
    uint32_t max_verify, max_drafted;
    /* Context lookup (host/spec, hs_tree_add_lookup): after drafting, the
     * tokens that followed the latest earlier occurrence of the longest
     * suffix of the sequence (at least lookup_min tokens long, at most
     * HS_LOOKUP_MAX_MATCH) are merged into the tree as a chain of up to
     * `lookup` nodes for select to weigh; 0: off. When the match is at least
     * lookup_nodraft tokens (0: never) the head drafts no level that round.
     * Only policies whose select values lookup nodes set it (HeteroSpec). */
    uint32_t lookup, lookup_min, lookup_nodraft;
    /* The n-gram store (host/ngram, hs_spec_set_store): in a round where the
     * context lookup merged nothing, a chain of up to store_len tokens the
     * store drafts after the sequence is merged instead (hs_tree_add_store);
     * 0: off. */
    uint32_t store_len;
    /* Drafts without a head: no consumes, no draft levels, candidates from
     * the context lookup alone (hs_tree_lookup; HeteroSpec where calibration
     * found the head does not pay). host/spec then ignores any head. */
    bool headless;
    /* The target's output head along a chain of the verification list
     * (hs_tree_heads_k): when acceptance reaches a node whose head is not
     * computed yet, the heads of it and of up to heads - 1 list entries after
     * it that each continue the one before are computed in one product
     * (hs_llama_heads), which on a device where the head's weights dominate
     * costs far less than one product per node. 1: one node at a time; 0:
     * HS_TREE_HEADS_DEFAULT. The outputs do not depend on it. */
    uint32_t heads;
    /* A verification list of 2 .. eager entries (the root included) may run
     * every entry's output head in the target's pass (hs_llama_eval with
     * all rows) instead of the root's alone and the others on demand: a
     * column of a product whose weights are being read anyway costs less
     * than reading them again after the pass, where acceptance reaches most
     * of a small tree. 0 or 1: never. At most HS_TREE_EAGER_MAX. Whether
     * such a list does: eager_round's answer for the selection (optional;
     * NULL: always). The outputs do not depend on it (a row's logits are
     * bitwise the same). */
    uint32_t eager;
    bool (*eager_round)(const hs_tree_policy *p, const hs_tree *t, const uint32_t *sel, uint32_t n);
    /* Optional (NULL for the built-in policies): after every round's
     * acceptance, rest rounds included, the policy updates t->fb from the
     * round's verification list (tree nodes list_nodes[i], parent entries
     * parents[i], entry 0 the root; n_list 1 when nothing was verified) and
     * the accepted path (list entries, path[0] = 0). */
    void (*observe)(const hs_tree_policy *p, hs_tree *t, const uint32_t *list_nodes, const int32_t *parents,
                    uint32_t n_list, const uint32_t *path, uint32_t len);
};

/* hs_tree_policy.heads of 0, and the most heads at once (hs_llama_heads' limit). */
#define HS_TREE_HEADS_DEFAULT 4u
#define HS_TREE_HEADS_MAX     8u
/* The largest hs_tree_policy.eager (lists of up to this many entries: the target's exact buckets). */
#define HS_TREE_EAGER_MAX 8u
/* Whether the verification list of the selection sel[0 .. n) runs every
 * output head in the pass under p (eager, eager_round). */
bool hs_tree_eager(const hs_tree_policy *p, const hs_tree *t, const uint32_t *sel, uint32_t n);

/* The most heads at once a policy's heads value means (0: HS_TREE_HEADS_DEFAULT, at most HS_TREE_HEADS_MAX). */
uint32_t hs_tree_heads_max(uint32_t heads);

/* The output heads a walk computes at once from list entry cur (> 0) of a
 * verification list (parents[0 .. n_list), as hs_tree_verify_list writes
 * it): the largest power of two k <= heads (0: HS_TREE_HEADS_DEFAULT; at most
 * HS_TREE_HEADS_MAX) such that entries cur + 1 .. cur + k - 1 each have the
 * entry before as parent. */
uint32_t hs_tree_heads_k(const int32_t *parents, uint32_t n_list, uint32_t cur, uint32_t heads);

/* Longest context match a lookup looks for (tokens). */
#define HS_LOOKUP_MAX_MATCH 8u
/* Longest lookup chain. */
#define HS_LOOKUP_MAX_LEN 16u

/* The lookup chain after hist[0 .. n) (whose last token is the root): the
 * latest earlier end e with the longest common suffix m of hist[.. e] and
 * hist (min_match <= m <= HS_LOOKUP_MAX_MATCH); the chain is the tokens
 * after e, continued periodically past the end of hist (a repeating stretch
 * keeps repeating). Writes up to max_len tokens to out; returns their count
 * (0 when no match), m in *match. */
uint32_t hs_lookup(const int32_t *hist, uint32_t n, uint32_t min_match, uint32_t max_len, int32_t *out,
                   uint32_t *match);

/* Chain: the top-1 child at every level, depth tokens. */
hs_tree_policy hs_tree_chain(uint32_t depth);
/* Static: branch[d] children of every kept node at depth d (the root's at
 * d = 0), for d < depth. */
hs_tree_policy hs_tree_static(const uint32_t *branch, uint32_t depth);
/* Parses "4,2,2,1" into a static policy. HS_ERR_INVALID_ARG on bad text. */
hs_status hs_tree_static_parse(const char *text, hs_tree_policy *out);
/* EAGLE-2: each level expands the top_k candidates of the newest level by S,
 * depth expansions; the total candidates of highest S are verified. Levels
 * whose nodes could not be among them (level >= total) are not drafted.
 * Set p_min on the result for a floor on the candidates' path probability. */
hs_tree_policy hs_tree_eagle2(uint32_t top_k, uint32_t depth, uint32_t total);

/* Recording at every root (calibration, `--record K/D/0`): drafts as EAGLE-2
 * with top_k and depth, all depth levels, and verifies nothing, so the target
 * decodes one token per round (plain decoding's tokens) and every root of
 * the answer gets a drafted tree that replays can regrow, as the roots any
 * replayed policy reaches. */
hs_tree_policy hs_tree_record(uint32_t top_k, uint32_t depth);

/* Context lookup alone (prompt lookup decoding, as llama.cpp's lookup
 * example; no head): every round verifies the lookup chain of up to len
 * tokens after a match of at least min_match tokens, and nothing else. */
hs_tree_policy hs_tree_lookup(uint32_t len, uint32_t min_match);

/* p->max_verify and p->max_drafted. */
uint32_t hs_tree_policy_max_verify(const hs_tree_policy *p);
uint32_t hs_tree_policy_max_drafted(const hs_tree_policy *p);

#endif
