/* The speculative options shared by `generate` and `bench-spec`: parsing,
 * finding a head that fits the model, loading target and head together, and
 * the statistics printed after a run. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_cli.h"
#include "hs_vk.h"

#ifndef HS_SOURCE_HEADS
#define HS_SOURCE_HEADS "models/heads"
#endif

void hs_cli_spec_defaults(hs_cli_spec *s) {
    memset(s, 0, sizeof *s);
    s->method = "auto";
    s->depth = -1;
    s->top_k = -1;
    s->tree_size = -1;
    s->lookup = -1;
    s->eager = -1;
    s->head_window = -1;
}

int hs_cli_spec_option(hs_cli_spec *s, const char *o, const char *v) {
    const char *const valued[] = {"--spec",      "--head", "--depth",        "--draft-top-k", "--tree-size",
                                  "--tree",      "--calibration", "--head-weights", "--lookup", "--store",
                                  "--eager",     "--p-min", "--rest", "--head-window"};
    const int which = hs_cli_option_index(o, valued, (int)(sizeof valued / sizeof valued[0]));
    if (which < 0) return 0;
    if (!v) {
        fprintf(stderr, "heterospec: %s needs a value\n", o);
        return -1;
    }
    switch (which) {
    case 0: s->method = v; break;
    case 1: s->head = v; break;
    case 2: return hs_cli_int(NULL, o, v, 1, INT_MAX, &s->depth) ? 2 : -1;
    case 3: return hs_cli_int(NULL, o, v, 1, INT_MAX, &s->top_k) ? 2 : -1;
    case 4: return hs_cli_int(NULL, o, v, 1, INT_MAX, &s->tree_size) ? 2 : -1;
    case 5: s->tree = v; break;
    case 6: s->calib = v; break;
    case 7: s->head_weights = v; break;
    case 8: return hs_cli_int(NULL, o, v, 0, HS_LOOKUP_MAX_LEN, &s->lookup) ? 2 : -1; /* 0: off */
    case 9: s->store = v; break;
    case 10: return hs_cli_int(NULL, o, v, 0, HS_TREE_EAGER_MAX, &s->eager) ? 2 : -1;
    case 11: return hs_cli_real(NULL, o, v, 0, 0.999, &s->p_min) ? 2 : -1;
    case 12: return hs_cli_int(NULL, o, v, 0, HS_HX_MAX_REST, &s->rest) ? 2 : -1;
    case 13: return hs_cli_int(NULL, o, v, 0, INT_MAX, &s->head_window) ? 2 : -1; /* 0: the whole prompt */
    }
    return 2;
}

bool hs_cli_spec_on(const hs_cli_spec *s) { return strcmp(s->method, "none") != 0; }

void hs_cli_set_head_window(hs_tree_policy *p, int w) {
    if (w >= 0) p->head_window = w ? (uint32_t)w : HS_HEAD_WINDOW_ALL;
}

const char *hs_cli_head_weights_name(const hs_eagle3 *head) {
    return !head ? "" : hs_eagle3_quantized(head) ? "q4_1" : "file";
}

hs_status hs_cli_head_weights(const char *name, hs_eagle3_weights *out) {
    if (!name || !strcmp(name, "auto"))
        *out = HS_EAGLE3_WEIGHTS_AUTO;
    else if (!strcmp(name, "file"))
        *out = HS_EAGLE3_WEIGHTS_FILE;
    else if (!strcmp(name, "q4_1"))
        *out = HS_EAGLE3_WEIGHTS_Q4_1;
    else
        return HS_FAIL(HS_ERR_INVALID_ARG, "--head-weights %s: expected auto, file or q4_1", name);
    return HS_OK;
}

static int pick(int given, int dflt) { return given >= 0 ? given : dflt; }

/* The methods hs_cli_spec_policy builds, in the order of its switch. */
enum { SPEC_CHAIN, SPEC_STATIC, SPEC_EAGLE2, SPEC_LOOKUP, SPEC_HETEROSPEC, SPEC_N };
static const char *const spec_methods[SPEC_N] = {"chain", "static", "eagle2", "lookup", "heterospec"};

static int spec_method(const char *name) { return hs_cli_option_index(name, spec_methods, SPEC_N); }

bool hs_cli_spec_builds(const char *method) { return spec_method(method) >= 0; }

hs_status hs_cli_spec_policy(const hs_cli_spec *s, hs_tree_policy *out) {
    hs_status st = HS_OK;
    if ((s->p_min > 0 || s->rest > 0) && spec_method(s->method) != SPEC_EAGLE2)
        return HS_FAIL(HS_ERR_INVALID_ARG, "--p-min and --rest are eagle2's options, not %s's", s->method);
    switch (spec_method(s->method)) {
    case SPEC_CHAIN: {
        const int d = pick(s->depth, 4);
        if (d < 1 || d >= (int)HS_TREE_MAX_DEPTH)
            return HS_FAIL(HS_ERR_INVALID_ARG, "--depth %d: a chain drafts 1..%u tokens", d,
                           HS_TREE_MAX_DEPTH - 1);
        *out = hs_tree_chain((uint32_t)d);
        break;
    }
    case SPEC_STATIC: HS_TRY(hs_tree_static_parse(s->tree ? s->tree : "4,2,2,1", out)); break;
    case SPEC_EAGLE2: {
        const int k = pick(s->top_k, 10), d = pick(s->depth, 5), n = pick(s->tree_size, 60);
        if (k < 1 || k > (int)HS_TOPK_MAX_K)
            return HS_FAIL(HS_ERR_INVALID_ARG, "--draft-top-k %d: must be 1..%u", k, HS_TOPK_MAX_K);
        if (d < 1 || d >= (int)HS_TREE_MAX_DEPTH - 1)
            return HS_FAIL(HS_ERR_INVALID_ARG, "--depth %d: must be 1..%u", d, HS_TREE_MAX_DEPTH - 2);
        if (n < 1) return HS_FAIL(HS_ERR_INVALID_ARG, "--tree-size %d: must be >= 1", n);
        *out = hs_tree_eagle2((uint32_t)k, (uint32_t)d, (uint32_t)n);
        out->p_min = s->p_min;
        out->rest = (uint32_t)s->rest;
        break;
    }
    case SPEC_LOOKUP: {
        /* Chains of 3 after matches of 2+ tokens: what `calibrate` (greedy, SmolLM2 on lavapipe, questions
         * 1-5 of each set) replays best of chains 1..16 x matches 1..4 ("lookup without the head, best"). */
        const int n = s->lookup >= 0 ? s->lookup : 3, m = pick(s->depth, 2);
        if (n < 1 || m < 1 || m > (int)HS_LOOKUP_MAX_MATCH)
            return HS_FAIL(HS_ERR_INVALID_ARG,
                           "--spec lookup: --lookup %d must be 1..%u, --depth (the shortest match) %d 1..%u", n,
                           HS_LOOKUP_MAX_LEN, m, HS_LOOKUP_MAX_MATCH);
        *out = hs_tree_lookup((uint32_t)n, (uint32_t)m);
        break;
    }
    case SPEC_HETEROSPEC:
        /* Its calibration is attached once the head is known (hs_cli_spec_load). */
        *out = (hs_tree_policy){.name = "heterospec"};
        break;
    default:
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "--spec %s: expected none, chain, static, eagle2, heterospec or lookup", s->method);
    }
fail:
    return st;
}

/* The model a head must fit: its configuration and general.name ("" if none). */
typedef struct head_target {
    hs_llama_config cfg;
    const char *name;
} head_target;

/* Whether the head file at path fits a model of configuration cfg (read
 * from its header only), with what does not fit as the error; *hc receives
 * the head's configuration. */
static hs_status head_check(const char *path, const hs_llama_config *cfg, hs_eagle3_config *hc) {
    hs_status st = HS_OK;
    hs_gguf *g = NULL;
    HS_TRY(hs_gguf_open(path, &g));
    HS_TRY(hs_eagle3_config_read(g, hc));
    HS_TRY(hs_eagle3_check_config(hc, cfg));
fail:
    hs_gguf_close(g);
    return st;
}

/* head_check, and the head names no other model than m's. */
static bool head_fits(const char *path, const head_target *m) {
    hs_eagle3_config hc;
    return head_check(path, &m->cfg, &hc) == HS_OK &&
           (!hc.target_name[0] || !strcmp(m->name, hc.target_name));
}

/* Searches dir and its subfolders (one level) for the first fitting head,
 * in name order. */
static bool search_dir(const char *dir, const head_target *model, char *out, size_t n, int levels) {
    struct dirent **ents = NULL;
    int m = scandir(dir, &ents, NULL, alphasort);
    bool found = false;
    for (int i = 0; i < m; i++) {
        const char *e = ents[i]->d_name;
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, e);
        size_t len = strlen(e);
        if (!found && e[0] != '.') {
            if (len > 5 && !strcmp(e + len - 5, ".gguf")) {
                if (head_fits(path, model)) {
                    snprintf(out, n, "%s", path);
                    found = true;
                }
            } else if (levels > 0) {
                found = search_dir(path, model, out, n, levels - 1);
            }
        }
        free(ents[i]);
    }
    free(ents);
    return found;
}

hs_status hs_cli_head_find(const hs_gguf *model, char *out, size_t n) {
    hs_status st = HS_OK;
    char home[1024] = "", dir[1100];
    head_target m = {.name = ""};
    HS_TRY(hs_llama_config_read(model, &m.cfg));
    if (hs_gguf_find_key(model, "general.name")) HS_TRY(hs_gguf_get_str(model, "general.name", &m.name));
    if (hs_home_dir(home, sizeof home) == HS_OK) {
        snprintf(dir, sizeof dir, "%s/heads", home);
        if (search_dir(dir, &m, out, n, 1)) return HS_OK;
    }
    if (search_dir(HS_SOURCE_HEADS, &m, out, n, 1)) return HS_OK;
    return HS_FAIL(HS_ERR_IO, "no draft head fits this model in %s/heads or %s (use --head FILE)", home,
                   HS_SOURCE_HEADS);
fail:
    return st;
}

hs_status hs_cli_store_find(const hs_gguf *model, char *out, size_t n) {
    char home[1024] = "", dir[1100];
    uint64_t want;
    hs_status st = hs_ngram_vocab_hash(model, &want);
    if (st != HS_OK) return st;
    if (hs_home_dir(home, sizeof home) != HS_OK) return HS_FAIL(HS_ERR_IO, "no n-gram store: no HS_HOME");
    snprintf(dir, sizeof dir, "%s/ngram", home);
    struct dirent **ents = NULL;
    const int ne = scandir(dir, &ents, NULL, alphasort);
    bool found = false;
    for (int i = 0; i < ne; i++) {
        const char *nm = ents[i]->d_name;
        const size_t len = strlen(nm);
        char path[2200];
        snprintf(path, sizeof path, "%s/%s", dir, nm);
        hs_ngram_info info;
        if (!found && len > 5 && !strcmp(nm + len - 5, ".hsng") && hs_ngram_read_info(path, &info) == HS_OK &&
            info.vocab_hash == want) {
            snprintf(out, n, "%s", path);
            found = true;
        }
        free(ents[i]);
    }
    free(ents);
    return found ? HS_OK : HS_FAIL(HS_ERR_IO, "no n-gram store for this model's vocabulary in %s", dir);
}

hs_status hs_cli_store_open(const char *given, const hs_gguf *model, const char *who, char *path, size_t n,
                            hs_ngram **out) {
    hs_status st = HS_OK;
    *out = NULL;
    path[0] = '\0';
    if (given && !strcmp(given, "none")) return HS_OK;
    if (given)
        snprintf(path, n, "%s", given);
    else if (hs_cli_store_find(model, path, n) != HS_OK) {
        fprintf(stderr, "[%s] %s: the policy's n-gram chains are off (tools/build_store.sh builds SmolLM2's)\n",
                who, hs_last_error());
        path[0] = '\0';
        return HS_OK;
    }
    HS_TRY(hs_ngram_load(path, out));
    st = hs_ngram_check(*out, model);
fail:
    if (st != HS_OK) {
        hs_ngram_free(*out);
        *out = NULL;
    }
    return st;
}

/* The store the policy drafts from (store_len > 0), or the one --store gives
 * (which must load and fit, used or not). */
static hs_status attach_store(const hs_cli_spec *s, const hs_gguf *model, hs_cli_spec_models *out) {
    hs_status st = HS_OK;
    if (!out->spec || (!s->store && out->policy.store_len == 0)) return HS_OK;
    HS_TRY(hs_cli_store_open(s->store, model, "heterospec", out->store_path, sizeof out->store_path, &out->store));
    if (!out->store) return HS_OK;
    if (out->policy.store_len == 0)
        fprintf(stderr, "[heterospec] %s: unused, the policy drafts no n-gram chains (%s)\n", out->store_path,
                out->policy.name && !strcmp(out->policy.name, "heterospec") ? "store_len 0 in its calibration"
                                                                               : "only HeteroSpec does");
    hs_spec_set_store(out->spec, out->store);
fail:
    return st;
}

hs_status hs_cli_spec_load(const hs_cli_spec *given, hs_ops *ops, const hs_gguf *model,
                           const hs_llama_options *lo, hs_cli_spec_models *out) {
    hs_status st = HS_OK;
    memset(out, 0, sizeof *out);
    hs_llama_options opt = lo ? *lo : (hs_llama_options){0};
    /* auto: HeteroSpec when a head fits the model (or one is given), else plain decoding. */
    hs_cli_spec resolved = *given;
    const hs_cli_spec *s = &resolved;
    if (!strcmp(resolved.method, "auto")) {
        resolved.method = "none";
        if (given->head || hs_cli_head_find(model, out->head_path, sizeof out->head_path) == HS_OK)
            resolved.method = "heterospec";
        else
            fprintf(stderr, "[heterospec] no draft head fits this model: plain decoding (%s)\n", hs_last_error());
    }
    if (hs_cli_spec_on(s)) {
        HS_TRY(hs_cli_spec_policy(s, &out->policy));
        if (s->head) {
            snprintf(out->head_path, sizeof out->head_path, "%s", s->head);
            /* Checked here too: a calibration may run without the head, and one that does not fit the
             * model is refused, not ignored. */
            hs_llama_config cfg;
            hs_eagle3_config hc;
            HS_TRY(hs_llama_config_read(model, &cfg));
            HS_TRY(head_check(out->head_path, &cfg, &hc));
        } else if (!out->policy.headless) /* --spec lookup needs none */
            HS_TRY(hs_cli_head_find(model, out->head_path, sizeof out->head_path));
    }
    if (!strcmp(out->policy.name ? out->policy.name : "", "heterospec")) {
        HS_TRY(hs_cli_hx_load(hs_vk_ctx_caps(hs_ops_vk(ops)), hs_gguf_name(model), out->head_path, s->calib,
                              s->sampling, opt.kv_type, &out->hx));
        if (out->hx.model.plain) { /* no tree pays here: no head, no taps */
            fprintf(stderr,
                    "[heterospec] calibration: %s\n[heterospec] it found that no tree pays on this device "
                    "when %s (\"plain\": true): plain decoding\n",
                    out->hx.source, s->sampling ? "sampling" : "greedy");
            resolved.method = "none";
            out->policy = (hs_tree_policy){0};
        } else {
            if (s->lookup >= 0) out->hx.model.lookup.max_len = (uint32_t)s->lookup;
            if (!out->hx.model.lookup.min_match) out->hx.model.lookup.min_match = 1;
            out->policy = hs_heterospec_policy(&out->hx.model);
            if (out->policy.headless)
                fprintf(stderr,
                        "[heterospec] calibration: %s\n[heterospec] it found that the head does not pay on "
                        "this device when %s (\"headless\": true): context lookup only\n",
                        out->hx.source, s->sampling ? "sampling" : "greedy");
        }
    } else if (s->lookup > 0 && out->policy.name) {
        /* Other policies never select lookup nodes; calibration records them. */
        out->policy.lookup = (uint32_t)s->lookup;
        out->policy.lookup_min = 1;
        out->policy.store_len = (uint32_t)s->lookup; /* and the n-gram store's, where one fits */
    }
    if (s->eager >= 0) out->policy.eager = (uint32_t)s->eager;
    hs_cli_set_head_window(&out->policy, s->head_window);
    if (out->policy.headless) { /* the context lookup alone (--spec lookup, or HeteroSpec where the head
                                 * does not pay): no head, no taps */
        HS_TRY(hs_llama_load(ops, model, &opt, &out->target));
        HS_TRY(hs_spec_create(out->target, NULL, &out->policy, &out->spec));
        HS_TRY(attach_store(s, model, out));
        return HS_OK;
    }
    if (hs_cli_spec_on(s)) {
        HS_TRY(hs_gguf_open(out->head_path, &out->head_gguf));
        hs_eagle3_config hc;
        HS_TRY(hs_eagle3_config_read(out->head_gguf, &hc));
        opt.taps = true;
        opt.custom_taps = true;
        memcpy(opt.tap_layers, hc.tap_layers, sizeof opt.tap_layers);
    }
    HS_TRY(hs_llama_load(ops, model, &opt, &out->target));
    /* A tree the target cannot verify in one pass is refused, not cut. */
    if (s->tree_size > 0 && (uint32_t)s->tree_size >= hs_llama_max_batch(out->target))
        HS_TRY(HS_FAIL(HS_ERR_INVALID_ARG,
                       "--tree-size %d: the target verifies at most %u tokens per pass, the root included, "
                       "so a tree of at most %u drafted tokens",
                       s->tree_size, hs_llama_max_batch(out->target), hs_llama_max_batch(out->target) - 1));
    if (hs_cli_spec_on(s)) {
        hs_eagle3_options ho = {.top_k =
                                    out->policy.top_k > HS_TOPK_MAX_K ? HS_TOPK_MAX_K : out->policy.top_k};
        HS_TRY(hs_cli_head_weights(s->head_weights, &ho.weights));
        HS_TRY(hs_eagle3_load(ops, out->head_gguf, out->target, &ho, &out->head));
        HS_TRY(hs_spec_create(out->target, out->head, &out->policy, &out->spec));
        HS_TRY(attach_store(s, model, out));
    }
fail:
    if (st != HS_OK) hs_cli_spec_unload(out);
    return st;
}

void hs_cli_spec_unload(hs_cli_spec_models *m) {
    hs_spec_destroy(m->spec);
    hs_eagle3_destroy(m->head);
    hs_llama_destroy(m->target);
    hs_gguf_close(m->head_gguf);
    hs_ngram_free(m->store);
    memset(m, 0, sizeof *m);
}

double hs_spec_tau(const hs_spec_stats *s) { return s->rounds ? 1.0 + (double)s->accepted / s->rounds : 1.0; }
double hs_spec_verified_per_round(const hs_spec_stats *s) {
    return s->rounds ? (double)s->verified / s->rounds : 1.0;
}

void hs_cli_spec_print(FILE *f, const hs_cli_spec_models *m, const hs_gen_result *r) {
    const hs_spec_stats *s = &r->spec;
    if (!m->spec) return;
    if (m->head) {
        fprintf(f, "[heterospec] draft: %s, head %s (%s weights)\n", m->policy.name, m->head_path,
                hs_cli_head_weights_name(m->head));
        const uint32_t w = hs_spec_head_window(m->spec);
        if (w && r->n_prompt > w)
            fprintf(f, "[heterospec] head window: the head read the prompt's last %u of %u rows\n", w,
                    r->n_prompt);
    } else
        fprintf(f, "[heterospec] draft: %s (no head)\n", m->policy.name);
    if (m->policy.expand && !strcmp(m->policy.name, "heterospec"))
        fprintf(f, "[heterospec] calibration: %s\n", m->hx.source);
    if (m->policy.lookup)
        fprintf(f, "[heterospec] context lookup: chains of up to %u tokens after matches of %u+ tokens\n",
                m->policy.lookup, m->policy.lookup_min);
    if (m->store)
        fprintf(f, "[heterospec] n-gram store %s (%llu contexts): chains of up to %u tokens where the context "
                   "has no match\n",
                m->store_path, (unsigned long long)hs_ngram_get_info(m->store).n_entries, m->policy.store_len);
    fprintf(f,
            "[heterospec] n_drafted = %llu, n_accept = %llu, draft acceptance rate = %.3f, mean accepted "
            "length = "
            "%.3f\n",
            (unsigned long long)s->drafted, (unsigned long long)s->accepted,
            s->drafted ? (double)s->accepted / s->drafted : 0.0,
            s->rounds ? (double)s->accepted / s->rounds : 0.0);
    fprintf(f,
            "[heterospec] rounds = %u, tau = %.3f tokens per target pass, verified = %.1f tokens per round, "
            "head rows = %.1f per round, resting rounds = %u\n",
            s->rounds, hs_spec_tau(s), hs_spec_verified_per_round(s),
            s->rounds ? (double)s->head_rows / s->rounds : 0.0, s->rest_rounds);
    if (s->head_calls)
        fprintf(f,
                "[heterospec] the target's output head past the root: %llu products for %llu accepted "
                "nodes (%llu rows computed, up to %u at once along a chain)\n",
                (unsigned long long)s->head_calls, (unsigned long long)s->accepted,
                (unsigned long long)s->head_calls_rows,
                hs_tree_heads_max(m->policy.heads));
    if (s->eager_rounds)
        fprintf(f,
                "[heterospec] every output head in the target's pass: %u of %u rounds (lists of up to %u "
                "tokens)\n",
                s->eager_rounds, s->rounds, m->policy.eager);
    if (m->policy.lookup)
        fprintf(f,
                "[heterospec] context lookup: %llu candidates verified, %llu accepted (%llu that the head "
                "did not propose)\n",
                (unsigned long long)s->lookup_verified, (unsigned long long)s->lookup_accepted,
                (unsigned long long)s->lookup_only_accepted);
    if (m->store)
        fprintf(f, "[heterospec] n-gram store: %llu candidates verified, %llu accepted\n",
                (unsigned long long)s->store_verified, (unsigned long long)s->store_accepted);
    if (m->policy.observe && s->rounds)
        fprintf(f,
                "[heterospec] feedback: estimates scaled by %.3f (head's) and %.3f (lookup's) on average "
                "(prior %g, decay %g)\n",
                s->fb_gain_sum[0] / s->rounds, s->fb_gain_sum[1] / s->rounds, m->hx.model.fb_prior,
                m->hx.model.fb_decay);
    fprintf(f, "[heterospec] acceptance per depth:");
    for (uint32_t d = 0; d < HS_SPEC_MAX_LEN && s->tried_depth[d]; d++)
        fprintf(f, " %u:%.3f", d + 1, s->rounds ? (double)s->accept_depth[d] / s->rounds : 0.0);
    const double tot = s->draft_s + s->verify_s;
    fprintf(f, "\n[heterospec] time: draft %.3f s (%.1f%%), verify %.3f s (%.1f%%)\n", s->draft_s,
            tot > 0 ? 100 * s->draft_s / tot : 0.0, s->verify_s, tot > 0 ? 100 * s->verify_s / tot : 0.0);
}

void hs_cli_spec_json(cJSON *o, const hs_cli_spec_models *m, const hs_gen_result *r) {
    const hs_spec_stats *s = &r->spec;
    cJSON_AddStringToObject(o, "spec", m->spec ? m->policy.name : "none");
    if (m->spec && m->head) {
        cJSON_AddStringToObject(o, "head", m->head_path);
        cJSON_AddStringToObject(o, "head_weights", hs_cli_head_weights_name(m->head));
        cJSON_AddNumberToObject(o, "head_window", hs_spec_head_window(m->spec)); /* 0: the whole prompt */
    }
    if (m->store) cJSON_AddStringToObject(o, "store", m->store_path);
    const uint32_t rounds = m->spec ? s->rounds : r->target_passes;
    cJSON_AddNumberToObject(o, "rounds", rounds);
    cJSON_AddNumberToObject(o, "tau", hs_spec_tau(s));
    cJSON_AddNumberToObject(o, "verified_per_round", hs_spec_verified_per_round(s));
    cJSON_AddNumberToObject(o, "drafted", (double)s->drafted);
    cJSON_AddNumberToObject(o, "accepted", (double)s->accepted);
    cJSON_AddNumberToObject(o, "head_rows_per_round", s->rounds ? (double)s->head_rows / s->rounds : 0.0);
    cJSON_AddNumberToObject(o, "rest_rounds", s->rest_rounds);
    cJSON_AddNumberToObject(o, "head_calls", (double)s->head_calls);
    cJSON_AddNumberToObject(o, "head_calls_rows", (double)s->head_calls_rows);
    cJSON_AddNumberToObject(o, "eager", m->spec ? m->policy.eager : 0);
    cJSON_AddNumberToObject(o, "eager_rounds", s->eager_rounds);
    cJSON_AddNumberToObject(o, "lookup", m->spec ? m->policy.lookup : 0);
    cJSON_AddNumberToObject(o, "lookup_verified", (double)s->lookup_verified);
    cJSON_AddNumberToObject(o, "lookup_accepted", (double)s->lookup_accepted);
    cJSON_AddNumberToObject(o, "lookup_only_accepted", (double)s->lookup_only_accepted);
    cJSON_AddNumberToObject(o, "store_verified", (double)s->store_verified);
    cJSON_AddNumberToObject(o, "store_accepted", (double)s->store_accepted);
    const bool fb = m->spec && m->policy.observe && s->rounds;
    cJSON_AddNumberToObject(o, "feedback_gain_head", fb ? s->fb_gain_sum[0] / s->rounds : 1.0);
    cJSON_AddNumberToObject(o, "feedback_gain_lookup", fb ? s->fb_gain_sum[1] / s->rounds : 1.0);
    cJSON *a = cJSON_AddArrayToObject(o, "accept_per_depth");
    for (uint32_t d = 0; d < HS_SPEC_MAX_LEN && s->tried_depth[d]; d++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber(s->rounds ? (double)s->accept_depth[d] / s->rounds : 0.0));
    cJSON_AddNumberToObject(o, "draft_s", s->draft_s);
    cJSON_AddNumberToObject(o, "verify_s", s->verify_s);
}
