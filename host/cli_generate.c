/* `heterospec generate`: llama.cpp-style flags, streamed output and a summary
 * (load time, prompt and generation tokens/s). The loop itself is
 * host/engine; this file parses, loads, prints. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "engine.h"
#include "gguf.h"
#include "hs_bench_ops.h"
#include "hs_cli.h"
#include "llama.h"
#include "sampler.h"
#include "tok_gguf.h"

static void usage(FILE *f) {
    fprintf(f, "usage: heterospec generate [options]\n\n"
               "  -m FILE          GGUF model (default: $HS_HOME/" HS_CLI_DEFAULT_MODEL ",\n"
               "                   fetched by tools/fetch_model.sh)\n"
               "  -p TEXT          prompt\n"
               "  -f FILE          read the prompt from FILE\n"
               "  -n N             tokens to generate (default 128)\n"
               "  -c N             context size (default: model's, at most 4096)\n"
               HS_CLI_KV_HELP
               "  --chat           wrap the prompt in the model's chat template (user turn)\n"
               "  --temp T         temperature (default 0: greedy)\n"
               "  --top-k K        (default 40)   --top-p P (default 0.95)   --min-p P (default 0.05)\n"
               "  --repeat-penalty R  (default 1: off)\n"
               "  --seed S         sampling seed (default 0)\n"
               "  --json           print one JSON object (text, ids, timings, draft statistics)\n"
               "                   instead of streaming\n"
               "  --spec METHOD    speculative decoding with a draft head: auto (default:\n"
               "                   heterospec when a head fits the model, else none), none,\n"
               "                   chain, static, eagle2 or heterospec; or without one: lookup\n"
               "                   (prompt lookup decoding: chains the context suggests)\n"
               "  --head FILE      EAGLE-3 head GGUF (default: the first that fits the model in\n"
               "                   $HS_HOME/heads or the source tree's models/heads)\n"
               "  --head-weights W the head's matrices: auto (default: q4_1 where the device\n"
               "                   computes with 8-bit activations, a cheaper draft), file (as\n"
               "                   stored) or q4_1\n"
               "  --depth D        chain: tokens drafted (default 4); eagle2: draft levels\n"
               "                   after the first (default 5)\n"
               "  --draft-top-k K  eagle2: nodes expanded per level (default 10)\n"
               "  --tree-size N    eagle2: most drafted tokens verified per round (default 60)\n"
               "  --tree B1,B2,..  static: children kept per node at each depth (default 4,2,2,1)\n"
               "  --p-min P        eagle2: drafts and verifies only candidates whose path\n"
               "                   probability is at least P (default 0: off)\n"
               "  --rest R         eagle2: after a round that verified no draft, R rounds decode\n"
               "                   plainly while the head only fills its cache (default 0)\n"
               "  --head-window W  the head consumes only the prompt's last W rows, its positions\n"
               "                   counted from there (a trained head's rows cut long prompts\n"
               "                   so); 0: the whole prompt; default: 3/4 of the rows the head\n"
               "                   was trained on (its file's eagle3.train_row_length), else 0;\n"
               "                   the output is the same\n"
               "  --lookup N       heterospec: longest context lookup chain (the tokens after the\n"
               "                   latest earlier occurrence of the text's last tokens), 0 off\n"
               "                   (default: the calibration's); lookup: the chain verified each\n"
               "                   round (default 3), after matches of --depth tokens (default 2)\n"
               "  --calibration F  heterospec: calibration JSON (default: this device's in\n"
               "                   $HS_HOME/calib, else the one committed beside the head, else\n"
               "                   built-in defaults; see heterospec calibrate); one that says\n"
               "                   \"plain\": true (no tree pays here) makes heterospec decode plainly\n"
               "  --store FILE     heterospec: the n-gram store whose chains it merges where the\n"
               "                   context has no match (default: the one in $HS_HOME/ngram built\n"
               "                   for the model's vocabulary, see ngram-build); none: off\n"
               "  --eager N        verification lists of up to N tokens (root included) compute\n"
               "                   every token's output head in the target's pass instead of on\n"
               "                   demand after it; 0 off (default: heterospec's calibration's,\n"
               "                   else off); the output does not depend on it\n"
               "  -q, --quiet      no streamed text, only the summary\n");
}

typedef struct gen_args {
    const char *model, *prompt, *prompt_file;
    int n_predict, n_ctx;
    hs_type kv_type;
    bool chat, json, quiet;
    hs_sampler_params sp;
    hs_cli_spec spec;
} gen_args;

static int parse(int argc, char **argv, gen_args *a) {
    memset(a, 0, sizeof *a);
    a->n_predict = 128;
    a->kv_type = HS_CLI_KV_DEFAULT;
    a->sp = hs_sampler_default_params();
    a->sp.temperature = 0.0f;
    hs_cli_spec_defaults(&a->spec);
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int used = hs_cli_spec_option(&a->spec, o, v);
        if (used < 0) return 2;
        if (used) {
            i++;
            continue;
        }
        const int kv = hs_cli_kv_option("generate", o, v, &a->kv_type);
        if (kv < 0) return 2;
        if (kv) {
            i++;
            continue;
        }
/* Numbers are parsed whole (hs_cli_int / hs_cli_real: "12x" or "abc" is an
 * error, not 12 or 0); the sampler's ranges are checked with its parameters. */
#define CMD "generate"
#define REAL(dst) hs_cli_real(CMD, o, v, -HUGE_VAL, HUGE_VAL, dst)
#define NUM(ok)                                                                                    \
    if (!(ok)) return 2
#define NEED_VALUE                                                                                 \
    if (!v) {                                                                                      \
        fprintf(stderr, "heterospec generate: %s needs a value\n", o);                           \
        return 2;                                                                                  \
    }                                                                                              \
    i++
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(o, "-m")) { NEED_VALUE; a->model = v; }
        else if (!strcmp(o, "-p")) { NEED_VALUE; a->prompt = v; }
        else if (!strcmp(o, "-f")) { NEED_VALUE; a->prompt_file = v; }
        else if (!strcmp(o, "-n")) { NEED_VALUE; NUM(hs_cli_int(CMD, o, v, 0, INT_MAX, &a->n_predict)); }
        else if (!strcmp(o, "-c")) { NEED_VALUE; NUM(hs_cli_int(CMD, o, v, 0, INT_MAX, &a->n_ctx)); }
        else if (!strcmp(o, "--temp")) { NEED_VALUE; NUM(REAL(&a->sp.temperature)); }
        else if (!strcmp(o, "--top-k")) { NEED_VALUE; NUM(hs_cli_int(CMD, o, v, -1, INT_MAX, &a->sp.top_k)); }
        else if (!strcmp(o, "--top-p")) { NEED_VALUE; NUM(REAL(&a->sp.top_p)); }
        else if (!strcmp(o, "--min-p")) { NEED_VALUE; NUM(REAL(&a->sp.min_p)); }
        else if (!strcmp(o, "--repeat-penalty")) { NEED_VALUE; NUM(REAL(&a->sp.repeat_penalty)); }
        else if (!strcmp(o, "--seed")) { NEED_VALUE; NUM(hs_cli_u64(CMD, o, v, &a->sp.seed)); }
        else if (!strcmp(o, "--chat")) a->chat = true;
        else if (!strcmp(o, "--json")) a->json = true;
        else if (!strcmp(o, "-q") || !strcmp(o, "--quiet")) a->quiet = true;
        else {
            fprintf(stderr, "heterospec generate: unknown option '%s' (see --help)\n", o);
            return 2;
        }
#undef NEED_VALUE
#undef NUM
#undef REAL
#undef CMD
    }
    if (a->n_predict < 0 || a->n_ctx < 0) {
        fprintf(stderr, "heterospec generate: -n and -c must be >= 0\n");
        return 2;
    }
    a->spec.sampling = a->sp.temperature > 0;
    return 0;
}

/* Streams a piece of text as each token arrives. */
static bool print_token(void *user, int32_t id) {
    const char *piece;
    size_t len;
    if (hs_tok_piece(user, id, &piece, &len) == HS_OK) fwrite(piece, 1, len, stdout);
    fflush(stdout);
    return true;
}

int hs_cli_generate(int argc, char **argv) {
    gen_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    char model_path[1200];
    if (hs_cli_model_path(a.model, model_path, sizeof model_path) != HS_OK) {
        fprintf(stderr, "heterospec generate: %s\n", hs_last_error());
        return 1;
    }
    hs_gguf *g = NULL;
    hs_tok *tok = NULL;
    hs_vk_ctx *vk = NULL;
    hs_ops *ops = NULL;
    hs_cli_spec_models sm = {0};
    hs_llama *m = NULL;
    char *text = NULL, *rendered = NULL, *out_text = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    hs_gen_result r = {0};
    rc = 1;
    double t0 = hs_now_s();
    if (hs_gguf_open(model_path, &g) != HS_OK) {
        if (!a.model) fprintf(stderr, "heterospec: default model not found; run tools/fetch_model.sh\n");
        goto fail;
    }
    if (hs_tok_from_gguf(g, &tok) != HS_OK) goto fail;
    if (hs_sampler_params_validate(&a.sp) != HS_OK) goto fail;
    if (a.prompt_file) {
        if (hs_cli_read_text(a.prompt_file, &text) != HS_OK) goto fail;
    } else {
        text = strdup(a.prompt ? a.prompt : "");
    }
    if (hs_cli_prompt_ids(g, tok, text, a.chat, &rendered, &ids, &n_ids) != HS_OK) goto fail;
    const char *prompt = rendered;
    hs_vk_ctx_options vo = {.device_index = -1, .validation = -1};
    if (hs_vk_ctx_create(&vo, &vk) != HS_OK || hs_ops_create(vk, &ops) != HS_OK) goto fail;
    hs_llama_options lo = {.n_ctx = (uint32_t)a.n_ctx, .kv_type = a.kv_type};
    if (hs_cli_spec_load(&a.spec, ops, g, &lo, &sm) != HS_OK) goto fail;
    m = sm.target;
    if (hs_engine_check_fit(m, n_ids, (uint32_t)a.n_predict) != HS_OK) goto fail;
    /* Every graph speculation's rounds can ask for is recorded now (its
     * pipelines created), with the load, so that no round of the timed
     * generation pays a recording. (llvmpipe still compiles a shader's machine
     * code at its first run, which a warm Mesa shader cache skips.) */
    if (sm.spec && hs_spec_prepare(sm.spec) != HS_OK) goto fail;
    double t_load = hs_now_s() - t0;
    if (!a.quiet && !a.json) {
        fwrite(prompt, 1, strlen(prompt), stdout);
        fflush(stdout);
    }
    hs_gen_params gp = {.n_predict = (uint32_t)a.n_predict, .sp = a.sp, .spec = sm.spec};
    if (!a.quiet && !a.json) {
        gp.on_token = print_token;
        gp.user = tok;
    }
    if (hs_engine_generate(m, tok, ids, n_ids, &gp, &r) != HS_OK) goto fail;
    const double t_prompt = r.prompt_s, t_first = t_load + r.prompt_s;
    const int n_gen = (int)r.n_gen;
    size_t out_len = 0;
    if (hs_tok_decode(tok, r.ids, r.n_gen, 0, &out_text, &out_len) != HS_OK) goto fail;
    double gen_tps = n_gen > 1 ? (n_gen - 1) / r.gen_s : 0; /* the last sampled token needs no forward */
    if (a.json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "model", model_path);
        cJSON_AddStringToObject(o, "device", hs_vk_ctx_caps(vk)->device_name);
        cJSON_AddStringToObject(o, "prompt", prompt);
        cJSON_AddStringToObject(o, "text", out_text);
        cJSON *arr = cJSON_AddArrayToObject(o, "ids");
        for (int i = 0; i < n_gen; i++) cJSON_AddItemToArray(arr, cJSON_CreateNumber(r.ids[i]));
        cJSON_AddNumberToObject(o, "prompt_tokens", (double)n_ids);
        cJSON_AddNumberToObject(o, "generated_tokens", n_gen);
        cJSON_AddNumberToObject(o, "load_s", t_load);
        cJSON_AddNumberToObject(o, "first_token_s", t_first);
        cJSON_AddNumberToObject(o, "prompt_tokens_per_s", n_ids / t_prompt);
        cJSON_AddNumberToObject(o, "gen_tokens_per_s", gen_tps);
        cJSON_AddNumberToObject(o, "n_gen", n_gen);
        cJSON_AddNumberToObject(o, "gen_s", r.gen_s);
        cJSON_AddNumberToObject(o, "dispatches_per_token", hs_llama_last_dispatches(m));
        cJSON_AddStringToObject(o, "kv_type", hs_type_name(a.kv_type));
        cJSON_AddNumberToObject(o, "n_ctx", hs_llama_n_ctx(m));
        cJSON_AddNumberToObject(o, "split_parts", hs_vk_ctx_caps(vk)->parts);
        cJSON_AddNumberToObject(o, "split_busy_cpus", hs_vk_ctx_caps(vk)->parts_busy);
        hs_cli_spec_json(o, &sm, &r);
        char *s = cJSON_Print(o);
        puts(s);
        free(s);
        cJSON_Delete(o);
    } else {
        const hs_vk_caps *vc = hs_vk_ctx_caps(vk);
        char split[96] = "";
        if (vc->parts > 1)
            snprintf(split, sizeof split, " (split execution: %u parts%s)", vc->parts,
                     vc->parts_busy ? ", busy CPUs left out" : "");
        else if (vc->parts_busy)
            snprintf(split, sizeof split, " (split execution off: %u of the CPUs busy)", vc->parts_busy);
        fprintf(stderr,
                "\n\n[heterospec] %s on %s%s\n[heterospec] load %.3f s | first token %.3f s | prompt %zu tokens, "
                "%.1f t/s | generated %d tokens, %.1f t/s | %u dispatches/token | KV cache %s, %u rows\n",
                model_path, vc->device_name, split, t_load, t_first, n_ids, n_ids / t_prompt, n_gen, gen_tps,
                hs_llama_last_dispatches(m), hs_type_name(a.kv_type), hs_llama_n_ctx(m));
        hs_cli_spec_print(stderr, &sm, &r);
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "heterospec generate: %s\n", hs_last_error());
    free(out_text);
    hs_gen_result_free(&r);
    free(ids);
    free(text);
    free(rendered);
    hs_cli_spec_unload(&sm);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
    hs_tok_destroy(tok);
    hs_gguf_close(g);
    return rc;
}
