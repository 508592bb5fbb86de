/* `heterospec logits`: the logits of every position of a prompt, written in
 * hs-oracle's binary "HSLG" format (tools/oracle/README.md) so that
 * heterospec's forward pass and llama.cpp's compare file against file
 * (tools/compare_logits.sh, tools/oracle/hslg_compare.c).
 *
 * The prompt (text, optionally wrapped in the model's chat template, or token
 * ids as given) is evaluated as one causal batch with all-token logits,
 * split into chunks of the batch limit (--batch, default 512, fewer when the
 * device's maxStorageBufferRange cannot hold that many logits rows) when longer.
 * --print-tokens prints the ids as one comma-separated line (the form
 * hs-oracle's --tokens takes); without -o it only tokenizes and loads no
 * device.
 *
 * File layout (little-endian): "HSLG", uint32 version 1, uint32 n_vocab,
 * uint32 n_rows, int32 tokens[n_rows], float32 logits[n_rows][n_vocab]; row i
 * holds the logits after tokens[0..i]. The header and tokens are known before
 * the evaluation, so unlike hs-oracle the file may also be a pipe.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "hs_cli.h"
#include "llama.h"
#include "tok_gguf.h"

#define HSLG_MAGIC   "HSLG"
#define HSLG_VERSION 1u

static void usage(FILE *f) {
    fprintf(f, "usage: heterospec logits [options] (-p TEXT | -f FILE | --tokens LIST)\n\n"
               "Evaluates the prompt as one batch and writes the logits of every position in\n"
               "hs-oracle's HSLG format (row i: logits after tokens 0..i).\n\n"
               "  -m FILE          GGUF model (default: $HS_HOME/" HS_CLI_DEFAULT_MODEL ")\n"
               "  -p TEXT          prompt text (BOS/EOS added as the model asks)\n"
               "  -f FILE          read the prompt text from FILE\n"
               "  --tokens LIST    comma-separated token ids, used as given (no BOS added)\n"
               "  --chat           wrap the text in the model's chat template (user turn)\n"
               "  -o FILE          write the HSLG logits file\n"
               "  --print-tokens   print the token ids as one line \"1,2,3\" (without -o: only tokenize)\n"
               "  --batch N        tokens per evaluation (default 512)\n"
               HS_CLI_KV_HELP);
}

typedef struct logits_args {
    const char *model, *prompt, *prompt_file, *token_list, *out;
    bool chat, print_tokens;
    int batch;
    hs_type kv_type;
} logits_args;

/* 0: run, 1: --help shown, 2: usage error. */
static int parse(int argc, char **argv, logits_args *a) {
    memset(a, 0, sizeof *a);
    a->batch = 512;
    a->kv_type = HS_CLI_KV_DEFAULT;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        const int kv = hs_cli_kv_option("logits", o, v, &a->kv_type);
        if (kv < 0) return 2;
        if (kv) {
            i++;
            continue;
        }
        bool takes_value = !strcmp(o, "-m") || !strcmp(o, "-p") || !strcmp(o, "-f") ||
                           !strcmp(o, "--tokens") || !strcmp(o, "-o") || !strcmp(o, "--batch");
        if (takes_value && !v) {
            fprintf(stderr, "heterospec logits: %s needs a value\n", o);
            return 2;
        }
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(o, "-m"))
            a->model = argv[++i];
        else if (!strcmp(o, "-p"))
            a->prompt = argv[++i];
        else if (!strcmp(o, "-f"))
            a->prompt_file = argv[++i];
        else if (!strcmp(o, "--tokens"))
            a->token_list = argv[++i];
        else if (!strcmp(o, "-o"))
            a->out = argv[++i];
        else if (!strcmp(o, "--batch")) {
            if (!hs_cli_int("logits", o, argv[++i], INT_MIN, INT_MAX, &a->batch)) return 2;
        } else if (!strcmp(o, "--chat"))
            a->chat = true;
        else if (!strcmp(o, "--print-tokens"))
            a->print_tokens = true;
        else {
            fprintf(stderr, "heterospec logits: unknown option '%s' (see --help)\n", o);
            return 2;
        }
    }
    int n_inputs = (a->prompt != NULL) + (a->prompt_file != NULL) + (a->token_list != NULL);
    if (n_inputs != 1) {
        fprintf(stderr, "heterospec logits: give exactly one of -p, -f and --tokens (see --help)\n");
        return 2;
    }
    if (a->chat && a->token_list) {
        fprintf(stderr, "heterospec logits: --chat applies to text, not to --tokens\n");
        return 2;
    }
    if (!a->out && !a->print_tokens) {
        fprintf(stderr, "heterospec logits: nothing to do: give -o FILE and/or --print-tokens\n");
        return 2;
    }
    if (a->batch < 1) {
        fprintf(stderr, "heterospec logits: --batch must be >= 1\n");
        return 2;
    }
    return 0;
}

/* "1,403,407" -> ids, each in [0, n_vocab). */
static hs_status parse_token_list(const char *s, uint32_t n_vocab, int32_t **ids, size_t *n) {
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    int32_t *v = malloc(sizeof *v * cap);
    if (!v) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "--tokens: out of memory");
    size_t k = 0;
    for (const char *p = s;; p++) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || (*end != ',' && *end != '\0') || x < 0 || x >= (long)n_vocab) {
            free(v);
            return HS_FAIL(HS_ERR_INVALID_ARG, "--tokens: item %zu ('%.20s') is not a token id in [0, %u)",
                           k + 1, p, n_vocab);
        }
        v[k++] = (int32_t)x;
        p = end;
        if (*p == '\0') break;
    }
    *ids = v;
    *n = k;
    return HS_OK;
}

/* The prompt's token ids: the list as given, or the (chat-wrapped) text tokenized. */
static hs_status prompt_ids(const logits_args *a, const hs_gguf *g, uint32_t n_vocab, int32_t **ids,
                            size_t *n) {
    hs_status st = HS_OK;
    hs_tok *tok = NULL;
    char *text = NULL;
    if (a->token_list) return parse_token_list(a->token_list, n_vocab, ids, n);
    HS_TRY(hs_tok_from_gguf(g, &tok));
    if (a->prompt_file)
        HS_TRY(hs_cli_read_text(a->prompt_file, &text));
    else if (!(text = strdup(a->prompt)))
        HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory"));
    HS_TRY(hs_cli_prompt_ids(g, tok, text, a->chat, NULL, ids, n));
    if (*n == 0) HS_TRY(HS_FAIL(HS_ERR_INVALID_ARG, "the prompt is empty and the model adds no BOS token"));
fail:
    free(text);
    hs_tok_destroy(tok);
    return st;
}

static void print_ids(const int32_t *ids, size_t n) {
    for (size_t i = 0; i < n; i++)
        printf(i ? ",%d" : "%d", ids[i]);
    printf("\n");
    fflush(stdout);
}

static hs_status write_header(FILE *f, const char *path, uint32_t n_vocab, const int32_t *ids, size_t n) {
    uint32_t head[3] = {HSLG_VERSION, n_vocab, (uint32_t)n};
    if (fwrite(HSLG_MAGIC, 1, 4, f) != 4 || fwrite(head, sizeof head, 1, f) != 1 ||
        fwrite(ids, sizeof *ids, n, f) != n)
        return HS_FAIL(HS_ERR_IO, "writing the header of %s: %s", path, strerror(errno));
    return HS_OK;
}

/* Loads the model on the default device and evaluates ids in chunks of at
 * most a->batch, appending every row's logits (V floats each) to f. */
static hs_status eval_to_file(const logits_args *a, const hs_gguf *g, uint32_t V, const int32_t *ids,
                              size_t n, FILE *f) {
    hs_status st = HS_OK;
    hs_vk_ctx *vk = NULL;
    hs_ops *ops = NULL;
    hs_llama *m = NULL;
    hs_vk_ctx_options vo = {.device_index = -1, .validation = -1};
    HS_TRY(hs_vk_ctx_create(&vo, &vk));
    HS_TRY(hs_ops_create(vk, &ops));
    uint32_t batch = (uint32_t)a->batch < n ? (uint32_t)a->batch : (uint32_t)n;
    /* The logits of one evaluation are one storage binding: fewer rows per chunk when the device's
     * maxStorageBufferRange holds fewer (e.g. a large vocabulary, or HS_VK_MAX_BUFFER_RANGE). */
    uint64_t row_bytes = (uint64_t)V * sizeof(float),
             fit = hs_vk_ctx_caps(vk)->max_storage_buffer_range / row_bytes;
    if (fit == 0)
        HS_TRY(HS_FAIL(
            HS_ERR_VK_UNSUPPORTED, "one logits row (%llu bytes) exceeds maxStorageBufferRange %llu",
            (unsigned long long)row_bytes, (unsigned long long)hs_vk_ctx_caps(vk)->max_storage_buffer_range));
    if (batch > fit) batch = (uint32_t)fit;
    hs_llama_options lo = {.n_ctx = (uint32_t)n, .max_batch = batch, .kv_type = a->kv_type};
    HS_TRY(hs_llama_load(ops, g, &lo, &m));
    for (size_t done = 0; done < n;) {
        uint32_t k = (uint32_t)(n - done < batch ? n - done : batch);
        const float *logits = NULL;
        HS_TRY(hs_llama_eval(m, ids + done, k, NULL, false, true, &logits, NULL));
        if (fwrite(logits, sizeof(float) * V, k, f) != k)
            HS_TRY(HS_FAIL(HS_ERR_IO, "writing logits rows %zu..%zu of %s: %s", done, done + k - 1, a->out,
                           strerror(errno)));
        done += k;
    }
fail:
    hs_llama_destroy(m);
    hs_ops_destroy(ops);
    hs_vk_ctx_destroy(vk);
    return st;
}

int hs_cli_logits(int argc, char **argv) {
    logits_args a;
    int rc = parse(argc, argv, &a);
    if (rc) return rc == 1 ? 0 : rc;
    char model_path[1200];
    if (hs_cli_model_path(a.model, model_path, sizeof model_path) != HS_OK) {
        fprintf(stderr, "heterospec logits: %s\n", hs_last_error());
        return 1;
    }
    hs_gguf *g = NULL;
    int32_t *ids = NULL;
    size_t n_ids = 0;
    FILE *f = NULL;
    bool created = false; /* a failed run removes its partial output */
    hs_llama_config cfg;
    rc = 1;
    if (hs_gguf_open(model_path, &g) != HS_OK || hs_llama_config_read(g, &cfg) != HS_OK) goto fail;
    if (prompt_ids(&a, g, cfg.n_vocab, &ids, &n_ids) != HS_OK) goto fail;
    if (n_ids > INT32_MAX) {
        HS_FAIL(HS_ERR_OUT_OF_RANGE, "the prompt has %zu tokens", n_ids);
        goto fail;
    }
    if (a.print_tokens) print_ids(ids, n_ids);
    if (a.out) {
        if (!(f = fopen(a.out, "wb"))) {
            HS_FAIL(HS_ERR_IO, "cannot create %s: %s", a.out, strerror(errno));
            goto fail;
        }
        created = true;
        if (write_header(f, a.out, cfg.n_vocab, ids, n_ids) != HS_OK) goto fail;
        if (eval_to_file(&a, g, cfg.n_vocab, ids, n_ids, f) != HS_OK) goto fail;
        FILE *done = f;
        f = NULL;
        if (fclose(done) != 0) {
            HS_FAIL(HS_ERR_IO, "closing %s: %s", a.out, strerror(errno));
            goto fail;
        }
    }
    rc = 0;
fail:
    if (rc) fprintf(stderr, "heterospec logits: %s\n", hs_last_error());
    if (f) fclose(f);
    if (rc && created) remove(a.out);
    free(ids);
    hs_gguf_close(g);
    return rc;
}
