/* `heterospec calibrate`: HeteroSpec's calibration (DESIGN.md section 4) on
 * the device at hand.
 *   1. The device cost model: verification passes of N = 1, 2, 4 .. 128
 *      nodes (every row's logits and argmax, as a round verifies; trees run
 *      in power-of-two capacity buckets, so a bucket's time holds for every N
 *      in it), the head's draft step for widths 1, 2, 4 .. 64, its consume
 *      of two rows and a plain decoding step (the reference), each the
 *      median of -r interleaved rounds after a warm-up round. All of it is
 *      timed --timings times (default 2), before and after the recording
 *      of 2 (back to back with --device), and the fastest of each cost
 *      kept: a VM's slow minutes would otherwise decide choices that hang
 *      on a pair of costs.
 *   2. Unless --device: generation on calibration questions with a generous
 *      EAGLE-2 tree (--record K/D/N), keeping every round's drafted tree and
 *      the tokens that followed; node records fit the strata and acceptance
 *      maps (hs_hx_fit), replays tune per-stratum pruning thresholds and
 *      depth caps (hs_hx_search) and choose the best EAGLE-2 setting of a
 *      grid (hs_hx_search_eagle2).
 * The result goes to $HS_HOME/calib (keyed by device, model, head and mode;
 * -o FILE elsewhere), where generate and bench-spec find it. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "hs_bench_ops.h"
#include "hs_cli.h"
#include "hx_calib.h"
#include "model_util.h"
#include "stb_ds.h"
#include "tok_gguf.h"

#ifndef HS_SHARED_DATA
#define HS_SHARED_DATA "../shared/data/bench" /* for --help; hs_cli_qset_defaults has the same */
#endif

static void usage(FILE *f) {
    fprintf(f,
            "usage: heterospec calibrate [options]\n\n"
            "Measures the device cost model and fits HeteroSpec's strata, acceptance maps,\n"
            "pruning thresholds and depth caps on calibration questions; writes JSON to\n"
            "$HS_HOME/calib (found there by generate and bench-spec).\n\n"
            "  -m FILE            GGUF model (default: $HS_HOME/" HS_CLI_DEFAULT_MODEL ")\n"
            "  --head FILE        draft head (default: the first that fits the model)\n"
            "  --head-weights W   auto (default: q4_1 where the device computes with 8-bit\n"
            "                     activations), file (as stored) or q4_1\n"
            "  --device           only the device cost model (keeps the strata of an existing\n"
            "                     calibration file, else built-in ones)\n"
            "  --if-missing       do nothing when the output file exists already (tools/demo.sh\n"
            "                     calibrates a device on its first run)\n"
            "  --data DIR         folder of <set>/question.jsonl (default: " HS_SHARED_DATA ")\n"
            "  --sets A,B,..      sets (default mt_bench,humaneval,gsm8k,alpaca,sum)\n"
            "  --questions F-T    calibration split: questions F..T of each set (default 1-10)\n"
            "  -n N               new tokens per question (default 96)\n"
            "  --temp T           temperature (default 0: greedy; > 0 fits the sample mode)\n"
            "  --seed S           sampling seed (default 0)\n"
            "  --record K/D/N     EAGLE-2 tree the rounds are recorded with (default 10/6/0). N 0:\n"
            "                     all D levels drafted, nothing verified: every root records a tree;\n"
            "                     N > 0 verifies N nodes and drafts at most N levels\n"
            "  --strata B         entropy strata (default 4, at most %d)\n"
            "  --max-verify N     most nodes a HeteroSpec tree verifies (default 64)\n"
            "  -r N               timing passes per measurement (default 5)\n"
            "  --timings N        times the whole device cost is timed, the fastest of each cost\n"
            "                     kept (default 2: before the recording and after it; with\n"
            "                     --device back to back; 1 to 9); with 2 or more, up to 2\n"
            "                     more while costs contradict each other (a one-token pass\n"
            "                     timed a tenth apart, twice the rows dearer than twice)\n"
            "  --kv-type T        the target's KV cache: f16 (default) or f32; part of the\n"
            "                     calibration's key (its costs differ)\n"
            "  -o FILE            output (default: the cache file for this device, model, head,\n"
            "                     mode and cache type)\n"
            "  --no-chat          the turn as it is, without the chat template\n",
            HS_HX_MAX_STRATA);
}

typedef struct cal_args {
    const char *model, *head, *out, *head_weights;
    hs_cli_qset q;
    int n_predict, strata, reps, timings, max_verify;
    unsigned rec_k, rec_d, rec_n;
    bool device_only, if_missing;
    hs_sampler_params sp;
    hs_type kv_type;
} cal_args;

static int parse(int argc, char **argv, cal_args *a) {
    memset(a, 0, sizeof *a);
    hs_cli_qset_defaults(&a->q);
    a->n_predict = 96;
    a->strata = 4;
    a->reps = 5;
    a->timings = 2;
    a->max_verify = 64;
    a->rec_k = 10;
    a->rec_d = 6;
    a->rec_n = 0;
    a->sp = hs_sampler_default_params();
    a->sp.temperature = 0.0f;
    a->kv_type = HS_CLI_KV_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!strcmp(o, "--device")) {
            a->device_only = true;
            continue;
        }
        if (!strcmp(o, "--if-missing")) {
            a->if_missing = true;
            continue;
        }
        const int kv = hs_cli_kv_option("calibrate", o, v, &a->kv_type);
        if (kv < 0) return 2;
        if (kv) {
            i++;
            continue;
        }
        const int used = hs_cli_qset_option(&a->q, "calibrate", o, v);
        if (used < 0) return 2;
        if (used) {
            i += used - 1;
            continue;
        }
        const char *const valued[] = {"-m",       "--head",   "-n",           "--temp", "--seed",
                                      "--record", "--strata", "--max-verify", "-r",     "-o",
                                      "--head-weights", "--timings"};
        const int w = hs_cli_option_index(o, valued, (int)(sizeof valued / sizeof valued[0]));
        if (w < 0 || !v) {
            fprintf(stderr, "heterospec calibrate: %s '%s' (see --help)\n",
                    w < 0 ? "unknown option" : "no value for", o);
            return 2;
        }
        i++;
        switch (w) {
        case 0: a->model = v; break;
        case 1: a->head = v; break;
        case 2:
            if (!hs_cli_int("calibrate", o, v, INT_MIN, INT_MAX, &a->n_predict)) return 2;
            break;
        case 3:
            if (!hs_cli_real("calibrate", o, v, -HUGE_VAL, HUGE_VAL, &a->sp.temperature)) return 2;
            break;
        case 4:
            if (!hs_cli_u64("calibrate", o, v, &a->sp.seed)) return 2;
            break;
        case 5:
            if (sscanf(v, "%u/%u/%u", &a->rec_k, &a->rec_d, &a->rec_n) != 3 || a->rec_k < 1 ||
                a->rec_k > HS_TOPK_MAX_K || a->rec_d < 1 || a->rec_d >= HS_TREE_MAX_DEPTH - 1) {
                fprintf(stderr,
                        "heterospec calibrate: --record %s: expected K/D/N, K 1..%u, D 1..%u, N >= 0\n", v,
                        HS_TOPK_MAX_K, HS_TREE_MAX_DEPTH - 2);
                return 2;
            }
            if (a->rec_n && a->rec_n < a->rec_d)
                fprintf(stderr,
                        "heterospec calibrate: --record %s drafts only %u of its %u levels (EAGLE-2 skips a "
                        "level its %u verified nodes cannot reach): the fit sees no deeper nodes\n",
                        v, a->rec_n, a->rec_d, a->rec_n);
            break;
        case 6:
            if (!hs_cli_int("calibrate", o, v, INT_MIN, INT_MAX, &a->strata)) return 2;
            break;
        case 7:
            if (!hs_cli_int("calibrate", o, v, INT_MIN, INT_MAX, &a->max_verify)) return 2;
            break;
        case 8:
            if (!hs_cli_int("calibrate", o, v, INT_MIN, INT_MAX, &a->reps)) return 2;
            break;
        case 9: a->out = v; break;
        case 10: a->head_weights = v; break;
        default:
            if (!hs_cli_int("calibrate", o, v, INT_MIN, INT_MAX, &a->timings)) return 2;
            break;
        }
    }
    if (a->n_predict < 2 || a->strata < 1 || a->strata > HS_HX_MAX_STRATA || a->reps < 1 || a->reps > 99 ||
        a->timings < 1 || a->timings > 9 || a->max_verify < 1 || a->max_verify >= HS_HX_MAX_N) {
        fprintf(stderr,
                "heterospec calibrate: need -n >= 2, 1 <= --strata <= %d, 1 <= -r <= 99, 1 <= --timings <= "
                "9, 1 <= --max-verify <= %d\n",
                HS_HX_MAX_STRATA, HS_HX_MAX_N - 1);
        return 2;
    }
    return 0;
}

static int dcmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, dcmp);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* Fills t[lo + 1 .. hi] with v (a capacity bucket's time holds for all of it). */
static void fill(double *t, uint32_t lo, uint32_t hi, double v) {
    for (uint32_t i = lo + 1; i <= hi; i++)
        t[i] = v;
}

/* The modelled speedup over plain decoding the tuned EAGLE-2 setting should
 * reach on every question set (hs_hx_groups.want): a margin above 1 for
 * what the cost model misses. */
#define E2_WANT 1.03

#define CTX_ROWS 256  /* context before the timed passes: a typical point of a generation */
#define CTX_LONG 1024 /* ... and the verification passes again after a long prompt */
/* Verification is timed at the target's graph sizes (hs_model_tree_bucket):
 * every N up to HS_MODEL_EXACT_BUCKETS, then powers of two up to 128; a size
 * between two costs what its bucket does. Draft levels at w = 1, 2, 4 .. 64. */
enum { NV = HS_MODEL_EXACT_BUCKETS + 4, ND = 7 };
_Static_assert(HS_TREE_EAGER_MAX <= HS_MODEL_EXACT_BUCKETS, "eager passes: vsize(0 .. HS_TREE_EAGER_MAX - 1)");
static uint32_t vsize(uint32_t i) {
    return i < HS_MODEL_EXACT_BUCKETS ? i + 1 : HS_MODEL_EXACT_BUCKETS << (i - HS_MODEL_EXACT_BUCKETS + 1);
}

/* Round r (r < 0: warm-up, untimed) of the verification passes of the
 * first `sizes` of N = 1, 2, 4 .. 128 chained nodes as speculation runs them
 * (nothing committed; the root's output head, or with all every row's,
 * hs_tree_policy.eager) into x. */
static hs_status time_verify(hs_llama *m, const int32_t *toks, const int32_t *parents, int r, uint32_t sizes,
                             bool all, double (*x)[100]) {
    hs_status st = HS_OK;
    uint32_t amax;
    const uint32_t *amax_all;
    for (uint32_t i = 0; i < sizes; i++) {
        const double t0 = hs_now_s();
        if (all)
            HS_TRY(hs_llama_eval(m, toks, vsize(i), parents, false, false, NULL, &amax_all));
        else
            HS_TRY(hs_llama_eval_tree(m, toks, vsize(i), parents, NULL, &amax));
        if (r >= 0) x[i][r] = hs_now_s() - t0;
    }
fail:
    return st;
}

static hs_status measure_cost(hs_llama *m, hs_eagle3 *h, int reps, hs_hx_cost *c) {
    hs_status st = HS_OK;
    const uint32_t V = hs_llama_cfg(m)->n_vocab;
    int32_t toks[HS_HX_MAX_N], parents[HS_HX_MAX_N], ctx[CTX_ROWS];
    uint32_t slots[CTX_ROWS];
    for (uint32_t i = 0; i < CTX_ROWS; i++) {
        ctx[i] = (int32_t)((i * 7919u + 11) % V);
        slots[i] = i;
    }
    for (uint32_t i = 0; i < HS_HX_MAX_N; i++) {
        toks[i] = (int32_t)((i * 104729u + 3) % V);
        parents[i] = (int32_t)i - 1;
    }
    const uint32_t rows = CTX_ROWS + HS_HX_MAX_N + 6 * (uint32_t)(reps + 1);
    if (hs_llama_max_batch(m) < HS_HX_MAX_N || hs_llama_n_ctx(m) < rows)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "calibrate: the target needs a batch of %u and a context of %u rows", HS_HX_MAX_N,
                       rows);
    hs_llama_reset(m);
    hs_eagle3_reset(h);
    const hs_topk_result *root;
    for (uint32_t at = 0; at + 1 < CTX_ROWS; at += HS_HX_MAX_N) {
        const uint32_t n = CTX_ROWS - 1 - at < HS_HX_MAX_N ? CTX_ROWS - 1 - at : HS_HX_MAX_N;
        HS_TRY(hs_llama_eval(m, ctx + at, n, NULL, true, true, NULL, NULL));
        HS_TRY(hs_eagle3_consume(h, slots, ctx + at + 1, n, &root));
    }
    /* Interleaved rounds (the first a warm-up), so that drifts of the
     * machine hit every measurement alike; medians per measurement:
     *   a plain decoding step right after the last round's end (the head's
     *   consume and a one-node draft level, below), and one right after
     *   that (as plain decoding runs them: the reference); their difference
     *   is t_after_head,
     *   verification of N chained nodes (nothing committed),
     *   the output head of one more node of the last pass (hs_llama_head), and
     *   of 2, 4 and 8 nodes in one product (hs_llama_heads),
     *   the head's consume of two kept rows (the target keeps them first),
     *   the same cache-only (hs_eagle3_consume_cache),
     *   a draft level of w nodes (all children of the root). */
    static double xv[NV][100], xd[ND][100], xc[100], xcc[100], xp[100], xh[100], xa[100], xhs[4][100];
    static double xva[HS_TREE_EAGER_MAX][100];
    const uint32_t *amax;
    const hs_topk_result *topk;
    uint32_t zeros[HS_HX_MAX_WIDTH] = {0};
    const uint32_t nd = hs_eagle3_max_nodes(h) < HS_HX_MAX_WIDTH ? 6 : ND; /* w <= 32 or <= 64 */
    memset(c, 0, sizeof *c);
    for (int r = -1; r < reps; r++) {
        double t0 = hs_now_s();
        HS_TRY(hs_llama_eval(m, toks, 1, NULL, true, false, NULL, &amax));
        if (r >= 0) xa[r] = hs_now_s() - t0;
        t0 = hs_now_s();
        HS_TRY(hs_llama_eval(m, toks, 1, NULL, true, false, NULL, &amax));
        if (r >= 0) {
            xp[r] = hs_now_s() - t0;
            xa[r] -= xp[r];
        }
        HS_TRY(time_verify(m, toks, parents, r, HS_TREE_EAGER_MAX, true, xva));
        HS_TRY(time_verify(m, toks, parents, r, NV, false, xv)); /* the heads below follow its last pass */
        uint32_t a;
        t0 = hs_now_s();
        HS_TRY(hs_llama_head(m, 1, NULL, &a));
        if (r >= 0) xh[r] = hs_now_s() - t0;
        for (uint32_t i = 1, k = 2; k <= HS_HX_MAX_HEADS; i++, k *= 2) {
            uint32_t ka[HS_HX_MAX_HEADS];
            t0 = hs_now_s();
            HS_TRY(hs_llama_heads(m, 1, k, NULL, ka));
            if (r >= 0) xhs[i][r] = hs_now_s() - t0;
        }
        HS_TRY(hs_llama_eval(m, toks, 2, NULL, true, true, NULL, NULL));
        t0 = hs_now_s();
        HS_TRY(hs_eagle3_consume_cache(h, slots, toks + 1, 2));
        if (r >= 0) xcc[r] = hs_now_s() - t0;
        HS_TRY(hs_llama_eval(m, toks, 2, NULL, true, true, NULL, NULL));
        t0 = hs_now_s();
        HS_TRY(hs_eagle3_consume(h, slots, toks + 1, 2, &root));
        if (r >= 0) xc[r] = hs_now_s() - t0;
        for (uint32_t i = 0; i < nd; i++) {
            hs_eagle3_reset_tree(h);
            t0 = hs_now_s();
            HS_TRY(hs_eagle3_draft(h, zeros, toks, 1u << i, &topk));
            if (r >= 0) xd[i][r] = hs_now_s() - t0;
        }
        /* The end of a round as a chain runs it (untimed), so that the next
         * round's first plain step (xa) follows the head's work a round does:
         * the target's pass keeps two rows, the head consumes them and drafts
         * one node. After the widest level above instead, xa also paid for
         * what that level left in the caches (up to 64 nodes' logits). */
        HS_TRY(hs_llama_eval(m, toks, 2, NULL, true, true, NULL, NULL));
        HS_TRY(hs_eagle3_consume(h, slots, toks + 1, 2, &root));
        hs_eagle3_reset_tree(h);
        HS_TRY(hs_eagle3_draft(h, zeros, toks, 1, &topk));
    }
    /* The verification passes again after CTX_LONG rows of context (they
     * commit nothing, so the context stays put), when the target holds it. */
    if (hs_llama_n_ctx(m) >= CTX_LONG + HS_HX_MAX_N) {
        static double xl[NV][100];
        int32_t filler[HS_HX_MAX_N];
        c->ctx0 = (CTX_ROWS - 1 + hs_llama_n_past(m)) / 2; /* the context grew by 6 a round above */
        for (uint32_t k = 0; hs_llama_n_past(m) < CTX_LONG; k++) {
            const uint32_t left = CTX_LONG - hs_llama_n_past(m), n = left < HS_HX_MAX_N ? left : HS_HX_MAX_N;
            for (uint32_t i = 0; i < n; i++)
                filler[i] = (int32_t)(((k * HS_HX_MAX_N + i) * 7919u + 11) % V);
            HS_TRY(hs_llama_eval(m, filler, n, NULL, true, true, NULL, NULL));
        }
        static double xla[HS_TREE_EAGER_MAX][100];
        for (int r = -1; r < reps; r++) {
            HS_TRY(time_verify(m, toks, parents, r, NV, false, xl));
            HS_TRY(time_verify(m, toks, parents, r, HS_TREE_EAGER_MAX, true, xla));
        }
        c->ctx1 = hs_llama_n_past(m);
        for (uint32_t i = 0; i < NV; i++)
            fill(c->t_verify_long, i ? vsize(i - 1) : 0, vsize(i), median(xl[i], reps));
        for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++)
            c->t_verify_all_long[n] = median(xla[n - 1], reps);
    }
    c->t_plain = median(xp, reps);
    /* Tests (calib_key): HS_TEST_CALIB_SLOW_PLAIN=N doubles the plain step of
     * the first N timings, a slow spell that hits both timings of one cost. */
    static int slowed;
    const char *slow = getenv("HS_TEST_CALIB_SLOW_PLAIN");
    if (slow && slowed < atoi(slow)) {
        c->t_plain *= 2;
        slowed++;
    }
    /* At least 1 us: a cost with it is told from one measured before it. */
    const double after = median(xa, reps);
    c->t_after_head = after > 1e-6 ? after : 1e-6;
    c->t_head = median(xh, reps);
    for (uint32_t i = 1, k = 2; k <= HS_HX_MAX_HEADS; i++, k *= 2)
        c->t_heads[k] = median(xhs[i], reps);
    for (uint32_t i = 0; i < NV; i++)
        fill(c->t_verify, i ? vsize(i - 1) : 0, vsize(i), median(xv[i], reps));
    c->n_verify = HS_HX_MAX_N;
    for (uint32_t n = 1; n <= HS_TREE_EAGER_MAX; n++)
        c->t_verify_all[n] = median(xva[n - 1], reps);
    c->n_verify_all = HS_TREE_EAGER_MAX;
    c->t_consume = median(xc, reps);
    c->t_consume_cache = median(xcc, reps);
    for (uint32_t i = 0; i < nd; i++)
        fill(c->t_draft, i ? 1u << (i - 1) : 0, 1u << i, median(xd[i], reps));
    c->n_draft = 1u << (nd - 1);
    hs_eagle3_reset_tree(h);
fail:
    return st;
}

/* An EAGLE-2 setting's row label: what, then k/d/n, eager, the floor and rest. */
static void e2_label(const char *what, const hs_tree_policy *p, char *buf, size_t size) {
    char floor_text[64] = "";
    if (p->p_min > 0)
        snprintf(floor_text, sizeof floor_text, ", path probability >= %g, rest %u", p->p_min, p->rest);
    snprintf(buf, size, "%s: k%u/d%u/n%u%s%s", what, p->top_k, p->depth, p->total,
             p->eager ? ", every head in the pass" : "", floor_text);
}

/* Closes the question set `set`'s group of recorded rounds at round `end`
 * (stb_ds arrays; nothing when it recorded none). */
static void end_group(uint32_t **ends, int **set_of, uint32_t end, int set) {
    if (end > (stbds_arrlen(*ends) ? (*ends)[stbds_arrlen(*ends) - 1] : 0)) {
        stbds_arrput(*ends, end);
        stbds_arrput(*set_of, set);
    }
}

/* The speedup is over plain decoding of the same tokens, a plain step each
 * at the round's context. */
static void print_replay(const char *what, const hs_hx_replay_result *r) {
    printf("| %s | %.2f | %.2fx | %.2f | %.1f |\n", what, hs_hx_replay_tps(r), hs_hx_replay_speedup(r),
           r->rounds ? r->tokens / r->rounds : 0, r->rounds ? r->verified / r->rounds : 0);
}

/* What chains could reach on this cost (hs_hx_chain_bound), before any
 * recording: the speedup for per-token acceptances a, and the least a that
 * reaches 1.5x and 2x, with free drafts (the lookup's) and the head's. */
static void print_chain_bounds(const hs_hx_cost *c, uint32_t max_verify) {
    static const double as[] = {0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0};
    const uint32_t max_d = max_verify - 1 < HS_TREE_MAX_DEPTH - 1 ? max_verify - 1 : HS_TREE_MAX_DEPTH - 1;
    printf("\nchains on this cost at context %u, each drafted token accepted with probability a given its "
           "parent (modelled speedup over plain decoding, best chain length in brackets; chains up to "
           "%u):\n\n| drafts | ",
           c->ctx0, max_d);
    for (size_t i = 0; i < sizeof as / sizeof *as; i++)
        printf("a %.1f | ", as[i]);
    printf("a for 1.5x | a for 2x |\n| --- |");
    for (size_t i = 0; i < sizeof as / sizeof *as + 2; i++)
        printf(" ---: |");
    for (int head = 0; head < 2; head++) {
        printf("\n| %s |", head ? "the head's" : "free (lookup)");
        for (size_t i = 0; i < sizeof as / sizeof *as; i++) {
            uint32_t d;
            const double s = hs_hx_chain_bound(c, c->ctx0, as[i], head, max_d, &d);
            printf(" %.2fx (%u) |", s, d);
        }
        for (int k = 0; k < 2; k++) {
            const double need = hs_hx_chain_needs(c, c->ctx0, k ? 2.0 : 1.5, head, max_d);
            printf(need > 1 ? " never |" : " %.2f |", need);
        }
    }
    printf("\n");
}

/* The device cost as calibrate prints it: the single costs, the table per
 * N or w at each measured context, and the chain bounds. */
static void print_cost(const hs_hx_cost *c, uint32_t max_verify) {
    printf(
        "\ndevice cost (ms): plain step %.2f (%.2f more after the head's work), output head of an accepted "
        "node %.2f (of 2 / 4 / 8 chained nodes at once %.2f / %.2f / %.2f), head consume %.2f (cache-only "
        "%.2f)\n\n| N or w | 1 | 2 | 3 | 4 | 5 | 6 | 7 | "
        "8 | 16 | 32 | 64 | 128 |\n| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: "
        "| ---: |",
        1e3 * c->t_plain, 1e3 * c->t_after_head, 1e3 * c->t_head, 1e3 * hs_hx_t_heads(c, 2),
        1e3 * hs_hx_t_heads(c, 4), 1e3 * hs_hx_t_heads(c, 8), 1e3 * c->t_consume,
        1e3 * c->t_consume_cache);
    /* One row per measured context (one row when the cost has no long table). */
    const bool two_ctx = c->ctx1 > c->ctx0;
    for (int row = 0; row < (two_ctx ? 2 : 1); row++) {
        const uint32_t ctx = row ? c->ctx1 : c->ctx0;
        if (two_ctx)
            printf("\n| verify N, context %u |", ctx);
        else
            printf("\n| verify N |");
        for (uint32_t i = 0; i < NV; i++)
            printf(" %.1f |", 1e3 * hs_hx_t_verify_at(c, vsize(i), ctx));
        if (two_ctx)
            printf("\n| ... every node's output head, context %u |", ctx);
        else
            printf("\n| ... every node's output head |");
        for (uint32_t i = 0; i < NV; i++)
            printf(vsize(i) <= c->n_verify_all ? " %.1f |" : " |",
                   1e3 * hs_hx_t_verify_all_at(c, vsize(i), ctx));
    }
    printf("\n| draft level of w |");
    for (uint32_t i = 0; i < NV; i++) {
        const uint32_t w = vsize(i);
        const bool pow2 = (w & (w - 1)) == 0;
        printf(pow2 && w <= c->n_draft ? " %.1f |" : " |", 1e3 * hs_hx_t_draft(c, w));
    }
    printf("\n");
    print_chain_bounds(c, max_verify);
}

/* Times the device cost `more` times again (measure_cost) and keeps in c the
 * fastest of each cost (hs_hx_cost_keep_faster), saying how far apart the
 * timings were. */
static hs_status time_again(hs_llama *m, hs_eagle3 *h, int reps, int more, hs_hx_cost *c) {
    hs_status st = HS_OK;
    uint32_t n_apart = 0;
    double worst = 1;
    for (int i = 0; i < more; i++) {
        hs_hx_cost again;
        uint32_t n;
        double w;
        HS_TRY(measure_cost(m, h, reps, &again));
        HS_TRY(hs_hx_cost_keep_faster(c, &again, &n, &w));
        n_apart += n;
        if (w > worst) worst = w;
    }
    if (more > 0)
        fprintf(stderr,
                "[calibrate] kept the fastest of %d timings of each cost: %u pairs differed by more than a "
                "quarter, the most by %.2fx\n",
                more + 1, n_apart, worst);
    /* Costs that contradict each other (hs_hx_cost_doubts): a slow spell hit both timings of some. */
    char why[200];
    uint32_t doubts = more > 0 ? hs_hx_cost_doubts(c, why, sizeof why) : 0;
    for (int extra = 0; doubts && extra < 2; extra++) {
        fprintf(stderr, "[calibrate] %u costs contradict each other (%s): timing them once more\n", doubts, why);
        hs_hx_cost again;
        HS_TRY(measure_cost(m, h, reps, &again));
        HS_TRY(hs_hx_cost_keep_faster(c, &again, NULL, NULL));
        doubts = hs_hx_cost_doubts(c, why, sizeof why);
    }
    if (doubts) fprintf(stderr, "[calibrate] %u costs still contradict each other (%s): kept\n", doubts, why);
fail:
    return st;
}

int hs_cli_calibrate(int argc, char **argv) {
    cal_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    const bool sampling = a.sp.temperature > 0;
    char model_path[1200], out_path[1400];
    hs_gguf *g = NULL;
    hs_tok *tok = NULL;
    hs_vk_ctx *vk = NULL;
    hs_ops *ops = NULL;
    hs_cli_spec_models sm = {0};
    hs_cli_hx base = {0};
    hs_cli_set *sets = NULL; /* the question sets (not with --device) */
    int n_sets = 0;
    hs_hx_recorder rec = {.st = HS_OK};
    hs_hx_record *records = NULL;
    hs_hx_lookup_record *lk_records = NULL, *text_lk_records = NULL;
    hs_hx_round *text_rounds = NULL;
    cJSON *o = NULL;
    char *text = NULL;
    rc = 1;
    if (hs_cli_model_path(a.model, model_path, sizeof model_path) != HS_OK) goto fail;
    if (hs_gguf_open(model_path, &g) != HS_OK || hs_tok_from_gguf(g, &tok) != HS_OK) goto fail;
    if (hs_sampler_params_validate(&a.sp) != HS_OK) goto fail;
    hs_vk_ctx_options vo = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&vo, &vk) != HS_OK || hs_ops_create(vk, &ops) != HS_OK) goto fail;
    const hs_vk_caps *caps = hs_vk_ctx_caps(vk);
    hs_cli_spec so;
    hs_cli_spec_defaults(&so);
    so.method = "eagle2";
    so.head = a.head;
    so.head_weights = a.head_weights;
    so.top_k = (int)a.rec_k;
    so.depth = (int)a.rec_d;
    so.tree_size = (int)(a.rec_n ? a.rec_n : a.rec_k * a.rec_d); /* 0: sized as the full tree */
    so.lookup = (int)HS_LOOKUP_MAX_LEN; /* every round records its longest lookup chain */
    hs_llama_options lo = {.max_batch = HS_HX_MAX_N, .kv_type = a.kv_type};
    if (hs_cli_spec_load(&so, ops, g, &lo, &sm) != HS_OK) goto fail;
    if (a.rec_n == 0) { /* every root records a tree: the same head, lookup and store, nothing verified */
        hs_tree_policy rp = hs_tree_record(a.rec_k, a.rec_d);
        rp.lookup = sm.policy.lookup;
        rp.lookup_min = sm.policy.lookup_min;
        rp.store_len = sm.policy.store_len;
        hs_spec_destroy(sm.spec);
        sm.spec = NULL;
        sm.policy = rp;
        if (hs_spec_create(sm.target, sm.head, &sm.policy, &sm.spec) != HS_OK) goto fail;
        hs_spec_set_store(sm.spec, sm.store);
    }
    hs_cli_hx_id id;
    if (hs_cli_hx_identity(caps, model_path, sm.head_path, &id) != HS_OK) goto fail;
    if (a.out)
        snprintf(out_path, sizeof out_path, "%s", a.out);
    else if (hs_cli_hx_cache_path(&id, sampling, a.kv_type, out_path, sizeof out_path) != HS_OK)
        goto fail;
    /* What exists already (this file, else the usual lookup) is the base. */
    FILE *exists = fopen(out_path, "rb");
    if (exists) fclose(exists);
    if (exists && a.if_missing) {
        printf("calibrate: %s exists, kept (--if-missing)\n", out_path);
        rc = 0;
        goto fail;
    }
    /* The question sets, before the device is timed (a wrong --data would fail only after that). */
    if (!a.device_only && hs_cli_qset_read(&a.q, &sets, &n_sets) != HS_OK) goto fail;
    if (hs_cli_hx_load(caps, model_path, sm.head_path, exists ? out_path : NULL, sampling, a.kv_type,
                       &base) != HS_OK)
        goto fail;
    hs_hx_model m = base.model;
    m.max_depth = a.rec_d;
    m.max_width = a.rec_k;
    m.max_verify = (uint32_t)a.max_verify;
    printf("calibrate: %s on %s (%s), head %s, %s, KV %s\n", model_path, caps->device_name,
           caps->driver_info, sm.head_path, sampling ? "sampling" : "greedy", hs_type_name(a.kv_type));

    /* A cost without t_head timed every row's output head in each pass (before
     * the head ran on demand), one without t_after_head its plain step right
     * after the head's work, one without t_heads no heads at once, one without
     * verify_all_s no pass with every head: measured again. */
    const bool measured_before = exists && base.model.cost.n_verify > 0 && base.model.cost.t_head > 0 &&
                                 base.model.cost.t_after_head > 0 && base.model.cost.t_heads[2] > 0 &&
                                 base.model.cost.n_verify_all > 0;
    const bool timed = a.device_only || !measured_before;
    if (timed) {
        fprintf(stderr, "[calibrate] timing verification, draft and consume (-r %d)\n", a.reps);
        if (measure_cost(sm.target, sm.head, a.reps, &m.cost) != HS_OK) goto fail;
    }
    if (a.device_only) { /* the other timings right after the first (else after the recording, below) */
        if (a.timings > 1) fprintf(stderr, "[calibrate] timing them again\n");
        if (time_again(sm.target, sm.head, a.reps, a.timings - 1, &m.cost) != HS_OK) goto fail;
        print_cost(&m.cost, m.max_verify);
    }

    hs_hx_eagle2_setting e2 = {0}, e2_pooled = {0};
    bool have_e2 = false;
    /* The recorded rounds per question set (stb_ds arrays: where each set's rounds end, and its index; a
     * set whose questions were all skipped has none). */
    uint32_t *group_ends = NULL;
    int *group_set = NULL;
    if (!a.device_only) {
        hs_spec_set_observer(sm.spec, hs_hx_recorder_observe, &rec);
        uint32_t n_questions = 0;
        for (int si = 0; si < n_sets; si++) {
            if (si) end_group(&group_ends, &group_set, (uint32_t)stbds_arrlen(rec.rounds), si - 1);
            const char *set = sets[si].name;
            const hs_cli_question *qs = sets[si].qs;
            const int nq = sets[si].n;
            for (int qi = 0; qi < nq; qi++) {
                fprintf(stderr, "\r[calibrate] %s question %d/%d, %td rounds so far   ", set, qi + 1, nq,
                        stbds_arrlen(rec.rounds));
                int32_t *ids = NULL;
                size_t n_ids = 0;
                hs_status st = hs_cli_prompt_ids(g, tok, qs[qi].text, !a.q.no_chat, NULL, &ids, &n_ids);
                if (st == HS_OK && hs_engine_check_fit(sm.target, n_ids, (uint32_t)a.n_predict) != HS_OK) {
                    fprintf(stderr, "\n[calibrate] %s question %d skipped: %s\n", set, qs[qi].id,
                            hs_last_error());
                    free(ids);
                    continue;
                }
                hs_hx_recorder_start(&rec);
                hs_gen_params gp = {.n_predict = (uint32_t)a.n_predict, .sp = a.sp, .spec = sm.spec};
                hs_gen_result r = {0};
                if (st == HS_OK) st = hs_engine_generate(sm.target, tok, ids, n_ids, &gp, &r);
                if (st == HS_OK) st = hs_hx_recorder_finish(&rec, r.ids, r.n_gen);
                /* The same text at every root, for the policy without the head. */
                if (st == HS_OK) st = hs_hx_text_rounds(ids, n_ids, r.ids, r.n_gen, sm.store, &text_rounds);
                hs_gen_result_free(&r);
                free(ids);
                if (st != HS_OK) goto fail;
                n_questions++;
            }
        }
        fprintf(stderr, "\r%70s\r", "");
        if (timed && a.timings > 1) { /* the other timings, minutes after the first */
            fprintf(stderr, "[calibrate] timing them again after the recording\n");
            if (time_again(sm.target, sm.head, a.reps, a.timings - 1, &m.cost) != HS_OK) goto fail;
        }
        print_cost(&m.cost, m.max_verify);
        const uint32_t n_rounds = (uint32_t)stbds_arrlen(rec.rounds);
        end_group(&group_ends, &group_set, n_rounds, n_sets - 1);
        for (uint32_t i = 0; i < n_rounds; i++)
            if (hs_hx_round_records(&rec.rounds[i], &records) != HS_OK ||
                hs_hx_round_lookup_records(&rec.rounds[i], &lk_records) != HS_OK)
                goto fail;
        const uint32_t n_rec = (uint32_t)stbds_arrlen(records), n_text = (uint32_t)stbds_arrlen(text_rounds);
        for (uint32_t i = 0; i < n_text; i++)
            if (hs_hx_round_lookup_records(&text_rounds[i], &text_lk_records) != HS_OK) goto fail;
        printf("\n%u questions, %u rounds, %u node records; %u roots for the policy without the head\n",
               n_questions, n_rounds, n_rec, n_text);
        /* Every decision is made again from the built-in ones (rest, lookup, feedback, headless,
         * plain), so the result does not depend on what an earlier calibration in the file chose;
         * only the device cost and the bounds carry over. */
        hs_hx_model fresh;
        hs_hx_model_default(&fresh);
        fresh.cost = m.cost;
        fresh.max_depth = m.max_depth;
        fresh.max_width = m.max_width;
        fresh.max_verify = m.max_verify;
        m = fresh;
        hs_hx_fit_options fo = {.n_strata = (uint32_t)a.strata, .feature = -1};
        if (hs_hx_fit(records, n_rec, &fo, &m) != HS_OK) goto fail;
        hs_hx_fit_lookup(lk_records, (uint32_t)stbds_arrlen(lk_records), &m.lookup);
        hs_hx_fit_lookup_headless(text_lk_records, (uint32_t)stbds_arrlen(text_lk_records), &m.lookup);
        hs_hx_replay_result r_fit, r_tuned, r_e2d, r_nolk, r_nofb;
        const hs_tree_policy hp = hs_heterospec_policy(&m);
        if (hs_hx_replay(&hp, &m.cost, rec.rounds, n_rounds, &r_fit) != HS_OK) goto fail;
        fprintf(stderr, "[calibrate] searching pruning thresholds and depth caps\n");
        if (hs_hx_search(&m, rec.rounds, n_rounds, &r_tuned) != HS_OK) goto fail;
        fprintf(stderr, "[calibrate] searching the EAGLE-2 grid\n");
        /* Tuned for every set where a setting replays faster than plain decoding on each (hs_hx_groups). */
        const hs_hx_groups groups = {
            .ends = group_ends, .n = (uint32_t)stbds_arrlen(group_ends), .want = E2_WANT};
        if (hs_hx_search_eagle2(&m.cost, rec.rounds, n_rounds, &groups, &e2, &e2_pooled) != HS_OK) goto fail;
        have_e2 = true;
        hs_hx_model nolk = m;
        nolk.lookup.max_len = 0;
        nolk.lookup.store_len = 0;
        const hs_tree_policy hp_nolk = hs_heterospec_policy(&nolk);
        if (hs_hx_replay(&hp_nolk, &m.cost, rec.rounds, n_rounds, &r_nolk) != HS_OK) goto fail;
        hs_hx_model nofb = m;
        nofb.fb_prior = 0;
        const hs_tree_policy hp_nofb = hs_heterospec_policy(&nofb);
        if (hs_hx_replay(&hp_nofb, &m.cost, rec.rounds, n_rounds, &r_nofb) != HS_OK) goto fail;
        /* HeteroSpec without the head: the lookup alone, valued by its table and the cost model. */
        hs_hx_model mh;
        hs_hx_replay_result r_hl, r_hl_rec;
        if (hs_hx_search_headless(&m, text_rounds, n_text, &mh, &r_hl) != HS_OK) goto fail;
        /* Which to keep is decided on the same rounds: the recorded ones, where the policy with the head
         * is replayed (recorded at every root, the default, they are exact for both; with --record
         * K/D/N, N > 0, they start where the recording's tree stopped, which flatters any policy, and
         * the text rounds, exact for this one, give its own figure). */
        const hs_tree_policy hp_hl = hs_heterospec_policy(&mh);
        if (hs_hx_replay(&hp_hl, &m.cost, rec.rounds, n_rounds, &r_hl_rec) != HS_OK) goto fail;
        hs_hx_take_headless(&m, &mh, false);
        /* Both tuned policies with the output heads computed one at a time, for comparison. */
        hs_hx_model one = m, one_hl = mh;
        one.heads = one_hl.heads = 1;
        hs_hx_replay_result r_one, r_one_hl;
        const hs_tree_policy hp_one = hs_heterospec_policy(&one), hp_one_hl = hs_heterospec_policy(&one_hl);
        if (hs_hx_replay(&hp_one, &m.cost, rec.rounds, n_rounds, &r_one) != HS_OK ||
            hs_hx_replay(&hp_one_hl, &m.cost, text_rounds, n_text, &r_one_hl) != HS_OK)
            goto fail;
        /* Prompt lookup without the head (bench-spec's lookup method), fixed chains. */
        static const uint32_t lk_lens[] = {1, 2, 3, 4, 6, 8, 12, 16};
        hs_hx_replay_result r_lk = {0}, r;
        uint32_t lk_len = 0, lk_min = 0;
        for (uint32_t a = 0; a < sizeof lk_lens / sizeof *lk_lens; a++)
            for (uint32_t b = 1; b <= 4; b++) {
                const hs_tree_policy lp = hs_tree_lookup(lk_lens[a], b);
                if (hs_hx_replay(&lp, &m.cost, text_rounds, n_text, &r) != HS_OK) goto fail;
                if (hs_hx_replay_tps(&r) > hs_hx_replay_tps(&r_lk)) {
                    r_lk = r;
                    lk_len = lk_lens[a];
                    lk_min = b;
                }
            }
        const hs_tree_policy e2d = hs_tree_eagle2(10, 5, 60);
        if (hs_hx_replay(&e2d, &m.cost, rec.rounds, n_rounds, &r_e2d) != HS_OK) goto fail;
        printf("\nstrata on %s (log-likelihood %.4f per record):\n\n| stratum | records | accept | look | "
               "depth cap | "
               "prune |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
               hs_hx_feature_name(m.feature), hs_hx_loglik(&m, records, n_rec));
        for (uint32_t b = 0; b < m.n_strata; b++)
            printf("| [%.3f, %.3f) | %u | %.3f | %.3f | %u | %.2f |\n", m.s[b].lo, m.s[b].hi, m.s[b].records,
                   m.s[b].rate, m.s[b].look, m.s[b].depth_cap, m.s[b].prune);
        printf("\ncontext lookup: %u records; P(accepted | parent accepted) by match length and place in "
               "the chain, lookup only / also the head's / any (the policy without the head):\n\n"
               "| match | 1st | 2nd | 3rd | 4th+ |\n"
               "| --- | --- | --- | --- | --- |\n",
               m.lookup.records);
        for (uint32_t mb = 0; mb < HS_HX_LK_MATCH; mb++) {
            printf("| %u%s |", mb + 1, mb + 1 == HS_HX_LK_MATCH ? "+" : "");
            for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
                printf(" %.2f / %.2f / %.2f |", m.lookup.accept[mb][pb][HS_HX_LK_ONLY],
                       m.lookup.accept[mb][pb][HS_HX_LK_HEAD], m.lookup.accept[mb][pb][HS_HX_LK_ANY]);
            printf("\n");
        }
        printf("\ntuned lookup: chains of %u after matches of %u+ tokens, no draft levels after matches of "
               "%u+ "
               "(0: always drafts)\n",
               m.lookup.max_len, m.lookup.min_match, m.lookup.nodraft);
        if (m.lookup.store_records) {
            printf("\nn-gram store (%s): %u records; P(accepted | parent accepted) by the store's confidence "
                   "and place in the chain, store only / also the head's / any:\n\n| confidence | 1st | 2nd | 3rd | "
                   "4th+ |\n| --- | --- | --- | --- | --- |\n",
                   sm.store_path, m.lookup.store_records);
            static const char *const conf_names[HS_NGRAM_CONF] = {"< 0.4", "0.4-0.6", "0.6-0.8", ">= 0.8"};
            for (uint32_t cb = 0; cb < HS_NGRAM_CONF; cb++) {
                printf("| %s |", conf_names[cb]);
                for (uint32_t pb = 0; pb < HS_HX_LK_POS; pb++)
                    printf(" %.2f / %.2f / %.2f |", m.lookup.store_accept[cb][pb][HS_HX_LK_ONLY],
                           m.lookup.store_accept[cb][pb][HS_HX_LK_HEAD],
                           m.lookup.store_accept[cb][pb][HS_HX_LK_ANY]);
                printf("\n");
            }
            printf("\ntuned store chains: %u tokens with the head, %u without (0: off)\n", m.lookup.store_len,
                   mh.lookup.store_len);
        }
        printf("\nreplayed on the recorded rounds (the policies without the head: at every root of the same "
               "answers), priced by the cost model (ar: one token per plain step at the round's context):\n\n"
               "| policy | tokens/s | vs ar | tau | verified/round |\n| --- | ---: | ---: | ---: | ---: |\n");
        print_replay("heterospec (fitted)", &r_fit);
        print_replay("heterospec (tuned)", &r_tuned);
        char label[160];
        snprintf(label, sizeof label, "heterospec (tuned, without the head: chains of %u after %u+)",
                 m.headless_len, m.headless_min);
        print_replay(label, &r_hl);
        print_replay("heterospec (the same, on the recorded rounds)", &r_hl_rec);
        print_replay("heterospec (tuned, lookup off)", &r_nolk);
        print_replay("heterospec (tuned, feedback off)", &r_nofb);
        snprintf(label, sizeof label, "heterospec (tuned, output heads one at a time; tuned: %u at once)",
                 hs_tree_heads_max(m.heads));
        print_replay(label, &r_one);
        snprintf(label, sizeof label, "heterospec (the same without the head; tuned: %u at once)",
                 hs_tree_heads_max(mh.heads));
        print_replay(label, &r_one_hl);
        if (m.fb_prior > 0)
            printf("| (heterospec's feedback: prior %g acceptances, decay %g per round) |\n", m.fb_prior,
                   m.fb_decay);
        if (mh.fb_prior > 0)
            printf("| (without the head its own: prior %g, decay %g) |\n", mh.fb_prior, mh.fb_decay);
        else
            printf("| (without the head: no feedback) |\n");
        printf("| (heterospec rests %u rounds after a round without candidates: %.0f%% of its rounds) |\n",
               m.rest, r_tuned.rounds ? 100 * r_tuned.rest_rounds / r_tuned.rounds : 0.0);
        e2_label("eagle2 best on every set", &e2.policy, label, sizeof label);
        print_replay(label, &e2.replay);
        e2_label("eagle2 fastest over all", &e2_pooled.policy, label, sizeof label);
        print_replay(label, &e2_pooled.replay);
        print_replay("eagle2 k10/d5/n60", &r_e2d);
        snprintf(label, sizeof label, "lookup without the head, best: l%u/m%u", lk_len, lk_min);
        print_replay(label, &r_lk);
        printf("\nEAGLE-2's modelled speedup over plain decoding per set (calibrate keeps the fastest setting "
               "whose every set reaches %.2fx, else the fastest faster than plain decoding on every set, else "
               "the fastest over all):\n\n| setting |",
               E2_WANT);
        for (ptrdiff_t k = 0; k < stbds_arrlen(group_set); k++)
            printf(" %s |", sets[group_set[k]].name);
        printf("\n| --- |");
        for (ptrdiff_t k = 0; k < stbds_arrlen(group_set); k++)
            printf(" ---: |");
        for (int which = 0; which < 2; which++) {
            e2_label(which ? "fastest over all" : "best on every set", which ? &e2_pooled.policy : &e2.policy,
                     label, sizeof label);
            printf("\n| %s |", label);
            for (uint32_t k = 0; k < groups.n; k++) {
                if (hs_hx_replay_group(which ? &e2_pooled.policy : &e2.policy, &m.cost, rec.rounds, &groups, k,
                                       &r) != HS_OK)
                    goto fail;
                printf(" %.2fx |", hs_hx_replay_speedup(&r));
            }
        }
        printf("\n");
        if (hs_hx_prefer_headless(&r_tuned, &r_hl_rec)) {
            printf("\nthe head does not pay here: on the recorded rounds HeteroSpec without it replays at %.2fx "
                   "plain decoding, with it %.2fx; generation with this calibration loads no head "
                   "(\"headless\": true)\n",
                   hs_hx_replay_speedup(&r_hl_rec), hs_hx_replay_speedup(&r_tuned));
            hs_hx_take_headless(&m, &mh, true);
            r_tuned = r_hl;
        }
        m.plain = !hs_hx_speculation_pays(&r_tuned);
        if (m.plain)
            printf("\nno tree pays here (tuned heterospec %.2fx plain decoding): generation with this "
                   "calibration decodes plainly (\"plain\": true)\n",
                   hs_hx_replay_speedup(&r_tuned));
        else
            printf("\nspeculation pays here (tuned heterospec %.2fx plain decoding)\n",
                   hs_hx_replay_speedup(&r_tuned));
    }

    o = hs_hx_model_to_json(&m);
    cJSON *idj = hs_cli_hx_identity_json(caps, &id, model_path, sm.head_path, sampling, a.kv_type);
    for (cJSON *it = idj->child; it;) {
        cJSON *next = it->next;
        cJSON_AddItemToObject(o, it->string, cJSON_DetachItemViaPointer(idj, it));
        it = next;
    }
    cJSON_Delete(idj);
    if (have_e2) {
        cJSON *e = cJSON_AddObjectToObject(o, "eagle2_tuned");
        cJSON_AddNumberToObject(e, "top_k", e2.policy.top_k);
        cJSON_AddNumberToObject(e, "depth", e2.policy.depth);
        cJSON_AddNumberToObject(e, "total", e2.policy.total);
        cJSON_AddNumberToObject(e, "eager", e2.policy.eager);
        cJSON_AddNumberToObject(e, "p_min", round(e2.policy.p_min * 1e4) / 1e4); /* the grid's value */
        cJSON_AddNumberToObject(e, "rest", e2.policy.rest);
        cJSON_AddNumberToObject(e, "replay_tokens_per_s", hs_hx_replay_tps(&e2.replay));
        cJSON_AddNumberToObject(e, "replay_speedup", hs_hx_replay_speedup(&e2.replay));
        if (stbds_arrlen(group_set)) { /* its slowest set on the recording */
            cJSON_AddStringToObject(e, "replay_slowest_set", sets[group_set[e2.worst_group]].name);
            cJSON_AddNumberToObject(e, "replay_slowest_speedup", e2.worst);
        }
    }
    cJSON *cal = cJSON_AddObjectToObject(o, "calibration");
    cJSON_AddStringToObject(cal, "sets", a.q.sets);
    cJSON_AddNumberToObject(cal, "question_from", a.q.q_from);
    cJSON_AddNumberToObject(cal, "question_to", a.q.q_to);
    cJSON_AddNumberToObject(cal, "n_predict", a.n_predict);
    cJSON_AddNumberToObject(cal, "rounds", (double)stbds_arrlen(rec.rounds));
    cJSON_AddNumberToObject(cal, "records", (double)stbds_arrlen(records));
    cJSON_AddBoolToObject(cal, "strata_fitted", !a.device_only);
    text = cJSON_Print(o);
    char dir[1400];
    snprintf(dir, sizeof dir, "%s", out_path);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = 0;
        if (hs_mkdir_p(dir) != HS_OK) goto fail;
    }
    FILE *f = fopen(out_path, "wb");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0) {
        HS_FAIL(HS_ERR_IO, "cannot write %s", out_path);
        goto fail;
    }
    printf("\nwrote %s\n", out_path);
    rc = 0;
fail:
    if (rc) fprintf(stderr, "\nheterospec calibrate: %s\n", hs_last_error());
    free(text);
    cJSON_Delete(o);
    hs_hx_recorder_free(&rec);
    stbds_arrfree(records);
    stbds_arrfree(lk_records);
    hs_hx_rounds_free(&text_rounds);
    stbds_arrfree(text_lk_records);
    stbds_arrfree(group_ends);
    stbds_arrfree(group_set);
    hs_cli_sets_free(sets, n_sets);
    hs_cli_spec_unload(&sm);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
    hs_tok_destroy(tok);
    hs_gguf_close(g);
    return rc;
}
