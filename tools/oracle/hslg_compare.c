/* hslg_compare — compares two logits files in hs-oracle's "HSLG" format (tools/oracle/README.md), e.g. the
 * llama.cpp oracle's (reference) against `heterospec logits` (test), position by position.
 *
 * Usage:  hslg_compare [--tsv | --rows] REF.hslg TEST.hslg
 *
 * Both files must hold the same vocabulary size and the same token at every position (so that the rows
 * are predictions for the same context). Per position, with p = softmax(REF row) and q = softmax(TEST row)
 * computed in double precision:
 *   top-1 agreement   argmax equal (lowest id on a tie, as hs-oracle's greedy mode)
 *   max |p - q|       over all positions and vocabulary entries
 *   KL(p || q)        sum_i p_i (log p_i - log q_i), mean and max over positions
 *   max |logit diff|  raw logits, over all positions and entries
 *   mismatch margin   at positions whose top-1 differs: REF[argmax REF] - REF[argmax TEST], i.e. how far
 *                     from a tie the reference was; the largest such margin (0 when all agree)
 * Default output is one readable line per figure; --tsv prints one tab-separated line
 *   rows  agree  max_abs_dp  sum_kl  max_kl  max_abs_dlogit  max_mismatch_margin
 * for scripts to sum over files (tools/compare_logits.sh); --rows prints one line per position instead
 *   pos  token  kl  max_abs_dp  max_abs_dlogit  argmax_ref  argmax_test
 * to see where two files part. Exit status 0 on success, 1 on any malformed or
 * mismatched input (with a message naming the file and what is wrong), 2 on a usage error.
 *
 * Build: cc -O2 -std=c11 -o hslg_compare hslg_compare.c -lm (tools/compare_logits.sh does this into
 * $HS_HOME/peer/bin). Stand-alone: no heterospec or llama.cpp code. Rows are streamed, so memory is
 * O(n_vocab + n_rows) whatever the file size. Single-threaded.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct hslg {
    const char *path;
    FILE *f;
    uint32_t n_vocab, n_rows;
    int32_t *tokens; /* (n_rows) */
} hslg;

typedef struct stats {
    uint64_t rows, agree;
    double max_dp, sum_kl, max_kl, max_dlogit, max_margin;
} stats;

static int die(const char *fmt, const char *path, const char *what) {
    fprintf(stderr, "hslg_compare: ");
    fprintf(stderr, fmt, path, what);
    fprintf(stderr, "\n");
    return 1;
}

static void hslg_close(hslg *h) {
    if (h->f) fclose(h->f);
    free(h->tokens);
    h->f = NULL;
    h->tokens = NULL;
}

/* Opens a file and reads its header and tokens, checking the size against the header. */
static int hslg_open(const char *path, hslg *h) {
    memset(h, 0, sizeof *h);
    h->path = path;
    if (!(h->f = fopen(path, "rb"))) return die("cannot open %s: %s", path, strerror(errno));
    char magic[4];
    uint32_t head[3];
    if (fread(magic, 1, 4, h->f) != 4 || fread(head, sizeof head, 1, h->f) != 1)
        return die("%s: %s", path, "shorter than the 16-byte header");
    if (memcmp(magic, "HSLG", 4)) return die("%s: %s", path, "not an HSLG file (bad magic)");
    if (head[0] != 1) return die("%s: %s", path, "unsupported version (expected 1)");
    h->n_vocab = head[1];
    h->n_rows = head[2];
    if (h->n_vocab == 0 || h->n_vocab > (1u << 24)) return die("%s: %s", path, "implausible n_vocab");
    if (fseek(h->f, 0, SEEK_END) != 0) return die("%s: %s", path, "not seekable");
    long size = ftell(h->f);
    double want = 16.0 + 4.0 * h->n_rows + 4.0 * h->n_rows * (double)h->n_vocab;
    if (size < 0 || (double)size != want) return die("%s: %s", path, "size does not match n_rows x n_vocab");
    if (fseek(h->f, 16, SEEK_SET) != 0) return die("%s: %s", path, "seek failed");
    if (!(h->tokens = malloc(sizeof *h->tokens * (h->n_rows ? h->n_rows : 1))))
        return die("%s: %s", path, "out of memory");
    if (fread(h->tokens, sizeof *h->tokens, h->n_rows, h->f) != h->n_rows)
        return die("%s: %s", path, "truncated token list");
    return 0;
}

static uint32_t argmax(const float *x, uint32_t n) {
    uint32_t best = 0;
    for (uint32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* log(sum(exp(x))) in double, with e[i] = exp(x[i] - max) kept for the caller. */
static double log_sum_exp(const float *x, uint32_t n, double *e) {
    double mx = x[argmax(x, n)], s = 0;
    for (uint32_t i = 0; i < n; i++)
        s += e[i] = exp((double)x[i] - mx);
    return mx + log(s);
}

/* Adds one position's figures; ea/eb are scratch of n doubles. With `rows`, prints them too. */
static void compare_row(const float *a, const float *b, uint32_t n, double *ea, double *eb, stats *s,
                        bool rows, int32_t token) {
    double la = log_sum_exp(a, n, ea), lb = log_sum_exp(b, n, eb);
    double ma = a[argmax(a, n)], mb = b[argmax(b, n)];
    double ca = exp(ma - la), cb = exp(mb - lb), kl = 0, row_dp = 0, row_dl = 0;
    for (uint32_t i = 0; i < n; i++) {
        double p = ea[i] * ca, q = eb[i] * cb;
        double dp = fabs(p - q), dl = fabs((double)a[i] - b[i]);
        if (dp > row_dp) row_dp = dp;
        if (dl > row_dl || isnan(dl)) row_dl = isnan(dl) ? INFINITY : dl;
        if (p > 0) kl += p * (((double)a[i] - la) - ((double)b[i] - lb));
    }
    uint32_t ta = argmax(a, n), tb = argmax(b, n);
    if (rows)
        printf("%llu\t%d\t%.6g\t%.6g\t%.6g\t%u\t%u\n", (unsigned long long)s->rows, token, kl, row_dp, row_dl,
               ta, tb);
    if (row_dp > s->max_dp) s->max_dp = row_dp;
    if (row_dl > s->max_dlogit) s->max_dlogit = row_dl;
    if (ta == tb)
        s->agree++;
    else if (a[ta] - a[tb] > s->max_margin)
        s->max_margin = (double)a[ta] - a[tb];
    s->sum_kl += kl;
    if (kl > s->max_kl) s->max_kl = kl;
    s->rows++;
}

static int compare(hslg *r, hslg *t, stats *s, bool rows) {
    if (r->n_vocab != t->n_vocab) return die("%s and %s have different n_vocab", r->path, t->path);
    if (r->n_rows != t->n_rows) return die("%s and %s have different numbers of rows", r->path, t->path);
    for (uint32_t i = 0; i < r->n_rows; i++)
        if (r->tokens[i] != t->tokens[i]) return die("%s and %s differ in their token ids", r->path, t->path);
    uint32_t V = r->n_vocab;
    float *a = malloc(sizeof *a * V), *b = malloc(sizeof *b * V);
    double *ea = malloc(sizeof *ea * V), *eb = malloc(sizeof *eb * V);
    int rc = 0;
    if (!a || !b || !ea || !eb) rc = die("%s: %s", r->path, "out of memory");
    for (uint32_t i = 0; !rc && i < r->n_rows; i++) {
        if (fread(a, sizeof *a, V, r->f) != V)
            rc = die("%s: %s", r->path, "short read");
        else if (fread(b, sizeof *b, V, t->f) != V)
            rc = die("%s: %s", t->path, "short read");
        else
            compare_row(a, b, V, ea, eb, s, rows, r->tokens[i]);
    }
    free(a);
    free(b);
    free(ea);
    free(eb);
    return rc;
}

int main(int argc, char **argv) {
    bool tsv = argc > 1 && !strcmp(argv[1], "--tsv"), rows = argc > 1 && !strcmp(argv[1], "--rows");
    int opt = tsv || rows;
    if (argc - opt != 3 || (argc > 1 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")))) {
        fprintf(stderr, "usage: hslg_compare [--tsv | --rows] REF.hslg TEST.hslg\n");
        return 2;
    }
    hslg r, t;
    stats s = {0};
    int rc = hslg_open(argv[1 + opt], &r);
    if (!rc)
        rc = hslg_open(argv[2 + opt], &t);
    else
        memset(&t, 0, sizeof t);
    if (!rc) rc = compare(&r, &t, &s, rows);
    hslg_close(&r);
    hslg_close(&t);
    if (rc || rows) return rc;
    if (tsv) {
        printf("%llu\t%llu\t%.9g\t%.9g\t%.9g\t%.9g\t%.9g\n", (unsigned long long)s.rows,
               (unsigned long long)s.agree, s.max_dp, s.sum_kl, s.max_kl, s.max_dlogit, s.max_margin);
    } else {
        printf("positions           %llu\n", (unsigned long long)s.rows);
        printf("top-1 agreement     %llu (%.2f%%)\n", (unsigned long long)s.agree,
               s.rows ? 100.0 * s.agree / s.rows : 100.0);
        printf("max |p - q|         %.3e\n", s.max_dp);
        printf("mean KL(ref||test)  %.3e\n", s.rows ? s.sum_kl / s.rows : 0.0);
        printf("max KL(ref||test)   %.3e\n", s.max_kl);
        printf("max |logit diff|    %.3e\n", s.max_dlogit);
        printf("max mismatch margin %.3e\n", s.max_margin);
    }
    return 0;
}
