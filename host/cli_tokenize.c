/* `heterospec tokenize`: token ids of a text with the model's tokenizer, as
 * llama.cpp's llama_tokenize(add_special = true, parse_special = false) gives
 * them unless told otherwise (tools/compare_tokens.py compares the two). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf.h"
#include "hs_cli.h"
#include "tok_gguf.h"

int hs_cli_tokenize(int argc, char **argv) {
    const char *model = NULL, *text = NULL;
    unsigned flags = HS_TOK_ADD_SPECIAL;
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: heterospec tokenize -m FILE -p TEXT [--no-special] [--parse-special]\n\n"
                   "Prints the token ids of TEXT, comma-separated, on one line.\n"
                   "  --no-special     do not add BOS/EOS\n"
                   "  --parse-special  match control-token texts (e.g. <|im_start|>) in TEXT\n");
            return 0;
        } else if (!strcmp(o, "-m") && i + 1 < argc) model = argv[++i];
        else if (!strcmp(o, "-p") && i + 1 < argc) text = argv[++i];
        else if (!strcmp(o, "--no-special")) flags &= ~(unsigned)HS_TOK_ADD_SPECIAL;
        else if (!strcmp(o, "--parse-special")) flags |= HS_TOK_PARSE_SPECIAL;
        else {
            fprintf(stderr, "heterospec tokenize: unknown option '%s' (see --help)\n", o);
            return 2;
        }
    }
    if (!model || !text) {
        fprintf(stderr, "heterospec tokenize: need -m FILE and -p TEXT (see --help)\n");
        return 2;
    }
    hs_gguf *g = NULL;
    hs_tok *tok = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = 1;
    if (hs_gguf_open(model, &g) != HS_OK || hs_tok_from_gguf(g, &tok) != HS_OK ||
        hs_tok_encode(tok, text, strlen(text), flags, &ids, &n) != HS_OK) {
        fprintf(stderr, "heterospec tokenize: %s\n", hs_last_error());
        goto done;
    }
    for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    printf("\n");
    rc = 0;
done:
    free(ids);
    hs_tok_destroy(tok);
    hs_gguf_close(g);
    return rc;
}
