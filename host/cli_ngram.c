/* `heterospec ngram-build`: HeteroSpec's n-gram store (host/ngram.h) from
 * token sequences the target generated, one per line: comma-separated ids
 * in the line's last tab-separated field (the answers files of
 * models/heads/<name>/distill, decompressed, or `tokenize` output). */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "hs_cli.h"
#include "ngram.h"
#include "stb_ds.h"

/* Appends the ids of every line of f to *ids (stb_ds), each line followed by
 * -1; a malformed id fails naming the file and line. */
static hs_status read_ids(FILE *f, const char *name, uint32_t n_vocab, int32_t **ids) {
    char *line = NULL;
    size_t cap = 0;
    hs_status st = HS_OK;
    for (size_t no = 1; getline(&line, &cap, f) >= 0; no++) {
        char *p = strrchr(line, '\t');
        p = p ? p + 1 : line;
        bool any = false;
        while (*p && *p != '\n' && *p != '\r') {
            char *end;
            errno = 0;
            const long v = strtol(p, &end, 10);
            if (end == p || errno || v < 0 || v >= (long)n_vocab || (*end != ',' && *end != '\n' && *end != '\r' &&
                                                                     *end != '\0')) {
                st = HS_FAIL(HS_ERR_FORMAT, "%s:%zu: expected comma-separated token ids below %u", name, no,
                             n_vocab);
                goto done;
            }
            arrput(*ids, (int32_t)v);
            any = true;
            p = *end == ',' ? end + 1 : end;
        }
        if (any) arrput(*ids, -1);
    }
done:
    free(line);
    return st;
}

int hs_cli_ngram_build(int argc, char **argv) {
    const char *model = NULL, *out = NULL;
    int order = 4, min_count = 2;
    const char **files = NULL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: heterospec ngram-build -m MODEL -o OUT [--order K] [--min-count C] FILE...\n\n"
                   "Builds HeteroSpec's n-gram store: for every context of 1..K tokens seen at least C\n"
                   "times in the sequences, the token that followed it most often. FILE ('-': stdin)\n"
                   "holds one sequence per line, comma-separated ids in the line's last tab-separated\n"
                   "field (e.g. xz -dc models/heads/smollm2/distill/answers-*.txt.xz | ... -).\n"
                   "  -m MODEL         the target (the store is stamped with its vocabulary)\n"
                   "  -o OUT           the store file (generate finds store.hsng beside the head)\n"
                   "  --order K        longest context (default 4, at most %u)\n"
                   "  --min-count C    fewest occurrences of a context kept (default 2)\n",
                   HS_NGRAM_MAX_ORDER);
            return 0;
        } else if (!strcmp(o, "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(o, "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(o, "--order") && i + 1 < argc) {
            if (!hs_cli_int("ngram-build", o, argv[++i], 1, HS_NGRAM_MAX_ORDER, &order)) return 2;
        } else if (!strcmp(o, "--min-count") && i + 1 < argc) {
            if (!hs_cli_int("ngram-build", o, argv[++i], 1, 65535, &min_count)) return 2;
        }
        else if (o[0] == '-' && o[1] != '\0') {
            fprintf(stderr, "heterospec ngram-build: unknown option '%s' (see --help)\n", o);
            return 2;
        } else arrput(files, o);
    }
    if (!model || !out || arrlen(files) == 0 || order < 1 || order > (int)HS_NGRAM_MAX_ORDER ||
        min_count < 1 || min_count > 65535) {
        fprintf(stderr, "heterospec ngram-build: need -m MODEL, -o OUT and input files; --order 1..%u, "
                        "--min-count 1..65535 (see --help)\n",
                HS_NGRAM_MAX_ORDER);
        arrfree(files);
        return 2;
    }
    int rc = 1;
    hs_gguf *g = NULL;
    hs_ngram *ng = NULL;
    int32_t *ids = NULL;
    uint64_t vh = 0;
    const hs_gguf_value *toks;
    if (hs_gguf_open(model, &g) != HS_OK || hs_ngram_vocab_hash(g, &vh) != HS_OK ||
        hs_gguf_get_arr(g, "tokenizer.ggml.tokens", HS_GGUF_TYPE_STRING, &toks) != HS_OK)
        goto done;
    const uint32_t n_vocab = (uint32_t)toks->v.arr.n;
    for (ptrdiff_t i = 0; i < arrlen(files); i++) {
        const bool in = !strcmp(files[i], "-");
        FILE *f = in ? stdin : fopen(files[i], "r");
        if (!f) {
            HS_FAIL(HS_ERR_IO, "%s: cannot open", files[i]);
            goto done;
        }
        const hs_status st = read_ids(f, in ? "stdin" : files[i], n_vocab, &ids);
        if (!in) fclose(f);
        if (st != HS_OK) goto done;
    }
    if (hs_ngram_build(ids, (uint64_t)arrlen(ids), (uint32_t)order, (uint32_t)min_count, n_vocab, vh, &ng) !=
            HS_OK ||
        hs_ngram_save(ng, out) != HS_OK)
        goto done;
    const hs_ngram_info info = hs_ngram_get_info(ng);
    printf("%s: %llu contexts of 1..%u tokens (seen %u+ times) from %llu tokens\n", out,
           (unsigned long long)info.n_entries, info.order, info.min_count, (unsigned long long)info.n_tokens);
    rc = 0;
done:
    if (rc) fprintf(stderr, "heterospec ngram-build: %s\n", hs_last_error());
    hs_ngram_free(ng);
    arrfree(ids);
    arrfree(files);
    hs_gguf_close(g);
    return rc;
}
