/* ngram: the store of the target's own continuations (see ngram.h). */
#include "ngram.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ngram_entry {
    uint64_t key;
    int32_t token;
    uint16_t count, total;
} ngram_entry;

struct hs_ngram {
    hs_ngram_info info;
    ngram_entry *e; /* sorted by key */
};

#define NGRAM_MAGIC "HSNG"
#define NGRAM_VERSION 1u
#define NGRAM_HEADER 48u
#define FNV_OFFSET 0xcbf29ce484222325ull
#define FNV_PRIME 0x100000001b3ull

static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * FNV_PRIME;
    return h;
}

uint64_t hs_ngram_key(const int32_t *ctx, uint32_t k) {
    unsigned char buf[4 * (HS_NGRAM_MAX_ORDER + 1)];
    for (uint32_t i = 0; i <= k; i++) {
        const uint32_t v = i == 0 ? k : (uint32_t)ctx[i - 1];
        for (uint32_t j = 0; j < 4; j++) buf[4 * i + j] = (unsigned char)(v >> (8 * j));
    }
    return fnv_bytes(FNV_OFFSET, buf, 4 * ((size_t)k + 1));
}

uint8_t hs_ngram_conf_bucket(uint32_t count, uint32_t total) {
    if (total == 0) return 0;
    const double p = (double)count / (double)total;
    return p < 0.4 ? 0 : p < 0.6 ? 1 : p < 0.8 ? 2 : 3;
}

/* Pairs (context key, next token) of the build, sorted by both. */
typedef struct ngram_pair {
    uint64_t key;
    int32_t token;
} ngram_pair;

static int pair_cmp(const void *a, const void *b) {
    const ngram_pair *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    return (x->token > y->token) - (x->token < y->token);
}

hs_status hs_ngram_build(const int32_t *ids, uint64_t n, uint32_t order, uint32_t min_count, uint32_t n_vocab,
                         uint64_t vocab_hash, hs_ngram **out) {
    hs_status st = HS_OK;
    *out = NULL;
    if (order < 1 || order > HS_NGRAM_MAX_ORDER || min_count < 1 || n_vocab == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "hs_ngram_build: order %u (1 .. %u), min_count %u (>= 1), n_vocab %u",
                       order, HS_NGRAM_MAX_ORDER, min_count, n_vocab);
    uint64_t n_tok = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (ids[i] >= (int32_t)n_vocab)
            return HS_FAIL(HS_ERR_INVALID_ARG, "hs_ngram_build: id %d at %llu is outside the vocabulary of %u",
                           ids[i], (unsigned long long)i, n_vocab);
        n_tok += ids[i] >= 0;
    }
    ngram_pair *pairs = malloc(sizeof *pairs * (n_tok * order + 1));
    hs_ngram *g = calloc(1, sizeof *g);
    if (!pairs || !g) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_ngram_build: out of memory for %llu tokens",
                     (unsigned long long)n_tok);
        goto fail;
    }
    uint64_t np = 0, start = 0; /* start: first id of the current sequence */
    for (uint64_t i = 0; i < n; i++) {
        if (ids[i] < 0) {
            start = i + 1;
            continue;
        }
        for (uint32_t k = 1; k <= order && i - start >= k; k++)
            pairs[np++] = (ngram_pair){hs_ngram_key(ids + i - k, k), ids[i]};
    }
    qsort(pairs, np, sizeof *pairs, pair_cmp);
    uint64_t ne = 0;
    g->e = malloc(sizeof *g->e * (np + 1));
    if (!g->e) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "hs_ngram_build: out of memory");
        goto fail;
    }
    for (uint64_t i = 0; i < np;) {
        uint64_t j = i, total = 0, best = 0;
        int32_t best_tok = pairs[i].token;
        while (j < np && pairs[j].key == pairs[i].key) {
            uint64_t r = j;
            while (r < np && pairs[r].key == pairs[i].key && pairs[r].token == pairs[j].token) r++;
            if (r - j > best) { /* ties: the smallest id (runs are in id order) */
                best = r - j;
                best_tok = pairs[j].token;
            }
            total += r - j;
            j = r;
        }
        if (total > 65535) { /* saturate, keeping the ratio */
            best = best * 65535 / total;
            if (best == 0) best = 1;
            total = 65535;
        }
        if (total >= min_count)
            g->e[ne++] = (ngram_entry){
                .key = pairs[i].key, .token = best_tok, .count = (uint16_t)best, .total = (uint16_t)total};
        i = j;
    }
    g->info = (hs_ngram_info){.order = order,
                              .min_count = min_count,
                              .n_vocab = n_vocab,
                              .vocab_hash = vocab_hash,
                              .n_tokens = n_tok,
                              .n_entries = ne};
    free(pairs);
    *out = g;
    return HS_OK;
fail:
    free(pairs);
    hs_ngram_free(g);
    return st;
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const unsigned char *p) { return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32; }

hs_status hs_ngram_save(const hs_ngram *g, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f) return HS_FAIL(HS_ERR_IO, "ngram: cannot write %s", path);
    unsigned char h[NGRAM_HEADER] = {0};
    memcpy(h, NGRAM_MAGIC, 4);
    put32(h + 4, NGRAM_VERSION);
    put32(h + 8, g->info.order);
    put32(h + 12, g->info.min_count);
    put32(h + 16, g->info.n_vocab);
    put64(h + 24, g->info.vocab_hash);
    put64(h + 32, g->info.n_tokens);
    put64(h + 40, g->info.n_entries);
    bool ok = fwrite(h, 1, sizeof h, f) == sizeof h;
    for (uint64_t i = 0; ok && i < g->info.n_entries; i++) {
        unsigned char b[16];
        put64(b, g->e[i].key);
        put32(b + 8, (uint32_t)g->e[i].token);
        put32(b + 12, (uint32_t)g->e[i].count | (uint32_t)g->e[i].total << 16);
        ok = fwrite(b, 1, sizeof b, f) == sizeof b;
    }
    ok = fclose(f) == 0 && ok;
    return ok ? HS_OK : HS_FAIL(HS_ERR_IO, "ngram: writing %s failed", path);
}

/* The header of a store file of size bytes (at least NGRAM_HEADER of them
 * in h): magic, version, order and vocabulary, and its entry count against
 * the size. */
static hs_status parse_header(const char *path, const unsigned char *h, long size, hs_ngram_info *in) {
    if (memcmp(h, NGRAM_MAGIC, 4) != 0 || get32(h + 4) != NGRAM_VERSION)
        return HS_FAIL(HS_ERR_FORMAT, "ngram: %s is not a version-%u store (magic \"%s\")", path, NGRAM_VERSION,
                       NGRAM_MAGIC);
    *in = (hs_ngram_info){.order = get32(h + 8),
                          .min_count = get32(h + 12),
                          .n_vocab = get32(h + 16),
                          .vocab_hash = get64(h + 24),
                          .n_tokens = get64(h + 32),
                          .n_entries = get64(h + 40)};
    if (in->order < 1 || in->order > HS_NGRAM_MAX_ORDER || in->n_vocab == 0)
        return HS_FAIL(HS_ERR_FORMAT, "ngram: %s: order %u (1 .. %u), vocabulary %u", path, in->order,
                       HS_NGRAM_MAX_ORDER, in->n_vocab);
    if (in->n_entries > ((uint64_t)size - NGRAM_HEADER) / 16 || (uint64_t)size != NGRAM_HEADER + 16 * in->n_entries)
        return HS_FAIL(HS_ERR_FORMAT, "ngram: %s is %ld bytes, but its header says %llu entries (%llu bytes)", path,
                       size, (unsigned long long)in->n_entries,
                       (unsigned long long)(NGRAM_HEADER + 16 * in->n_entries));
    return HS_OK;
}

/* Opens path and checks its size holds a header (*size: the file's bytes). */
static hs_status open_store(const char *path, FILE **f, long *size) {
    *f = fopen(path, "rb");
    if (!*f) return HS_FAIL(HS_ERR_IO, "ngram: cannot open %s", path);
    *size = -1;
    if (fseek(*f, 0, SEEK_END) == 0) *size = ftell(*f);
    if (*size < 0 || fseek(*f, 0, SEEK_SET) != 0) return HS_FAIL(HS_ERR_IO, "ngram: cannot read %s", path);
    if (*size < (long)NGRAM_HEADER)
        return HS_FAIL(HS_ERR_FORMAT, "ngram: %s is %ld bytes, shorter than the %u-byte header", path, *size,
                       NGRAM_HEADER);
    return HS_OK;
}

hs_status hs_ngram_read_info(const char *path, hs_ngram_info *out) {
    FILE *f = NULL;
    long size = 0;
    unsigned char h[NGRAM_HEADER];
    hs_status st = open_store(path, &f, &size);
    if (st == HS_OK && fread(h, 1, sizeof h, f) != sizeof h) st = HS_FAIL(HS_ERR_IO, "ngram: cannot read %s", path);
    if (st == HS_OK) st = parse_header(path, h, size, out);
    if (f) fclose(f);
    return st;
}

hs_status hs_ngram_load(const char *path, hs_ngram **out) {
    hs_status st = HS_OK;
    *out = NULL;
    unsigned char *buf = NULL;
    hs_ngram *g = NULL;
    FILE *f = NULL;
    long size = 0;
    hs_ngram_info in;
    HS_TRY(open_store(path, &f, &size));
    buf = malloc((size_t)size);
    g = calloc(1, sizeof *g);
    if (!buf || !g) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "ngram: out of memory for %s", path);
        goto fail;
    }
    if (fread(buf, 1, (size_t)size, f) != (size_t)size) {
        st = HS_FAIL(HS_ERR_IO, "ngram: cannot read %s", path);
        goto fail;
    }
    HS_TRY(parse_header(path, buf, size, &in));
    g->e = malloc(sizeof *g->e * (in.n_entries + 1));
    if (!g->e) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "ngram: out of memory for %s", path);
        goto fail;
    }
    for (uint64_t i = 0; i < in.n_entries; i++) {
        const unsigned char *b = buf + NGRAM_HEADER + 16 * i;
        const uint32_t ct = get32(b + 12);
        ngram_entry e = {.key = get64(b), .token = (int32_t)get32(b + 8), .count = ct & 0xffff, .total = ct >> 16};
        if (e.token < 0 || (uint32_t)e.token >= in.n_vocab || e.count == 0 || e.count > e.total ||
            (i > 0 && e.key <= g->e[i - 1].key)) {
            st = HS_FAIL(HS_ERR_FORMAT,
                         "ngram: %s: entry %llu is corrupt (token %d of %u, count %u of %u, keys %s)", path,
                         (unsigned long long)i, e.token, in.n_vocab, e.count, e.total,
                         i > 0 && e.key <= g->e[i - 1].key ? "out of order" : "in order");
            goto fail;
        }
        g->e[i] = e;
    }
    g->info = in;
    fclose(f);
    free(buf);
    *out = g;
    return HS_OK;
fail:
    if (f) fclose(f);
    free(buf);
    hs_ngram_free(g);
    return st;
}

void hs_ngram_free(hs_ngram *g) {
    if (!g) return;
    free(g->e);
    free(g);
}

hs_ngram_info hs_ngram_get_info(const hs_ngram *g) { return g->info; }

hs_status hs_ngram_vocab_hash(const hs_gguf *model, uint64_t *out) {
    const hs_gguf_value *a;
    const hs_status st = hs_gguf_get_arr(model, "tokenizer.ggml.tokens", HS_GGUF_TYPE_STRING, &a);
    if (st != HS_OK) return st;
    const hs_gguf_str *s = a->v.arr.data;
    uint64_t h = FNV_OFFSET;
    const unsigned char zero = 0;
    for (uint64_t i = 0; i < a->v.arr.n; i++) {
        h = fnv_bytes(h, s[i].s, (size_t)s[i].len);
        h = fnv_bytes(h, &zero, 1);
    }
    *out = h;
    return HS_OK;
}

hs_status hs_ngram_check(const hs_ngram *g, const hs_gguf *model) {
    uint64_t h;
    const hs_status st = hs_ngram_vocab_hash(model, &h);
    if (st != HS_OK) return st;
    if (h != g->info.vocab_hash)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "ngram: the store was built for another vocabulary (%u tokens, hash %016llx) than the "
                       "model's (hash %016llx)",
                       g->info.n_vocab, (unsigned long long)g->info.vocab_hash, (unsigned long long)h);
    return HS_OK;
}

bool hs_ngram_next(const hs_ngram *g, const int32_t *ctx, uint32_t k, int32_t *token, uint32_t *count,
                   uint32_t *total) {
    const uint64_t key = hs_ngram_key(ctx, k);
    uint64_t lo = 0, hi = g->info.n_entries;
    while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (g->e[mid].key < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == g->info.n_entries || g->e[lo].key != key) return false;
    *token = g->e[lo].token;
    *count = g->e[lo].count;
    *total = g->e[lo].total;
    return true;
}

uint32_t hs_ngram_chain(const hs_ngram *g, const int32_t *hist, uint32_t n, uint32_t max_len, int32_t *out,
                        uint8_t *conf) {
    int32_t ctx[2 * HS_NGRAM_MAX_ORDER];
    const uint32_t order = g->info.order;
    /* ctx: the last `order` tokens (fewer at the start), drafted ones appended. */
    uint32_t have = n < order ? n : order;
    memcpy(ctx, hist + n - have, sizeof *ctx * have);
    uint32_t len = 0;
    while (len < max_len) {
        int32_t tok = -1;
        uint32_t c = 0, tot = 0;
        bool found = false;
        for (uint32_t k = have; k >= 1 && !found; k--) found = hs_ngram_next(g, ctx + have - k, k, &tok, &c, &tot);
        if (!found) break;
        out[len] = tok;
        if (conf) conf[len] = hs_ngram_conf_bucket(c, tot);
        len++;
        if (have == order) { /* slide */
            memmove(ctx, ctx + 1, sizeof *ctx * (order - 1));
            have--;
        }
        ctx[have++] = tok;
    }
    return len;
}
