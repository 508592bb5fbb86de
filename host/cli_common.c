/* Helpers shared by the CLI commands. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chat.h"
#include "hs_cli.h"
#include "hs_vk.h"

hs_status hs_cli_model_path(const char *given, char *buf, size_t n) {
    if (given) {
        snprintf(buf, n, "%s", given);
        return HS_OK;
    }
    char home[1024];
    hs_status st = hs_home_dir(home, sizeof home);
    if (st == HS_OK) snprintf(buf, n, "%s/%s", home, HS_CLI_DEFAULT_MODEL);
    return st;
}

static void bad_number(const char *cmd, const char *opt, const char *v, const char *what) {
    fprintf(stderr, "heterospec%s%s: %s %s: expected %s\n", cmd ? " " : "", cmd ? cmd : "", opt, v, what);
}

bool hs_cli_parse_int(const char *v, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    const long x = strtol(v, &end, 10);
    if (end == v || *end || errno || x < lo || x > hi || x < INT_MIN || x > INT_MAX) return false;
    *out = (int)x;
    return true;
}

bool hs_cli_int(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out) {
    if (hs_cli_parse_int(v, lo, hi, out)) return true;
    char what[96];
    snprintf(what, sizeof what, "an integer %ld..%ld", lo, hi);
    bad_number(cmd, opt, v, what);
    return false;
}

int hs_cli_option_index(const char *o, const char *const *names, int n) {
    for (int i = 0; i < n; i++)
        if (!strcmp(o, names[i])) return i;
    return -1;
}

int hs_cli_kv_option(const char *cmd, const char *o, const char *v, hs_type *out) {
    if (strcmp(o, "--kv-type")) return 0;
    if (!v) {
        fprintf(stderr, "heterospec %s: --kv-type needs a value (f32 or f16)\n", cmd);
        return -1;
    }
    if (!strcmp(v, "f32")) *out = HS_TYPE_F32;
    else if (!strcmp(v, "f16")) *out = HS_TYPE_F16;
    else {
        fprintf(stderr, "heterospec %s: --kv-type %s: expected f32 or f16\n", cmd, v);
        return -1;
    }
    return 2;
}

bool hs_cli_real(const char *cmd, const char *opt, const char *v, double lo, double hi, float *out) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (end == v || *end || errno || !(x >= lo && x <= hi)) {
        char what[96];
        if (isinf(lo) && isinf(hi))
            snprintf(what, sizeof what, "a number");
        else
            snprintf(what, sizeof what, "a number %g..%g", lo, hi);
        bad_number(cmd, opt, v, what);
        return false;
    }
    *out = (float)x;
    return true;
}

bool hs_cli_u64(const char *cmd, const char *opt, const char *v, uint64_t *out) {
    char *end;
    errno = 0;
    const unsigned long long x = strtoull(v, &end, 10);
    if (end == v || *end || errno || v[0] == '-') {
        bad_number(cmd, opt, v, "an unsigned integer");
        return false;
    }
    *out = (uint64_t)x;
    return true;
}

hs_status hs_cli_read_text(const char *path, char **out) {
    hs_status st = HS_OK;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return HS_FAIL(HS_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0;
    if (!(buf = malloc(cap))) HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory reading %s", path));
    for (size_t r; (r = fread(buf + n, 1, cap - n - 1, f)) > 0;) {
        n += r;
        if (n + 1 == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory reading %s", path));
            buf = nb;
        }
    }
    if (ferror(f)) HS_TRY(HS_FAIL(HS_ERR_IO, "reading %s: %s", path, strerror(errno)));
    buf[n] = '\0';
    *out = buf;
    buf = NULL;
fail:
    free(buf);
    fclose(f);
    return st;
}

hs_status hs_cli_prompt_ids(const hs_gguf *g, const hs_tok *tok, const char *text, bool chat, char **rendered,
                            int32_t **ids, size_t *n) {
    hs_status st = HS_OK;
    hs_chat *c = NULL;
    char *r = NULL;
    const char *prompt = text;
    if (chat) {
        const char *tmpl = NULL;
        if (hs_gguf_get_str(g, "tokenizer.chat_template", &tmpl) != HS_OK)
            HS_TRY(HS_FAIL(HS_ERR_FORMAT, "--chat: the model has no tokenizer.chat_template"));
        HS_TRY(hs_chat_create(tmpl, &c));
        hs_chat_msg msg = {"user", text};
        HS_TRY(hs_chat_render(c, &msg, 1, true, &r));
        prompt = r;
    }
    unsigned flags = HS_TOK_ADD_SPECIAL | (chat ? HS_TOK_PARSE_SPECIAL : 0);
    HS_TRY(hs_tok_encode(tok, prompt, strlen(prompt), flags, ids, n));
    if (rendered && !(*rendered = strdup(prompt))) HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory"));
fail:
    free(r);
    hs_chat_destroy(c);
    return st;
}

hs_status hs_cli_questions_read(const char *path, int from, int to, hs_cli_question **out, int *n) {
    hs_status st = HS_OK;
    char *all = NULL;
    *out = NULL;
    *n = 0;
    HS_TRY(hs_cli_read_text(path, &all));
    hs_cli_question *qs = calloc((size_t)(to - from + 1), sizeof *qs);
    if (!qs) HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory"));
    *out = qs;
    int line_no = 0;
    for (char *save = NULL, *line = strtok_r(all, "\n", &save); line && line_no < to;
         line = strtok_r(NULL, "\n", &save)) {
        if (++line_no < from) continue;
        cJSON *j = cJSON_Parse(line);
        const cJSON *turns = cJSON_GetObjectItem(j, "turns"), *id = cJSON_GetObjectItem(j, "question_id");
        const cJSON *t0 = cJSON_GetArrayItem(turns, 0);
        if (!cJSON_IsString(t0)) {
            cJSON_Delete(j);
            HS_TRY(HS_FAIL(HS_ERR_FORMAT, "%s line %d: no \"turns\" with a first turn", path, line_no));
        }
        qs[*n].id = cJSON_IsNumber(id) ? id->valueint : line_no;
        qs[*n].text = strdup(t0->valuestring);
        cJSON_Delete(j);
        if (!qs[(*n)++].text) HS_TRY(HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "out of memory"));
    }
    if (*n < to - from + 1)
        HS_TRY(HS_FAIL(HS_ERR_INVALID_ARG, "%s has %d questions; --questions asks for %d-%d", path, line_no,
                       from, to));
fail:
    free(all);
    return st;
}

void hs_cli_questions_free(hs_cli_question *qs, int n) {
    for (int i = 0; i < n; i++)
        free(qs[i].text);
    free(qs);
}

hs_status hs_cli_qset_read(const hs_cli_qset *q, hs_cli_set **out, int *n) {
    hs_status st = HS_OK;
    hs_cli_set *sets = NULL;
    int ns = 0;
    *out = NULL;
    *n = 0;
    for (const char *p = q->sets; *p;) {
        const size_t len = strcspn(p, ",");
        if (len == 0) { /* "a,,b" and a trailing comma name no set */
            p++;
            continue;
        }
        if (len >= sizeof sets->name) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "--sets %s: a set name is at most %zu characters", q->sets,
                         sizeof sets->name - 1);
            goto fail;
        }
        hs_cli_set *grown = realloc(sets, sizeof *sets * (size_t)(ns + 1));
        if (!grown) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "question sets");
            goto fail;
        }
        sets = grown;
        hs_cli_set *s = &sets[ns++];
        memset(s, 0, sizeof *s);
        memcpy(s->name, p, len);
        char path[1400];
        snprintf(path, sizeof path, "%s/%s/question.jsonl", q->data, s->name);
        HS_TRY(hs_cli_questions_read(path, q->q_from, q->q_to, &s->qs, &s->n));
        p += len;
        if (*p == ',') p++;
    }
    *out = sets;
    *n = ns;
    return HS_OK;
fail:
    hs_cli_sets_free(sets, ns);
    return st;
}

void hs_cli_sets_free(hs_cli_set *sets, int n) {
    for (int i = 0; sets && i < n; i++) hs_cli_questions_free(sets[i].qs, sets[i].n);
    free(sets);
}

#ifndef HS_SHARED_DATA
#define HS_SHARED_DATA "../shared/data/bench"
#endif

void hs_cli_qset_defaults(hs_cli_qset *q) {
    *q = (hs_cli_qset){
        .data = HS_SHARED_DATA, .sets = "mt_bench,humaneval,gsm8k,alpaca,sum", .q_from = 1, .q_to = 10};
}

int hs_cli_qset_option(hs_cli_qset *q, const char *cmd, const char *o, const char *v) {
    if (!strcmp(o, "--no-chat")) {
        q->no_chat = true;
        return 1;
    }
    if (strcmp(o, "--data") && strcmp(o, "--sets") && strcmp(o, "--questions")) return 0;
    if (!v) {
        fprintf(stderr, "heterospec %s: %s needs a value\n", cmd, o);
        return -1;
    }
    if (!strcmp(o, "--data")) {
        q->data = v;
    } else if (!strcmp(o, "--sets")) {
        q->sets = v;
    } else if (sscanf(v, "%d-%d", &q->q_from, &q->q_to) != 2 || q->q_from < 1 || q->q_to < q->q_from) {
        fprintf(stderr, "heterospec %s: --questions %s: expected FROM-TO, 1 <= FROM <= TO\n", cmd, v);
        return -1;
    }
    return 2;
}
