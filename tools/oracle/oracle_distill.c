/* hs-oracle --distill: greedy answers to many prompts at once, for self-distillation data.
 *
 * Reads jobs (one per line: "IDX<TAB>id,id,...", the prompt's token ids as they are fed, chat template
 * included) and answers them greedily with continuous batching: --parallel sequences decode together
 * in one llama_decode per step, each in its own KV stream (kv_unified off, so a token attends to its own
 * sequence's rows only); a finished sequence frees its slot for the next job, whose whole prompt joins
 * the next step's batch. A sequence ends after an end-of-generation token (kept as the answer's last
 * token) or --max-new tokens. Each finished job is appended to ANSWERS as one line
 * "IDX<TAB>STOP<TAB>N_PROMPT<TAB>id,id,..." (STOP 1: end token, 0: length limit) and flushed, so a
 * restart with the same ANSWERS skips the jobs already there (a job in flight at a kill is redone).
 * --minutes M: no new job starts after M minutes; the running ones finish.
 *
 * The answers are llama.cpp's greedy choice (lowest id on a tie); the trainer computes its features
 * (taps, target probabilities) from the token ids in a separate pass, so nothing here needs to match
 * heterospec bit for bit. */
#define _GNU_SOURCE /* getline */
#include "oracle.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct job {
    long idx;
    llama_token *ids;
    int n;
} job;

typedef struct slot {
    int job;           /* index into the job list; -1: free */
    int n_fed;         /* positions in the KV stream */
    llama_token *ans;  /* answer so far */
    int n_ans;
    int batch_row;     /* row of this step's batch whose logits are ours; -1: none */
} slot;

static double now_s(void) { return 1e-9 * (double)hs_oracle_now_ns(); }

/* Parses "IDX\tid,id,..." into j; returns false on a malformed line. */
static bool parse_job(char *line, int32_t n_vocab, job *j) {
    char *end = NULL;
    errno = 0;
    j->idx = strtol(line, &end, 10);
    if (errno || end == line || *end != '\t') return false;
    char *p = end + 1;
    int cap = 64;
    j->ids = malloc((size_t)cap * sizeof *j->ids);
    j->n = 0;
    if (!j->ids) return false;
    while (*p && *p != '\n') {
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= n_vocab) return false;
        if (j->n == cap) {
            cap *= 2;
            llama_token *t = realloc(j->ids, (size_t)cap * sizeof *t);
            if (!t) return false;
            j->ids = t;
        }
        j->ids[j->n++] = (llama_token)v;
        p = end;
        if (*p == ',') p++;
        else if (*p && *p != '\n') return false;
    }
    return j->n > 0;
}

/* Marks the job indices already answered in ANSWERS (missing file: none). */
static hs_status read_done(const char *path, long **done, size_t *n_done) {
    *done = NULL;
    *n_done = 0;
    FILE *f = fopen(path, "r");
    if (!f) return errno == ENOENT ? HS_OK : HS_FAIL(HS_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0, n_cap = 0;
    ssize_t len;
    hs_status st = HS_OK;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] != '\n') break; /* a line cut by a kill: redone */
        char *end = NULL;
        long idx = strtol(line, &end, 10);
        if (end == line || *end != '\t') {
            st = HS_FAIL(HS_ERR_FORMAT, "'%s': malformed answer line '%.40s'", path, line);
            break;
        }
        if (*n_done == n_cap) {
            n_cap = n_cap ? 2 * n_cap : 1024;
            long *d = realloc(*done, n_cap * sizeof *d);
            if (!d) {
                st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "answer index list");
                break;
            }
            *done = d;
        }
        (*done)[(*n_done)++] = idx;
    }
    free(line);
    fclose(f);
    return st;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static hs_status read_jobs(const hs_oracle_opts *o, int32_t n_vocab, job **jobs, int *n_jobs) {
    long *done = NULL;
    size_t n_done = 0;
    hs_status st = HS_OK;
    HS_TRY(read_done(o->distill_answers, &done, &n_done));
    qsort(done, n_done, sizeof *done, cmp_long);
    FILE *f = fopen(o->distill_jobs, "r");
    if (!f) {
        st = HS_FAIL(HS_ERR_IO, "cannot read jobs '%s': %s", o->distill_jobs, strerror(errno));
        goto fail;
    }
    char *line = NULL;
    size_t cap = 0;
    int n_cap = 0, lineno = 0;
    *jobs = NULL;
    *n_jobs = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        job j = {0};
        if (!parse_job(line, n_vocab, &j)) {
            free(j.ids);
            st = HS_FAIL(HS_ERR_FORMAT, "'%s' line %d: expected IDX<TAB>id,id,... with ids below %d",
                         o->distill_jobs, lineno, n_vocab);
            break;
        }
        if (bsearch(&j.idx, done, n_done, sizeof *done, cmp_long)) {
            free(j.ids);
            continue;
        }
        if (j.n + o->distill_max_new > o->distill_ctx) {
            free(j.ids);
            st = HS_FAIL(HS_ERR_INVALID_ARG, "'%s' line %d: a prompt of %d tokens + --max-new %d exceeds --ctx %d",
                         o->distill_jobs, lineno, j.n, o->distill_max_new, o->distill_ctx);
            break;
        }
        if (*n_jobs == n_cap) {
            n_cap = n_cap ? 2 * n_cap : 1024;
            job *t = realloc(*jobs, (size_t)n_cap * sizeof *t);
            if (!t) {
                free(j.ids);
                st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "job list");
                break;
            }
            *jobs = t;
        }
        (*jobs)[(*n_jobs)++] = j;
    }
    free(line);
    fclose(f);
    if (st == HS_OK)
        fprintf(stderr, "hs-oracle distill: %d jobs to answer (%zu already in '%s')\n", *n_jobs, n_done,
                o->distill_answers);
fail:
    free(done);
    return st;
}

static hs_status write_answer(FILE *out, const job *j, const slot *s, bool stopped) {
    fprintf(out, "%ld\t%d\t%d\t", j->idx, stopped ? 1 : 0, j->n);
    for (int i = 0; i < s->n_ans; i++)
        fprintf(out, i ? ",%d" : "%d", s->ans[i]);
    fputc('\n', out);
    if (fflush(out) != 0 || ferror(out)) return HS_FAIL(HS_ERR_IO, "writing answers: %s", strerror(errno));
    return HS_OK;
}

hs_status hs_oracle_distill(const hs_oracle_opts *o, hs_oracle_session *s) {
    hs_status st = HS_OK;
    job *jobs = NULL;
    int n_jobs = 0;
    slot *slots = NULL;
    struct llama_context *ctx = NULL;
    FILE *out = NULL;
    struct llama_batch b = {0};
    bool have_batch = false;
    const int P = o->distill_parallel;
    HS_TRY(read_jobs(o, s->n_vocab, &jobs, &n_jobs));
    if (n_jobs == 0) goto fail;
    out = fopen(o->distill_answers, "a");
    if (!out) {
        st = HS_FAIL(HS_ERR_IO, "cannot append to '%s': %s", o->distill_answers, strerror(errno));
        goto fail;
    }
    const int n_batch = o->distill_batch;
    HS_TRY(hs_oracle_context(o, s, (uint32_t)(P * o->distill_ctx), (uint32_t)n_batch, 512u, (uint32_t)P,
                             GGML_TYPE_F16, LLAMA_FLASH_ATTN_TYPE_AUTO, &ctx));
    llama_memory_t mem = llama_get_memory(ctx);
    b = llama_batch_init(n_batch, 0, 1);
    have_batch = true;
    slots = calloc((size_t)P, sizeof *slots);
    if (!slots) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "slots");
        goto fail;
    }
    for (int i = 0; i < P; i++) {
        slots[i].job = -1;
        slots[i].ans = malloc((size_t)o->distill_max_new * sizeof(llama_token));
        if (!slots[i].ans) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "slot answers");
            goto fail;
        }
    }
    double t0 = now_s(), t_log = t0;
    int next = 0, n_finished = 0;
    long n_tokens = 0;
    for (;;) {
        bool accept_new = o->distill_minutes <= 0 || now_s() - t0 < 60.0 * o->distill_minutes;
        b.n_tokens = 0;
        int active = 0;
        /* Running sequences first (one token each), then new prompts while the batch has room. */
        for (int i = 0; i < P; i++) {
            slot *sl = &slots[i];
            sl->batch_row = -1;
            if (sl->job < 0 || sl->n_ans == 0) continue;
            int r = b.n_tokens++;
            b.token[r] = sl->ans[sl->n_ans - 1];
            b.pos[r] = sl->n_fed++;
            b.n_seq_id[r] = 1;
            b.seq_id[r][0] = i;
            b.logits[r] = 1;
            sl->batch_row = r;
            active++;
        }
        for (int i = 0; i < P; i++) {
            slot *sl = &slots[i];
            if (sl->job >= 0 || !accept_new || next >= n_jobs || b.n_tokens + jobs[next].n > n_batch) continue;
            const job *j = &jobs[next];
            sl->job = next++;
            sl->n_fed = 0;
            sl->n_ans = 0;
            llama_memory_seq_rm(mem, i, -1, -1);
            for (int k = 0; k < j->n; k++) {
                int r = b.n_tokens++;
                b.token[r] = j->ids[k];
                b.pos[r] = sl->n_fed++;
                b.n_seq_id[r] = 1;
                b.seq_id[r][0] = i;
                b.logits[r] = k == j->n - 1;
            }
            sl->batch_row = b.n_tokens - 1;
            active++;
        }
        if (active == 0) {
            /* Every slot free and still nothing started: the next prompt exceeds the batch. */
            if (accept_new && next < n_jobs) {
                st = HS_FAIL(HS_ERR_INVALID_ARG, "a prompt of %d tokens does not fit --distill-batch %d",
                             jobs[next].n, n_batch);
                goto fail;
            }
            break;
        }
        int32_t rc = llama_decode(ctx, b);
        if (rc != 0) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "llama_decode failed (%d) on a batch of %d tokens", rc, b.n_tokens);
            goto fail;
        }
        for (int i = 0; i < P; i++) {
            slot *sl = &slots[i];
            if (sl->batch_row < 0) continue;
            const float *row = llama_get_logits_ith(ctx, sl->batch_row);
            if (!row) {
                st = HS_FAIL(HS_ERR_INVALID_ARG, "no logits for batch row %d", sl->batch_row);
                goto fail;
            }
            llama_token t = hs_oracle_argmax(row, s->n_vocab);
            sl->ans[sl->n_ans++] = t;
            n_tokens++;
            bool stopped = llama_vocab_is_eog(s->vocab, t);
            if (stopped || sl->n_ans >= o->distill_max_new) {
                HS_TRY(write_answer(out, &jobs[sl->job], sl, stopped));
                n_finished++;
                sl->job = -1;
            }
        }
        double t = now_s();
        if (t - t_log >= 30.0) {
            fprintf(stderr, "hs-oracle distill: %d/%d answered, %ld tokens, %.1f tokens/s, %.0f s\n",
                    n_finished, n_jobs, n_tokens, (double)n_tokens / (t - t0), t - t0);
            t_log = t;
        }
    }
    fprintf(stderr, "hs-oracle distill: done: %d answered, %ld tokens in %.0f s (%.1f tokens/s)%s\n",
            n_finished, n_tokens, now_s() - t0, (double)n_tokens / (now_s() - t0),
            next < n_jobs ? "; --minutes reached, the rest not started" : "");
fail:
    if (have_batch) llama_batch_free(b);
    if (ctx) llama_free(ctx);
    if (out && fclose(out) != 0 && st == HS_OK) st = HS_FAIL(HS_ERR_IO, "closing answers: %s", strerror(errno));
    for (int i = 0; slots && i < P; i++)
        free(slots[i].ans);
    free(slots);
    for (int i = 0; i < n_jobs; i++)
        free(jobs[i].ids);
    free(jobs);
    return st;
}
