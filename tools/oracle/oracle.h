/* hs-oracle — llama.cpp as a reference ("oracle") and as a speed peer for heterospec.
 *
 * Purpose: evaluate a GGUF model with the prebuilt llama.cpp libraries (npm package
 * @node-llama-cpp/linux-x64-vulkan@3.22.1, llama.cpp v0.5.0) and write what heterospec's
 * own forward pass is compared against: the logits of every position (binary file or
 * top-k text) and greedy generations. In --bench mode it measures pp/tg tokens per
 * second the way llama-bench does, for the side-by-side peer benchmark.
 *
 * Usage: see tools/oracle/README.md or `hs-oracle --help`. Built by tools/oracle/build.sh
 * against the llama.h of the matching llama.cpp source clone, never by the main build.
 *
 * Ownership: hs_oracle_setup() loads the backends, the model and a context into an
 * hs_oracle_session that hs_oracle_session_destroy() frees (NULL and half-built
 * sessions accepted). Token and logit buffers are owned by the function that makes them.
 *
 * Thread-safety: single-threaded driver; llama.cpp uses its own worker threads.
 */
#ifndef HS_ORACLE_H
#define HS_ORACLE_H

#include "hs_status.h"
#include "llama.h"

#include <stdbool.h>
#include <stdint.h>

/* Binary logits file ("-o FILE"), all little-endian:
 *   char     magic[4]   "HSLG"
 *   uint32   version    1
 *   uint32   n_vocab
 *   uint32   n_rows     number of evaluated positions
 *   int32    tokens[n_rows]            token evaluated at each position
 *   float32  logits[n_rows][n_vocab]   row i: logits after tokens[0..i] (predicts i+1)
 */
#define HS_ORACLE_LOGITS_MAGIC   "HSLG"
#define HS_ORACLE_LOGITS_VERSION 1u

typedef enum hs_oracle_mode {
    HS_ORACLE_EVAL,     /* evaluate the prompt (+ greedy generation), write logits */
    HS_ORACLE_TOKENIZE, /* print the prompt's token ids */
    HS_ORACLE_BENCH,    /* pp/tg tokens per second, as llama-bench */
    HS_ORACLE_DEQUANTIZE, /* write the model with every tensor as f32 */
    HS_ORACLE_DISTILL,  /* greedy answers to many prompts, continuous batching (oracle_distill.c) */
} hs_oracle_mode;

typedef struct hs_oracle_opts {
    hs_oracle_mode mode;
    const char *model_path;
    const char *prompt;      /* text to tokenize; NULL when token_list is given */
    const char *token_list;  /* "1,403,407": ids used as they are (no BOS added) */
    bool add_special;        /* tokenizer adds BOS/EOS as the model asks (default on) */
    int n_generate;          /* greedy tokens to generate after the prompt */
    const char *logits_path; /* binary logits of every evaluated position */
    const char *dequant_path; /* --dequantize: the all-f32 GGUF to write */
    int top_k;               /* print the top_k logits of every position (0: off) */
    bool print_last_logits;  /* print the last position's logits, one per line */
    int ubatch;              /* physical batch for prompt evaluation (0: whole prompt) */
    int n_threads;
    bool vulkan;         /* Vulkan backend with every layer offloaded; else CPU only */
    int kv_type;         /* enum ggml_type of the K and V cache; -1: mode's default */
    int flash_attn;      /* enum llama_flash_attn_type; -2: mode's default */
    const char *lib_dir; /* folder of libggml-*.so backends; NULL: <exe>/../lib */
    bool verbose;
    /* bench */
    int n_prompt_bench; /* pp test size (default 512; 0 skips it) */
    int n_gen_bench;    /* tg test size (default 128; 0 skips it) */
    int reps;           /* repetitions after the warm-up (default 5) */
    int n_batch_bench;  /* logical batch (default 2048, llama-bench's) */
    int n_ubatch_bench; /* physical batch (default 512, llama-bench's) */
    bool json;          /* bench results as JSON with the raw samples */
    /* distill */
    const char *distill_jobs;    /* "IDX<TAB>id,id,..." per line */
    const char *distill_answers; /* appended "IDX<TAB>STOP<TAB>N_PROMPT<TAB>id,..." per answered job */
    int distill_parallel;        /* sequences decoded together (default 32) */
    int distill_max_new;         /* most answer tokens (default 256) */
    int distill_ctx;             /* KV rows per sequence (default 512) */
    int distill_batch;           /* most tokens per llama_decode (default 2048) */
    double distill_minutes;      /* start no new job after this long (0: no limit) */
    double distill_temp;         /* > 0: sampled answers (heterospec's sampler, its defaults otherwise) */
    uint64_t distill_seed;       /* with distill_temp: job IDX's answer is drawn from seed (this, IDX) */
    const char *distill_feats;   /* appended feature records (HSF1 below) per answered job; NULL: none */
    bool distill_refeed;         /* records of the answers already in distill_answers instead of answering */
} hs_oracle_opts;

/* --feats FILE: one record per answered job, appended before its answer line, little-endian:
 *   char     magic[4]   "HSF1"
 *   int64    idx        the job's IDX
 *   int32    stop       1: ended by an end-of-generation token, 0: by --max-new
 *   int32    n_prompt
 *   int32    n          prompt + answer tokens
 *   int32    d3         HS_ORACLE_TAPS * n_embd
 *   int32    k          HS_ORACLE_TOP_K
 *   int32    tokens[n]
 *   uint16   taps[n-1][d3]   f16: at position p < n - 1, the inputs of layers 2, L/2 and L-3 (heterospec's
 *                            EAGLE-3 taps), i.e. llama.cpp's l_out of layers 1, L/2 - 1 and L-4
 *   int32    top_id[n-1][k]  the k most probable next tokens at position p (largest first; zero
 *   uint16   top_p[n-1][k]   at the prompt's positions before its last), f16 probabilities
 * the layout of the trainer's feature shards (tools/hs_train/distill.py, pack-feats), computed while the
 * answer is generated instead of in a second pass. */
#define HS_ORACLE_FEATS_MAGIC "HSF1"
#define HS_ORACLE_TAPS        3
#define HS_ORACLE_TOP_K       32

/* Backends, the loaded model and the device list; contexts are made per use. */
typedef struct hs_oracle_session {
    bool backend_initialized; /* llama_backend_init() was called */
    struct llama_model *model;
    const struct llama_vocab *vocab;
    int32_t n_vocab;
    char backend_desc[256];           /* e.g. "Vulkan (llvmpipe (LLVM 15.0.6, 256 bits))" */
    ggml_backend_dev_t no_devices[1]; /* empty NULL-terminated list: CPU only */
    bool threadpool_fns;              /* ggml_threadpool_new/free found in the CPU backend */
    struct ggml_threadpool *(*threadpool_new)(struct ggml_threadpool_params *params);
    void (*threadpool_free)(struct ggml_threadpool *threadpool);
} hs_oracle_session;

/* Loads the backends from opts->lib_dir (or <exe>/../lib) and the model. */
hs_status hs_oracle_setup(const hs_oracle_opts *opts, hs_oracle_session *s);
void hs_oracle_session_destroy(hs_oracle_session *s);

/* A context for n_ctx positions with opts' backend, cache type and attention setting.
 * kv_default/fa_default apply when opts leave them unset. n_seq > 1: that many sequences, each in
 * its own KV stream of n_ctx / n_seq rows. */
hs_status hs_oracle_context(const hs_oracle_opts *opts, hs_oracle_session *s, uint32_t n_ctx,
                            uint32_t n_batch, uint32_t n_ubatch, uint32_t n_seq, int kv_default,
                            int fa_default, struct llama_context **out);
/* The same with llama.cpp's eval callback (cb_eval, called for the graph's tensors; NULL: none). */
hs_status hs_oracle_context_cb(const hs_oracle_opts *opts, hs_oracle_session *s, uint32_t n_ctx,
                               uint32_t n_batch, uint32_t n_ubatch, uint32_t n_seq, int kv_default,
                               int fa_default, ggml_backend_sched_eval_callback cb, void *cb_data,
                               struct llama_context **out);

/* Index of the largest logit; the lowest id wins a tie (as numpy's argmax). */
llama_token hs_oracle_argmax(const float *row, int32_t n);
/* The ids of the min(k, n) largest logits into idx, largest first (the lower id first on a tie); returns
 * their count. */
int hs_oracle_top_ids(const float *row, int32_t n, int k, int32_t *idx);
/* CLOCK_MONOTONIC in nanoseconds. */
uint64_t hs_oracle_now_ns(void);

/* Runs the llama-bench style pp/tg measurement and prints the table (or JSON). */
hs_status hs_oracle_bench(const hs_oracle_opts *opts, hs_oracle_session *s);

/* --distill: answers the jobs greedily, many sequences per decode, appending to the answers file. */
hs_status hs_oracle_distill(const hs_oracle_opts *opts, hs_oracle_session *s);
/* --distill JOBS --answers ANS --feats FILE --refeed: the HSF1 records of answers already in ANS
 * (oracle_distill.c). */
hs_status hs_oracle_refeed(const hs_oracle_opts *opts, hs_oracle_session *s);

#endif
