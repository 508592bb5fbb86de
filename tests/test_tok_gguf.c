/* Tests of models/tok_gguf: the tokenizer of a GGUF file, read with models/gguf.h.
 *
 * - stories260K (SPM): the prompt ids of its README.
 * - small GGUF files written here with tests/gguf_writer.h: every tokenizer.ggml.* key reaches the
 *   tokenizer (scores as f32 or i32, types, special ids, flags), and each missing or mistyped key fails
 *   with HS_ERR_FORMAT and a message naming the key.
 * - SmolLM2-135M-Instruct (GPT-2 BPE, "smollm" pre-tokenizer), when tools/fetch_model.sh has put it in
 *   $HS_HOME/models or ~/.cache/heterospec/models (skipped otherwise): strings and the ChatML prompt of the
 *   first MT-bench question against ids from llama.cpp (see k_smol_* below).
 */
#include "testutil.h"

#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "chat.h"
#include "gguf.h"
#include "gguf_writer.h"
#include "tok_gguf.h"
#include "tokenizer.h"

static void assert_ids(const int32_t *got, size_t n_got, const int32_t *want, size_t n_want) {
    if (n_got != n_want) fail_msg("got %zu ids, want %zu", n_got, n_want);
    for (size_t i = 0; i < n_want; i++)
        if (got[i] != want[i]) fail_msg("id %zu: got %d, want %d", i, got[i], want[i]);
}

static void encode_expect(const hs_tok *tok, const char *text, unsigned flags, const int32_t *want,
                          size_t n_want) {
    int32_t *ids;
    size_t n;
    HS_CHECK(hs_tok_encode(tok, text, strlen(text), flags, &ids, &n));
    assert_ids(ids, n, want, n_want);
    free(ids);
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

/* ---- stories260K ---- */

static void test_stories(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    hs_gguf *g;
    hs_tok *tok;
    HS_CHECK(hs_gguf_open(path, &g));
    HS_CHECK(hs_tok_from_gguf(g, &tok));
    hs_gguf_close(g); /* the tokenizer keeps its own copy */
    assert_int_equal(hs_tok_get_kind(tok), HS_TOK_SPM);
    assert_int_equal(hs_tok_n_tokens(tok), 512);
    /* from ../shared/models/stories260K/README.md (also what llama.cpp gives: tools/oracle --tokenize) */
    static const int32_t want[] = {1, 403, 407, 261, 378};
    encode_expect(tok, "Once upon a time", HS_TOK_ADD_SPECIAL, want, N_OF(want));
    hs_tok_destroy(tok);
}

/* ---- synthetic vocabularies ---- */

/* What to write: the base file, less one key, or with one key of the wrong kind. */
typedef struct synth {
    const char *model;          /* tokenizer.ggml.model (default "llama") */
    const char *omit;           /* key left out */
    const char *retype;         /* key written as a scalar of another type (str -> u32, else str) */
    const char *bad_elem;       /* array key written with elements of another type */
    uint64_t n_scores, n_types; /* entries written (0: one per token) */
    bool scores_i32;            /* scores as an array of i32 */
    bool merges;                /* write tokenizer.ggml.merges = ["a b"] */
} synth;

static const char *const k_toks[] = {"<unk>",
                                     "<s>",
                                     "</s>",
                                     "\xe2\x96\x81",
                                     "a",
                                     "b",
                                     "\xe2\x96\x81"
                                     "a",
                                     "ab"};
/* "ab" (-1) outranks "▁a" (-2), so "ab a" -> ▁ ab ▁a; without scores "▁a" would merge first. */
static const float k_scores[] = {0, 0, 0, -3, -4, -5, -2, -1};
static const int32_t k_types[] = {2, 3, 3, 1, 1, 1, 1, 1};
#define N_TOKS N_OF(k_toks)

/* Writes key's header, or its replacement when s asks for one; false when the key is to be left out. */
static bool key(hs_gw *w, const synth *s, const char *k, uint32_t type, uint64_t *n_kv) {
    if (s->omit && !strcmp(s->omit, k)) return false;
    ++*n_kv;
    if (s->retype && !strcmp(s->retype, k)) {
        if (type == HS_GW_STRING) {
            hs_gw_key(w, k, HS_GW_UINT32), hs_gw_u32(w, 7);
        } else {
            hs_gw_key(w, k, HS_GW_STRING), hs_gw_str(w, "oops");
        }
        return false;
    }
    hs_gw_key(w, k, type);
    return true;
}

static bool bad_elem(const synth *s, const char *k) { return s->bad_elem && !strcmp(s->bad_elem, k); }

static void write_arrays(hs_gw *w, const synth *s, uint64_t *n_kv) {
    if (key(w, s, "tokenizer.ggml.tokens", HS_GW_ARRAY, n_kv)) {
        bool num = bad_elem(s, "tokenizer.ggml.tokens");
        hs_gw_arr(w, num ? HS_GW_UINT32 : HS_GW_STRING, N_TOKS);
        for (size_t i = 0; i < N_TOKS; i++) {
            if (num)
                hs_gw_u32(w, 0);
            else
                hs_gw_str(w, k_toks[i]);
        }
    }
    if (key(w, s, "tokenizer.ggml.scores", HS_GW_ARRAY, n_kv)) {
        uint64_t n = s->n_scores ? s->n_scores : N_TOKS;
        bool str = bad_elem(s, "tokenizer.ggml.scores");
        hs_gw_arr(w, str ? HS_GW_STRING : s->scores_i32 ? HS_GW_INT32 : HS_GW_FLOAT32, n);
        for (uint64_t i = 0; i < n; i++) {
            if (str)
                hs_gw_str(w, "1");
            else if (s->scores_i32)
                hs_gw_u32(w, (uint32_t)(int32_t)k_scores[i]);
            else
                hs_gw_f32(w, k_scores[i]);
        }
    }
    if (key(w, s, "tokenizer.ggml.token_type", HS_GW_ARRAY, n_kv)) {
        uint64_t n = s->n_types ? s->n_types : N_TOKS;
        bool flt = bad_elem(s, "tokenizer.ggml.token_type");
        hs_gw_arr(w, flt ? HS_GW_FLOAT32 : HS_GW_INT32, n);
        for (uint64_t i = 0; i < n; i++) {
            if (flt)
                hs_gw_f32(w, 1.0f);
            else
                hs_gw_u32(w, (uint32_t)k_types[i]);
        }
    }
    if (s->merges && key(w, s, "tokenizer.ggml.merges", HS_GW_ARRAY, n_kv)) {
        hs_gw_arr(w, HS_GW_STRING, 1);
        hs_gw_str(w, "a b");
    }
}

/* A GGUF file with a small SPM vocabulary and no tensors. */
static hs_status open_synth(hs_gw *w, const synth *s, hs_gguf **g) {
    uint64_t n_kv = 0;
    hs_gw_init(w);
    size_t ver = hs_gw_header(w, 3, 0, 0);
    if (key(w, s, "general.architecture", HS_GW_STRING, &n_kv)) hs_gw_str(w, "llama");
    if (key(w, s, "tokenizer.ggml.model", HS_GW_STRING, &n_kv)) hs_gw_str(w, s->model ? s->model : "llama");
    if (key(w, s, "tokenizer.ggml.pre", HS_GW_STRING, &n_kv)) hs_gw_str(w, "default");
    write_arrays(w, s, &n_kv);
    if (key(w, s, "tokenizer.ggml.bos_token_id", HS_GW_UINT32, &n_kv)) hs_gw_u32(w, 1);
    if (key(w, s, "tokenizer.ggml.eos_token_id", HS_GW_INT32, &n_kv)) hs_gw_u32(w, 2);
    if (key(w, s, "tokenizer.ggml.unknown_token_id", HS_GW_UINT64, &n_kv)) hs_gw_u64(w, 0);
    /* outside the vocabulary: ignored, as llama.cpp does ("bad special token") */
    if (key(w, s, "tokenizer.ggml.padding_token_id", HS_GW_UINT32, &n_kv)) hs_gw_u32(w, 99);
    if (key(w, s, "tokenizer.ggml.add_bos_token", HS_GW_BOOL, &n_kv)) hs_gw_u8(w, 0);
    if (key(w, s, "tokenizer.ggml.add_eos_token", HS_GW_BOOL, &n_kv)) hs_gw_u8(w, 1);
    hs_gw_patch_u64(w, ver + 12, n_kv); /* after the version (4 bytes) and the tensor count (8) */
    hs_gw_pad(w, 32);
    return hs_gguf_open_memory(w->buf, w->len, "synth", g);
}

static hs_status synth_tok(const synth *s, hs_tok **tok) {
    hs_gw w;
    hs_gguf *g = NULL;
    hs_status st = open_synth(&w, s, &g);
    if (st == HS_OK) st = hs_tok_from_gguf(g, tok);
    hs_gguf_close(g);
    hs_gw_free(&w);
    return st;
}

static void test_synth_keys(void **state) {
    (void)state;
    hs_tok *tok;
    HS_CHECK(synth_tok(&(synth){0}, &tok));
    assert_int_equal(hs_tok_n_tokens(tok), N_TOKS);
    assert_int_equal(hs_tok_bos(tok), 1);
    assert_int_equal(hs_tok_eos(tok), 2);
    assert_int_equal(hs_tok_unk(tok), 0);
    assert_int_equal(hs_tok_pad(tok), HS_TOK_NONE);
    assert_false(hs_tok_add_bos(tok));
    assert_true(hs_tok_add_eos(tok));
    assert_int_equal(hs_tok_token_type(tok, 2), HS_TOK_TYPE_CONTROL);
    assert_int_equal(hs_tok_token_type(tok, 0), HS_TOK_TYPE_UNKNOWN);
    assert_string_equal(hs_tok_token_text(tok, 7), "ab");
    /* by hand from SPM's rule (highest score first): "▁ab▁a" -> ▁ ab ▁a, then EOS (add_eos, no BOS) */
    static const int32_t want[] = {3, 7, 6, 2};
    encode_expect(tok, "ab a", HS_TOK_ADD_SPECIAL, want, N_OF(want));
    hs_tok_destroy(tok);

    HS_CHECK(synth_tok(&(synth){.scores_i32 = true}, &tok)); /* integer scores, converted */
    encode_expect(tok, "ab a", HS_TOK_ADD_SPECIAL, want, N_OF(want));
    hs_tok_destroy(tok);

    /* without scores every merge ties and the leftmost goes first: ▁a b ▁a */
    HS_CHECK(synth_tok(&(synth){.omit = "tokenizer.ggml.scores"}, &tok));
    encode_expect(tok, "ab a", 0, (const int32_t[]){6, 5, 6}, 3);
    hs_tok_destroy(tok);

    /* without the flags and ids: SPM defaults (BOS 1 added, EOS 2 not) */
    HS_CHECK(synth_tok(&(synth){.omit = "tokenizer.ggml.add_bos_token"}, &tok));
    assert_true(hs_tok_add_bos(tok));
    hs_tok_destroy(tok);
    HS_CHECK(synth_tok(&(synth){.omit = "tokenizer.ggml.eos_token_id"}, &tok));
    assert_int_equal(hs_tok_eos(tok), 2);
    hs_tok_destroy(tok);
    HS_CHECK(synth_tok(&(synth){.omit = "tokenizer.ggml.pre"}, &tok));
    hs_tok_destroy(tok);
    HS_CHECK(synth_tok(&(synth){.omit = "tokenizer.ggml.token_type"}, &tok));
    assert_int_equal(hs_tok_token_type(tok, 2), HS_TOK_TYPE_NORMAL);
    hs_tok_destroy(tok);

    /* BPE: the one merge applies ("a" and "b" are their own byte-level symbols) */
    HS_CHECK(synth_tok(&(synth){.model = "gpt2", .merges = true}, &tok));
    assert_int_equal(hs_tok_get_kind(tok), HS_TOK_BPE);
    encode_expect(tok, "ab", HS_TOK_ADD_SPECIAL, (const int32_t[]){7, 2}, 2);
    hs_tok_destroy(tok);
}

static void expect_fail(const synth *s, hs_status want, const char *needle) {
    hs_tok *tok = (hs_tok *)&tok;
    hs_error_clear();
    assert_int_equal(synth_tok(s, &tok), want);
    assert_null(tok);
    if (!strstr(hs_last_error(), needle))
        fail_msg("error '%s' does not mention '%s'", hs_last_error(), needle);
}

static void test_synth_errors(void **state) {
    (void)state;
    expect_fail(&(synth){.omit = "tokenizer.ggml.tokens"}, HS_ERR_FORMAT,
                "tokenizer.ggml.tokens missing: this GGUF has no tokenizer");
    expect_fail(&(synth){.retype = "tokenizer.ggml.tokens"}, HS_ERR_FORMAT,
                "tokenizer.ggml.tokens has type str, expected an array");
    expect_fail(&(synth){.bad_elem = "tokenizer.ggml.tokens"}, HS_ERR_FORMAT,
                "tokenizer.ggml.tokens is an array of u32, expected an array of strings");
    expect_fail(&(synth){.omit = "tokenizer.ggml.model"}, HS_ERR_FORMAT, "tokenizer.ggml.model missing");
    expect_fail(&(synth){.retype = "tokenizer.ggml.model"}, HS_ERR_FORMAT,
                "'tokenizer.ggml.model' has type u32");
    expect_fail(&(synth){.retype = "tokenizer.ggml.pre"}, HS_ERR_FORMAT, "'tokenizer.ggml.pre' has type u32");
    expect_fail(&(synth){.retype = "tokenizer.ggml.scores"}, HS_ERR_FORMAT,
                "tokenizer.ggml.scores has type str");
    expect_fail(&(synth){.bad_elem = "tokenizer.ggml.scores"}, HS_ERR_FORMAT,
                "tokenizer.ggml.scores is an array of str, expected an array of numbers");
    expect_fail(&(synth){.n_scores = N_TOKS - 1}, HS_ERR_FORMAT,
                "tokenizer.ggml.scores has 7 entries for 8 tokens");
    expect_fail(&(synth){.bad_elem = "tokenizer.ggml.token_type"}, HS_ERR_FORMAT,
                "tokenizer.ggml.token_type is an array of f32, expected an array of integers");
    expect_fail(&(synth){.n_types = 3}, HS_ERR_FORMAT,
                "tokenizer.ggml.token_type has 3 entries for 8 tokens");
    expect_fail(&(synth){.retype = "tokenizer.ggml.bos_token_id"}, HS_ERR_FORMAT,
                "tokenizer.ggml.bos_token_id has type str, expected an integer");
    expect_fail(&(synth){.retype = "tokenizer.ggml.add_eos_token"}, HS_ERR_FORMAT,
                "tokenizer.ggml.add_eos_token has type str, expected bool");
    /* what hs_tok_create refuses comes through */
    expect_fail(&(synth){.model = "bert"}, HS_ERR_UNSUPPORTED_TYPE, "bert");
    expect_fail(&(synth){.model = "gpt2", .merges = true, .retype = "tokenizer.ggml.merges"}, HS_ERR_FORMAT,
                "tokenizer.ggml.merges has type str");
    expect_fail(&(synth){.model = "gpt2"}, HS_ERR_FORMAT,
                "tokenizer.ggml.merges missing: a BPE (gpt2) tokenizer needs its merges");

    hs_tok *tok = (hs_tok *)&tok;
    assert_int_equal(hs_tok_from_gguf(NULL, &tok), HS_ERR_INVALID_ARG);
    assert_null(tok);
    hs_gw w;
    hs_gguf *g;
    HS_CHECK(open_synth(&w, &(synth){0}, &g));
    assert_int_equal(hs_tok_from_gguf(g, NULL), HS_ERR_INVALID_ARG);
    hs_gguf_close(g);
    hs_gw_free(&w);
}

/* ---- SmolLM2-135M-Instruct (GPT-2 BPE) ---- */

/* Expected ids below come from llama.cpp (the prebuilt libraries of tools/oracle, v0.5.0), not from this
 * code: llama_tokenize(vocab, text, len, add_special = true, parse_special) on this GGUF, through a
 * throwaway program; for parse_special = false they equal `hs-oracle --tokenize -p TEXT`. */
typedef struct smol_case {
    const char *text;
    bool parse_special;
    int32_t ids[32];
    size_t n;
} smol_case;

static const smol_case k_smol_cases[] = {
    {"Hello, world!", false, {19556, 28, 905, 17}, 4},
    {"Once upon a time, there was a little girl named Lily.",
     false,
     {6403, 1980, 253, 655, 28, 665, 436, 253, 1838, 8180, 3365, 14176, 30},
     13},
    {"I've got 12,345 apples -- don't you?\n\n\tIndented   spaces  ",
     false,
     {57,   3543, 3363, 216, 33,   34,  28,   35,   36,  37,   13855, 3009,
      1326, 982,  346,  47,  1116, 197, 5080, 6574, 256, 5600, 256},
     23},
    {"Caf\xc3\xa9 na\xc3\xafve \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\xa6\x99 \xc3\x9cn\xc3\xaf"
     "c\xc3\xb6"
     "d\xc3\xa9",
     false,
     {51,    1939, 2756, 15486, 46494, 17097, 241,   115, 40993, 179, 120, 248,
      15107, 116,  243,  5549,  246,   94,    25972, 83,  7466,  84,  2756},
     23},
    /* <|im_end|> is a control token: its text only with parse_special */
    {"a<|im_end|>b", false, {81, 44, 108, 306, 79, 486, 108, 46, 82}, 9},
    {"a<|im_end|>b", true, {81, 2, 82}, 3},
};

/* ChatML prompt of the first MT-bench question (question_id 81) as SmolLM2's template renders it (default
 * system turn), tokenized by llama.cpp as above with parse_special = true. */
static const int32_t k_smol_chat[] = {1,    9690,  198,  2683,  359, 253,   5356,  5646, 11173, 3365, 3511,
                                      308,  34519, 28,   7018,  411, 407,   19712, 8182, 2,     198,  1,
                                      4093, 198,   3750, 2594,  354, 4798,  2827,  5862, 1681,  563,  253,
                                      2765, 7022,  288,  14126, 28,  10775, 2642,  2647, 284,   1251, 29,
                                      4009, 21627, 30,   2,     198, 1,     520,   9531, 198};

/* Opens the SmolLM2 GGUF, or skips the test. */
static hs_gguf *smol_or_skip(void) {
    char path[4200];
    if (!hs_test_model_path("SmolLM2-135M-Instruct.Q4_1.gguf", path, sizeof path)) {
        print_message("SmolLM2-135M-Instruct.Q4_1.gguf not in $HS_TEST_MODELS, $HS_HOME/models or "
                      "~/.cache/heterospec/models (tools/fetch_model.sh): skipping\n");
        skip();
    }
    hs_gguf *g;
    HS_CHECK(hs_gguf_open(path, &g));
    return g;
}

static void test_smol_strings(void **state) {
    (void)state;
    hs_gguf *g = smol_or_skip();
    hs_tok *tok;
    HS_CHECK(hs_tok_from_gguf(g, &tok));
    hs_gguf_close(g);
    assert_int_equal(hs_tok_get_kind(tok), HS_TOK_BPE);
    assert_int_equal(hs_tok_n_tokens(tok), 49152);
    for (size_t i = 0; i < N_OF(k_smol_cases); i++) {
        const smol_case *c = &k_smol_cases[i];
        unsigned flags = HS_TOK_ADD_SPECIAL | (c->parse_special ? HS_TOK_PARSE_SPECIAL : 0);
        encode_expect(tok, c->text, flags, c->ids, c->n);
        if (c->parse_special) continue;
        char *text; /* and back */
        size_t len;
        HS_CHECK(hs_tok_decode(tok, c->ids, c->n, 0, &text, &len));
        assert_string_equal(text, c->text);
        free(text);
    }
    hs_tok_destroy(tok);
}

/* First turn of the first question of ../shared/data/bench/mt_bench/question.jsonl (malloc'ed). */
static char *mt_bench_first_turn(void) {
    char path[1024], line[8192];
    snprintf(path, sizeof path, "%s/data/bench/mt_bench/question.jsonl", hs_test_shared_dir());
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    assert_non_null(fgets(line, sizeof line, f));
    fclose(f);
    cJSON *q = cJSON_Parse(line);
    assert_non_null(q);
    const cJSON *turn = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(q, "turns"), 0);
    assert_true(cJSON_IsString(turn));
    char *s = strdup(turn->valuestring);
    cJSON_Delete(q);
    return s;
}

static void test_smol_chatml(void **state) {
    (void)state;
    hs_gguf *g = smol_or_skip();
    hs_tok *tok;
    hs_chat *chat;
    const char *tmpl;
    HS_CHECK(hs_tok_from_gguf(g, &tok));
    HS_CHECK(hs_gguf_get_str(g, "tokenizer.chat_template", &tmpl));
    HS_CHECK(hs_chat_create(tmpl, &chat));
    hs_gguf_close(g);
    char *question = mt_bench_first_turn(), *prompt, want[8192];
    hs_chat_msg msg = {"user", question};
    HS_CHECK(hs_chat_render(chat, &msg, 1, true, &prompt));
    snprintf(
        want, sizeof want,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n",
        question);
    assert_string_equal(prompt, want);

    int32_t im_start = hs_tok_find(tok, "<|im_start|>"), im_end = hs_tok_find(tok, "<|im_end|>");
    assert_int_equal(hs_tok_token_type(tok, im_start), HS_TOK_TYPE_CONTROL);
    assert_int_equal(hs_tok_token_type(tok, im_end), HS_TOK_TYPE_CONTROL);
    encode_expect(tok, prompt, HS_TOK_ADD_SPECIAL | HS_TOK_PARSE_SPECIAL, k_smol_chat, N_OF(k_smol_chat));
    int32_t *ids;
    size_t n, n_start = 0, n_end = 0;
    HS_CHECK(hs_tok_encode(tok, prompt, strlen(prompt), HS_TOK_ADD_SPECIAL | HS_TOK_PARSE_SPECIAL, &ids, &n));
    for (size_t i = 0; i < n; i++)
        n_start += ids[i] == im_start, n_end += ids[i] == im_end;
    assert_int_equal(n_start, 3); /* system, user, assistant: each one token */
    assert_int_equal(n_end, 2);
    free(ids);
    /* without PARSE_SPECIAL the markers are plain text (82 ids in llama.cpp), never the control tokens */
    HS_CHECK(hs_tok_encode(tok, prompt, strlen(prompt), HS_TOK_ADD_SPECIAL, &ids, &n));
    assert_int_equal(n, 82);
    for (size_t i = 0; i < n; i++)
        assert_true(ids[i] != im_start && ids[i] != im_end);
    free(ids);
    free(prompt);
    free(question);
    hs_chat_destroy(chat);
    hs_tok_destroy(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories),      cmocka_unit_test(test_synth_keys),
        cmocka_unit_test(test_synth_errors), cmocka_unit_test(test_smol_strings),
        cmocka_unit_test(test_smol_chatml),
    };
    return hs_test_run_group("tok_gguf", tests, NULL, NULL);
}
