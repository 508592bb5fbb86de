/* spec — one speculative round (DESIGN.md section 2), driven by host/engine.
 *
 * A round, given the root token x_n (sampled last, not yet in the target's
 * cache) and the head's Top-K for the token after it:
 *   1. draft: the tree policy (host/tree) picks nodes level by level and the
 *      head (models/eagle3) drafts each level in one recorded sequence;
 *   2. the policy selects the candidates to verify (at most what the
 *      target's batch and the context left hold); the target evaluates the
 *      root and them in one pass (positions n + depth, tree mask);
 *   3. acceptance walks down from the root: greedy takes the child equal to
 *      the target's argmax; sampling tries the children in Top-K order and
 *      accepts child x with probability p(x) / (mass not yet rejected),
 *      else removes x from p (DESIGN.md section 3). The bonus token is the
 *      target's choice at the last accepted node (argmax, or a draw from
 *      the residual p);
 *   4. the target keeps the accepted path (hs_llama_accept: KV compaction),
 *      and the head consumes the path's taps with the tokens after them,
 *      which yields the Top-K for the next round's root (the bonus token).
 * Context lookup (hs_tree_policy.lookup > 0): after drafting, the tokens
 * that followed the latest earlier occurrence of the sequence's longest
 * suffix (prompt and output so far, root included) join the tree as a chain
 * (hs_lookup, hs_tree_add_lookup), also in rounds the head does not draft;
 * select weighs them with the head's nodes. Verification is unchanged, so
 * exactness and lossless sampling hold whatever the chain proposes (every
 * candidate set is fixed before the target's pass).
 * Rest (hs_tree_policy.rest = R > 0): after a round that verified no
 * candidate, the next R rounds verify the root alone and the head consumes
 * cache-only (hs_eagle3_consume_cache), since no draft distribution is
 * needed; the round after them drafts again. The head's cache is bitwise
 * what full consumes write, so drafts after a rest are unchanged.
 * Every decided token (accepted drafts, then the bonus) is fed to the
 * sampler's history in order, so penalties see what plain decoding sees.
 *
 * Usage (host/engine does this):
 *   hs_spec *s;  HS_TRY(hs_spec_create(target, head, &policy, &s));
 *   ... prompt chunks: hs_llama_eval (taps on), then
 *   HS_TRY(hs_spec_consume_prompt(s, chunk, n, after));   // per chunk
 *   while (...) HS_TRY(hs_spec_round(s, smp, root, max_new, out, &n_out));
 *   hs_spec_destroy(s);
 *
 * Ownership: borrows the target and the head; the policy is copied.
 * Thread-safety: one thread.
 */
#ifndef HS_SPEC_H
#define HS_SPEC_H

#include "eagle3.h"
#include "ngram.h"
#include "llama.h"
#include "sampler.h"
#include "tree.h"

/* Longest accepted path a round reports on its own (deeper ones count here too). */
#define HS_SPEC_MAX_LEN HS_TREE_MAX_DEPTH

typedef struct hs_spec_stats {
    uint32_t rounds;      /* target passes of speculative rounds */
    uint64_t drafted;     /* candidates verified, root excluded */
    uint64_t accepted;    /* of those, accepted */
    uint64_t verified;    /* tokens the target evaluated in rounds, root included */
    uint64_t head_rows;   /* rows the head drafted (sum of level widths) */
    uint32_t draft_steps; /* head draft calls (levels) */
    uint32_t rest_rounds; /* rounds that decoded plainly under the policy's rest (counted in rounds) */
    uint64_t head_calls;  /* output head products after the pass (hs_llama_heads; one per accepted node
                           * when policy.heads is 1), and the rows they computed */
    uint64_t head_calls_rows;
    uint32_t eager_rounds;    /* rounds whose pass ran every entry's output head (policy.eager) */
    uint64_t lookup_verified; /* candidates verified that the context lookup proposed (the head too, maybe) */
    uint64_t lookup_accepted; /* of those, accepted */
    uint64_t lookup_only_accepted; /* accepted candidates only the lookup proposed */
    uint64_t store_verified, store_accepted; /* of the lookup's, those of the n-gram store's chains */
    double fb_gain_sum[2]; /* policies with feedback: the sums over rounds of the gains (head, lookup) */
    /* Rounds whose accepted path reached depth d (d >= 1): accept_depth[d - 1]. */
    uint32_t accept_depth[HS_SPEC_MAX_LEN];
    /* Rounds that verified at least one candidate at depth d: tried_depth[d - 1]. */
    uint32_t tried_depth[HS_SPEC_MAX_LEN];
    double draft_s;  /* rounds only: head consume + drafting + policy (the prompt's consume is prefill) */
    double verify_s; /* target pass + acceptance + compaction */
} hs_spec_stats;

typedef struct hs_spec hs_spec;

/* What one round verified and kept, for calibration (host/heterospec): the
 * tree as drafted, the verification list (list entry i is tree node
 * list_nodes[i], its parent entry parents[i]; entry 0 the root) and the
 * accepted path as list entries (path[0] = 0, then the accepted drafts).
 * Greedy acceptance decided every entry whose parent is on the path;
 * sampling tried such entries in list order up to the accepted one. */
typedef struct hs_spec_round_info {
    const hs_tree *tree;
    const uint32_t *list_nodes;
    const int32_t *parents;
    uint32_t n_list;
    const uint32_t *path;
    uint32_t len;
    bool greedy;
    /* The context lookup chain of the round (merged into the tree; n_lookup
     * 0 when the policy has lookup off or nothing matched) and its match. */
    const int32_t *lookup;
    uint32_t n_lookup, lookup_match;
    /* The n-gram store's chain after the sequence (with a store set and the
     * policy's store_len > 0, drafted in every observed round, merged only
     * when the lookup merged nothing) with its confidence buckets. */
    const int32_t *store;
    const uint8_t *store_conf;
    uint32_t n_store;
} hs_spec_round_info;
typedef void (*hs_spec_observer)(void *user, const hs_spec_round_info *r);

/* head may be NULL for a policy that drafts with the context lookup alone
 * (hs_tree_policy.headless): no head consumes, no draft levels; such a
 * policy ignores a head it is given. */
hs_status hs_spec_create(hs_llama *target, hs_eagle3 *head, const hs_tree_policy *policy, hs_spec **out);
void hs_spec_destroy(hs_spec *s);
/* Forgets the head's context and the statistics (the engine resets the target). */
void hs_spec_reset(hs_spec *s);
const hs_spec_stats *hs_spec_stats_get(const hs_spec *s);
/* The n-gram store the policy's store_len drafts from (NULL: none; the
 * caller keeps it alive and checks it fits the target, hs_ngram_check). */
void hs_spec_set_store(hs_spec *s, const hs_ngram *store);
/* The next prompt's length, before its first hs_spec_consume_prompt (after
 * hs_spec_reset): with a head window W > 0 (hs_spec_head_window), the head
 * consumes only its last W rows. Without this call the head consumes every
 * prompt row. */
void hs_spec_set_prompt(hs_spec *s, size_t n_prompt);
/* The head's window over the prompt a policy gets with a head of config c
 * (NULL: no head), 0 meaning the whole prompt: the policy's head_window when
 * it names one, 0 for HS_HEAD_WINDOW_ALL, and by default (head_window 0)
 * three quarters of the rows the head was trained on (eagle3.train_row_length:
 * 384 of 512, which leaves 128 generated tokens inside them; chosen on the
 * calibration split, README "The head's window"), or 0 when the head's file
 * does not record them. */
uint32_t hs_spec_window_of(const hs_tree_policy *p, const hs_eagle3_config *c);
/* The window this spec's head uses (0: the whole prompt, or no head). */
uint32_t hs_spec_head_window(const hs_spec *s);
/* Records every graph a round of this policy can ask of the target and the
 * head (hs_llama_prepare_tree, hs_eagle3_prepare) without running anything:
 * for a benchmark's warm-up, so that no pipeline is compiled while it times. */
hs_status hs_spec_prepare(hs_spec *s);
/* Calls fn after every round's acceptance (NULL: none). */
void hs_spec_set_observer(hs_spec *s, hs_spec_observer fn, void *user);

/* After the target evaluated a prompt chunk of n tokens (slots 0 .. n-1 of
 * its last eval): the head consumes their taps, each with the token after it
 * (chunk[i + 1], and `after` for the last: the next chunk's first token, or
 * the first generated token after the prompt's last chunk). */
hs_status hs_spec_consume_prompt(hs_spec *s, const int32_t *chunk, uint32_t n, int32_t after);

/* One round after the root token (see above). max_new >= 1 bounds the new
 * tokens wanted (drafting stops short of it). out receives the decided tokens
 * in order (at most HS_SPEC_MAX_LEN + 1): accepted drafts, then the bonus,
 * which is the next round's root. */
hs_status hs_spec_round(hs_spec *s, hs_sampler *smp, int32_t root, uint32_t max_new, int32_t *out,
                        uint32_t *n_out);

#endif
