/* tokenizer — text <-> token ids for the two vocabulary kinds heterospec runs:
 *
 *   "llama" (SentencePiece-style, SPM): Llama, Gemma, stories260K. Spaces become
 *     U+2581, a space is prefixed to the text, adjacent pieces are merged by
 *     vocabulary score, and characters with no piece fall back to byte tokens,
 *     written "<0x" + two hex digits + ">" (e.g. <0x41>), or to the unknown
 *     token when the vocabulary has none.
 *   "gpt2" (GPT-2 byte-level BPE): SmolLM2, Qwen2, Llama 3. The text is split by
 *     the pre-tokenizer regexes of its `tokenizer.ggml.pre` (PCRE2, UTF + UCP),
 *     every byte is mapped to a printable code point, and merges are applied in
 *     rank order.
 *
 * Both follow llama.cpp (src/llama-vocab.cpp, llm_tokenizer_spm / _bpe and
 * tokenizer_st_partition) so that ids agree with llama.cpp's test vectors: special
 * tokens (control, user-defined, unknown) found verbatim in the text are emitted as
 * themselves before pre-tokenization; with parse_special off only user-defined
 * tokens are, as in llama.cpp.
 *
 * Usage:
 *   hs_tok_vocab v = {.model = "llama", .n_tokens = n, .tokens = texts, .scores = scores,
 *                     .types = types, .bos = 1, .eos = 2, .unk = 0, .pad = -1,
 *                     .add_bos = HS_TOK_DEFAULT, .add_eos = HS_TOK_DEFAULT,
 *                     .add_space_prefix = HS_TOK_DEFAULT};
 *   hs_tok *tok;  HS_TRY(hs_tok_create(&v, &tok));
 *   int32_t *ids; size_t n;
 *   HS_TRY(hs_tok_encode(tok, "Once upon a time", 16, HS_TOK_ADD_SPECIAL | HS_TOK_PARSE_SPECIAL, &ids, &n));
 *   char *text; size_t len;
 *   HS_TRY(hs_tok_decode(tok, ids, n, 0, &text, &len));
 *   free(ids); free(text); hs_tok_destroy(tok);
 *
 * Supported `pre` values (others fail with HS_ERR_UNSUPPORTED_TYPE): NULL or
 * "default"; "gpt2"/"gpt-2" and its family (phi-2, mpt, olmo, jais, exaone4);
 * "smollm" and its family (starcoder, refact, command-r, codeshell, exaone,
 * minerva-7b); "qwen2" (deepseek-r1-qwen, megrez, stablelm2); "qwen35"; "llama3"
 * (llama-v3, llama-bpe, falcon3, dbrx, smaug-bpe); "falcon"; "deepseek-llm";
 * "deepseek-coder".
 *
 * Ownership: hs_tok_create copies everything it needs from the description; the
 * caller may free it afterwards. Arrays returned by encode/decode are malloc'ed
 * and owned by the caller (free()). Pointers returned by hs_tok_piece and
 * hs_tok_token_text stay valid until hs_tok_destroy.
 *
 * Thread-safety: a created tokenizer is immutable; encode, decode and the lookups
 * may run concurrently on the same hs_tok from several threads.
 */
#ifndef HS_TOKENIZER_H
#define HS_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hs_status.h"

typedef struct hs_tok hs_tok;

/* Token types as stored in GGUF's tokenizer.ggml.token_type (llama.cpp's llama_token_type). */
typedef enum hs_tok_type {
    HS_TOK_TYPE_UNDEFINED = 0,
    HS_TOK_TYPE_NORMAL = 1,
    HS_TOK_TYPE_UNKNOWN = 2,
    HS_TOK_TYPE_CONTROL = 3,
    HS_TOK_TYPE_USER_DEFINED = 4,
    HS_TOK_TYPE_UNUSED = 5,
    HS_TOK_TYPE_BYTE = 6,
} hs_tok_type;

typedef enum hs_tok_kind {
    HS_TOK_SPM = 0, /* model "llama" */
    HS_TOK_BPE = 1, /* model "gpt2" */
} hs_tok_kind;

/* Value of the tri-state flags of hs_tok_vocab: the key was not in the file, use
 * llama.cpp's default for the model and pre-tokenizer. */
#define HS_TOK_DEFAULT (-1)
/* Token id meaning "none". */
#define HS_TOK_NONE (-1)

/* Plain description of a vocabulary, as GGUF's tokenizer.ggml.* keys hold it.
 * Everything is borrowed for the duration of hs_tok_create only. */
typedef struct hs_tok_vocab {
    const char *model;          /* tokenizer.ggml.model: "llama" (SPM) or "gpt2" (BPE) */
    const char *pre;            /* tokenizer.ggml.pre; NULL = "default" */
    uint32_t n_tokens;          /* tokenizer.ggml.tokens */
    const char *const *tokens;  /* (n_tokens) UTF-8 texts, NUL-terminated */
    const float *scores;        /* (n_tokens) SPM merge scores; NULL = all 0 */
    const int32_t *types;       /* (n_tokens) hs_tok_type values; NULL = all normal
                                 * (SPM: texts like <0x41> are bytes) */
    uint32_t n_merges;          /* tokenizer.ggml.merges (BPE only) */
    const char *const *merges;  /* (n_merges) "left right", rank = index */
    int32_t bos, eos, unk, pad; /* ids or HS_TOK_NONE; SPM: HS_TOK_NONE bos/eos/unk take 1/2/0 */
    int8_t add_bos;             /* 0, 1 or HS_TOK_DEFAULT (SPM: 1; llama3: 1; other BPE: 0) */
    int8_t add_eos;             /* 0, 1 or HS_TOK_DEFAULT (0) */
    int8_t add_space_prefix;    /* 0, 1 or HS_TOK_DEFAULT (SPM: 1; BPE: 0) */
} hs_tok_vocab;

/* Flags of hs_tok_encode. */
enum {
    HS_TOK_ADD_SPECIAL = 1u << 0,   /* add BOS/EOS as the vocabulary asks (add_bos/add_eos) */
    HS_TOK_PARSE_SPECIAL = 1u << 1, /* match control/unknown token texts verbatim in the input */
};

/* Flags of hs_tok_decode. */
enum {
    HS_TOK_REMOVE_SPECIAL = 1u << 0,  /* drop a leading BOS / trailing EOS that add_bos/add_eos would add */
    HS_TOK_UNPARSE_SPECIAL = 1u << 1, /* render control/unknown tokens as their text (else as nothing) */
};

hs_status hs_tok_create(const hs_tok_vocab *vocab, hs_tok **out);
void hs_tok_destroy(hs_tok *tok);

/* Tokenizes len bytes of text (any bytes; invalid UTF-8 is handled as llama.cpp
 * does). On success *ids is a malloc'ed array of *n ids (NULL when *n == 0). */
hs_status hs_tok_encode(const hs_tok *tok, const char *text, size_t len, unsigned flags, int32_t **ids,
                        size_t *n);

/* Detokenizes n ids into a malloc'ed, NUL-terminated string of *len bytes (the
 * bytes of byte tokens are copied as they are, so the text may be invalid UTF-8
 * when a multi-byte character is cut). Fails on ids outside the vocabulary. */
hs_status hs_tok_decode(const hs_tok *tok, const int32_t *ids, size_t n, unsigned flags, char **text,
                        size_t *len);

/* The bytes one token decodes to (control/unknown tokens: their text), for
 * streaming output. *piece is not NUL-terminated and may contain any byte. */
hs_status hs_tok_piece(const hs_tok *tok, int32_t id, const char **piece, size_t *len);

hs_tok_kind hs_tok_get_kind(const hs_tok *tok);
uint32_t hs_tok_n_tokens(const hs_tok *tok);
int32_t hs_tok_bos(const hs_tok *tok); /* HS_TOK_NONE when absent */
int32_t hs_tok_eos(const hs_tok *tok);
int32_t hs_tok_unk(const hs_tok *tok);
int32_t hs_tok_pad(const hs_tok *tok);
bool hs_tok_add_bos(const hs_tok *tok);
bool hs_tok_add_eos(const hs_tok *tok);
/* Vocabulary text of a token (NULL when out of range), its type, and the id of an
 * exact vocabulary text (HS_TOK_NONE when absent). */
const char *hs_tok_token_text(const hs_tok *tok, int32_t id);
hs_tok_type hs_tok_token_type(const hs_tok *tok, int32_t id);
int32_t hs_tok_find(const hs_tok *tok, const char *text);

#endif
