/* Tests of models/tokenizer: SentencePiece-style (stories260K, llama.cpp's
 * llama-spm vocabulary) and GPT-2 byte-level BPE (gpt-2, qwen2, llama-bpe, ...).
 *
 * Expected ids come from outside this code: the stories260K README (prompt ids),
 * golden_greedy.txt (ids and text from an independent numpy + llama2.c pipeline),
 * and llama.cpp's own test vectors (models/ggml-vocab-*.gguf.inp/.out, produced by
 * the Hugging Face tokenizers). The llama.cpp source is looked up in $HS_LLAMA_SRC,
 * $HS_HOME/src/llama.cpp, then ~/.cache/heterospec/src/llama.cpp (where
 * tools/fetch_llama_src.sh puts it); tests that need it skip when it is missing.
 * Vocabularies are read with the GGUF reader (models/gguf.h) and hs_tok_from_gguf
 * (models/tok_gguf.h); tests/test_tok_gguf.c covers the latter on its own.
 */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gguf.h"
#include "tok_gguf.h"
#include "tokenizer.h"

/* ---- helpers ---- */

static char *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t got = fread(buf + n, 1, 4096, f);
        n += got;
        if (got < 4096) break;
    }
    fclose(f);
    if (buf) buf[n] = 0;
    *len = n;
    return buf;
}

static hs_status load_tok(const char *path, hs_tok **tok) {
    hs_status st = HS_OK;
    hs_gguf *g = NULL;
    HS_TRY(hs_gguf_open(path, &g));
    HS_TRY(hs_tok_from_gguf(g, tok));
fail:
    hs_gguf_close(g);
    return st;
}

static bool is_dir(const char *p) {
    struct stat sb;
    return stat(p, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* The llama.cpp source folder, or NULL. */
static const char *llama_src(void) {
    static char buf[4096];
    const char *e = getenv("HS_LLAMA_SRC");
    if (e && is_dir(e)) return e;
    e = getenv("HS_HOME");
    if (e) {
        snprintf(buf, sizeof buf, "%s/src/llama.cpp/models", e);
        if (is_dir(buf)) return snprintf(buf, sizeof buf, "%s/src/llama.cpp", e), buf;
    }
    e = getenv("HOME");
    if (e) {
        snprintf(buf, sizeof buf, "%s/.cache/heterospec/src/llama.cpp/models", e);
        if (is_dir(buf)) return snprintf(buf, sizeof buf, "%s/.cache/heterospec/src/llama.cpp", e), buf;
    }
    return NULL;
}

/* Loads models/ggml-vocab-<name>.gguf of the llama.cpp source, or skips the test. */
static hs_tok *llama_vocab_or_skip(const char *name) {
    const char *src = llama_src();
    if (!src) {
        print_message("llama.cpp source not found (run tools/fetch_llama_src.sh): skipping\n");
        skip();
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models/ggml-vocab-%s.gguf", src, name);
    hs_tok *tok = NULL;
    HS_CHECK(load_tok(path, &tok));
    return tok;
}

static void assert_ids(const int32_t *got, size_t n_got, const int32_t *want, size_t n_want) {
    assert_int_equal(n_got, n_want);
    for (size_t i = 0; i < n_want; i++)
        assert_int_equal(got[i], want[i]);
}

static hs_tok *stories(void **state) { return *state; }

static int setup(void **state) {
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    hs_tok *tok = NULL;
    if (load_tok(path, &tok) != HS_OK) {
        fprintf(stderr, "test_tokenizer: %s\n", hs_last_error());
        return -1;
    }
    *state = tok;
    return 0;
}

static int teardown(void **state) {
    hs_tok_destroy(*state);
    return 0;
}

/* ---- stories260K (SPM, 512 tokens) ---- */

static void test_stories_prompt(void **state) {
    hs_tok *tok = stories(state);
    assert_int_equal(hs_tok_get_kind(tok), HS_TOK_SPM);
    assert_int_equal(hs_tok_n_tokens(tok), 512);
    int32_t *ids;
    size_t n;
    HS_CHECK(hs_tok_encode(tok, "Once upon a time", 16, HS_TOK_ADD_SPECIAL, &ids, &n));
    /* from ../shared/models/stories260K/README.md */
    const int32_t want[] = {1, 403, 407, 261, 378};
    assert_ids(ids, n, want, 5);
    free(ids);
    /* without special tokens: the same ids less BOS */
    HS_CHECK(hs_tok_encode(tok, "Once upon a time", 16, 0, &ids, &n));
    assert_ids(ids, n, want + 1, 4);
    free(ids);
}

/* Parses a Python string literal '...' (the "text" field of golden_greedy.txt). */
static char *py_unrepr(const char *s, size_t *len) {
    assert_true(*s == '\'' || *s == '"');
    char q = *s++;
    char *out = malloc(strlen(s) + 1);
    size_t n = 0;
    for (; *s && *s != q; s++) {
        if (*s != '\\') {
            out[n++] = *s;
            continue;
        }
        s++;
        switch (*s) {
        case 'n': out[n++] = '\n'; break;
        case 't': out[n++] = '\t'; break;
        case 'r': out[n++] = '\r'; break;
        case '\\':
        case '\'':
        case '"': out[n++] = *s; break;
        default: fail_msg("unexpected escape \\%c in golden text", *s);
        }
    }
    assert_int_equal(*s, q);
    out[n] = 0;
    *len = n;
    return out;
}

/* Reads "[a, b, c]" after key in line into a malloc'ed array. */
static int32_t *parse_id_list(const char *line, const char *key, size_t *n) {
    const char *p = strstr(line, key);
    assert_non_null(p);
    p = strchr(p, '[');
    assert_non_null(p);
    int32_t *ids = malloc(4096 * sizeof *ids);
    *n = 0;
    for (p++; *p && *p != ']';) {
        char *end;
        long v = strtol(p, &end, 10);
        assert_true(end != p);
        assert_true(*n < 4096);
        ids[(*n)++] = (int32_t)v;
        p = end;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return ids;
}

/* decode(prompt ids without BOS + generated ids) must equal the golden text, which
 * the numpy pipeline decoded with llama2.c's tokenizer; and encoding that text
 * gives back the ids (it does for these greedy outputs). */
static void test_stories_golden(void **state) {
    hs_tok *tok = stories(state);
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/golden_greedy.txt", hs_test_shared_dir());
    size_t flen;
    char *file = read_file(path, &flen);
    assert_non_null(file);
    int cases = 0;
    for (char *line = strtok(file, "\n"); line; line = strtok(NULL, "\n")) {
        if (strncmp(line, "PROMPT ", 7) != 0) continue;
        size_t np, ng, tl;
        int32_t *prompt = parse_id_list(line, "prompt_tokens", &np);
        char *gen_line = strtok(NULL, "\n"), *text_line = strtok(NULL, "\n");
        assert_non_null(gen_line);
        assert_non_null(text_line);
        assert_true(strncmp(text_line, "text ", 5) == 0);
        int32_t *gen = parse_id_list(gen_line, "greedy_generated_ids", &ng);
        char *want = py_unrepr(text_line + 5, &tl);
        assert_true(np >= 1 && prompt[0] == hs_tok_bos(tok));
        int32_t *all = malloc((np + ng) * sizeof *all);
        memcpy(all, prompt + 1, (np - 1) * sizeof *all);
        memcpy(all + np - 1, gen, ng * sizeof *all);
        size_t n = np - 1 + ng, len;
        char *text;
        HS_CHECK(hs_tok_decode(tok, all, n, 0, &text, &len));
        assert_int_equal(len, tl);
        assert_memory_equal(text, want, tl);
        /* with BOS in front the decoded text is the same: the BOS piece is empty and the
         * space after it is kept, as llama.cpp does ("<s> Once" -> " Once") */
        char *text2;
        size_t len2;
        HS_CHECK(hs_tok_decode(tok, prompt, 1, HS_TOK_UNPARSE_SPECIAL, &text2, &len2));
        assert_string_equal(text2, "<s>");
        free(text2);
        int32_t *ids;
        size_t nids;
        HS_CHECK(hs_tok_encode(tok, text, len, 0, &ids, &nids));
        assert_ids(ids, nids, all, n);
        free(ids);
        free(text);
        free(all);
        free(want);
        free(gen);
        free(prompt);
        cases++;
    }
    assert_int_equal(cases, 2);
    free(file);
}

static void test_stories_byte_fallback(void **state) {
    hs_tok *tok = stories(state);
    /* "ж" (D0 B6) has no piece in this 512-token vocabulary: "▁" then its two byte tokens */
    assert_int_equal(hs_tok_find(tok, "\xd0\xb6"), HS_TOK_NONE);
    int32_t want[3] = {hs_tok_find(tok, "\xe2\x96\x81"), hs_tok_find(tok, "<0xD0>"),
                       hs_tok_find(tok, "<0xB6>")};
    for (int i = 0; i < 3; i++)
        assert_true(want[i] >= 0);
    assert_int_equal(hs_tok_token_type(tok, want[1]), HS_TOK_TYPE_BYTE);
    int32_t *ids;
    size_t n, len;
    HS_CHECK(hs_tok_encode(tok, "\xd0\xb6", 2, 0, &ids, &n));
    assert_ids(ids, n, want, 3);
    char *text;
    HS_CHECK(hs_tok_decode(tok, ids, n, 0, &text, &len));
    assert_string_equal(text, "\xd0\xb6");
    free(text);
    free(ids);
    /* a single byte token decodes to its byte */
    const char *piece;
    HS_CHECK(hs_tok_piece(tok, hs_tok_find(tok, "<0x0A>"), &piece, &len));
    assert_int_equal(len, 1);
    assert_int_equal(piece[0], '\n');
}

static void test_stories_empty(void **state) {
    hs_tok *tok = stories(state);
    int32_t *ids = (int32_t *)&ids;
    size_t n = 7, len = 7;
    HS_CHECK(hs_tok_encode(tok, "", 0, 0, &ids, &n));
    assert_int_equal(n, 0);
    assert_null(ids);
    HS_CHECK(hs_tok_encode(tok, NULL, 0, HS_TOK_ADD_SPECIAL, &ids, &n));
    assert_ids(ids, n, (const int32_t[]){1}, 1);
    free(ids);
    char *text;
    HS_CHECK(hs_tok_decode(tok, NULL, 0, 0, &text, &len));
    assert_int_equal(len, 0);
    assert_string_equal(text, "");
    free(text);
}

/* Invalid UTF-8 goes through byte fallback unchanged, so the SPM round trip is exact. */
static void test_stories_invalid_utf8(void **state) {
    hs_tok *tok = stories(state);
    static const char *const inputs[] = {
        "\xff",
        "\xc3",
        "a\x80z",
        "\xe2\x96",
        "tail \xf0\x9f\xa6",
        "\xc0\x80 overlong",
        "\xed\xa0\x80 surrogate",
        "\xf8\x88\x80\x80\x80",
        "x\xfe\xfd\xfc",
    };
    for (size_t k = 0; k < sizeof inputs / sizeof inputs[0]; k++) {
        const char *s = inputs[k];
        size_t sl = strlen(s), n, len;
        int32_t *ids;
        char *text;
        HS_CHECK(hs_tok_encode(tok, s, sl, HS_TOK_ADD_SPECIAL | HS_TOK_PARSE_SPECIAL, &ids, &n));
        assert_true(n >= 2);
        for (size_t i = 0; i < n; i++)
            assert_true(ids[i] >= 0 && ids[i] < 512);
        HS_CHECK(hs_tok_decode(tok, ids + 1, n - 1, 0, &text, &len));
        assert_int_equal(len, sl);
        assert_memory_equal(text, s, sl);
        free(text);
        free(ids);
    }
    /* NUL bytes inside the text are ordinary bytes */
    int32_t *ids;
    size_t n;
    HS_CHECK(hs_tok_encode(tok, "a\0b", 3, 0, &ids, &n));
    assert_true(n >= 3);
    free(ids);
}

/* Control tokens are matched verbatim only with HS_TOK_PARSE_SPECIAL. */
static void test_stories_special(void **state) {
    hs_tok *tok = stories(state);
    int32_t eos = hs_tok_find(tok, "</s>");
    assert_int_equal(eos, hs_tok_eos(tok));
    assert_int_equal(hs_tok_token_type(tok, eos), HS_TOK_TYPE_CONTROL);
    int32_t *ids, *a, *b;
    size_t n, na, nb;
    HS_CHECK(hs_tok_encode(tok, "Hi</s>Hi", 8, HS_TOK_PARSE_SPECIAL, &ids, &n));
    /* expected: tokens of "Hi", EOS, then "Hi" again with the space prefix (after a special token) */
    HS_CHECK(hs_tok_encode(tok, "Hi", 2, 0, &a, &na));
    assert_int_equal(n, 2 * na + 1);
    assert_memory_equal(ids, a, na * sizeof *a);
    assert_int_equal(ids[na], eos);
    assert_memory_equal(ids + na + 1, a, na * sizeof *a);
    free(ids);
    HS_CHECK(hs_tok_encode(tok, "Hi</s>Hi", 8, 0, &b, &nb));
    for (size_t i = 0; i < nb; i++)
        assert_int_not_equal(b[i], eos);
    char *text;
    size_t len;
    HS_CHECK(hs_tok_decode(tok, b, nb, 0, &text, &len));
    assert_string_equal(text, "Hi</s>Hi");
    free(text);
    free(a);
    free(b);
    /* decode: control tokens hidden unless asked for; REMOVE_SPECIAL drops the BOS */
    const int32_t seq[] = {1, 403, 2};
    HS_CHECK(hs_tok_decode(tok, seq, 3, HS_TOK_UNPARSE_SPECIAL, &text, &len));
    assert_string_equal(text, "<s> Once</s>");
    free(text);
    HS_CHECK(hs_tok_decode(tok, seq + 1, 1, 0, &text, &len));
    assert_string_equal(text, "Once");
    free(text);
    const int32_t bad[] = {403, 512};
    assert_int_equal(hs_tok_decode(tok, bad, 2, 0, &text, &len), HS_ERR_OUT_OF_RANGE);
    assert_int_equal(hs_tok_piece(tok, -1, (const char **)&text, &len), HS_ERR_OUT_OF_RANGE);
}

/* Random strings of ASCII, stray continuation bytes (80-BF) and two-byte
 * characters survive an SPM encode/decode round trip: unknown characters go
 * through byte fallback unchanged. (Not for every byte string: as in llama.cpp, a
 * lead byte F0 takes the next three bytes as its character, so "\xF0 " swallows
 * the U+2581 of the space into byte tokens; and a literal U+2581 decodes to a space.) */
static void test_stories_random_roundtrip(void **state) {
    hs_tok *tok = stories(state);
    hs_rng rng;
    hs_rng_seed(&rng, 42);
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz ABC .,!?'\n\t0123456789";
    char buf[96];
    for (int it = 0; it < 300; it++) {
        size_t sl = 1 + hs_rng_u32(&rng) % (sizeof buf - 2);
        for (size_t i = 0; i < sl; i++) {
            uint32_t r = hs_rng_u32(&rng);
            if (r & 3) {
                buf[i] = alphabet[(r >> 2) % (sizeof alphabet - 1)];
            } else if (r & 4 || i + 1 == sl) {
                buf[i] = (char)(0x80 | ((r >> 8) & 0x3F));
            } else {
                buf[i++] = (char)(0xC2 | ((r >> 8) & 0x1D)); /* C2-DF lead byte */
                buf[i] = (char)(0x80 | ((r >> 16) & 0x3F));
            }
        }
        int32_t *ids;
        char *text;
        size_t n, len;
        HS_CHECK(hs_tok_encode(tok, buf, sl, 0, &ids, &n));
        HS_CHECK(hs_tok_decode(tok, ids, n, 0, &text, &len));
        assert_int_equal(len, sl);
        assert_memory_equal(text, buf, sl);
        free(ids);
        free(text);
    }
}

/* ---- malformed vocabularies ---- */

/* An SPM ("llama") vocabulary of n tokens with every special id and flag left
 * to the tokenizer's defaults. */
static hs_tok_vocab spm_vocab(const char *const *toks, const int32_t *types, uint32_t n) {
    return (hs_tok_vocab){.model = "llama",
                          .n_tokens = n,
                          .tokens = toks,
                          .types = types,
                          .bos = HS_TOK_NONE,
                          .eos = HS_TOK_NONE,
                          .unk = HS_TOK_NONE,
                          .pad = HS_TOK_NONE,
                          .add_bos = HS_TOK_DEFAULT,
                          .add_eos = HS_TOK_DEFAULT,
                          .add_space_prefix = HS_TOK_DEFAULT};
}

static void expect_create_fails(const hs_tok_vocab *v, hs_status want, const char *needle) {
    hs_tok *tok = (hs_tok *)&tok;
    hs_error_clear();
    assert_int_equal(hs_tok_create(v, &tok), want);
    assert_null(tok);
    if (!strstr(hs_last_error(), needle))
        fail_msg("error '%s' does not mention '%s'", hs_last_error(), needle);
}

static void test_malformed_vocab(void **state) {
    (void)state;
    const char *toks[] = {"<unk>", "<s>", "</s>", "a", "b", "ab", "<0xZZ>"};
    const int32_t types[] = {2, 3, 3, 1, 1, 1, 6};
    const char *merges[] = {"a b"}, *bad_merges[] = {"ab"};
    hs_tok_vocab v = spm_vocab(toks, types, 6);
    hs_tok *tok;
    HS_CHECK(hs_tok_create(&v, &tok)); /* the well-formed base case */
    hs_tok_destroy(tok);
    hs_tok_destroy(NULL);

    hs_tok_vocab w = v;
    w.model = "bert";
    expect_create_fails(&w, HS_ERR_UNSUPPORTED_TYPE, "bert");
    w = v, w.model = NULL;
    expect_create_fails(&w, HS_ERR_FORMAT, "model");
    w = v, w.n_tokens = 0;
    expect_create_fails(&w, HS_ERR_FORMAT, "no tokens");
    w = v, w.n_tokens = 7;
    expect_create_fails(&w, HS_ERR_FORMAT, "<0xZZ>");
    w = v, w.bos = 6;
    expect_create_fails(&w, HS_ERR_FORMAT, "BOS token id 6");
    w = v, w.eos = -5;
    expect_create_fails(&w, HS_ERR_FORMAT, "EOS token id -5");
    w = v, w.add_bos = 3;
    expect_create_fails(&w, HS_ERR_INVALID_ARG, "add_bos");
    const char *holes[] = {"a", NULL};
    w = v, w.tokens = holes, w.n_tokens = 2, w.types = NULL;
    expect_create_fails(&w, HS_ERR_FORMAT, "token 1");

    hs_tok_vocab b = v;
    b.model = "gpt2", b.types = NULL, b.n_merges = 1, b.merges = merges;
    HS_CHECK(hs_tok_create(&b, &tok));
    int32_t *ids;
    size_t n;
    HS_CHECK(hs_tok_encode(tok, "ab", 2, 0, &ids, &n));
    assert_ids(ids, n, (const int32_t[]){5}, 1); /* the one merge applies */
    free(ids);
    hs_tok_destroy(tok);
    w = b, w.pre = "no-such-pre";
    expect_create_fails(&w, HS_ERR_UNSUPPORTED_TYPE, "no-such-pre");
    w = b, w.merges = bad_merges;
    expect_create_fails(&w, HS_ERR_FORMAT, "merge 0");
    w = b, w.merges = NULL;
    expect_create_fails(&w, HS_ERR_FORMAT, "merge");
    w = b, w.add_bos = 1;
    expect_create_fails(&w, HS_ERR_FORMAT, "BOS");
    assert_int_equal(hs_tok_create(NULL, &tok), HS_ERR_INVALID_ARG);
}

/* SPM without byte tokens falls back to the unknown token, or fails cleanly. */
static void test_spm_unknown(void **state) {
    (void)state;
    const char *toks[] = {"<unk>", "<s>", "</s>", "\xe2\x96\x81", "a"};
    const int32_t types[] = {2, 3, 3, 1, 1};
    hs_tok_vocab v = spm_vocab(toks, types, 5);
    hs_tok *tok;
    HS_CHECK(hs_tok_create(&v, &tok));
    int32_t *ids;
    size_t n;
    HS_CHECK(hs_tok_encode(tok, "a\xc3\xa9", 3, 0, &ids, &n));
    assert_ids(ids, n, (const int32_t[]){3, 4, 0, 0}, 4); /* "▁", "a", then <unk> per byte of é */
    free(ids);
    hs_tok_destroy(tok);
}

/* ---- GGUF reader robustness ---- */

static void test_gguf_truncated(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    size_t len;
    char *data = read_file(path, &len);
    assert_non_null(data);
    hs_gguf *g;
    hs_tok *tok;
    HS_CHECK(hs_gguf_open_memory(data, len, "stories260K", &g));
    HS_CHECK(hs_tok_from_gguf(g, &tok));
    hs_tok_destroy(tok);
    hs_gguf_close(g);
    /* the key/value section of this file is longer than 4 KiB (512 token strings),
     * so every shorter prefix must be rejected as truncated */
    for (size_t l = 0; l < 4096; l += 3) {
        g = (hs_gguf *)&g;
        assert_int_equal(hs_gguf_open_memory(data, l, "prefix", &g), HS_ERR_FORMAT);
        assert_null(g);
    }
    memcpy(data, "GGUX", 4);
    assert_int_equal(hs_gguf_open_memory(data, len, "bad magic", &g), HS_ERR_FORMAT);
    assert_null(g);
    free(data);
}

/* ---- llama.cpp test vectors ---- */

typedef struct vocab_case {
    const char *name;
    bool supported; /* false: hs_tok_create must refuse it with HS_ERR_UNSUPPORTED_TYPE */
    bool roundtrip; /* decode(encode(x)) == x for valid UTF-8 inputs */
} vocab_case;

/* Runs every case of models/ggml-vocab-<name>.gguf.inp/.out with add_special and
 * parse_special off, as llama.cpp's tests/test-tokenizer-0.cpp does. */
static void run_vocab(const vocab_case *vc) {
    const char *src = llama_src();
    if (!src) {
        print_message("llama.cpp source not found (run tools/fetch_llama_src.sh): skipping\n");
        skip();
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/models/ggml-vocab-%s.gguf", src, vc->name);
    hs_tok *tok = NULL;
    hs_status st = load_tok(path, &tok);
    if (!vc->supported) {
        assert_int_equal(st, HS_ERR_UNSUPPORTED_TYPE);
        print_message("%-16s not supported: %s\n", vc->name, hs_last_error());
        return;
    }
    HS_CHECK(st);
    size_t inp_len, out_len;
    char inp_path[4300], out_path[4300];
    snprintf(inp_path, sizeof inp_path, "%s.inp", path);
    snprintf(out_path, sizeof out_path, "%s.out", path);
    char *inp = read_file(inp_path, &inp_len), *out = read_file(out_path, &out_len);
    assert_non_null(inp);
    assert_non_null(out);
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sepl = sizeof sep - 1;
    int cases = 0, failed = 0;
    char *inp_pos = inp, *inp_end = inp + inp_len, *line = out;
    while (inp_pos < inp_end) {
        char *m = strstr(inp_pos, sep);
        size_t sl = m ? (size_t)(m - inp_pos) : (size_t)(inp_end - inp_pos);
        assert_true(line && *line != 0);
        char *eol = strchr(line, '\n');
        if (eol) *eol = 0;
        int32_t want[1024];
        size_t nw = 0;
        for (char *p = line, *end; *p; p = end) {
            long v = strtol(p, &end, 10);
            if (end == p) break;
            assert_true(nw < 1024);
            want[nw++] = (int32_t)v;
        }
        int32_t *ids;
        size_t n;
        HS_CHECK(hs_tok_encode(tok, inp_pos, sl, 0, &ids, &n));
        bool ok = n == nw && (n == 0 || memcmp(ids, want, n * sizeof *ids) == 0);
        if (!ok) {
            failed++;
            print_message("%s case %d '%.*s': got %zu ids, want %zu\n", vc->name, cases,
                          (int)(sl < 60 ? sl : 60), inp_pos, n, nw);
        }
        if (ok && vc->roundtrip) {
            char *text;
            size_t len;
            HS_CHECK(hs_tok_decode(tok, ids, n, 0, &text, &len));
            /* valid UTF-8 inputs come back unchanged (the .inp files are valid UTF-8) */
            if (len != sl || memcmp(text, inp_pos, sl) != 0) {
                failed++;
                print_message("%s case %d: decode differs from the input\n", vc->name, cases);
            }
            free(text);
        }
        free(ids);
        cases++;
        inp_pos += sl + (m ? sepl : 0);
        line = eol ? eol + 1 : NULL;
    }
    print_message("%-16s %d/%d cases pass\n", vc->name, cases - failed, cases);
    assert_true(cases > 0);
    assert_int_equal(failed, 0);
    free(inp);
    free(out);
    hs_tok_destroy(tok);
}

#define VOCAB_TEST(fn, ...)                                                                                  \
    static void fn(void **state) {                                                                           \
        (void)state;                                                                                         \
        const vocab_case vc = {__VA_ARGS__};                                                                 \
        run_vocab(&vc);                                                                                      \
    }

VOCAB_TEST(test_vocab_llama_spm, "llama-spm", true, true)
VOCAB_TEST(test_vocab_gpt2, "gpt-2", true, false)
VOCAB_TEST(test_vocab_qwen2, "qwen2", true, true)
VOCAB_TEST(test_vocab_qwen35, "qwen35", true, true)
VOCAB_TEST(test_vocab_llama_bpe, "llama-bpe", true, false)
VOCAB_TEST(test_vocab_mpt, "mpt", true, false)
VOCAB_TEST(test_vocab_starcoder, "starcoder", true, false)
VOCAB_TEST(test_vocab_refact, "refact", true, false)
VOCAB_TEST(test_vocab_command_r, "command-r", true, true)
VOCAB_TEST(test_vocab_falcon, "falcon", true, false)
VOCAB_TEST(test_vocab_deepseek_llm, "deepseek-llm", true, true)
VOCAB_TEST(test_vocab_deepseek_coder, "deepseek-coder", true, true)
VOCAB_TEST(test_vocab_phi3, "phi-3", true, true)
VOCAB_TEST(test_vocab_bert_bge, "bert-bge", false, false)
VOCAB_TEST(test_vocab_gemma4, "gemma-4", false, false)

/* Special tokens of a BPE vocabulary, and random valid UTF-8 round trips. */
static void test_bpe_special_and_random(void **state) {
    (void)state;
    hs_tok *tok = llama_vocab_or_skip("qwen2");
    int32_t eot = hs_tok_find(tok, "<|endoftext|>");
    assert_true(eot >= 0);
    assert_int_equal(hs_tok_token_type(tok, eot), HS_TOK_TYPE_CONTROL);
    int32_t *ids;
    size_t n;
    HS_CHECK(hs_tok_encode(tok, "a<|endoftext|>", 14, HS_TOK_PARSE_SPECIAL, &ids, &n));
    assert_int_equal(n, 2);
    assert_int_equal(ids[1], eot);
    free(ids);
    HS_CHECK(hs_tok_encode(tok, "a<|endoftext|>", 14, 0, &ids, &n));
    assert_true(n > 2);
    for (size_t i = 0; i < n; i++)
        assert_int_not_equal(ids[i], eot);
    free(ids);
    HS_CHECK(hs_tok_encode(tok, "", 0, HS_TOK_ADD_SPECIAL, &ids, &n));
    assert_int_equal(n, 0); /* qwen2 adds no BOS */

    /* invalid UTF-8: each bad byte is taken as U+FFFD (llama.cpp's unicode_cpts_from_utf8) */
    char *text;
    size_t len;
    HS_CHECK(hs_tok_encode(tok, "a\xff\xc3", 3, 0, &ids, &n));
    HS_CHECK(hs_tok_decode(tok, ids, n, 0, &text, &len));
    assert_string_equal(text, "a\xef\xbf\xbd\xef\xbf\xbd");
    free(text);
    free(ids);

    static const uint32_t cpts[] = {'a',  'Z',    ' ',   ' ',    '\n',   '\t',    '3',
                                    '\'', 's',    '.',   0xE9,   0x3B1,  0x4E2D,  0x1F999,
                                    0xA0, 0x3000, 0x300, 0x180E, 0xFFFD, 0x10FFFF};
    hs_rng rng;
    hs_rng_seed(&rng, 7);
    char buf[400];
    for (int it = 0; it < 200; it++) {
        size_t sl = 0, k = 1 + hs_rng_u32(&rng) % 60;
        for (size_t i = 0; i < k; i++) {
            uint32_t c = cpts[hs_rng_u32(&rng) % (sizeof cpts / sizeof cpts[0])];
            /* UTF-8 encoding written out here, independently of the tokenizer's helper */
            if (c < 0x80) {
                buf[sl++] = (char)c;
            } else if (c < 0x800) {
                buf[sl++] = (char)(0xC0 | (c >> 6)), buf[sl++] = (char)(0x80 | (c & 0x3F));
            } else if (c < 0x10000) {
                buf[sl++] = (char)(0xE0 | (c >> 12)), buf[sl++] = (char)(0x80 | ((c >> 6) & 0x3F));
                buf[sl++] = (char)(0x80 | (c & 0x3F));
            } else {
                buf[sl++] = (char)(0xF0 | (c >> 18)), buf[sl++] = (char)(0x80 | ((c >> 12) & 0x3F));
                buf[sl++] = (char)(0x80 | ((c >> 6) & 0x3F)), buf[sl++] = (char)(0x80 | (c & 0x3F));
            }
        }
        HS_CHECK(hs_tok_encode(tok, buf, sl, 0, &ids, &n));
        HS_CHECK(hs_tok_decode(tok, ids, n, 0, &text, &len));
        assert_int_equal(len, sl);
        assert_memory_equal(text, buf, sl);
        free(text);
        free(ids);
    }
    hs_tok_destroy(tok);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stories_prompt),
        cmocka_unit_test(test_stories_golden),
        cmocka_unit_test(test_stories_byte_fallback),
        cmocka_unit_test(test_stories_empty),
        cmocka_unit_test(test_stories_invalid_utf8),
        cmocka_unit_test(test_stories_special),
        cmocka_unit_test(test_stories_random_roundtrip),
        cmocka_unit_test(test_malformed_vocab),
        cmocka_unit_test(test_spm_unknown),
        cmocka_unit_test(test_gguf_truncated),
        cmocka_unit_test(test_vocab_llama_spm),
        cmocka_unit_test(test_vocab_gpt2),
        cmocka_unit_test(test_vocab_qwen2),
        cmocka_unit_test(test_vocab_qwen35),
        cmocka_unit_test(test_vocab_llama_bpe),
        cmocka_unit_test(test_vocab_mpt),
        cmocka_unit_test(test_vocab_starcoder),
        cmocka_unit_test(test_vocab_refact),
        cmocka_unit_test(test_vocab_command_r),
        cmocka_unit_test(test_vocab_falcon),
        cmocka_unit_test(test_vocab_deepseek_llm),
        cmocka_unit_test(test_vocab_deepseek_coder),
        cmocka_unit_test(test_vocab_phi3),
        cmocka_unit_test(test_vocab_bert_bge),
        cmocka_unit_test(test_vocab_gemma4),
        cmocka_unit_test(test_bpe_special_and_random),
    };
    return hs_test_run_group("tokenizer", tests, setup, teardown);
}
