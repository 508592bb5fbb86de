/* tok_internal — state shared by tokenizer.c (vocabulary, special tokens, encode
 * and decode drivers), tok_spm.c (SentencePiece merging) and tok_bpe.c (GPT-2
 * byte-level BPE with PCRE2 pre-tokenizer). Not a public header.
 *
 * Token ids are int32_t throughout, as in GGUF and llama.cpp. Growing arrays are
 * stb_ds arrays (STBDS_NO_SHORT_NAMES); every lookup into the hash maps goes
 * through hs_tok__map_get, which does not write into the map, so a created
 * tokenizer can be shared between threads.
 */
#ifndef HS_TOK_INTERNAL_H
#define HS_TOK_INTERNAL_H

#include "tokenizer.h"

#define STBDS_NO_SHORT_NAMES
#include "stb_ds.h"

/* Empties a stb_ds array, keeping its memory (stbds_arrsetlen(a, 0) trips -Wtype-limits). */
#define HS_TOK_ARR_CLEAR(a) ((a) ? (void)(stbds_header(a)->length = 0) : (void)0)

/* llama.cpp's llama_token_attr bits (UNDEFINED = 0). */
enum {
    HS_TOK_ATTR_UNKNOWN = 1 << 0,
    HS_TOK_ATTR_UNUSED = 1 << 1,
    HS_TOK_ATTR_NORMAL = 1 << 2,
    HS_TOK_ATTR_CONTROL = 1 << 3,
    HS_TOK_ATTR_USER_DEFINED = 1 << 4,
    HS_TOK_ATTR_BYTE = 1 << 5,
};

/* stb_ds string map: NUL-terminated key -> id or merge rank. */
typedef struct hs_tok_map {
    char *key;
    int32_t value;
} hs_tok_map;

/* One pre-tokenizer of the BPE table in tok_bpe.c. */
typedef struct hs_tok_pre_def hs_tok_pre_def;

struct hs_tok {
    hs_tok_kind kind;
    uint32_t n_tokens;
    char *texts;         /* arena of all token texts, each NUL-terminated */
    uint32_t *text_off;  /* (n_tokens) offset of token i in texts */
    uint32_t *text_len;  /* (n_tokens) */
    uint32_t max_len;    /* longest token text in bytes */
    float *scores;       /* (n_tokens) */
    uint8_t *types;      /* (n_tokens) hs_tok_type */
    uint8_t *attrs;      /* (n_tokens) HS_TOK_ATTR_* */
    hs_tok_map *by_text; /* token text -> id */
    char *pieces;        /* arena of decoded pieces (control tokens: their text) */
    uint32_t *piece_off; /* (n_tokens) */
    uint32_t *piece_len; /* (n_tokens) */
    int32_t *specials;   /* control/user-defined/unknown ids, longest text first */
    uint32_t n_specials;
    int32_t bos, eos, unk, pad;
    bool add_bos, add_eos, add_space_prefix, clean_spaces;

    /* SPM */
    int32_t byte_ids[256]; /* byte fallback token of each byte, or HS_TOK_NONE */

    /* BPE */
    const hs_tok_pre_def *pre;
    bool ignore_merges; /* a pre-tokenized word that is a token is not merged */
    bool pre_add_bos;   /* default of add_bos for this pre-tokenizer */
    hs_tok_map *merges; /* "left" "\xff" "right" -> rank */
    char *merge_keys;   /* arena of the merge keys */
    void **regex;       /* (n_regex) pcre2_code_8 * */
    uint32_t n_regex;
    char byte_utf8[256][3]; /* byte -> UTF-8 of its printable code point (NUL-terminated) */
    int16_t cpt_byte[324];  /* printable code point (< 0x144) -> byte, or -1 */
};

/* Id of the token whose text is s[0..n), or HS_TOK_NONE. *scratch is a stb_ds
 * char array reused between calls (the caller frees it). */
int32_t hs_tok__lookup(const hs_tok *tok, const char *s, size_t n, char **scratch);
int32_t hs_tok__map_get(const hs_tok_map *map, const char *key);

/* Appends the ids of one text fragment (spaces already replaced by U+2581) to
 * *out (stb_ds array). */
hs_status hs_tok__spm_encode(const hs_tok *tok, const char *text, size_t len, int32_t **out);

/* BPE: tables and regexes from the vocabulary; encoding of one fragment; the
 * decoded text of a normal token (llama.cpp's llama_decode_text) into *out. */
hs_status hs_tok__bpe_init(hs_tok *tok, const hs_tok_vocab *v);
void hs_tok__bpe_free(hs_tok *tok);
hs_status hs_tok__bpe_encode(const hs_tok *tok, const char *text, size_t len, int32_t **out);
void hs_tok__bpe_decode_text(const hs_tok *tok, const char *text, size_t len, char **out);

/* Lenient UTF-8 decoding as llama.cpp's unicode_cpt_from_utf8: returns the code
 * point at s[*i] and advances *i; an invalid sequence yields U+FFFD and advances
 * one byte. Overlong forms and surrogates are decoded as they are. */
uint32_t hs_tok__utf8_next(const char *s, size_t len, size_t *i);
/* Writes the UTF-8 of cpt (<= 0x10FFFF, surrogates included) to buf; returns its length. */
size_t hs_tok__utf8_put(uint32_t cpt, char buf[4]);
/* Length of the UTF-8 sequence that starts with byte c (llama.cpp's unicode_len_utf8). */
size_t hs_tok__utf8_len(unsigned char c);

#endif
