/* `heterospec tokenize`: token ids of a text with the model's tokenizer, as
 * llama.cpp's llama_tokenize(add_special = true, parse_special = false) gives
 * them unless told otherwise (tools/compare_tokens.py compares the two).
 *
 * --chat wraps the text in the model's chat template as a user turn with the
 * generation prompt and parses control tokens, exactly as `generate --chat`
 * builds its prompt. --jsonl FILE tokenizes one string field (--field, default
 * "prompt") of every line of a JSON-lines file and prints one line of ids per
 * input line, in order (the head trainer's prompts, tools/hs_train). */
#define _POSIX_C_SOURCE 200809L
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "gguf.h"
#include "hs_cli.h"
#include "tok_gguf.h"

typedef struct tok_args {
    const char *model, *text, *jsonl, *field;
    unsigned flags;
    bool chat;
} tok_args;

/* Prints the ids of one text (chat-wrapped when asked) as a comma-separated line. */
static hs_status print_ids(const hs_tok *tok, const hs_chat *chat, const char *text, unsigned flags) {
    char *rendered = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    hs_status st = HS_OK;
    if (chat) {
        hs_chat_msg msg = {"user", text};
        if ((st = hs_chat_render(chat, &msg, 1, true, &rendered)) != HS_OK) goto done;
        text = rendered;
    }
    if ((st = hs_tok_encode(tok, text, strlen(text), flags, &ids, &n)) != HS_OK) goto done;
    for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    printf("\n");
done:
    free(ids);
    free(rendered);
    return st;
}

/* One line of ids per line of the file; a line that is not a JSON object with
 * a string `field` fails naming its line number. */
static hs_status tokenize_jsonl(const hs_tok *tok, const hs_chat *chat, const tok_args *a) {
    FILE *f = fopen(a->jsonl, "r");
    if (!f) return HS_FAIL(HS_ERR_IO, "%s: cannot open", a->jsonl);
    char *line = NULL;
    size_t cap = 0;
    hs_status st = HS_OK;
    for (size_t no = 1; getline(&line, &cap, f) >= 0; no++) {
        cJSON *o = cJSON_Parse(line);
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, a->field);
        if (!cJSON_IsString(v)) {
            st = HS_FAIL(HS_ERR_FORMAT, "%s:%zu: not a JSON object with a string \"%s\"", a->jsonl, no, a->field);
        } else {
            st = print_ids(tok, chat, v->valuestring, a->flags);
        }
        cJSON_Delete(o);
        if (st != HS_OK) break;
    }
    free(line);
    fclose(f);
    return st;
}

int hs_cli_tokenize(int argc, char **argv) {
    tok_args a = {.field = "prompt", .flags = HS_TOK_ADD_SPECIAL};
    for (int i = 1; i < argc; i++) {
        const char *o = argv[i];
        if (!strcmp(o, "-h") || !strcmp(o, "--help")) {
            printf("usage: heterospec tokenize -m FILE (-p TEXT | --jsonl FILE [--field NAME]) [--chat]\n"
                   "                           [--no-special] [--parse-special]\n\n"
                   "Prints the token ids of TEXT, comma-separated, on one line.\n"
                   "  --chat           wrap the text in the model's chat template (user turn, generation\n"
                   "                   prompt) and parse control tokens, as generate --chat does\n"
                   "  --jsonl FILE     tokenize the string field NAME of every line of a JSON-lines file:\n"
                   "                   one line of ids per input line, in order\n"
                   "  --field NAME     the field --jsonl reads (default: prompt)\n"
                   "  --no-special     do not add BOS/EOS\n"
                   "  --parse-special  match control-token texts (e.g. <|im_start|>) in TEXT\n");
            return 0;
        } else if (!strcmp(o, "-m") && i + 1 < argc) a.model = argv[++i];
        else if (!strcmp(o, "-p") && i + 1 < argc) a.text = argv[++i];
        else if (!strcmp(o, "--jsonl") && i + 1 < argc) a.jsonl = argv[++i];
        else if (!strcmp(o, "--field") && i + 1 < argc) a.field = argv[++i];
        else if (!strcmp(o, "--chat")) a.chat = true;
        else if (!strcmp(o, "--no-special")) a.flags &= ~(unsigned)HS_TOK_ADD_SPECIAL;
        else if (!strcmp(o, "--parse-special")) a.flags |= HS_TOK_PARSE_SPECIAL;
        else {
            fprintf(stderr, "heterospec tokenize: unknown option '%s' (see --help)\n", o);
            return 2;
        }
    }
    if (!a.model || !a.text == !a.jsonl) {
        fprintf(stderr, "heterospec tokenize: need -m FILE and one of -p TEXT, --jsonl FILE (see --help)\n");
        return 2;
    }
    if (a.chat) a.flags |= HS_TOK_PARSE_SPECIAL;
    hs_gguf *g = NULL;
    hs_tok *tok = NULL;
    hs_chat *chat = NULL;
    int rc = 1;
    if (hs_gguf_open(a.model, &g) != HS_OK || hs_tok_from_gguf(g, &tok) != HS_OK) goto done;
    if (a.chat) {
        const char *tmpl = NULL;
        if (hs_gguf_get_str(g, "tokenizer.chat_template", &tmpl) != HS_OK) {
            HS_FAIL(HS_ERR_FORMAT, "--chat: the model has no tokenizer.chat_template");
            goto done;
        }
        if (hs_chat_create(tmpl, &chat) != HS_OK) goto done;
    }
    if ((a.jsonl ? tokenize_jsonl(tok, chat, &a) : print_ids(tok, chat, a.text, a.flags)) != HS_OK) goto done;
    rc = 0;
done:
    if (rc) fprintf(stderr, "heterospec tokenize: %s\n", hs_last_error());
    hs_chat_destroy(chat);
    hs_tok_destroy(tok);
    hs_gguf_close(g);
    return rc;
}
