/* hx_calib — HeteroSpec calibration from recorded rounds (DESIGN.md section
 * 4; `heterospec calibrate` drives it from host/cli_calibrate.c).
 *
 * A recorded round is the draft tree a generous policy drafted (every node
 * with its draft probability and entropies) plus the truth: the tokens the
 * generation actually produced after the round's root. Greedy speculation is
 * exact, so a drafted node is accepted exactly when its path spells the truth;
 * that decides every drafted node whose parent is on the true path, verified
 * or not, and it lets any policy be replayed on the recording:
 *   - hs_hx_round_records: the node records hs_hx_fit fits strata and maps to;
 *   - hs_hx_replay: a policy re-grows each round's tree inside the recorded
 *     one (a node the recording never drafted gets no children) and the
 *     device cost model prices it: tokens per modelled second, tau, verified
 *     nodes per round — the objective calibration tunes against;
 *   - hs_hx_search: per-stratum pruning thresholds and depth caps by
 *     coordinate search on replays; hs_hx_search_eagle2: the best EAGLE-2
 *     setting of a small grid, the same way.
 * (With sampling the truth is one sampled continuation, so the records are
 * samples of "the draft matches what was generated", an approximation of
 * the acceptance rule that the README states.)
 *
 * Ownership: rounds own their node copies (hs_hx_round_free).
 * Thread-safety: plain data.
 */
#ifndef HS_HX_CALIB_H
#define HS_HX_CALIB_H

#include "heterospec.h"
#include "spec.h"

typedef struct hs_hx_round {
    hs_tree_node *nodes; /* the drafted tree (node 0 the root) */
    uint32_t n;
    uint32_t ctx;                     /* context rows before the root (the tree's ctx) */
    int32_t truth[HS_TREE_MAX_DEPTH]; /* tokens after the root; -1 past the end of the output */
    /* The round's context lookup chain (recorded long: HS_LOOKUP_MAX_LEN
     * tokens from matches of 1 token up) and its match; replays merge its
     * first hs_tree_policy.lookup tokens when the match is long enough. */
    int32_t lookup[HS_LOOKUP_MAX_LEN];
    uint32_t n_lookup, lookup_match;
    /* The n-gram store's chain after the root (recorded long, whatever the
     * lookup found); replays merge its first hs_tree_policy.store_len tokens
     * when they merge no lookup chain. */
    int32_t store[HS_LOOKUP_MAX_LEN];
    uint8_t store_conf[HS_LOOKUP_MAX_LEN];
    uint32_t n_store;
    bool first; /* the first round of a generation (replays start the policy's feedback afresh) */
} hs_hx_round;

/* Copies a round's tree (truth all -1 until hs_hx_round_set_truth) and its
 * lookup chain (n_lookup tokens, may be 0). */
hs_status hs_hx_round_copy(const hs_tree *t, const int32_t *lookup, uint32_t n_lookup, uint32_t match,
                           hs_hx_round *r);
/* Sets the round's store chain (n tokens, may be 0). */
void hs_hx_round_set_store(hs_hx_round *r, const int32_t *tokens, const uint8_t *conf, uint32_t n);
void hs_hx_round_free(hs_hx_round *r);
/* Frees every round of an stb_ds array of rounds and the array (*rounds = NULL). */
void hs_hx_rounds_free(hs_hx_round **rounds);
/* truth[i] = ids[pos + 1 + i] while inside ids[0 .. n_ids). */
void hs_hx_round_set_truth(hs_hx_round *r, const int32_t *ids, uint32_t n_ids, uint32_t pos);

/* Rounds for the policy without the head, one at every position of a
 * generation (appended to *out, an stb_ds array): the root ids[p] at context
 * n_prompt + p for p = 0 .. n_gen - 2 (the first marked first), no drafted
 * node, the longest lookup chain in prompt and ids[0 .. p] (hs_lookup from
 * matches of 1 token, HS_LOOKUP_MAX_LEN long), the store's chain (store may be
 * NULL) and the truth ids[p + 1 ..]. That policy's drafts depend on the text
 * alone, so a replay on these visits exactly the roots its generation
 * would, where the recorded rounds start where the recording's generous
 * tree stopped (replays of the policy without the head on those credited
 * it with about 8 % more tokens per round than generation measured). */
hs_status hs_hx_text_rounds(const int32_t *prompt, uint32_t n_prompt, const int32_t *ids, uint32_t n_gen,
                            const hs_ngram *store, hs_hx_round **out);
/* Recording rounds as calibrate does: hs_hx_recorder_observe is an hs_spec
 * observer (user: the recorder) that copies each round with its lookup and
 * store chains and notes its root's index in the answer;
 * hs_hx_recorder_start before a generation, hs_hx_recorder_finish after it
 * (sets the truth of its rounds from the answer, and returns the first
 * failure observing met). */
typedef struct hs_hx_recorder {
    hs_hx_round *rounds; /* stb_ds array: every round so far */
    uint32_t *pos;       /* stb_ds array: the answer index of each round's root */
    uint32_t next_pos;   /* of the next round's root */
    uint32_t first;      /* the generation's first round in rounds */
    hs_status st;
} hs_hx_recorder;
void hs_hx_recorder_observe(void *user, const hs_spec_round_info *info);
void hs_hx_recorder_start(hs_hx_recorder *r);
hs_status hs_hx_recorder_finish(hs_hx_recorder *r, const int32_t *ids, uint32_t n_gen);
void hs_hx_recorder_free(hs_hx_recorder *r);

/* Appends the round's records to *out (stb_ds array): every node the head
 * drafted whose parent is on the true path. */
hs_status hs_hx_round_records(const hs_hx_round *r, hs_hx_record **out);
/* Appends the round's lookup records to *out (stb_ds array): every node of
 * its lookup chain whose parent is on the true path (the chain's nodes after
 * its first miss are not), then those of its store chain (match 0). */
hs_status hs_hx_round_lookup_records(const hs_hx_round *r, hs_hx_lookup_record **out);

typedef struct hs_hx_replay_result {
    double tokens;   /* decided tokens (accepted + bonus) */
    double time_s;   /* modelled time */
    double verified; /* nodes verified, roots included */
    double rounds;
    double unknown; /* nodes a policy drafted that the recording never did */
    double rest_rounds; /* rounds decoded plainly under the policy's rest */
    double plain_s; /* plain decoding of the same tokens: a plain step at each round's context per token */
    double skipped; /* recorded rounds whose root the replayed policy had already passed */
} hs_hx_replay_result;

double hs_hx_replay_tps(const hs_hx_replay_result *r);
/* Modelled speedup over plain decoding of the same tokens (plain_s / time_s). */
double hs_hx_replay_speedup(const hs_hx_replay_result *r);
/* Whether a policy whose replay is r beats plain decoding of the same tokens
 * (modelled speedup above 1): calibration sets hs_hx_model.plain when the
 * tuned HeteroSpec policy does not, so that a device and mode where no tree
 * pays decode plainly instead of paying the head's consume every round. */
bool hs_hx_speculation_pays(const hs_hx_replay_result *r);
/* The modelled speedup over plain decoding, at ctx context rows, of a chain
 * drafter whose every drafted token is accepted with probability a given its
 * parent (a + a^2 + ... + a^d accepted of d), priced as hs_hx_replay prices a
 * round: the pass over d + 1 rows, each accepted node's output head and, with
 * the head, its consume, t_after_head and d - 1 draft levels of one node (the
 * consume gives the first). The best d in 0 .. max_d goes to *best_d (when
 * non-NULL). With a = 1 it is what any chain drafter could reach on the
 * device: the ceiling the cost model sets before acceptance enters. */
double hs_hx_chain_bound(const hs_hx_cost *c, uint32_t ctx, double a, bool head, uint32_t max_d,
                         uint32_t *best_d);
/* The least a (to 1e-4) whose hs_hx_chain_bound reaches `speedup`; a value
 * above 1 when not even a = 1 does. */
double hs_hx_chain_needs(const hs_hx_cost *c, uint32_t ctx, double speedup, bool head, uint32_t max_d);

/* Replays policy p on the rounds, priced with cost. With p->rest, a round
 * that selects nothing makes the next p->rest recorded rounds plain ones (one
 * token each, priced t_consume_cache + t_after_head + t_verify(1)): each
 * stands for a round the generation would have decoded without drafting. The
 * replay walks the text as the policy would: a recorded round whose root lies
 * inside what an earlier replayed round of the same generation already
 * decided (its ctx above that round's and below the context reached) is
 * skipped, so a policy that accepts more than the recording visits fewer
 * rounds, as it would generating. Rounds at the same ctx (synthetic ones) are all replayed. */
hs_status hs_hx_replay(const hs_tree_policy *p, const hs_hx_cost *cost, const hs_hx_round *rounds, uint32_t n,
                       hs_hx_replay_result *out);

/* Tunes the policy with the head (clears m->headless, which an earlier
 * calibration may have set): the output heads at once along a chain (heads
 * 1, 2, 4, 8), m's per-stratum prune and depth_cap on
 * replays (coordinate search, a few passes), then m->rest (0, 1, 2, 3, 4, 6, 8, 12, 16), then the
 * lookup's chain length (0 = off, 2 .. 16), shortest match (1 .. 4) and
 * no-draft match (never, 2 .. 8), then the feedback's prior and decay, then
 * the strata, rest and heads once more. *out receives the final replay. */
hs_status hs_hx_search(hs_hx_model *m, const hs_hx_round *rounds, uint32_t n, hs_hx_replay_result *out);
/* The policy of m without the head (*h = m with headless set: the lookup
 * alone; heads, headless_len {0, 1, 2, 3, 4, 6, 8, 12, 16} and headless_min {1..4},
 * the store's chain length, the feedback from the built-in one (not m's,
 * which was tuned with the head), then the lookup's and heads again, tuned on
 * replays); *out receives its replay. Calibration uses it when it replays
 * faster than m (hs_hx_prefer_headless), with its store, feedback and heads. */
hs_status hs_hx_search_headless(const hs_hx_model *m, const hs_hx_round *rounds, uint32_t n, hs_hx_model *h,
                                hs_hx_replay_result *out);
/* Takes into m what hs_hx_search_headless tuned in h, the one list of those
 * fields: always its lookup chain length and shortest match (headless_len,
 * headless_min: a policy with the head keeps them for bench-spec's
 * heterospec/h1 variant); with chosen (calibration keeps the policy without
 * the head) also its store chains, feedback and output heads at once, and
 * m->headless. m then replays as h does. */
void hs_hx_take_headless(hs_hx_model *m, const hs_hx_model *h, bool chosen);
/* Whether the headless replay beats the one with the head, by modelled
 * speedup over plain decoding of each replay's own tokens (the two may
 * replay different rounds: hs_hx_text_rounds). */
bool hs_hx_prefer_headless(const hs_hx_replay_result *with_head, const hs_hx_replay_result *headless);

/* Rounds in groups (calibrate: one per question set): group g holds
 * rounds [g ? ends[g - 1] : 0, ends[g]), ends increasing to the rounds'
 * count, each group starting with a generation's first round (a replay
 * starts afresh there, so the groups' replays add up to the whole one's). */
typedef struct hs_hx_groups {
    const uint32_t *ends;
    uint32_t n;
    double want; /* the modelled speedup over plain decoding every group should reach (e.g. 1.03) */
} hs_hx_groups;

/* Replays p on group k's rounds alone into *out. */
hs_status hs_hx_replay_group(const hs_tree_policy *p, const hs_hx_cost *cost, const hs_hx_round *rounds,
                             const hs_hx_groups *g, uint32_t k, hs_hx_replay_result *out);

typedef struct hs_hx_eagle2_setting {
    hs_tree_policy policy; /* hs_tree_eagle2(top_k, depth, total) with its eager, p_min and rest */
    hs_hx_replay_result replay;
    /* With groups: the slowest group's modelled speedup over plain decoding and its index. */
    double worst;
    uint32_t worst_group;
} hs_hx_eagle2_setting;
/* The EAGLE-2 setting of the grid top_k {1,2,4,8,10} x depth {1..6} x total
 * {1,2,4,8,16,32,60} (within the recording) x floor on path probability
 * p_min {0, 0.05, 0.1, 0.2 .. 0.7}, each with its lists' output heads in the
 * pass (eager) and after it where the cost has the pass measured, then for
 * the best of those every floor above 0 with rest {1,2,3,4,6,8}. Best: the
 * most tokens per modelled second; with groups (NULL or n = 0: none), the
 * most among the settings whose every group replays at groups->want or
 * faster, where none does among those whose every group replays faster than
 * plain decoding, and where none does either among all (a setting that
 * trades speed on every group for less loss on one is not chosen).
 * fastest (may be NULL) receives, from the same replays, the setting the
 * search finds without groups: the most tokens per modelled second. */
hs_status hs_hx_search_eagle2(const hs_hx_cost *cost, const hs_hx_round *rounds, uint32_t n,
                              const hs_hx_groups *groups, hs_hx_eagle2_setting *out,
                              hs_hx_eagle2_setting *fastest);

#endif
