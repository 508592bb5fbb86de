/* The n-gram store (host/ngram): build, look-ups and chains against counts
 * made here by brute force over the corpus, the file round trip, corrupt
 * files, and the vocabulary check against a real GGUF. No device needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gguf.h"
#include "ngram.h"
#include "testutil.h"

#define NV 50u

/* A corpus with structure: sequences from a small random walk where some
 * transitions dominate, separated by -1. */
static int32_t *make_corpus(uint64_t *n) {
    hs_rng r;
    hs_rng_seed(&r, 7);
    const uint64_t cap = 6000;
    int32_t *ids = malloc(sizeof *ids * cap);
    uint64_t k = 0;
    while (k + 60 < cap) {
        int32_t t = (int32_t)(hs_rng_u32(&r) % NV);
        const uint32_t len = 5 + hs_rng_u32(&r) % 50;
        for (uint32_t i = 0; i < len; i++) {
            ids[k++] = t;
            const uint32_t u = hs_rng_u32(&r) % 10;
            t = u < 6 ? (t * 7 + 3) % (int32_t)NV : u < 8 ? (t + 1) % (int32_t)NV : (int32_t)(hs_rng_u32(&r) % NV);
        }
        ids[k++] = -1;
    }
    *n = k;
    return ids;
}

/* Brute force: the most frequent token (smallest id on ties) after the
 * context ctx[0 .. k) in the corpus, never across a -1; false if the
 * context occurs fewer than min_count times. */
static bool brute_next(const int32_t *ids, uint64_t n, const int32_t *ctx, uint32_t k, uint32_t min_count,
                       int32_t *tok, uint32_t *count, uint32_t *total) {
    uint32_t counts[NV] = {0}, tot = 0;
    for (uint64_t i = k; i < n; i++) {
        if (ids[i] < 0) continue;
        bool m = true;
        for (uint32_t j = 0; j < k && m; j++)
            m = ids[i - k + j] == ctx[j];
        if (!m) continue;
        counts[ids[i]]++;
        tot++;
    }
    if (tot < min_count || tot == 0) return false;
    uint32_t best = 0;
    for (uint32_t v = 1; v < NV; v++)
        if (counts[v] > counts[best]) best = v;
    *tok = (int32_t)best;
    *count = counts[best];
    *total = tot;
    return true;
}

static void test_build_and_next(void **state) {
    (void)state;
    uint64_t n;
    int32_t *ids = make_corpus(&n);
    hs_ngram *g = NULL;
    HS_CHECK(hs_ngram_build(ids, n, 3, 2, NV, 42, &g));
    const hs_ngram_info in = hs_ngram_get_info(g);
    assert_int_equal(in.order, 3);
    assert_int_equal(in.min_count, 2);
    assert_true(in.n_entries > 100);
    uint64_t toks = 0;
    for (uint64_t i = 0; i < n; i++)
        toks += ids[i] >= 0;
    assert_int_equal(in.n_tokens, toks);
    /* Every context of 1..3 tokens at every position of the corpus, and some
     * that never occur, against the brute-force count. */
    hs_rng r;
    hs_rng_seed(&r, 3);
    uint32_t checked = 0, present = 0;
    for (uint32_t trial = 0; trial < 3000; trial++) {
        int32_t ctx[3];
        const uint32_t k = 1 + trial % 3;
        if (trial % 4 == 0) {
            for (uint32_t j = 0; j < k; j++)
                ctx[j] = (int32_t)(hs_rng_u32(&r) % NV);
        } else {
            const uint64_t at = hs_rng_u32(&r) % (n - k);
            memcpy(ctx, ids + at, sizeof *ctx * k);
            bool sep = false;
            for (uint32_t j = 0; j < k; j++)
                sep = sep || ctx[j] < 0;
            if (sep) continue;
        }
        int32_t bt = -1, gt = -1;
        uint32_t bc = 0, btot = 0, gc = 0, gtot = 0;
        const bool b = brute_next(ids, n, ctx, k, 2, &bt, &bc, &btot);
        const bool h = hs_ngram_next(g, ctx, k, &gt, &gc, &gtot);
        assert_int_equal(b, h);
        if (b) {
            assert_int_equal(bt, gt);
            assert_int_equal(bc, gc);
            assert_int_equal(btot, gtot);
            present++;
        }
        checked++;
    }
    assert_true(present > 1000 && checked > present);
    /* min_count 1 keeps contexts seen once; min_count 2 does not. */
    hs_ngram *g1 = NULL;
    HS_CHECK(hs_ngram_build(ids, n, 3, 1, NV, 42, &g1));
    assert_true(hs_ngram_get_info(g1).n_entries > in.n_entries);
    hs_ngram_free(g1);
    hs_ngram_free(g);
    free(ids);
}

static void test_separators_and_errors(void **state) {
    (void)state;
    /* No context reaches across a separator. */
    const int32_t ids[] = {5, 1, -1, 2, 3, -1, 1, 4, 1, 4};
    hs_ngram *g = NULL;
    HS_CHECK(hs_ngram_build(ids, 10, 2, 1, NV, 0, &g));
    int32_t t;
    uint32_t c, tot;
    const int32_t one[] = {1}, five_one[] = {5, 1};
    assert_true(hs_ngram_next(g, one, 1, &t, &c, &tot));
    assert_int_equal(t, 4); /* 1 -> 4 twice, never 1 -> 2 */
    assert_int_equal(c, 2);
    assert_int_equal(tot, 2);
    assert_false(hs_ngram_next(g, five_one, 2, &t, &c, &tot));
    /* Contexts inside the sequences only: (5) (2) (1) (4), (1 4) (4 1). */
    assert_int_equal(hs_ngram_get_info(g).n_entries, 6);
    hs_ngram_free(g);
    const int32_t bad[] = {1, 2, (int32_t)NV};
    assert_int_equal(hs_ngram_build(bad, 3, 2, 1, NV, 0, &g), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_ngram_build(ids, 10, 0, 1, NV, 0, &g), HS_ERR_INVALID_ARG);
    assert_int_equal(hs_ngram_build(ids, 10, HS_NGRAM_MAX_ORDER + 1, 1, NV, 0, &g), HS_ERR_INVALID_ARG);
    assert_null(g);
}

static void test_chain(void **state) {
    (void)state;
    /* A corpus where 10 11 12 13 14 repeats, and 20 -> 21 or 22. */
    int32_t ids[200];
    uint32_t n = 0;
    for (int r = 0; r < 5; r++) {
        for (int32_t v = 10; v <= 14; v++)
            ids[n++] = v;
        ids[n++] = -1;
    }
    const int32_t tail[] = {20, 21, -1, 20, 21, -1, 20, 22, -1, 30, 31, -1};
    memcpy(ids + n, tail, sizeof tail);
    n += sizeof tail / sizeof *tail;
    hs_ngram *g = NULL;
    HS_CHECK(hs_ngram_build(ids, n, 3, 2, NV, 0, &g));
    int32_t out[8];
    uint8_t conf[8];
    const int32_t h1[] = {7, 10, 11};
    uint32_t len = hs_ngram_chain(g, h1, 3, 8, out, conf);
    /* 12 13 14, then nothing follows 14 (a sequence end). */
    assert_int_equal(len, 3);
    assert_int_equal(out[0], 12);
    assert_int_equal(out[1], 13);
    assert_int_equal(out[2], 14);
    for (uint32_t i = 0; i < len; i++)
        assert_int_equal(conf[i], 3); /* always the same continuation */
    assert_int_equal(hs_ngram_chain(g, h1, 3, 2, out, NULL), 2); /* max_len */
    /* Back-off: (99, 20) is unknown, (20) is known: 21 with 2 of 3 (0.67: bucket 2). */
    const int32_t h2[] = {99, 20};
    len = hs_ngram_chain(g, h2, 2, 8, out, conf);
    assert_int_equal(len, 1);
    assert_int_equal(out[0], 21);
    assert_int_equal(conf[0], 2);
    /* 30 -> 31 occurs once: below min_count. */
    const int32_t h3[] = {30};
    assert_int_equal(hs_ngram_chain(g, h3, 1, 8, out, conf), 0);
    assert_int_equal(hs_ngram_conf_bucket(1, 3), 0);
    assert_int_equal(hs_ngram_conf_bucket(1, 2), 1);
    assert_int_equal(hs_ngram_conf_bucket(4, 5), 3);
    hs_ngram_free(g);
}

static void write_bytes(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, n, f), n);
    fclose(f);
}

static unsigned char *read_bytes(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n);
    assert_int_equal(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

static void test_file(void **state) {
    (void)state;
    uint64_t n;
    int32_t *ids = make_corpus(&n);
    hs_ngram *g = NULL, *l = NULL;
    HS_CHECK(hs_ngram_build(ids, n, 4, 2, NV, 0x1234567890abcdefull, &g));
    char path[256], bad[256];
    snprintf(path, sizeof path, "/tmp/hs_test_ngram_%d.hsng", (int)getpid());
    snprintf(bad, sizeof bad, "/tmp/hs_test_ngram_bad_%d.hsng", (int)getpid());
    HS_CHECK(hs_ngram_save(g, path));
    HS_CHECK(hs_ngram_load(path, &l));
    const hs_ngram_info a = hs_ngram_get_info(g), b = hs_ngram_get_info(l);
    assert_true(a.order == b.order && a.min_count == b.min_count && a.n_vocab == b.n_vocab &&
                a.vocab_hash == b.vocab_hash && a.n_tokens == b.n_tokens && a.n_entries == b.n_entries);
    hs_ngram_info h; /* the header alone says the same */
    HS_CHECK(hs_ngram_read_info(path, &h));
    assert_true(h.order == a.order && h.vocab_hash == a.vocab_hash && h.n_entries == a.n_entries);
    /* Same answers for every context of the corpus. */
    for (uint64_t i = 4; i < n; i += 3) {
        int32_t t1 = -2, t2 = -2;
        uint32_t c1 = 0, c2 = 0, s1 = 0, s2 = 0;
        const uint32_t k = 1 + (uint32_t)(i % 4);
        assert_int_equal(hs_ngram_next(g, ids + i - k, k, &t1, &c1, &s1),
                         hs_ngram_next(l, ids + i - k, k, &t2, &c2, &s2));
        assert_int_equal(t1, t2);
        assert_int_equal(c1, c2);
        assert_int_equal(s1, s2);
    }
    hs_ngram_free(l);
    l = NULL;
    size_t size;
    unsigned char *bytes = read_bytes(path, &size);
    assert_int_equal(size, 48 + 16 * a.n_entries);
    /* Truncated (header only, and mid-entry), bad magic, token past the
     * vocabulary, keys out of order, a count above the total. */
    write_bytes(bad, bytes, 20);
    assert_int_equal(hs_ngram_load(bad, &l), HS_ERR_FORMAT);
    write_bytes(bad, bytes, size - 5);
    assert_int_equal(hs_ngram_load(bad, &l), HS_ERR_FORMAT);
    assert_int_equal(hs_ngram_read_info(bad, &h), HS_ERR_FORMAT);
    unsigned char *c = malloc(size);
    memcpy(c, bytes, size);
    c[0] = 'X';
    write_bytes(bad, c, size);
    assert_int_equal(hs_ngram_load(bad, &l), HS_ERR_FORMAT);
    memcpy(c, bytes, size);
    c[48 + 16 * 3 + 8] = (unsigned char)NV; /* entry 3's token = NV */
    c[48 + 16 * 3 + 9] = 0;
    write_bytes(bad, c, size);
    assert_int_equal(hs_ngram_load(bad, &l), HS_ERR_FORMAT);
    memcpy(c, bytes, size);
    memcpy(c + 48 + 16 * 5, bytes + 48 + 16 * 6, 8); /* entry 5's key = entry 6's */
    write_bytes(bad, c, size);
    assert_int_equal(hs_ngram_load(bad, &l), HS_ERR_FORMAT);
    memcpy(c, bytes, size);
    c[48 + 16 * 2 + 12] = 0xff; /* entry 2's count 0xffff > its total */
    c[48 + 16 * 2 + 13] = 0xff;
    write_bytes(bad, c, size);
    assert_int_equal(hs_ngram_load(bad, &l), HS_ERR_FORMAT);
    assert_null(l);
    assert_int_equal(hs_ngram_load("/nonexistent/store.hsng", &l), HS_ERR_IO);
    free(c);
    free(bytes);
    remove(path);
    remove(bad);
    hs_ngram_free(g);
    free(ids);
}

static void test_vocab_check(void **state) {
    (void)state;
    char path[1024];
    snprintf(path, sizeof path, "%s/models/stories260K/stories260K.gguf", hs_test_shared_dir());
    hs_gguf *m = NULL;
    HS_CHECK(hs_gguf_open(path, &m));
    uint64_t h, h2;
    HS_CHECK(hs_ngram_vocab_hash(m, &h));
    HS_CHECK(hs_ngram_vocab_hash(m, &h2));
    assert_true(h == h2 && h != 0);
    const int32_t ids[] = {1, 2, 3, 1, 2, 3};
    hs_ngram *ok = NULL, *other = NULL;
    HS_CHECK(hs_ngram_build(ids, 6, 2, 1, 512, h, &ok));
    HS_CHECK(hs_ngram_build(ids, 6, 2, 1, 512, h ^ 1, &other));
    HS_CHECK(hs_ngram_check(ok, m));
    assert_int_equal(hs_ngram_check(other, m), HS_ERR_INVALID_ARG);
    hs_ngram_free(ok);
    hs_ngram_free(other);
    hs_gguf_close(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_build_and_next), cmocka_unit_test(test_separators_and_errors),
        cmocka_unit_test(test_chain),          cmocka_unit_test(test_file),
        cmocka_unit_test(test_vocab_check),
    };
    return hs_test_run_group("ngram", tests, NULL, NULL);
}
