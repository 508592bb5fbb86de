/* `heterospec bench-spec`: speculative methods against plain decoding on
 * question sets in EAGLE's format (DESIGN.md section 8). Every method runs on
 * the same questions in the same process, question by question (all methods
 * on one question before the next, so drifts of the machine hit all alike);
 * each method has one untimed warm-up generation first, after recording every
 * graph its rounds can ask for (hs_spec_prepare). With -r N each question runs
 * every method N times, the order of the methods turned by one each time, and
 * a question's figures are those of the method's run of median time. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "gguf.h"
#include "hs_bench_ops.h"
#include "hs_cli.h"
#include "tok_gguf.h"

#ifndef HS_SHARED_DATA
#define HS_SHARED_DATA "../shared/data/bench" /* for --help; hs_cli_qset_defaults has the same */
#endif
#include "hs_build_id.h" /* HS_BUILD_ID: generated at build time (cmake/build_id.cmake) */

#define MAX_METHODS 16
#define MAX_REPEAT 15

static void usage(FILE *f) {
    fprintf(f, "usage: heterospec bench-spec [options]\n\n"
               "Generates the first turn of each question (chat template) with every method and\n"
               "reports, per set and method: tokens/s, speedup over ar (same run), tau (tokens per\n"
               "target pass), verified tokens per round, draft share of the time, and whether the\n"
               "output equals ar's (greedy).\n\n"
               "  -m FILE            GGUF model (default: $HS_HOME/" HS_CLI_DEFAULT_MODEL ")\n"
               "  --head FILE        draft head (default: the first that fits the model)\n"
               "  --head-weights W   auto (default: q4_1 where the device computes with 8-bit\n"
               "                     activations), file (as stored) or q4_1\n"
               "  --data DIR         folder of <set>/question.jsonl (default: " HS_SHARED_DATA ")\n"
               "  --sets A,B,..      sets (default mt_bench,humaneval,gsm8k,alpaca,sum)\n"
               "  --questions F-T    questions F..T of each set, 1-based, in file order (default 1-10)\n"
               "  -n N               most new tokens per question (default 128)\n"
               "  -c N               context size (default: model's, at most 4096)\n"
               "  --kv-type T        the target's KV cache: f16 (default) or f32\n"
               "  --temp T[,T..]     temperatures (default 0: greedy); several run every method at\n"
               "                     each (labels get @tT, speedups are against ar at the same T)\n"
               "  --seed S           sampling seed (default 0)\n"
               "  -r N               runs of each method per question (default 1, at most 15), the\n"
               "                     methods' order turned by one each run; a question's figures are\n"
               "                     those of the method's run of median time (a run that gives\n"
               "                     other tokens is reported, and a greedy question then counts\n"
               "                     as not equal to ar)\n"
               "  --methods LIST     comma-separated (default ar,chain,eagle2); a method is\n"
               "                     ar | chain[/dD] | static[/B1xB2x..]\n"
               "                     | eagle2[/kK][/dD][/nN][/pP][/rR]\n"
               "                     | heterospec[/lL][/f0][/h1][/s0] | eagle2-tuned\n"
               "                     | lookup[/lL][/mM], each but eagle2-tuned also [/eN],\n"
               "                     each but lookup and ar also [/wW] (the head consumes only\n"
               "                     the prompt's last W rows, 0 all of them: --head-window W)\n"
               "                     (d: depth, k: draft top-k, n: tree size, p: --p-min in\n"
               "                     percent, r: --rest, l: context lookup\n"
               "                     chain length, 0 off; f0: heterospec without its acceptance\n"
               "                     feedback; h1: with the head where the calibration drops it;\n"
               "                     s0: without the n-gram store's chains; eN: lists of up to\n"
               "                     N tokens get every output head in the pass, e0 never\n"
               "                     (default: heterospec's calibration's, else never);\n"
               "                     lookup: prompt lookup decoding without\n"
               "                     the head, chains of L (default 3) after matches of M+ tokens\n"
               "                     (default 2); other defaults as generate;\n"
               "                     heterospec and eagle2-tuned take this device's calibration,\n"
               "                     see heterospec calibrate)\n"
               "  --calibration F    calibration JSON for heterospec and eagle2-tuned\n"
               "  --store FILE|none  heterospec's n-gram store (default: the one in $HS_HOME/ngram\n"
               "                     built for the model's vocabulary, see heterospec ngram-build)\n"
               "  --no-chat          the turn as it is, without the chat template\n"
               "  -o md|json         markdown tables (default) or one JSON object\n");
}

typedef struct method {
    char label[80];
    bool ar;
    float temp;
    int ar_ref; /* the ar method at the same temperature, -1 if none */
    hs_tree_policy policy;
    int lookup;    /* heterospec/lN: context lookup chain length (0: off); -1: the calibration's */
    int feedback;  /* heterospec/f0: 0 turns the acceptance feedback off; -1: the calibration's */
    int with_head; /* heterospec/h1: 1 keeps the head where the calibration says headless; -1: as it says */
    int store;     /* heterospec/s0: 0 turns the n-gram store's chains off; -1: the calibration's */
    int eager;     /* /eN: hs_tree_policy.eager (0: off); -1: the method's (heterospec: the calibration's) */
    int window;    /* /wN: the head's window (0: the whole prompt; -1: the head's default) */
    hs_hx_model hx; /* heterospec/h1: the calibration's model with the head (the policy points here) */
    hs_spec *spec; /* NULL for ar and plain */
    bool plain;    /* heterospec whose calibration found that no tree pays here: decodes plainly */
} method;

#define MAX_TEMPS 4

typedef struct acc {
    double tokens, gen_s, draft_s, verify_s;
    uint64_t rounds, accepted, verified, rest_rounds, eager_rounds;
    uint32_t questions, equal, compared;
} acc;

typedef struct args {
    const char *model, *head, *methods, *out, *calib, *head_weights, *store;
    hs_cli_qset q;
    int n_predict, n_ctx, n_temps, repeat;
    hs_type kv_type;
    float temps[MAX_TEMPS];
    hs_sampler_params sp;
} args;

static int parse(int argc, char **argv, args *a) {
    memset(a, 0, sizeof *a);
    hs_cli_qset_defaults(&a->q);
    a->methods = "ar,chain,eagle2";
    a->kv_type = HS_CLI_KV_DEFAULT;
    a->out = "md";
    a->n_predict = 128;
    a->sp = hs_sampler_default_params();
    a->sp.temperature = 0.0f;
    a->n_temps = 1;
    a->repeat = 1;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 1;
        }
        const int used = hs_cli_qset_option(&a->q, "bench-spec", o, v);
        if (used < 0) return 2;
        if (used) {
            i += used - 1;
            continue;
        }
        const int kv = hs_cli_kv_option("bench-spec", o, v, &a->kv_type);
        if (kv < 0) return 2;
        if (kv) {
            i++;
            continue;
        }
        const char *const valued[] = {"-m",     "--head",    "-n", "-c",           "--temp",
                                      "--seed", "--methods", "-o", "--calibration", "--head-weights",
                                      "--store", "-r"};
        const int w = hs_cli_option_index(o, valued, (int)(sizeof valued / sizeof valued[0]));
        if (w < 0) {
            fprintf(stderr, "heterospec bench-spec: unknown option '%s' (see --help)\n", o);
            return 2;
        }
        if (!v) {
            fprintf(stderr, "heterospec bench-spec: %s needs a value\n", o);
            return 2;
        }
        i++;
        switch (w) {
        case 0: a->model = v; break;
        case 1: a->head = v; break;
        case 2:
            if (!hs_cli_int("bench-spec", o, v, 0, INT_MAX, &a->n_predict)) return 2;
            break;
        case 3:
            if (!hs_cli_int("bench-spec", o, v, 0, INT_MAX, &a->n_ctx)) return 2;
            break;
        case 4: {
            char *end = NULL;
            a->n_temps = 0;
            for (const char *t = v; a->n_temps < MAX_TEMPS; t = end + 1) {
                a->temps[a->n_temps++] = strtof(t, &end);
                if (end == t || a->temps[a->n_temps - 1] < 0 || (*end && *end != ',')) {
                    fprintf(stderr, "heterospec bench-spec: --temp %s: expected T[,T..], each >= 0\n", v);
                    return 2;
                }
                if (!*end) break;
            }
            if (*end) {
                fprintf(stderr, "heterospec bench-spec: --temp %s: at most %d temperatures\n", v, MAX_TEMPS);
                return 2;
            }
            break;
        }
        case 5:
            if (!hs_cli_u64("bench-spec", o, v, &a->sp.seed)) return 2;
            break;
        case 6: a->methods = v; break;
        case 7: a->out = v; break;
        case 8: a->calib = v; break;
        case 9: a->head_weights = v; break;
        case 10: a->store = v; break;
        default:
            if (!hs_cli_int("bench-spec", o, v, 1, MAX_REPEAT, &a->repeat)) return 2;
            break;
        }
    }
    if (a->n_predict < 1 || a->n_ctx < 0 || (strcmp(a->out, "md") && strcmp(a->out, "json"))) {
        fprintf(stderr, "heterospec bench-spec: -n must be >= 1, -c >= 0, -o md or json\n");
        return 2;
    }
    return 0;
}

/* "eagle2/k8/d4/n32" -> a policy through the generate options' rules. */
static hs_status parse_method(const char *text, method *m) {
    hs_status st = HS_OK;
    memset(m, 0, sizeof *m);
    snprintf(m->label, sizeof m->label, "%s", text);
    m->lookup = -1;
    m->feedback = -1;
    m->with_head = -1;
    m->store = -1;
    m->eager = -1;
    m->window = -1;
    char buf[64];
    snprintf(buf, sizeof buf, "%s", text);
    char *save = NULL, *name = strtok_r(buf, "/", &save);
    if (!name) return HS_FAIL(HS_ERR_INVALID_ARG, "empty method");
    if (!strcmp(name, "ar")) {
        m->ar = true;
        return HS_OK;
    }
    if (!strcmp(name, "eagle2-tuned")) { /* the calibration's setting, attached after loading */
        for (char *part; (part = strtok_r(NULL, "/", &save));)
            if (part[0] != 'w' || !hs_cli_parse_int(part + 1, 0, INT_MAX, &m->window))
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: eagle2-tuned takes only /wN (the head's window)",
                               text);
        m->policy = (hs_tree_policy){.name = "eagle2-tuned"};
        return HS_OK;
    }
    if (!hs_cli_spec_builds(name))
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "method %s: expected ar, chain, static, eagle2, eagle2-tuned, heterospec or lookup", text);
    hs_cli_spec s;
    hs_cli_spec_defaults(&s);
    s.method = name;
    char tree[64] = "";
    int p_pct = 0; /* eagle2's /pP: the floor on path probability in percent */
    for (char *part; (part = strtok_r(NULL, "/", &save));) {
        int *dst = part[0] == 'd'   ? &s.depth
                   : part[0] == 'k' ? &s.top_k
                   : part[0] == 'n' ? &s.tree_size
                   : part[0] == 'l' && (!strcmp(name, "heterospec") || !strcmp(name, "lookup")) ? &m->lookup
                   : part[0] == 'm' && !strcmp(name, "lookup")                                 ? &s.depth
                   : part[0] == 'f' && !strcmp(name, "heterospec")                             ? &m->feedback
                   : part[0] == 'h' && !strcmp(name, "heterospec")                             ? &m->with_head
                   : part[0] == 's' && !strcmp(name, "heterospec")                             ? &m->store
                   : part[0] == 'e'                                                            ? &m->eager
                   : part[0] == 'w' && strcmp(name, "lookup")                                  ? &m->window
                   : part[0] == 'p' && !strcmp(name, "eagle2")                                 ? &p_pct
                   : part[0] == 'r' && !strcmp(name, "eagle2")                                 ? &s.rest
                                    : NULL;
        if (!strcmp(name, "static") && part[0] != 'e' && part[0] != 'w') {
            snprintf(tree, sizeof tree, "%s", part);
            for (char *c = tree; *c; c++)
                if (*c == 'x') *c = ',';
            s.tree = tree;
        } else if (dst && part[1] >= '0' && part[1] <= '9') {
            if (!hs_cli_parse_int(part + 1, 0, INT_MAX, dst))
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: '%s' is not a letter and a number", text,
                               part);
            if (dst == &m->lookup && *dst > (int)HS_LOOKUP_MAX_LEN)
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: a lookup chain is 0..%u tokens", text,
                               HS_LOOKUP_MAX_LEN);
            if (dst == &m->eager && *dst > (int)HS_TREE_EAGER_MAX)
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: e is 0..%u (list entries)", text,
                               HS_TREE_EAGER_MAX);
            if (dst == &p_pct && *dst > 99)
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: p is 0..99 (percent)", text);
            if (dst == &s.rest && *dst > HS_HX_MAX_REST)
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: r is 0..%d (rounds)", text, HS_HX_MAX_REST);
            if (dst == &m->with_head && *dst != 1)
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: h1 (with the head) is the only h option",
                               text);
            if (dst == &m->store && *dst != 0)
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: s0 (store off) is the only s option", text);
            if (dst == &m->feedback && *dst != 0)
                return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: f0 (feedback off) is the only f option",
                               text);
        } else {
            return HS_FAIL(HS_ERR_INVALID_ARG, "method %s: unknown part '%s'", text, part);
        }
    }
    s.lookup = m->lookup;
    s.p_min = (float)p_pct / 100;
    HS_TRY(hs_cli_spec_policy(&s, &m->policy));
    if (m->eager >= 0) m->policy.eager = (uint32_t)m->eager;
fail:
    return st;
}

/* One question's run; compared/equal: its output was compared with ar's and
 * equalled it. */
static void add(acc *a, const hs_gen_result *r, bool ar, bool compared, bool equal) {
    a->questions++;
    a->tokens += r->n_gen > 1 ? r->n_gen - 1 : 0; /* the first token comes from the prompt pass */
    a->gen_s += r->gen_s;
    a->compared += compared;
    a->equal += equal;
    if (!ar) {
        a->rounds += r->spec.rounds;
        a->accepted += r->spec.accepted;
        a->verified += r->spec.verified;
        a->rest_rounds += r->spec.rest_rounds;
        a->eager_rounds += r->spec.eager_rounds;
        a->draft_s += r->spec.draft_s;
        a->verify_s += r->spec.verify_s;
    }
}

/* Two generations gave the same tokens. */
static bool same_tokens(const hs_gen_result *a, const hs_gen_result *b) {
    return a->n_gen == b->n_gen && !memcmp(a->ids, b->ids, sizeof *a->ids * a->n_gen);
}

/* The run of median time among runs[0 .. n) (the lower one of an even count;
 * equal times ranked by run). */
static int median_run(const hs_gen_result *runs, int n) {
    for (int j = 0; j < n; j++) {
        int rank = 0;
        for (int k = 0; k < n; k++)
            rank += runs[k].gen_s < runs[j].gen_s || (runs[k].gen_s == runs[j].gen_s && k < j);
        if (rank == (n - 1) / 2) return j;
    }
    return 0;
}

static double tps(const acc *a) { return a->gen_s > 0 ? a->tokens / a->gen_s : 0; }
static double tau(const acc *a, bool ar) {
    return ar || !a->rounds ? 1.0 : 1.0 + (double)a->accepted / a->rounds; /* no rounds: decoded plainly */
}
static double vpr(const acc *a, bool ar) { return ar || !a->rounds ? 1.0 : (double)a->verified / a->rounds; }
static double dshare(const acc *a) { return a->gen_s > 0 ? a->draft_s / a->gen_s : 0; }

/* Tokens/s of the ar method at the method's temperature (0 if none). */
static double base_tps(const method *ms, int i, const acc *row) {
    return ms[i].ar_ref >= 0 ? tps(&row[ms[i].ar_ref]) : 0;
}

static void print_table(const char *title, method *ms, int nm, const acc *row) {
    printf("\n### %s\n\n| method | tokens/s | speedup | tau | verified/round | draft share | equal to ar |\n"
           "| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n",
           title);
    for (int i = 0; i < nm; i++) {
        const double base = base_tps(ms, i, row);
        char eq[32] = "n/a";
        if (ms[i].temp <= 0 && ms[i].ar_ref >= 0)
            snprintf(eq, sizeof eq, "%u/%u", row[i].equal, row[i].compared);
        printf("| %s | %.2f | %s%.2fx | %.2f | %.1f | %.1f%% | %s |\n", ms[i].label, tps(&row[i]),
               base > 0 ? "" : "~", base > 0 ? tps(&row[i]) / base : 0.0, tau(&row[i], ms[i].ar),
               vpr(&row[i], ms[i].ar), 100 * dshare(&row[i]), eq);
    }
}

static cJSON *acc_json(const method *m, const acc *a, double base) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", m->label);
    cJSON_AddNumberToObject(o, "temperature", m->temp);
    /* The head's window over the prompt (0: the whole prompt, or no head). */
    cJSON_AddNumberToObject(o, "head_window", m->spec ? hs_spec_head_window(m->spec) : 0);
    cJSON_AddNumberToObject(o, "questions", a->questions);
    cJSON_AddNumberToObject(o, "tokens", a->tokens);
    cJSON_AddNumberToObject(o, "gen_s", a->gen_s);
    cJSON_AddNumberToObject(o, "tokens_per_s", tps(a));
    cJSON_AddNumberToObject(o, "speedup", base > 0 ? tps(a) / base : 0);
    cJSON_AddNumberToObject(o, "tau", tau(a, m->ar));
    cJSON_AddNumberToObject(o, "verified_per_round", vpr(a, m->ar));
    cJSON_AddNumberToObject(o, "draft_share", dshare(a));
    cJSON_AddNumberToObject(o, "rest_share", a->rounds ? (double)a->rest_rounds / a->rounds : 0);
    cJSON_AddNumberToObject(o, "eager_share", a->rounds ? (double)a->eager_rounds / a->rounds : 0);
    cJSON_AddNumberToObject(o, "equal_to_ar", a->equal);
    cJSON_AddNumberToObject(o, "compared_to_ar", a->compared);
    return o;
}

int hs_cli_bench_spec(int argc, char **argv) {
    args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    method ms[MAX_METHODS];
    int nm = 0;
    /* Per temperature: its methods, ar first, so every other method is
     * compared with ar on each question. */
    for (int ti = 0; ti < a.n_temps; ti++) {
        const int first = nm;
        char *mlist = strdup(a.methods), *save = NULL;
        for (char *t = strtok_r(mlist, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            if (nm == MAX_METHODS || parse_method(t, &ms[nm]) != HS_OK) {
                fprintf(stderr, "heterospec bench-spec: %s\n",
                        nm == MAX_METHODS ? "too many methods (times temperatures)" : hs_last_error());
                free(mlist);
                return 2;
            }
            ms[nm].temp = a.temps[ti];
            if (a.n_temps > 1) {
                const size_t len = strlen(ms[nm].label);
                snprintf(ms[nm].label + len, sizeof ms[nm].label - len, " @t%g", a.temps[ti]);
            }
            nm++;
        }
        free(mlist);
        for (int i = first; i < nm; i++)
            if (ms[i].ar && i != first) {
                method t = ms[i];
                memmove(&ms[first + 1], &ms[first], sizeof *ms * (size_t)(i - first));
                ms[first] = t;
                break;
            }
        for (int i = first; i < nm; i++)
            ms[i].ar_ref = ms[first].ar ? first : -1;
    }
    char model_path[1200];
    hs_gguf *g = NULL;
    hs_tok *tok = NULL;
    hs_vk_ctx *vk = NULL;
    hs_ops *ops = NULL;
    hs_cli_spec_models sm = {0};
    hs_ngram *store = NULL;
    char store_path[1200] = "";
    static hs_cli_hx hxs[2]; /* greedy, sampling (large: static) */
    bool hx_loaded[2] = {false, false};
    hs_cli_set *sets = NULL; /* read before anything loads */
    int ns = 0;
    acc *accs = NULL, *all = NULL;
    cJSON *records = cJSON_CreateArray();
    rc = 1;
    if (hs_cli_qset_read(&a.q, &sets, &ns) != HS_OK) goto fail;
    /* Per set and method; row ns: all sets together. */
    accs = calloc((size_t)(ns + 1) * nm, sizeof *accs);
    if (accs) all = accs + (size_t)ns * nm;
    if (!accs || hs_cli_model_path(a.model, model_path, sizeof model_path) != HS_OK) goto fail;
    if (hs_gguf_open(model_path, &g) != HS_OK || hs_tok_from_gguf(g, &tok) != HS_OK) goto fail;
    for (int ti = 0; ti < a.n_temps; ti++) {
        hs_sampler_params sp = a.sp;
        sp.temperature = a.temps[ti];
        if (hs_sampler_params_validate(&sp) != HS_OK) goto fail;
    }
    hs_vk_ctx_options vo = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&vo, &vk) != HS_OK || hs_ops_create(vk, &ops) != HS_OK) goto fail;
    /* One target and head for all methods: the head's K is the largest any
     * method keeps per node (at least EAGLE-2's default 10). */
    hs_cli_spec so;
    hs_cli_spec_defaults(&so);
    so.head = a.head;
    so.head_weights = a.head_weights;
    int k = 10;
    for (int i = 0; i < nm; i++) {
        if (ms[i].ar) continue;
        so.method = "eagle2";
        if ((int)ms[i].policy.top_k > k) k = (int)ms[i].policy.top_k;
        for (uint32_t d = 0; d < ms[i].policy.depth && !strcmp(ms[i].policy.name, "static"); d++)
            if ((int)ms[i].policy.branch[d] > k) k = (int)ms[i].policy.branch[d];
    }
    so.top_k = k;
    hs_llama_options lo = {.n_ctx = (uint32_t)a.n_ctx, .kv_type = a.kv_type};
    if (hs_cli_spec_load(&so, ops, g, &lo, &sm) != HS_OK) goto fail;
    /* heterospec and eagle2-tuned: the calibration of each mode used. */
    for (int i = 0; i < nm; i++) {
        const bool hx = !strcmp(ms[i].policy.name ? ms[i].policy.name : "", "heterospec");
        const bool e2 = !strcmp(ms[i].policy.name ? ms[i].policy.name : "", "eagle2-tuned");
        if (!hx && !e2) continue;
        const int mode = ms[i].temp > 0;
        if (!hx_loaded[mode]) {
            if (hs_cli_hx_load(hs_vk_ctx_caps(vk), model_path, sm.head_path, a.calib, mode == 1,
                               a.kv_type, &hxs[mode]) != HS_OK)
                goto fail;
            hx_loaded[mode] = true;
            fprintf(stderr, "[bench-spec] %s calibration: %s\n", mode ? "sampling" : "greedy",
                    hxs[mode].source);
        }
        if (hx) {
            ms[i].policy = hs_heterospec_policy(&hxs[mode].model);
            if (ms[i].with_head == 1) {
                ms[i].hx = hxs[mode].model;
                ms[i].hx.headless = false;
                ms[i].policy = hs_heterospec_policy(&ms[i].hx);
            }
            if (ms[i].lookup >= 0) {
                ms[i].policy.lookup = (uint32_t)ms[i].lookup;
                if (!ms[i].policy.lookup_min) ms[i].policy.lookup_min = 1;
            }
            if (ms[i].feedback == 0) ms[i].policy.observe = NULL;
            if (ms[i].store == 0) ms[i].policy.store_len = 0;
            if (ms[i].eager >= 0) ms[i].policy.eager = (uint32_t)ms[i].eager;
            ms[i].plain = hxs[mode].model.plain;
            if (ms[i].plain) {
                fprintf(stderr,
                        "[bench-spec] %s: the calibration found that no tree pays here: plain decoding\n",
                        ms[i].label);
                const size_t len = strlen(ms[i].label);
                snprintf(ms[i].label + len, sizeof ms[i].label - len, " (plain)");
            } else if (ms[i].policy.headless) {
                fprintf(stderr, "[bench-spec] %s: the calibration found that the head does not pay here: the "
                        "context lookup alone\n", ms[i].label);
                const size_t len = strlen(ms[i].label);
                snprintf(ms[i].label + len, sizeof ms[i].label - len, " (no head)");
            }
        } else if (hxs[mode].have_eagle2) {
            ms[i].policy = hxs[mode].eagle2;
            const size_t len = strlen(ms[i].label);
            char floor_text[32] = ""; /* the floor in percent, as eagle2's /pP takes it */
            if (ms[i].policy.p_min > 0 || ms[i].policy.rest)
                snprintf(floor_text, sizeof floor_text, "/p%g/r%u", 100 * (double)ms[i].policy.p_min,
                         ms[i].policy.rest);
            snprintf(ms[i].label + len, sizeof ms[i].label - len, " (k%u/d%u/n%u%s%s)", ms[i].policy.top_k,
                     ms[i].policy.depth, ms[i].policy.total, ms[i].policy.eager ? "/eager" : "", floor_text);
        } else {
            HS_FAIL(HS_ERR_INVALID_ARG,
                    "eagle2-tuned: the calibration (%s) chose no EAGLE-2 setting; run heterospec "
                    "calibrate on this device",
                    hxs[mode].source);
            goto fail;
        }
    }
    /* The head's window (/wN), on every method's final policy (heterospec's and eagle2-tuned's come from the
     * calibrations above). */
    for (int i = 0; i < nm; i++)
        hs_cli_set_head_window(&ms[i].policy, ms[i].window);
    for (int i = 0; i < nm; i++)
        if (!ms[i].ar && !ms[i].plain &&
            hs_spec_create(sm.target, strcmp(ms[i].policy.name, "lookup") ? sm.head : NULL, &ms[i].policy,
                           &ms[i].spec) != HS_OK)
            goto fail;
    /* The n-gram store, for the methods whose calibration drafts from one. */
    bool want_store = false;
    for (int i = 0; i < nm; i++)
        want_store = want_store || (ms[i].spec && ms[i].policy.store_len > 0);
    if (want_store) {
        if (hs_cli_store_open(a.store, g, "bench-spec", store_path, sizeof store_path, &store) != HS_OK) goto fail;
        for (int i = 0; store && i < nm; i++)
            if (ms[i].spec && ms[i].policy.store_len) hs_spec_set_store(ms[i].spec, store);
        if (store) fprintf(stderr, "[bench-spec] n-gram store: %s\n", store_path);
    }
    const bool json = !strcmp(a.out, "json");
    if (!json) {
        printf("bench-spec: %s on %s (%s), head %s, temperature", model_path, hs_vk_ctx_caps(vk)->device_name,
               hs_vk_ctx_caps(vk)->driver_info, sm.head ? sm.head_path : "none");
        for (int ti = 0; ti < a.n_temps; ti++)
            printf("%s%g", ti ? "," : " ", a.temps[ti]);
        printf(", -n %d, questions %d-%d", a.n_predict, a.q.q_from, a.q.q_to);
        if (a.repeat > 1) printf(", %d runs per question (the median's figures)", a.repeat);
        printf("\n");
    }

    for (int si = 0; si < ns; si++) {
        const hs_cli_question *qs = sets[si].qs;
        const int nq = sets[si].n;
        for (int qi = 0; qi < nq; qi++) {
            int32_t *ids = NULL;
            size_t n_ids = 0;
            /* runs[mi][j]: method mi's run j on this question; the runs are
             * compared and timed after the question's last run. */
            static hs_gen_result runs[MAX_METHODS][MAX_REPEAT]; /* large: static */
            memset(runs, 0, sizeof runs);
            hs_status st = hs_cli_prompt_ids(g, tok, qs[qi].text, !a.q.no_chat, NULL, &ids, &n_ids);
            uint32_t n_predict = (uint32_t)a.n_predict;
            if (st == HS_OK && n_ids + n_predict > hs_llama_n_ctx(sm.target))
                st = hs_engine_check_fit(sm.target, n_ids, n_predict);
            for (int j = 0; j < a.repeat && st == HS_OK; j++)
                for (int step = 0; step < nm && st == HS_OK; step++) {
                    const int mi = (step + j) % nm; /* run 0 in the given order: each ar before its methods */
                    fprintf(stderr, "\r[bench-spec] %s %d/%d  question %d/%d  ", sets[si].name, si + 1, ns,
                            qi + 1, nq);
                    if (a.repeat > 1) fprintf(stderr, "run %d/%d  ", j + 1, a.repeat);
                    fprintf(stderr, "%-20s", ms[mi].label);
                    hs_gen_params gp = {.n_predict = n_predict, .sp = a.sp, .spec = ms[mi].spec};
                    gp.sp.temperature = ms[mi].temp;
                    if (si == 0 && qi == 0 && j == 0) { /* warm-up: records graphs, compiles pipelines */
                        hs_gen_result w;
                        if (gp.spec && (st = hs_spec_prepare(gp.spec)) != HS_OK) break;
                        hs_gen_params wp = gp;
                        wp.n_predict = n_predict < 32 ? n_predict : 32;
                        if ((st = hs_engine_generate(sm.target, tok, ids, n_ids, &wp, &w)) != HS_OK) break;
                        hs_gen_result_free(&w);
                    }
                    st = hs_engine_generate(sm.target, tok, ids, n_ids, &gp, &runs[mi][j]);
                }
            for (int mi = 0; mi < nm && st == HS_OK; mi++) {
                const hs_gen_result *r0 = &runs[mi][0];
                /* Every run gives the same tokens (the same seed at each temperature). */
                bool same = true;
                for (int j = 1; j < a.repeat; j++)
                    same = same && same_tokens(&runs[mi][j], r0);
                if (!same)
                    fprintf(stderr, "\n[bench-spec] %s question %d: %s gave other tokens in another run\n",
                            sets[si].name, qs[qi].id, ms[mi].label);
                const hs_gen_result *r = &runs[mi][median_run(runs[mi], a.repeat)];
                const bool greedy = ms[mi].temp <= 0;
                bool compared = false, equal = false;
                if (ms[mi].ar && greedy) {
                    compared = true;
                    equal = same;
                } else if (greedy && ms[mi].ar_ref >= 0) {
                    compared = true;
                    equal = same && same_tokens(r0, &runs[ms[mi].ar_ref][0]);
                    if (!equal)
                        fprintf(stderr, "\n[bench-spec] %s question %d: %s differs from ar\n", sets[si].name,
                                qs[qi].id, ms[mi].label);
                }
                add(&accs[si * nm + mi], r, ms[mi].ar, compared, equal);
                add(&all[mi], r, ms[mi].ar, compared, equal);
                cJSON *rec = cJSON_CreateObject();
                cJSON_AddStringToObject(rec, "set", sets[si].name);
                cJSON_AddNumberToObject(rec, "question_id", qs[qi].id);
                cJSON_AddStringToObject(rec, "method", ms[mi].label);
                cJSON_AddNumberToObject(rec, "prompt_tokens", (double)n_ids);
                cJSON_AddNumberToObject(rec, "n_gen", r->n_gen);
                cJSON_AddNumberToObject(rec, "gen_s", r->gen_s);
                cJSON *reps = cJSON_AddArrayToObject(rec, "gen_s_runs");
                for (int j = 0; j < a.repeat; j++)
                    cJSON_AddItemToArray(reps, cJSON_CreateNumber(runs[mi][j].gen_s));
                cJSON_AddNumberToObject(rec, "target_passes", r->target_passes);
                if (!ms[mi].ar) {
                    cJSON_AddNumberToObject(rec, "tau", hs_spec_tau(&r->spec));
                    cJSON_AddNumberToObject(rec, "verified_per_round", hs_spec_verified_per_round(&r->spec));
                    cJSON_AddNumberToObject(rec, "draft_s", r->spec.draft_s);
                    cJSON_AddNumberToObject(rec, "verify_s", r->spec.verify_s);
                }
                cJSON_AddNumberToObject(rec, "temperature", ms[mi].temp);
                if (greedy && ms[mi].ar_ref >= 0) cJSON_AddBoolToObject(rec, "equal_to_ar", equal);
                if (a.repeat > 1) cJSON_AddBoolToObject(rec, "runs_equal", same);
                cJSON_AddItemToArray(records, rec);
            }
            for (int mi = 0; mi < nm; mi++)
                for (int j = 0; j < a.repeat; j++)
                    hs_gen_result_free(&runs[mi][j]);
            free(ids);
            if (st != HS_OK) goto fail;
        }
    }
    fprintf(stderr, "\r%80s\r", "");

    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", model_path);
        cJSON_AddStringToObject(o, "head", sm.head ? sm.head_path : "");
        cJSON_AddStringToObject(o, "head_weights", hs_cli_head_weights_name(sm.head));
        cJSON_AddStringToObject(o, "build", HS_BUILD_ID);
        cJSON_AddStringToObject(o, "kv_type", hs_type_name(a.kv_type));
        cJSON_AddItemToObject(o, "device", hs_bench_device_json(hs_vk_ctx_caps(vk)));
        cJSON_AddNumberToObject(o, "n_predict", a.n_predict);
        cJSON_AddNumberToObject(o, "temperature", a.temps[0]);
        cJSON *jt = cJSON_AddArrayToObject(o, "temperatures");
        for (int ti = 0; ti < a.n_temps; ti++)
            cJSON_AddItemToArray(jt, cJSON_CreateNumber(a.temps[ti]));
        cJSON_AddNumberToObject(o, "seed", (double)a.sp.seed);
        cJSON_AddNumberToObject(o, "repeat", a.repeat);
        cJSON_AddNumberToObject(o, "question_from", a.q.q_from);
        cJSON_AddNumberToObject(o, "question_to", a.q.q_to);
        cJSON *jsets = cJSON_AddArrayToObject(o, "sets");
        for (int si = 0; si < ns; si++) {
            cJSON *js = cJSON_CreateObject();
            cJSON_AddStringToObject(js, "set", sets[si].name);
            cJSON *jm = cJSON_AddArrayToObject(js, "methods");
            for (int mi = 0; mi < nm; mi++)
                cJSON_AddItemToArray(
                    jm, acc_json(&ms[mi], &accs[si * nm + mi], base_tps(ms, mi, &accs[si * nm])));
            cJSON_AddItemToArray(jsets, js);
        }
        cJSON *jall = cJSON_AddArrayToObject(o, "all");
        for (int mi = 0; mi < nm; mi++)
            cJSON_AddItemToArray(jall, acc_json(&ms[mi], &all[mi], base_tps(ms, mi, all)));
        cJSON_AddItemToObject(o, "questions", records);
        records = NULL;
        char *s = cJSON_Print(o);
        puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        for (int si = 0; si < ns; si++)
            print_table(sets[si].name, ms, nm, &accs[si * nm]);
        print_table("all sets (tokens and time summed)", ms, nm, all);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "\nheterospec bench-spec: %s\n", hs_last_error());
    cJSON_Delete(records);
    for (int i = 0; i < nm; i++)
        hs_spec_destroy(ms[i].spec);
    free(accs);
    hs_cli_sets_free(sets, ns);
    hs_cli_spec_unload(&sm);
    hs_ngram_free(store);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
    hs_tok_destroy(tok);
    hs_gguf_close(g);
    return rc;
}
