/* tok_spm: SentencePiece-style merging (llama.cpp's llm_tokenizer_spm_session).
 *
 * The text (spaces already replaced by U+2581) is split into UTF-8 characters;
 * every adjacent pair whose concatenation is a vocabulary piece enters a max-heap
 * keyed by the piece's score (ties: leftmost first). The best pair is merged and
 * its new neighbours are queued, until no pair is left. Each final symbol is a
 * piece, or a single character with no piece, which falls back to its byte
 * tokens, written "<0x" + two hex digits + ">" (e.g. <0x41>), or to the
 * unknown token when the vocabulary has no byte tokens.
 */
#include "tok_internal.h"

#include <string.h>

typedef struct sym {
    int prev, next; /* neighbours in the linked list, -1 at the ends */
    size_t off, n;  /* bytes of the text; n = 0 once merged into the left neighbour */
} sym;

typedef struct bigram {
    int left, right;
    float score;
    size_t size; /* bytes of the merged piece, to detect stale entries */
} bigram;

/* true when a is to be merged before b */
static bool before(const bigram *a, const bigram *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(bigram **h, bigram b) {
    stbds_arrput(*h, b);
    size_t i = stbds_arrlenu(*h) - 1;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!before(&(*h)[i], &(*h)[p])) break;
        bigram t = (*h)[i];
        (*h)[i] = (*h)[p];
        (*h)[p] = t;
        i = p;
    }
}

static bigram heap_pop(bigram *h) {
    bigram top = h[0];
    size_t n = stbds_arrlenu(h) - 1;
    h[0] = h[n];
    stbds_arrsetlen(h, n);
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && before(&h[l], &h[m])) m = l;
        if (r < n && before(&h[r], &h[m])) m = r;
        if (m == i) break;
        bigram t = h[i];
        h[i] = h[m];
        h[m] = t;
        i = m;
    }
    return top;
}

typedef struct spm_state {
    const hs_tok *tok;
    const char *text;
    sym *syms;
    bigram *heap;
    char *scratch;
} spm_state;

static void try_add_bigram(spm_state *s, int left, int right) {
    if (left < 0 || right < 0) return;
    size_t n = s->syms[left].n + s->syms[right].n;
    int32_t id = hs_tok__lookup(s->tok, s->text + s->syms[left].off, n, &s->scratch);
    if (id == HS_TOK_NONE) return;
    heap_push(&s->heap, (bigram){left, right, s->tok->scores[id], n});
}

static hs_status emit(spm_state *s, const sym *y, int32_t **out) {
    int32_t id = hs_tok__lookup(s->tok, s->text + y->off, y->n, &s->scratch);
    if (id != HS_TOK_NONE) {
        stbds_arrput(*out, id);
        return HS_OK;
    }
    for (size_t j = 0; j < y->n; j++) {
        unsigned char b = (unsigned char)s->text[y->off + j];
        id = s->tok->byte_ids[b] != HS_TOK_NONE ? s->tok->byte_ids[b] : s->tok->unk;
        if (id == HS_TOK_NONE)
            return HS_FAIL(HS_ERR_FORMAT,
                           "tokenizer: no piece for byte 0x%02X: the vocabulary has neither "
                           "<0x%02X> nor an unknown token",
                           b, b);
        stbds_arrput(*out, id);
    }
    return HS_OK;
}

hs_status hs_tok__spm_encode(const hs_tok *tok, const char *text, size_t len, int32_t **out) {
    hs_status st = HS_OK;
    spm_state s = {.tok = tok, .text = text};
    if (len > (size_t)INT32_MAX)
        return HS_FAIL(HS_ERR_INVALID_ARG, "tokenizer: text of %zu bytes too long", len);
    for (size_t off = 0; off < len;) {
        size_t n = hs_tok__utf8_len((unsigned char)text[off]);
        if (n > len - off) n = len - off;
        int idx = (int)stbds_arrlen(s.syms);
        stbds_arrput(s.syms, ((sym){idx - 1, off + n == len ? -1 : idx + 1, off, n}));
        off += n;
    }
    for (int i = 1; i < (int)stbds_arrlen(s.syms); i++)
        try_add_bigram(&s, i - 1, i);
    while (stbds_arrlenu(s.heap)) {
        bigram b = heap_pop(s.heap);
        sym *l = &s.syms[b.left], *r = &s.syms[b.right];
        /* stale: one side was merged away, or grew since the pair was queued */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size) continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0) s.syms[r->next].prev = b.left;
        try_add_bigram(&s, l->prev, b.left);
        try_add_bigram(&s, b.left, l->next);
    }
    for (int i = stbds_arrlen(s.syms) ? 0 : -1; i != -1; i = s.syms[i].next)
        HS_TRY(emit(&s, &s.syms[i], out));
fail:
    stbds_arrfree(s.syms);
    stbds_arrfree(s.heap);
    stbds_arrfree(s.scratch);
    return st;
}
