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
 * The answers are llama.cpp's greedy choice (lowest id on a tie), so nothing here needs to match
 * heterospec bit for bit; with --distill-temp T they are drawn instead, by heterospec's own sampler
 * (host/sampler.c: generate's defaults top-k 40, top-p 0.95, min-p 0.05, at temperature T), one per slot,
 * seeded afresh for each job from (--distill-seed, IDX): a job's answer depends on its logits and that seed
 * only, not on which jobs share its batches (a resumed run draws the same answers). The trainer's features
 * (the EAGLE-3 taps of every position, the top 32 probabilities of every answer position) come either from a
 * second pass over the token ids (tools/hs_train/distill.py feats) or, with --feats FILE, from this pass:
 * llama.cpp's eval callback copies the tap layers' outputs of every row, and each finished job's record
 * (oracle.h, HSF1) is appended to FILE before its answer line. The callback sees rows in the order of the ubatches, which for a
 * multi-stream cache are runs of consecutive sequence ids with equal token counts (llama.cpp's
 * split_equal): so with --feats the running sequences decode together (one token each, in slot order,
 * which that split keeps) and each new prompt decodes alone; every call checks that each tap layer
 * delivered exactly the batch's rows. */
#define _GNU_SOURCE /* getline */
#include "oracle.h"
#include "sampler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    hs_sampler *smp;   /* --distill-temp: this job's sampler (NULL: greedy) */
    /* --feats: per fed position (distill_ctx rows) */
    ggml_fp16_t *taps; /* [pos][d3] */
    int32_t *top_id;   /* [pos][HS_ORACLE_TOP_K] */
    ggml_fp16_t *top_p;
} slot;

/* --feats: the tap layers' rows of one llama_decode call, in batch order. */
typedef struct tap_capture {
    int layer[HS_ORACLE_TAPS]; /* l_out index of each tap */
    int dim;
    int cap;                   /* rows of rows[] */
    float *rows;               /* [row][tap][dim] */
    int seen[HS_ORACLE_TAPS];  /* rows delivered this call */
    bool bad;                  /* a tap tensor of an unexpected shape or type, or too many rows */
} tap_capture;

/* The layer index of a tensor named "l_out-N" (-1: another tensor). */
static int l_out_layer(const char *name) {
    int il;
    char tail;
    return sscanf(name, "l_out-%d%c", &il, &tail) == 1 ? il : -1;
}

static bool tap_wanted(const tap_capture *c, int il) {
    for (int t = 0; il >= 0 && t < HS_ORACLE_TAPS; t++)
        if (c->layer[t] == il) return true;
    return false;
}

/* llama.cpp's eval callback: asked for each tensor of the graph, then given the wanted ones' data. A
 * layer may be several taps (a small model's 2, L/2 and L-3 can coincide). */
static bool tap_callback(struct ggml_tensor *t, bool ask, void *user) {
    tap_capture *c = user;
    const int il = l_out_layer(t->name);
    if (ask) return tap_wanted(c, il);
    if (!tap_wanted(c, il)) return true;
    const int n = (int)t->ne[1];
    for (int k = 0; k < HS_ORACLE_TAPS; k++) {
        if (c->layer[k] != il) continue;
        if (t->type != GGML_TYPE_F32 || t->ne[0] != c->dim || t->ne[2] != 1 || t->ne[3] != 1 ||
            c->seen[k] + n > c->cap) {
            c->bad = true;
            return true;
        }
        for (int r = 0; r < n; r++)
            ggml_backend_tensor_get(t, c->rows + ((size_t)(c->seen[k] + r) * HS_ORACLE_TAPS + k) * c->dim,
                                    (size_t)r * t->nb[1], (size_t)c->dim * sizeof(float));
        c->seen[k] += n;
    }
    return true;
}

/* The HS_ORACLE_TOP_K most probable ids of softmax(row) and their probabilities, largest first (lower
 * id first on a tie). */
static void top_probs(const float *row, int32_t n_vocab, int32_t *ids, ggml_fp16_t *probs) {
    enum { K = HS_ORACLE_TOP_K };
    float mx = row[0];
    for (int32_t i = 1; i < n_vocab; i++)
        if (row[i] > mx) mx = row[i];
    double sum = 0.0;
    for (int32_t i = 0; i < n_vocab; i++)
        sum += exp((double)row[i] - mx);
    int32_t best[K];
    const int nb = hs_oracle_top_ids(row, n_vocab, K, best);
    for (int j = 0; j < K; j++) {
        ids[j] = j < nb ? best[j] : 0;
        probs[j] = ggml_fp32_to_fp16(j < nb ? (float)(exp((double)row[best[j]] - mx) / sum) : 0.0f);
    }
}

static double now_s(void) { return 1e-9 * (double)hs_oracle_now_ns(); }

/* Parses "id,id,..." (up to a newline or the end) into a new array; false if malformed or empty. */
static bool parse_ids(const char *p, int32_t n_vocab, llama_token **out, int *n_out) {
    int cap = 64, n = 0;
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    *out = NULL;
    *n_out = 0;
    if (!ids) return false;
    while (*p && *p != '\n') {
        char *end = NULL;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= n_vocab) goto bad;
        if (n == cap) {
            cap *= 2;
            llama_token *t = realloc(ids, (size_t)cap * sizeof *t);
            if (!t) goto bad;
            ids = t;
        }
        ids[n++] = (llama_token)v;
        p = end;
        if (*p == ',') p++;
        else if (*p && *p != '\n') goto bad;
    }
    if (n == 0) goto bad;
    *out = ids;
    *n_out = n;
    return true;
bad:
    free(ids);
    return false;
}

/* Parses "IDX\tid,id,..." into j; returns false on a malformed line. */
static bool parse_job(char *line, int32_t n_vocab, job *j) {
    char *end = NULL;
    errno = 0;
    j->idx = strtol(line, &end, 10);
    if (errno || end == line || *end != '\t') return false;
    return parse_ids(end + 1, n_vocab, &j->ids, &j->n);
}

/* Appends v to the growing array *a of *n (capacity *cap); false when out of memory. */
static bool push_idx(long **a, size_t *n, size_t *cap, long v) {
    if (*n == *cap) {
        const size_t c = *cap ? 2 * *cap : 1024;
        long *d = realloc(*a, c * sizeof *d);
        if (!d) return false;
        *a = d;
        *cap = c;
    }
    (*a)[(*n)++] = v;
    return true;
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
        if (!push_idx(done, n_done, &n_cap, idx)) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "answer index list");
            break;
        }
    }
    free(line);
    fclose(f);
    return st;
}

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

static int cmp_job(const void *a, const void *b) { return cmp_long(&((const job *)a)->idx, &((const job *)b)->idx); }

/* The jobs of JOBS; answering: those not yet in ANSWERS, whose prompt leaves --max-new rows of --ctx (else
 * every job, for --refeed). */
static hs_status read_jobs(const hs_oracle_opts *o, int32_t n_vocab, bool answering, job **jobs, int *n_jobs) {
    long *done = NULL;
    size_t n_done = 0;
    hs_status st = HS_OK;
    if (answering) HS_TRY(read_done(o->distill_answers, &done, &n_done));
    if (n_done) qsort(done, n_done, sizeof *done, cmp_long);
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
        if (n_done && bsearch(&j.idx, done, n_done, sizeof *done, cmp_long)) {
            free(j.ids);
            continue;
        }
        if (answering && j.n + o->distill_max_new > o->distill_ctx) {
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
    if (st == HS_OK && answering)
        fprintf(stderr, "hs-oracle distill: %d jobs to answer (%zu already in '%s')\n", *n_jobs, n_done,
                o->distill_answers);
fail:
    free(done);
    return st;
}

/* The HSF1 record of a finished job (oracle.h). */
static hs_status write_feats(FILE *f, const job *j, const slot *s, bool stopped, int d3) {
    const int32_t n = j->n + s->n_ans, k = HS_ORACLE_TOP_K, head[5] = {stopped ? 1 : 0, j->n, n, d3, k};
    const int64_t idx = j->idx;
    bool ok = fwrite(HS_ORACLE_FEATS_MAGIC, 1, 4, f) == 4 && fwrite(&idx, sizeof idx, 1, f) == 1 &&
              fwrite(head, sizeof head, 1, f) == 1 &&
              fwrite(j->ids, sizeof *j->ids, (size_t)j->n, f) == (size_t)j->n &&
              fwrite(s->ans, sizeof *s->ans, (size_t)s->n_ans, f) == (size_t)s->n_ans &&
              fwrite(s->taps, sizeof *s->taps * d3, (size_t)(n - 1), f) == (size_t)(n - 1) &&
              fwrite(s->top_id, sizeof *s->top_id * k, (size_t)(n - 1), f) == (size_t)(n - 1) &&
              fwrite(s->top_p, sizeof *s->top_p * k, (size_t)(n - 1), f) == (size_t)(n - 1);
    if (!ok || fflush(f) != 0 || ferror(f))
        return HS_FAIL(HS_ERR_IO, "writing features: %s", strerror(errno));
    return HS_OK;
}

static hs_status write_answer(FILE *out, const job *j, const slot *s, bool stopped) {
    fprintf(out, "%ld\t%d\t%d\t", j->idx, stopped ? 1 : 0, j->n);
    for (int i = 0; i < s->n_ans; i++)
        fprintf(out, i ? ",%d" : "%d", s->ans[i]);
    fputc('\n', out);
    if (fflush(out) != 0 || ferror(out)) return HS_FAIL(HS_ERR_IO, "writing answers: %s", strerror(errno));
    return HS_OK;
}

/* One llama_decode of b, then each participating slot's next token (and with --feats the rows' taps and
 * the slot's top probabilities); finished jobs are written and free their slot. */
static hs_status decode_step(struct llama_context *ctx, struct llama_batch *b, hs_oracle_session *s,
                             const hs_oracle_opts *o, job *jobs, slot *slots, int P, tap_capture *cap,
                             FILE *out, FILE *feats, int *n_finished, long *n_tokens) {
    hs_status st = HS_OK;
    if (b->n_tokens == 0) return HS_OK;
    if (cap) {
        memset(cap->seen, 0, sizeof cap->seen);
        cap->bad = false;
    }
    int32_t rc = llama_decode(ctx, *b);
    if (rc != 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "llama_decode failed (%d) on a batch of %d tokens", rc,
                       b->n_tokens);
    const int d3 = cap ? HS_ORACLE_TAPS * cap->dim : 0;
    if (cap) {
        for (int t = 0; t < HS_ORACLE_TAPS; t++)
            if (cap->bad || cap->seen[t] != b->n_tokens)
                return HS_FAIL(HS_ERR_FORMAT,
                               "--feats: tap layer l_out-%d delivered %d rows for a batch of %d%s (another "
                               "llama.cpp graph?)",
                               cap->layer[t], cap->seen[t], b->n_tokens,
                               cap->bad ? ", or rows of another shape" : "");
        for (int r = 0; r < b->n_tokens; r++) {
            slot *sl = &slots[b->seq_id[r][0]];
            ggml_fp32_to_fp16_row(cap->rows + (size_t)r * d3, sl->taps + (size_t)b->pos[r] * d3, d3);
            if (!b->logits[r]) { /* a prompt position before the last: no probabilities (unused) */
                const size_t at = (size_t)b->pos[r] * HS_ORACLE_TOP_K;
                memset(sl->top_id + at, 0, HS_ORACLE_TOP_K * sizeof(int32_t));
                memset(sl->top_p + at, 0, HS_ORACLE_TOP_K * sizeof(ggml_fp16_t));
            }
        }
    }
    for (int i = 0; i < P; i++) {
        slot *sl = &slots[i];
        if (sl->batch_row < 0) continue;
        const float *row = llama_get_logits_ith(ctx, sl->batch_row);
        if (!row) return HS_FAIL(HS_ERR_INVALID_ARG, "no logits for batch row %d", sl->batch_row);
        if (cap) {
            const size_t at = (size_t)b->pos[sl->batch_row] * HS_ORACLE_TOP_K;
            top_probs(row, s->n_vocab, sl->top_id + at, sl->top_p + at);
        }
        sl->batch_row = -1;
        llama_token t;
        if (sl->smp) {
            int32_t drawn;
            HS_TRY(hs_sampler_sample(sl->smp, row, s->n_vocab, &drawn));
            HS_TRY(hs_sampler_accept(sl->smp, drawn));
            t = drawn;
        } else {
            t = hs_oracle_argmax(row, s->n_vocab);
        }
        sl->ans[sl->n_ans++] = t;
        (*n_tokens)++;
        bool stopped = llama_vocab_is_eog(s->vocab, t);
        if (stopped || sl->n_ans >= o->distill_max_new) {
            if (feats) HS_TRY(write_feats(feats, &jobs[sl->job], sl, stopped, d3));
            HS_TRY(write_answer(out, &jobs[sl->job], sl, stopped));
            (*n_finished)++;
            sl->job = -1;
        }
    }
fail:
    return st;
}

/* The seed of job idx's sampler: splitmix64's finaliser of (seed, idx), so neighbouring jobs and seeds
 * draw unrelated streams. */
static uint64_t job_seed(uint64_t seed, long idx) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + (uint64_t)idx + 0x632BE59BD9B4E019ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Appends job j's prompt to b for slot i (a fresh KV stream); with --distill-temp, a sampler of its own. */
static hs_status start_job(const hs_oracle_opts *o, int32_t n_vocab, struct llama_batch *b, llama_memory_t mem,
                           slot *sl, int i, const job *j, int j_index) {
    hs_status st = HS_OK;
    hs_sampler_destroy(sl->smp);
    sl->smp = NULL;
    if (o->distill_temp > 0) {
        hs_sampler_params sp = hs_sampler_default_params();
        sp.temperature = (float)o->distill_temp;
        sp.seed = job_seed(o->distill_seed, j->idx);
        HS_TRY(hs_sampler_create(&sp, n_vocab, &sl->smp));
    }
    sl->job = j_index;
    sl->n_fed = 0;
    sl->n_ans = 0;
    llama_memory_seq_rm(mem, i, -1, -1);
    for (int k = 0; k < j->n; k++) {
        int r = b->n_tokens++;
        b->token[r] = j->ids[k];
        b->pos[r] = sl->n_fed++;
        b->n_seq_id[r] = 1;
        b->seq_id[r][0] = i;
        b->logits[r] = k == j->n - 1;
    }
    sl->batch_row = b->n_tokens - 1;
fail:
    return st;
}

hs_status hs_oracle_distill(const hs_oracle_opts *o, hs_oracle_session *s) {
    hs_status st = HS_OK;
    job *jobs = NULL;
    int n_jobs = 0;
    slot *slots = NULL;
    struct llama_context *ctx = NULL;
    FILE *out = NULL, *feats = NULL;
    struct llama_batch b = {0};
    bool have_batch = false;
    tap_capture tc = {0}, *cap = NULL;
    const int P = o->distill_parallel;
    HS_TRY(read_jobs(o, s->n_vocab, true, &jobs, &n_jobs));
    if (n_jobs == 0) goto fail;
    out = fopen(o->distill_answers, "a");
    if (!out) {
        st = HS_FAIL(HS_ERR_IO, "cannot append to '%s': %s", o->distill_answers, strerror(errno));
        goto fail;
    }
    const int n_batch = o->distill_batch;
    if (o->distill_feats) {
        /* heterospec's taps: the inputs of layers 2, L/2 and L-3 = the outputs of the layers before. */
        const int L = llama_model_n_layer(s->model), in[HS_ORACLE_TAPS] = {2, L / 2, L - 3};
        for (int t = 0; t < HS_ORACLE_TAPS; t++) {
            if (in[t] < 1 || in[t] >= L) {
                st = HS_FAIL(HS_ERR_INVALID_ARG, "--feats: a model of %d layers has no tap layer %d", L,
                             in[t]);
                goto fail;
            }
            tc.layer[t] = in[t] - 1;
        }
        tc.dim = llama_model_n_embd(s->model);
        tc.cap = n_batch;
        tc.rows = malloc((size_t)n_batch * HS_ORACLE_TAPS * tc.dim * sizeof(float));
        if (!tc.rows) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "--feats: tap rows");
            goto fail;
        }
        cap = &tc;
        feats = fopen(o->distill_feats, "ab");
        if (!feats) {
            st = HS_FAIL(HS_ERR_IO, "cannot append to '%s': %s", o->distill_feats, strerror(errno));
            goto fail;
        }
    }
    HS_TRY(hs_oracle_context_cb(o, s, (uint32_t)(P * o->distill_ctx), (uint32_t)n_batch, 512u, (uint32_t)P,
                                GGML_TYPE_F16, LLAMA_FLASH_ATTN_TYPE_AUTO, cap ? tap_callback : NULL, cap,
                                &ctx));
    llama_memory_t mem = llama_get_memory(ctx);
    b = llama_batch_init(n_batch, 0, 1);
    have_batch = true;
    slots = calloc((size_t)P, sizeof *slots);
    if (!slots) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "slots");
        goto fail;
    }
    const size_t d3 = (size_t)HS_ORACLE_TAPS * tc.dim, rows = (size_t)o->distill_ctx;
    for (int i = 0; i < P; i++) {
        slots[i].job = -1;
        slots[i].ans = malloc((size_t)o->distill_max_new * sizeof(llama_token));
        if (cap) {
            slots[i].taps = malloc(rows * d3 * sizeof(ggml_fp16_t));
            slots[i].top_id = malloc(rows * HS_ORACLE_TOP_K * sizeof(int32_t));
            slots[i].top_p = malloc(rows * HS_ORACLE_TOP_K * sizeof(ggml_fp16_t));
        }
        if (!slots[i].ans || (cap && (!slots[i].taps || !slots[i].top_id || !slots[i].top_p))) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "slot buffers");
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
        /* Running sequences first (one token each, in slot order), then new prompts while the batch has
         * room (with --feats each new prompt in a call of its own, below). */
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
        if (cap) HS_TRY(decode_step(ctx, &b, s, o, jobs, slots, P, cap, out, feats, &n_finished, &n_tokens));
        for (int i = 0; i < P; i++) {
            slot *sl = &slots[i];
            if (cap) b.n_tokens = 0;
            if (sl->job >= 0 || !accept_new || next >= n_jobs || b.n_tokens + jobs[next].n > n_batch)
                continue;
            HS_TRY(start_job(o, s->n_vocab, &b, mem, sl, i, &jobs[next], next));
            next++;
            active++;
            if (cap)
                HS_TRY(decode_step(ctx, &b, s, o, jobs, slots, P, cap, out, feats, &n_finished, &n_tokens));
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
        if (!cap) HS_TRY(decode_step(ctx, &b, s, o, jobs, slots, P, NULL, out, NULL, &n_finished, &n_tokens));
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
    if (feats && fclose(feats) != 0 && st == HS_OK)
        st = HS_FAIL(HS_ERR_IO, "closing features: %s", strerror(errno));
    for (int i = 0; slots && i < P; i++) {
        hs_sampler_destroy(slots[i].smp);
        free(slots[i].ans);
        free(slots[i].taps);
        free(slots[i].top_id);
        free(slots[i].top_p);
    }
    free(slots);
    free(tc.rows);
    for (int i = 0; i < n_jobs; i++)
        free(jobs[i].ids);
    free(jobs);
    return st;
}

/* ---- --refeed: the features of answers already in ANSWERS ----
 *
 * For every complete answer line of ANSWERS whose job is in JOBS and whose record is not yet in FEATS, the
 * prompt and the answer but its last token decode in one llama_decode (one sequence at a time, so the tap
 * rows arrive in position order), with logits at the positions that predict the answer: the HSF1 record
 * --feats writes while answering (taps of every position but the last, the top 32 where the answer is
 * predicted), at prompt-processing speed instead of a decoding step per token. A record cut by a kill at
 * the end of FEATS is cut off before appending (resume). */

/* The idx of every complete record of FEATS (missing file: none) and the bytes they take. */
static hs_status feats_done(const char *path, long **done, size_t *n_done, long *good_bytes) {
    *done = NULL;
    *n_done = 0;
    *good_bytes = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? HS_OK : HS_FAIL(HS_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    hs_status st = HS_OK;
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return HS_FAIL(HS_ERR_IO, "cannot seek in '%s'", path);
    }
    const long size = ftell(f);
    rewind(f);
    size_t cap = 0;
    for (;;) {
        char magic[4];
        int64_t idx;
        int32_t head[5];
        if (fread(magic, 1, 4, f) != 4 || fread(&idx, sizeof idx, 1, f) != 1 || fread(head, sizeof head, 1, f) != 1)
            break;
        if (memcmp(magic, HS_ORACLE_FEATS_MAGIC, 4) || head[2] < 2 || head[3] <= 0 || head[4] <= 0) {
            st = HS_FAIL(HS_ERR_FORMAT, "'%s': no HSF1 record at byte %ld", path, *good_bytes);
            break;
        }
        const long n = head[2], at = *good_bytes + 32 + 4 * n + (n - 1) * (2L * head[3] + 6L * head[4]);
        if (at > size || fseek(f, at, SEEK_SET) != 0) break; /* cut by a kill */
        if (!push_idx(done, n_done, &cap, (long)idx)) {
            st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "record index list");
            break;
        }
        *good_bytes = at;
    }
    fclose(f);
    return st;
}

hs_status hs_oracle_refeed(const hs_oracle_opts *o, hs_oracle_session *s) {
    hs_status st = HS_OK;
    job *jobs = NULL;
    int n_jobs = 0;
    long *done = NULL;
    size_t n_done = 0;
    long good = 0;
    char *line = NULL;
    size_t line_cap = 0;
    FILE *in = NULL, *feats = NULL;
    struct llama_context *ctx = NULL;
    struct llama_batch b = {0};
    bool have_batch = false;
    tap_capture tc = {0};
    slot sl = {0};
    if (!o->distill_feats) return HS_FAIL(HS_ERR_INVALID_ARG, "--refeed needs --feats FILE");
    HS_TRY(read_jobs(o, s->n_vocab, false, &jobs, &n_jobs));
    if (n_jobs) qsort(jobs, (size_t)n_jobs, sizeof *jobs, cmp_job); /* by idx, for bsearch */
    HS_TRY(feats_done(o->distill_feats, &done, &n_done, &good));
    if (n_done) qsort(done, n_done, sizeof *done, cmp_long);
    if (truncate(o->distill_feats, good) != 0 && errno != ENOENT) {
        st = HS_FAIL(HS_ERR_IO, "cannot cut '%s' to its %zu complete records: %s", o->distill_feats, n_done,
                     strerror(errno));
        goto fail;
    }
    feats = fopen(o->distill_feats, "ab");
    in = fopen(o->distill_answers, "r");
    if (!feats || !in) {
        st = HS_FAIL(HS_ERR_IO, "cannot open '%s' or '%s': %s", o->distill_feats, o->distill_answers,
                     strerror(errno));
        goto fail;
    }
    const int L = llama_model_n_layer(s->model), tap_in[HS_ORACLE_TAPS] = {2, L / 2, L - 3};
    for (int t = 0; t < HS_ORACLE_TAPS; t++) {
        if (tap_in[t] < 1 || tap_in[t] >= L) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "--feats: a model of %d layers has no tap layer %d", L, tap_in[t]);
            goto fail;
        }
        tc.layer[t] = tap_in[t] - 1;
    }
    tc.dim = llama_model_n_embd(s->model);
    const int rows = o->distill_ctx, d3 = HS_ORACLE_TAPS * tc.dim;
    tc.cap = rows;
    tc.rows = malloc((size_t)rows * d3 * sizeof(float));
    sl.taps = malloc((size_t)rows * d3 * sizeof(ggml_fp16_t));
    sl.top_id = calloc((size_t)rows * HS_ORACLE_TOP_K, sizeof(int32_t));
    sl.top_p = calloc((size_t)rows * HS_ORACLE_TOP_K, sizeof(ggml_fp16_t));
    if (!tc.rows || !sl.taps || !sl.top_id || !sl.top_p) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "--refeed buffers");
        goto fail;
    }
    HS_TRY(hs_oracle_context_cb(o, s, (uint32_t)rows, (uint32_t)rows, 512u, 1u, GGML_TYPE_F16,
                                LLAMA_FLASH_ATTN_TYPE_AUTO, tap_callback, &tc, &ctx));
    llama_memory_t mem = llama_get_memory(ctx);
    b = llama_batch_init(rows, 0, 1);
    have_batch = true;
    double t0 = now_s(), t_log = t0;
    long n_tokens = 0, n_written = 0, n_skipped = 0;
    for (int lineno = 1; getline(&line, &line_cap, in) > 0; lineno++) {
        if (!strchr(line, '\n')) break; /* cut by a kill */
        char *end = NULL;
        const long idx = strtol(line, &end, 10);
        int stop = 0, n_prompt = 0, consumed = 0;
        if (end == line || sscanf(end, "\t%d\t%d\t%n", &stop, &n_prompt, &consumed) != 2 || !consumed) {
            st = HS_FAIL(HS_ERR_FORMAT, "'%s' line %d: expected IDX<TAB>STOP<TAB>N_PROMPT<TAB>ids",
                         o->distill_answers, lineno);
            goto fail;
        }
        if (n_done && bsearch(&idx, done, n_done, sizeof *done, cmp_long)) {
            n_skipped++;
            continue;
        }
        const job key = {.idx = idx}, *j = n_jobs ? bsearch(&key, jobs, (size_t)n_jobs, sizeof *jobs, cmp_job) : NULL;
        if (!j || j->n != n_prompt) {
            st = HS_FAIL(HS_ERR_FORMAT, "'%s' line %d: answer %ld has %s", o->distill_answers, lineno, idx,
                         j ? "another prompt length than its job" : "no job in the jobs file");
            goto fail;
        }
        free(sl.ans);
        sl.ans = NULL;
        if (!parse_ids(end + consumed, s->n_vocab, &sl.ans, &sl.n_ans)) {
            st = HS_FAIL(HS_ERR_FORMAT, "'%s' line %d: malformed answer ids", o->distill_answers, lineno);
            goto fail;
        }
        const int n = j->n + sl.n_ans; /* the record's tokens; positions 0 .. n - 2 are fed */
        if (n - 1 > rows) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "answer %ld: %d tokens exceed --ctx %d", idx, n, rows);
            goto fail;
        }
        llama_memory_seq_rm(mem, 0, -1, -1);
        b.n_tokens = 0;
        for (int p = 0; p < n - 1; p++) {
            b.token[p] = p < j->n ? j->ids[p] : sl.ans[p - j->n];
            b.pos[p] = p;
            b.n_seq_id[p] = 1;
            b.seq_id[p][0] = 0;
            b.logits[p] = p >= j->n - 1;
            b.n_tokens++;
        }
        memset(tc.seen, 0, sizeof tc.seen);
        tc.bad = false;
        const int32_t rc = llama_decode(ctx, b);
        if (rc != 0) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "llama_decode failed (%d) on answer %ld", rc, idx);
            goto fail;
        }
        for (int t = 0; t < HS_ORACLE_TAPS; t++)
            if (tc.bad || tc.seen[t] != b.n_tokens) {
                st = HS_FAIL(HS_ERR_FORMAT, "--refeed: tap layer l_out-%d delivered %d rows for %d", tc.layer[t],
                             tc.seen[t], b.n_tokens);
                goto fail;
            }
        for (int p = 0; p < n - 1; p++) {
            ggml_fp32_to_fp16_row(tc.rows + (size_t)p * d3, sl.taps + (size_t)p * d3, d3);
            const size_t at = (size_t)p * HS_ORACLE_TOP_K;
            if (p < j->n - 1) {
                memset(sl.top_id + at, 0, HS_ORACLE_TOP_K * sizeof(int32_t));
                memset(sl.top_p + at, 0, HS_ORACLE_TOP_K * sizeof(ggml_fp16_t));
                continue;
            }
            const float *row = llama_get_logits_ith(ctx, p);
            if (!row) {
                st = HS_FAIL(HS_ERR_INVALID_ARG, "no logits for row %d of answer %ld", p, idx);
                goto fail;
            }
            top_probs(row, s->n_vocab, sl.top_id + at, sl.top_p + at);
        }
        HS_TRY(write_feats(feats, j, &sl, stop != 0, d3));
        n_written++;
        n_tokens += n - 1;
        const double t = now_s();
        if (t - t_log >= 30.0) {
            fprintf(stderr, "hs-oracle refeed: %ld records, %ld tokens, %.1f tokens/s, %.0f s\n", n_written,
                    n_tokens, (double)n_tokens / (t - t0), t - t0);
            t_log = t;
        }
    }
    fprintf(stderr, "hs-oracle refeed: done: %ld records (%ld already in '%s'), %ld tokens in %.0f s (%.1f tokens/s)\n",
            n_written, n_skipped, o->distill_feats, n_tokens, now_s() - t0, (double)n_tokens / (now_s() - t0));
fail:
    if (have_batch) llama_batch_free(b);
    if (ctx) llama_free(ctx);
    if (in) fclose(in);
    if (feats && fclose(feats) != 0 && st == HS_OK)
        st = HS_FAIL(HS_ERR_IO, "closing features: %s", strerror(errno));
    free(line);
    free(done);
    free(tc.rows);
    free(sl.taps);
    free(sl.top_id);
    free(sl.top_p);
    free(sl.ans);
    for (int i = 0; i < n_jobs; i++)
        free(jobs[i].ids);
    free(jobs);
    return st;
}
