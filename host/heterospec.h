/* heterospec — the HeteroSpec tree policy, its calibration and its device
 * cost model (DESIGN.md section 4; the README's HeteroSpec section says the
 * same in prose).
 *
 * Per candidate node v of a draft tree (host/tree), with parent u:
 *   x(v)   its entropy feature, one of (chosen by calibration):
 *            parent_ent  H_K(u), the Top-K entropy of the draft step that proposed v
 *            path_ent    C(v) = sum of H_K over v's ancestors (meta-path entropy)
 *            mean_ent    C(v) / depth(v)
 *   b(v)   its stratum: the interval of x(v) between the calibrated edges;
 *   f_b(q) the stratum's acceptance map: monotone in the draft probability q
 *          of v, the probability that the target accepts v given u accepted;
 *   V(v)   = V(u) * f_{b(v)}(q(v)), V(root) = 1: the probability that v is
 *          accepted; E[tau] of a verified set S = 1 + sum over S of V.
 * Context lookup nodes (the sequence's own continuation of its longest
 * repeated suffix, merged into the tree after drafting, host/spec) have
 * f = the lookup table's rate for their match length and place in the chain
 * (hs_hx_lookup); a node both sources propose takes the larger f.
 * Device cost of a round that drafts levels of widths w_1 .. w_L and verifies
 * N nodes besides the root, after c rows of context, accepting A of them:
 *   T = t_consume + t_after_head + sum_l t_draft(w_l) + t_verify(N + 1, c) + T_heads
 * (t_after_head: the target's pass runs slower right after the head's work
 * than after a pass of its own, as in plain decoding; without the head T
 * drops t_consume and t_after_head)
 * (t_verify measured at two contexts and interpolated in c: attention makes
 * each verified node cost more after a long prompt; the pass computes the
 * root's output head, and each accepted node's is computed when acceptance
 * reaches it, hs_llama_head, or with the heads of the chain after it in
 * one product, hs_llama_heads, hs_tree_policy.heads; T_heads, the time of
 * those products: the replays of calibration price the products the walk
 * made; before a round, select takes its expectation: the verified nodes
 * split into runs, each node the child of the one before it in node order
 * (so in the verification list), and a run's products start at its nodes
 * s_0, s_0 + k_0 .. with k the largest power of two at most `heads` and the
 * rest of the run, each costing t_heads(k) with probability V(s); an
 * expected child of expand's costs V t_head. With heads 1, T_heads = A
 * t_head with A = E[tau] - 1).
 * Eager (a list of N + 1 <= eager entries, hs_tree_policy.eager): the pass
 * runs every entry's output head, t_verify_all(N + 1, c), and T_heads = 0.
 * Rest: after a round that chose N = 0, the next `rest` rounds decode the
 * root alone at t_consume_cache + t_after_head + t_verify(1) each, without a
 * draft distribution (host/spec); calibration picks rest on replays, weighing the
 * consumes saved against the speculation those rounds forgo.
 * Decisions (the whole policy):
 *   select: the candidates in order of V (shallower first on ties, so the
 *           set stays closed under ancestors), keeping the prefix whose
 *           E[tau] / T is highest. N = 0 (plain decoding of the root) is one
 *           of the choices: a round speculates only when it pays.
 *   expand: before drafting level l, each unexpanded candidate of depth l
 *           whose stratum allows it (V(v) >= prune_b, l < depth_cap_b) may be
 *           drafted; drafting v is expected to add one child of value
 *           V(v) * look_b (look_b: the calibrated probability that some child
 *           of an accepted node of stratum b is accepted). The policy drafts
 *           the w best (by V) for the w whose best E[tau] / T (select's rule,
 *           with those expected children and t_draft(w) added) is highest,
 *           and stops when no w beats drafting nothing.
 * So low-entropy strata (f near 1, look high) grow deep narrow chains and
 * high-entropy ones are pruned, and a steeper t_verify gives smaller trees.
 *
 * Feedback (fb_prior > 0): the maps and the lookup table are averages over
 * the calibration text, and the head (or the text's repetitions) can serve
 * the text at hand much better or worse. After each round the policy
 * compares, per source (head, lookup) over its candidates that acceptance
 * decided (verified, parent accepted), the acceptances f predicted with
 * those that happened, in sums decayed by fb_decay per round (rest rounds
 * too), and multiplies that source's estimates f (the head's look too) by
 *   gain = (acc + fb_prior) / (pred + fb_prior)   (f at most 0.999 after);
 * where a source keeps failing its nodes stop paying (the trees shrink to
 * the other or to nothing, rest), and as the evidence decays it is tried again.
 * Headless (m->headless, chosen by calibration where the head costs more
 * than it adds): the same select over the context lookup's chain alone
 * (headless_len, headless_min), no consume, no draft level; generation loads
 * no head.
 * Decisions depend only on the tree, the model and the sequence's own
 * acceptances (no clocks), so a run is repeatable. The model is calibrated
 * by `heterospec calibrate` (host/cli_calibrate.c): node records from a
 * generous tree fit the strata, maps, look-ahead values, depth caps and
 * pruning thresholds; `calibrate --device` times t_verify, t_draft and
 * t_consume.
 *
 * Usage:
 *   hs_hx_model m;  HS_TRY(hs_hx_model_load_json(text, &m));   // or fit / defaults
 *   hs_tree_policy p = hs_heterospec_policy(&m);    // borrows m: keep it alive
 *   ... hs_spec_create(target, head, &p, &spec) ...
 *
 * Ownership: plain structs; the policy points at the caller's model.
 * Thread-safety: the policy functions only read the model.
 */
#ifndef HS_HETEROSPEC_H
#define HS_HETEROSPEC_H

#include <stdbool.h>
#include <stdint.h>

#include <cJSON.h>

#include "ngram.h"
#include "tree.h"

#define HS_HX_MAX_STRATA 8
#define HS_HX_MAP_POINTS 16  /* knots of an acceptance map */
#define HS_HX_MAX_N      128 /* t_verify(N) for N = 1 .. this */
#define HS_HX_MAX_WIDTH  64  /* t_draft(w) for w = 1 .. this */
#define HS_HX_MAX_HEADS  HS_TREE_HEADS_MAX /* t_heads(k) for k = 2, 4 .. this */

typedef enum hs_hx_feature {
    HS_HX_PARENT_ENT = 0,
    HS_HX_PATH_ENT = 1,
    HS_HX_MEAN_ENT = 2,
    HS_HX_N_FEATURES
} hs_hx_feature;

const char *hs_hx_feature_name(hs_hx_feature f);

typedef struct hs_hx_stratum {
    float lo, hi;                  /* x in [lo, hi); the first starts at -inf, the last ends at +inf */
    uint32_t n_map;                /* knots, q increasing, p non-decreasing; 0: constant `rate` */
    float map_q[HS_HX_MAP_POINTS]; /* piecewise linear between knots, flat outside */
    float map_p[HS_HX_MAP_POINTS];
    float rate;         /* mean acceptance of the stratum's records */
    float look;         /* P(some child of v accepted | v accepted), v in this stratum */
    uint32_t depth_cap; /* nodes of this stratum are drafted only at depth < depth_cap */
    float prune;        /* ... and only with V >= prune */
    uint32_t records;   /* calibration records behind it */
} hs_hx_stratum;

typedef struct hs_hx_cost {
    /* Seconds. t_verify[N] for N = 1 .. n_verify (index 0 unused); larger N
     * extrapolate linearly from the last two. t_draft[w] likewise. */
    uint32_t n_verify, n_draft;
    double t_verify[HS_HX_MAX_N + 1];
    double t_draft[HS_HX_MAX_WIDTH + 1];
    /* t_verify was measured at ctx0 context rows; when ctx1 > ctx0 the table
     * t_verify_long holds the same passes at ctx1 rows, and the cost at a
     * context c is interpolated (extrapolated) linearly in c between the
     * two and beyond ctx1 (hs_hx_t_verify_at; below ctx0 it is t_verify). ctx1 = 0:
     * the cost does not depend on c. */
    uint32_t ctx0, ctx1;
    double t_verify_long[HS_HX_MAX_N + 1];
    double t_consume;
    double t_consume_cache; /* a cache-only consume (0: unknown, taken as t_consume) */
    double t_plain;         /* a plain decoding step, for comparisons (0: unknown) */
    /* The output head of one node acceptance reaches past the root
     * (hs_llama_head; t_verify times the pass with the root's head only).
     * 0: t_verify includes every row's head (calibrations before the head
     * ran on demand). */
    double t_head;
    /* The output heads of k nodes of a chain in one product (hs_llama_heads,
     * hs_tree_policy.heads), k = 2, 4 .. HS_HX_MAX_HEADS (index k; 0: not
     * measured, taken as k t_head). */
    double t_heads[HS_HX_MAX_HEADS + 1];
    /* What the target's pass costs more when the head ran just before it
     * (its draft levels or consume) than after a pass of its own, as in
     * plain decoding: charged once to every round that runs the head
     * (0: unknown, or calibrations before it was measured). */
    double t_after_head;
    /* The pass over N = 1 .. n_verify_all chained nodes with every row's
     * output head (hs_tree_policy.eager), at ctx0 and (when ctx1 > ctx0) at
     * ctx1 rows; n_verify_all 0: not measured (no eager rounds priced). */
    uint32_t n_verify_all;
    double t_verify_all[HS_TREE_EAGER_MAX + 1];
    double t_verify_all_long[HS_TREE_EAGER_MAX + 1];
} hs_hx_cost;

/* The context lookup chain's nodes (host/spec, hs_tree_add_lookup): their
 * acceptance given the parent accepted, by match length (buckets 1, 2, 3,
 * >= 4 tokens), place in the chain (0, 1, 2, >= 3) and a column: whether the
 * head also proposed the node (such a node is worth the larger of the two
 * estimates) or, for the policy without the head, every record whatever the
 * head proposed. Calibration records lookup nodes beside a generous head
 * tree, so the "lookup only" records are the tokens that tree left out, a
 * sample far below the lookup's own rate: valuing headless drafts with them
 * underrated every lookup and store node. */
#define HS_HX_LK_MATCH 4
#define HS_HX_LK_POS   4
#define HS_HX_LK_COLS  3
enum { HS_HX_LK_ONLY = 0, HS_HX_LK_HEAD = 1, HS_HX_LK_ANY = 2 };
typedef struct hs_hx_lookup {
    uint32_t max_len;   /* chain length (hs_tree_policy.lookup; 0: lookup off) */
    uint32_t min_match; /* shortest match used */
    uint32_t nodraft;   /* a match this long skips the head's draft levels (0: never) */
    float accept[HS_HX_LK_MATCH][HS_HX_LK_POS][HS_HX_LK_COLS];
    uint32_t records;
    /* The n-gram store's chain (match 0 nodes; hs_tree_policy.store_len, 0:
     * off): acceptance by the store's confidence bucket (ngram.h), place in
     * the chain and the same columns. */
    uint32_t store_len;
    float store_accept[HS_NGRAM_CONF][HS_HX_LK_POS][HS_HX_LK_COLS];
    uint32_t store_records;
} hs_hx_lookup;

/* f for a lookup node (HS_NODE_LOOKUP set); headless: the policy without the
 * head (column HS_HX_LK_ANY), else by whether the head proposed the node. */
float hs_hx_lookup_accept(const hs_hx_lookup *l, const hs_tree_node *v, bool headless);

typedef struct hs_hx_model {
    hs_hx_feature feature;
    uint32_t n_strata;
    hs_hx_stratum s[HS_HX_MAX_STRATA];
    hs_hx_cost cost;
    /* Bounds of every tree: deepest drafted token, widest level, most
     * verified candidates (root excluded). */
    uint32_t max_depth, max_width, max_verify;
    /* Rounds to decode plainly after one that verified no candidate
     * (hs_tree_policy.rest; 0 .. HS_HX_MAX_REST): chosen by calibration. */
    uint32_t rest;
    /* Calibration found that no tree pays on this device in this mode (the
     * tuned policy's replay is slower than plain decoding of the same
     * tokens, hs_hx_speculation_pays): generation decodes plainly, without
     * the head's consume. */
    bool plain;
    /* The policy without the head: the context lookup alone (chains of
     * headless_len after matches of headless_min+, valued by lookup.accept
     * and the cost model), no consume, no draft level (hs_tree_policy.
     * headless). Calibration tunes both and sets headless when that replays
     * faster than the tuned policy with the head on this device in this mode:
     * generation then loads no head. */
    bool headless;
    uint32_t headless_len, headless_min;
    hs_hx_lookup lookup;
    /* Acceptance feedback (hs_hx_observe): prior strength in acceptances
     * (0: off) and the decay per round; chosen by calibration. */
    float fb_prior, fb_decay;
    /* Output heads computed at once along a chain (hs_tree_policy.heads; 0:
     * HS_TREE_HEADS_DEFAULT): chosen by calibration. */
    uint32_t heads;
    /* Verification lists of up to this many entries run every entry's output
     * head in the pass (hs_tree_policy.eager; 0: never): chosen by calibration. */
    uint32_t eager;
} hs_hx_model;
#define HS_HX_MAX_REST 16
/* The feedback's gain stays within [1 / HS_HX_FB_MAX_GAIN, HS_HX_FB_MAX_GAIN]. */
#define HS_HX_FB_MAX_GAIN 4.0f

/* ---- values and costs ---- */

/* The stratum of a candidate node (not the root). */
uint32_t hs_hx_stratum_of(const hs_hx_model *m, const hs_tree_node *v);
/* f_b(q), in [0, 1]. */
float hs_hx_accept(const hs_hx_stratum *s, float q);
/* V of every node of t into V[0 .. t->n) (V[0] = 1). */
void hs_hx_values(const hs_hx_model *m, const hs_tree *t, float *V);
double hs_hx_t_verify(const hs_hx_cost *c, uint32_t n);
/* What a round that runs the head pays besides its draft levels and the
 * pass: its consume (cache-only in a rest round; unknown: a full one) and
 * t_after_head. */
double hs_hx_t_head_round(const hs_hx_cost *c, bool resting);
/* t_verify(n) after ctx rows of context: t_verify(n) up to ctx0, then
 * linear in ctx through the two measured contexts (beyond ctx1 too), at
 * least a quarter of t_verify(n). */
double hs_hx_t_verify_at(const hs_hx_cost *c, uint32_t n, uint32_t ctx);
double hs_hx_t_draft(const hs_hx_cost *c, uint32_t w);
/* The output heads of k (1, 2, 4 ..) chained nodes in one product: t_head
 * for one, t_heads[k] where measured, else k t_head. */
double hs_hx_t_heads(const hs_hx_cost *c, uint32_t k);
/* Whether a verification list of n entries runs every output head in its
 * pass under eager (hs_tree_policy.eager): 2 <= n <= eager, and measured. */
bool hs_hx_eager(const hs_hx_cost *c, uint32_t eager, uint32_t n);
/* The pass over n entries with every row's output head after ctx rows
 * (interpolated in ctx as hs_hx_t_verify_at); n <= c->n_verify_all. */
double hs_hx_t_verify_all_at(const hs_hx_cost *c, uint32_t n, uint32_t ctx);

/* Keeps in c, per measured cost, the faster of c's and o's, two timings of
 * the same passes at different times (calibrate times the device before and
 * after its recording): a VM's slow minutes add to some timings and not to
 * others, and a choice made on such a pair (heads at once or one at a time,
 * eager lists) flips with the hour. Entries either leaves unknown (0) take
 * the other's. Fails where the two do not time the same shape (table sizes,
 * contexts). Says in *n_apart how many timings differ by more than a
 * quarter (a table's entries that repeat the one before in both, a capacity
 * bucket's time, count once), and in *worst (when not NULL) the largest
 * ratio of the slower to the faster. */
hs_status hs_hx_cost_keep_faster(hs_hx_cost *c, const hs_hx_cost *o, uint32_t *n_apart, double *worst);

/* How many of c's costs contradict what holds on any device, the mark of a
 * slow spell that hit some costs and not others (the fastest of two timings
 * keeps a cost slow when both of its timings were hit): the three one-token passes
 * (a plain step, the pass over a root alone and the same with every head)
 * more than a tenth apart, or a product of 2k rows dearer than two of k, with
 * a quarter's slack (output heads at once, the verification passes at each
 * context, with every head, draft levels). The first into why (when not
 * NULL). calibrate times the device again while some remain (at most twice). */
uint32_t hs_hx_cost_doubts(const hs_hx_cost *c, char *why, size_t size);

/* The policy (tree.h interface; name "heterospec"). */
hs_tree_policy hs_heterospec_policy(const hs_hx_model *m);
/* The policy's observe (with m->fb_prior > 0; see above): decays t->fb by
 * fb_decay; for each source, adds f (ungained) of every verified candidate
 * of that source whose parent is on the accepted path to its pred and each
 * accepted candidate of it to its acc (a node both proposed counts for
 * both), and sets its gain = (acc + prior) / (pred + prior) within the
 * bounds. */
void hs_hx_observe(const hs_tree_policy *p, hs_tree *t, const uint32_t *list_nodes, const int32_t *parents,
                   uint32_t n_list, const uint32_t *path, uint32_t len);

/* ---- calibration ---- */

/* One verified candidate whose parent was accepted (or is the root). */
typedef struct hs_hx_record {
    float q;          /* draft probability */
    float parent_ent; /* H_K of the parent */
    float path_ent;   /* C(v) */
    uint32_t depth;
    bool accepted;
    /* When accepted: whether any child of it was verified, and accepted. */
    bool children_tried, child_accepted;
} hs_hx_record;

/* One verified lookup node whose parent was accepted (or is the root);
 * match 0: a node of the n-gram store's chain, conf its bucket. */
typedef struct hs_hx_lookup_record {
    uint32_t match, pos, conf;
    bool head; /* the head proposed it too */
    bool accepted;
} hs_hx_lookup_record;

/* The lookup acceptance table from records: each cell's rate shrunk toward
 * its (match, head) row and that toward the records' overall rate. Keeps
 * max_len, min_match and nodraft. */
void hs_hx_fit_lookup(const hs_hx_lookup_record *r, uint32_t n, hs_hx_lookup *l);
/* The HS_HX_LK_ANY columns (lookup and store) alone, fitted afresh from the
 * records of rounds the policy without the head drafts in (hx_calib's
 * hs_hx_text_rounds); with no records they stay as they are. */
void hs_hx_fit_lookup_headless(const hs_hx_lookup_record *r, uint32_t n, hs_hx_lookup *l);

/* Feature value of a record (as hs_hx_stratum_of sees a node). */
float hs_hx_record_x(hs_hx_feature f, const hs_hx_record *r);

typedef struct hs_hx_fit_options {
    uint32_t n_strata;    /* B; 0: 4 */
    uint32_t min_records; /* fewest records per stratum; 0: 50 */
    int feature;          /* -1: the one with the best likelihood; else an hs_hx_feature */
} hs_hx_fit_options;

/* Fits feature, strata, maps, look-ahead values and depth caps from records
 * (the cost and the bounds of m are kept; pruning thresholds are set to 0).
 * HS_ERR_INVALID_ARG when there are fewer records than one stratum needs. */
hs_status hs_hx_fit(const hs_hx_record *r, uint32_t n, const hs_hx_fit_options *opt, hs_hx_model *m);
/* Mean log-likelihood per record of the fitted acceptance maps (for
 * comparing fits). */
double hs_hx_loglik(const hs_hx_model *m, const hs_hx_record *r, uint32_t n);

/* ---- files ---- */

/* The model as calibration JSON ("kind": "heterospec-calibration"); the
 * caller adds identity fields (device, model, head) to the object. */
cJSON *hs_hx_model_to_json(const hs_hx_model *m);
/* HS_ERR_FORMAT naming the first bad field. Fields the JSON leaves out keep
 * m's values (a device-only file carries only "cost"). */
hs_status hs_hx_model_from_json(const cJSON *o, hs_hx_model *m);
/* A model with one stratum of constant acceptance `rate` and the given
 * cost: what generation uses when no calibration exists at all. */
void hs_hx_model_default(hs_hx_model *m);

#endif
