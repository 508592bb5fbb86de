/* hs-oracle: command line, backend/model setup, prompt evaluation and greedy generation.
 * See oracle.h for the module contract and README.md for usage. */
#define _GNU_SOURCE /* setenv, readlink */
#include "oracle.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- logging ---------------------------------------------------------------------------- */

static bool g_verbose;
static enum ggml_log_level g_last_level = GGML_LOG_LEVEL_INFO;

/* llama.cpp and ggml log through here: errors always, the rest with -v. */
static void log_cb(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level != GGML_LOG_LEVEL_CONT) g_last_level = level;
    if (g_verbose || g_last_level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

/* ---- command line ----------------------------------------------------------------------- */

static const char *USAGE =
    "usage: hs-oracle [options] MODEL.gguf\n"
    "\n"
    "Evaluates a prompt with llama.cpp (CPU backend, f32 KV cache, flash attention off by\n"
    "default) and writes the logits of every position; or benchmarks pp/tg like llama-bench.\n"
    "\n"
    "input:\n"
    "  -p, --prompt TEXT     prompt to tokenize (default: empty; BOS is added if the model asks)\n"
    "      --tokens LIST     comma-separated token ids, used as given (no BOS added)\n"
    "      --no-special      tokenize without adding BOS/EOS\n"
    "      --tokenize        print the prompt's token ids and exit\n"
    "conversion:\n"
    "      --dequantize OUT  write MODEL with every tensor converted to f32 by llama.cpp's own\n"
    "                        dequantizers (llama_model_quantize, ftype ALL_F32) and exit: the same\n"
    "                        weights without the CPU backend's q8 rounding of activations\n"
    "evaluation:\n"
    "  -n, --generate N      greedily generate N tokens after the prompt (fixed count, no stop\n"
    "                        at EOS); prints prompt_ids, generated_ids and text\n"
    "  -o, --logits FILE     write the logits of every evaluated position (binary, see README)\n"
    "      --top-k K         print the K (<= 64) largest logits of every position\n"
    "      --print-logits    print the last position's logits, one per line\n"
    "      --ubatch N        prompt positions per batch (default: all, at most 512; 1: one by one)\n"
    "backend:\n"
    "      --vulkan          Vulkan backend, every layer offloaded (sets GGML_VK_VISIBLE_DEVICES=0\n"
    "                        unless it is set; lavapipe is only used when it is)\n"
    "  -t, --threads N       CPU threads (default 1; bench: online CPUs)\n"
    "      --kv TYPE         KV cache type f32|f16 (default: f32; bench: f16)\n"
    "      --fa on|off|auto  flash attention (default: off; bench: auto)\n"
    "      --lib-dir DIR     folder of the libggml-*.so backends (default: <exe>/../lib)\n"
    "  -v, --verbose         llama.cpp's log\n"
    "benchmark (llama-bench's method: warm-up, then REPS timed runs; mean and std of t/s):\n"
    "      --bench           run pp and tg tests\n"
    "      --pp N            prompt-processing test size (default 512, 0: skip)\n"
    "      --tg N            generation test size (default 128, 0: skip)\n"
    "  -r, --reps N          repetitions (default 5)\n"
    "      --batch N         logical batch (default 2048)  --bench-ubatch N  physical (512)\n"
    "      --json            JSON with the raw samples instead of the markdown table\n"
    "self-distillation data (greedy or sampled answers, many sequences per decode; see oracle_distill.c):\n"
    "      --distill JOBS    prompts as lines IDX<TAB>id,id,... (token ids as fed)\n"
    "      --answers FILE    appends IDX<TAB>STOP<TAB>N_PROMPT<TAB>id,... per answer; jobs already\n"
    "                        in it are skipped (resume)\n"
    "      --parallel N      sequences decoded together (default 32)\n"
    "      --max-new N       most answer tokens (default 256)  --ctx N  KV rows per sequence (512)\n"
    "      --distill-batch N most tokens per decode (2048)  --minutes M  start no job after M minutes\n"
    "      --feats FILE      also appends each answer's features (EAGLE-3 taps, top-32 probabilities;\n"
    "                        the HSF1 records of oracle.h) for the trainer\n"
    "      --refeed          with --feats: instead of answering, append the records of the answers\n"
    "                        already in --answers (one prefill each; records already in FILE skipped)\n"
    "      --distill-temp T  sampled answers at temperature T (heterospec's sampler with generate's\n"
    "                        defaults: top-k 40, top-p 0.95, min-p 0.05); 0 (default): greedy\n"
    "      --distill-seed S  with --distill-temp: the answer to job IDX is drawn from seed (S, IDX), the\n"
    "                        same whatever the batch (default 0)\n";

/* Parses a non-negative int in [lo, hi]; "name" is for the message. */
static hs_status parse_int(const char *name, const char *text, long lo, long hi, int *out) {
    char *end = NULL;
    errno = 0;
    long v = text ? strtol(text, &end, 10) : 0;
    if (!text || end == text || *end != '\0' || errno != 0 || v < lo || v > hi)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s expects an integer in [%ld, %ld], got '%s'", name, lo, hi,
                       text ? text : "(nothing)");
    *out = (int)v;
    return HS_OK;
}

static hs_status parse_kv(const char *text, int *out) {
    if (text && strcmp(text, "f32") == 0)
        *out = GGML_TYPE_F32;
    else if (text && strcmp(text, "f16") == 0)
        *out = GGML_TYPE_F16;
    else
        return HS_FAIL(HS_ERR_INVALID_ARG, "--kv expects f32 or f16, got '%s'", text ? text : "(nothing)");
    return HS_OK;
}

static hs_status parse_fa(const char *text, int *out) {
    if (text && strcmp(text, "on") == 0)
        *out = LLAMA_FLASH_ATTN_TYPE_ENABLED;
    else if (text && strcmp(text, "off") == 0)
        *out = LLAMA_FLASH_ATTN_TYPE_DISABLED;
    else if (text && strcmp(text, "auto") == 0)
        *out = LLAMA_FLASH_ATTN_TYPE_AUTO;
    else
        return HS_FAIL(HS_ERR_INVALID_ARG, "--fa expects on, off or auto, got '%s'",
                       text ? text : "(nothing)");
    return HS_OK;
}

static void opts_default(hs_oracle_opts *o) {
    memset(o, 0, sizeof *o);
    o->mode = HS_ORACLE_EVAL;
    o->add_special = true;
    o->n_threads = 0; /* chosen per mode after parsing */
    o->kv_type = -1;
    o->flash_attn = -2;
    o->n_prompt_bench = 512;
    o->n_gen_bench = 128;
    o->reps = 5;
    o->n_batch_bench = 2048;
    o->n_ubatch_bench = 512;
    o->distill_parallel = 32;
    o->distill_max_new = 256;
    o->distill_ctx = 512;
    o->distill_batch = 2048;
}

/* Options that take a value; returns HS_OK and sets *used when arg matched. */
static hs_status parse_valued(hs_oracle_opts *o, const char *a, const char *v, bool *used) {
    *used = true;
    if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
        o->prompt = v;
    else if (!strcmp(a, "--tokens"))
        o->token_list = v;
    else if (!strcmp(a, "-o") || !strcmp(a, "--logits"))
        o->logits_path = v;
    else if (!strcmp(a, "--dequantize")) {
        o->mode = HS_ORACLE_DEQUANTIZE;
        o->dequant_path = v;
    } else if (!strcmp(a, "--distill")) {
        o->mode = HS_ORACLE_DISTILL;
        o->distill_jobs = v;
    } else if (!strcmp(a, "--answers"))
        o->distill_answers = v;
    else if (!strcmp(a, "--feats"))
        o->distill_feats = v;
    else if (!strcmp(a, "--parallel"))
        return parse_int(a, v, 1, 256, &o->distill_parallel);
    else if (!strcmp(a, "--max-new"))
        return parse_int(a, v, 1, 1 << 16, &o->distill_max_new);
    else if (!strcmp(a, "--ctx"))
        return parse_int(a, v, 2, 1 << 20, &o->distill_ctx);
    else if (!strcmp(a, "--distill-batch"))
        return parse_int(a, v, 1, 1 << 20, &o->distill_batch);
    else if (!strcmp(a, "--minutes")) {
        char *end = NULL;
        o->distill_minutes = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || o->distill_minutes < 0)
            return HS_FAIL(HS_ERR_INVALID_ARG, "--minutes expects a non-negative number, got '%s'",
                           v ? v : "(nothing)");
    } else if (!strcmp(a, "--distill-temp")) {
        char *end = NULL;
        o->distill_temp = v ? strtod(v, &end) : 0;
        if (!v || end == v || *end || !(o->distill_temp >= 0 && o->distill_temp <= 100))
            return HS_FAIL(HS_ERR_INVALID_ARG, "--distill-temp expects a number in [0, 100], got '%s'",
                           v ? v : "(nothing)");
    } else if (!strcmp(a, "--distill-seed")) {
        char *end = NULL;
        errno = 0;
        o->distill_seed = v ? strtoull(v, &end, 10) : 0;
        if (!v || end == v || *end || errno || *v == '-')
            return HS_FAIL(HS_ERR_INVALID_ARG, "--distill-seed expects an unsigned integer, got '%s'",
                           v ? v : "(nothing)");
    } else if (!strcmp(a, "--lib-dir"))
        o->lib_dir = v;
    else if (!strcmp(a, "-n") || !strcmp(a, "--generate"))
        return parse_int(a, v, 0, 1 << 20, &o->n_generate);
    else if (!strcmp(a, "--top-k"))
        return parse_int(a, v, 1, 64, &o->top_k);
    else if (!strcmp(a, "--ubatch"))
        return parse_int(a, v, 1, 1 << 20, &o->ubatch);
    else if (!strcmp(a, "-t") || !strcmp(a, "--threads"))
        return parse_int(a, v, 1, 1024, &o->n_threads);
    else if (!strcmp(a, "--kv"))
        return parse_kv(v, &o->kv_type);
    else if (!strcmp(a, "--fa"))
        return parse_fa(v, &o->flash_attn);
    else if (!strcmp(a, "--pp"))
        return parse_int(a, v, 0, 1 << 20, &o->n_prompt_bench);
    else if (!strcmp(a, "--tg"))
        return parse_int(a, v, 0, 1 << 20, &o->n_gen_bench);
    else if (!strcmp(a, "-r") || !strcmp(a, "--reps"))
        return parse_int(a, v, 1, 100000, &o->reps);
    else if (!strcmp(a, "--batch"))
        return parse_int(a, v, 1, 1 << 20, &o->n_batch_bench);
    else if (!strcmp(a, "--bench-ubatch"))
        return parse_int(a, v, 1, 1 << 20, &o->n_ubatch_bench);
    else
        *used = false;
    if (*used && !v) return HS_FAIL(HS_ERR_INVALID_ARG, "%s needs a value", a);
    return HS_OK;
}

/* Returns HS_OK with *help set when --help was asked for. */
static hs_status parse_args(int argc, char **argv, hs_oracle_opts *o, bool *help) {
    hs_status st = HS_OK;
    opts_default(o);
    *help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        bool used = false;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            *help = true;
            return HS_OK;
        } else if (!strcmp(a, "--no-special"))
            o->add_special = false;
        else if (!strcmp(a, "--tokenize"))
            o->mode = HS_ORACLE_TOKENIZE;
        else if (!strcmp(a, "--bench"))
            o->mode = HS_ORACLE_BENCH;
        else if (!strcmp(a, "--print-logits"))
            o->print_last_logits = true;
        else if (!strcmp(a, "--vulkan"))
            o->vulkan = true;
        else if (!strcmp(a, "--json"))
            o->json = true;
        else if (!strcmp(a, "--refeed"))
            o->distill_refeed = true;
        else if (!strcmp(a, "-v") || !strcmp(a, "--verbose"))
            o->verbose = true;
        else if (a[0] == '-' && a[1] != '\0') {
            HS_TRY(parse_valued(o, a, i + 1 < argc ? argv[i + 1] : NULL, &used));
            if (!used) return HS_FAIL(HS_ERR_INVALID_ARG, "unknown option '%s' (see --help)", a);
            i++;
        } else if (!o->model_path)
            o->model_path = a;
        else
            return HS_FAIL(HS_ERR_INVALID_ARG, "unexpected argument '%s' (the model is '%s')", a,
                           o->model_path);
    }
    if (!o->model_path) return HS_FAIL(HS_ERR_INVALID_ARG, "no model given (see --help)");
    if (o->n_threads == 0) {
        /* Evaluation: one thread. The logits do not depend on the thread count, and ggml's
         * spinning workers lose badly to other processes on a loaded machine. Bench: every
         * online CPU, as llama-bench (which takes the physical cores). */
        long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
        bool all_cpus =
            o->mode == HS_ORACLE_BENCH || o->mode == HS_ORACLE_DEQUANTIZE || o->mode == HS_ORACLE_DISTILL;
        o->n_threads = all_cpus && ncpu > 0 ? (int)ncpu : 1;
    }
    if (o->mode == HS_ORACLE_DISTILL && !o->distill_answers)
        return HS_FAIL(HS_ERR_INVALID_ARG, "--distill needs --answers FILE");
    if (o->distill_refeed && (o->mode != HS_ORACLE_DISTILL || !o->distill_feats))
        return HS_FAIL(HS_ERR_INVALID_ARG, "--refeed goes with --distill JOBS --answers FILE --feats FILE");
    if (o->distill_temp > 0 && (o->mode != HS_ORACLE_DISTILL || o->distill_refeed))
        return HS_FAIL(HS_ERR_INVALID_ARG, "--distill-temp goes with --distill (answering, not --refeed)");
    if (!o->distill_refeed && o->distill_max_new >= o->distill_ctx)
        return HS_FAIL(HS_ERR_INVALID_ARG, "--max-new %d leaves no room for a prompt in --ctx %d",
                       o->distill_max_new, o->distill_ctx);
    if (o->prompt && o->token_list) return HS_FAIL(HS_ERR_INVALID_ARG, "give --prompt or --tokens, not both");
    if (o->mode == HS_ORACLE_BENCH && o->n_prompt_bench == 0 && o->n_gen_bench == 0)
        return HS_FAIL(HS_ERR_INVALID_ARG, "--bench with --pp 0 and --tg 0 has nothing to measure");
fail:
    return st;
}

/* ---- setup ------------------------------------------------------------------------------ */

/* <folder of this executable>/../lib, where build.sh puts the llama.cpp libraries. */
static hs_status default_lib_dir(char *buf, size_t size) {
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return HS_FAIL(HS_ERR_IO, "readlink(/proc/self/exe): %s; pass --lib-dir", strerror(errno));
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    if ((size_t)snprintf(buf, size, "%s/../lib", exe) >= size)
        return HS_FAIL(HS_ERR_IO, "library path too long under '%s'; pass --lib-dir", exe);
    return HS_OK;
}

/* Finds a device of the given type among the loaded backends (NULL if none). */
static ggml_backend_dev_t find_device(enum ggml_backend_dev_type type) {
    for (size_t i = 0; i < ggml_backend_dev_count(); i++) {
        ggml_backend_dev_t d = ggml_backend_dev_get(i);
        if (ggml_backend_dev_type(d) == type) return d;
    }
    return NULL;
}

/* Loads the CPU (and Vulkan) backends and describes the device that will compute. */
static hs_status load_backends(const hs_oracle_opts *o, hs_oracle_session *s) {
    char dir[PATH_MAX];
    hs_status st = HS_OK;
    if (o->lib_dir)
        snprintf(dir, sizeof dir, "%s", o->lib_dir);
    else
        HS_TRY(default_lib_dir(dir, sizeof dir));
    if (access(dir, R_OK) != 0)
        return HS_FAIL(HS_ERR_IO, "backend folder '%s': %s (run tools/fetch_llama_bin.sh)", dir,
                       strerror(errno));
    /* ggml-vulkan skips CPU-type Vulkan devices (lavapipe) unless they are listed explicitly. */
    if (o->vulkan) setenv("GGML_VK_VISIBLE_DEVICES", "0", 0);
    ggml_backend_load_all_from_path(dir);
    ggml_backend_dev_t cpu = find_device(GGML_BACKEND_DEVICE_TYPE_CPU);
    if (!cpu) return HS_FAIL(HS_ERR_IO, "no CPU backend (libggml-cpu-*.so) could be loaded from '%s'", dir);
    ggml_backend_dev_t dev = cpu;
    if (o->vulkan) {
        dev = find_device(GGML_BACKEND_DEVICE_TYPE_GPU);
        if (!dev) dev = find_device(GGML_BACKEND_DEVICE_TYPE_IGPU);
        if (!dev)
            return HS_FAIL(
                HS_ERR_VK_NO_DEVICE,
                "--vulkan: no Vulkan device from '%s/libggml-vulkan.so' (GGML_VK_VISIBLE_DEVICES=%s)", dir,
                getenv("GGML_VK_VISIBLE_DEVICES"));
    }
    snprintf(s->backend_desc, sizeof s->backend_desc, "%s (%s)", ggml_backend_dev_name(dev),
             ggml_backend_dev_description(dev));
    ggml_backend_reg_t reg = ggml_backend_dev_backend_reg(cpu);
    void *fnew = ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_new");
    void *ffree = ggml_backend_reg_get_proc_address(reg, "ggml_threadpool_free");
    if (fnew && ffree) {
        /* POSIX guarantees object and function pointers convert; copy to avoid -Wpedantic's cast rule. */
        memcpy(&s->threadpool_new, &fnew, sizeof fnew);
        memcpy(&s->threadpool_free, &ffree, sizeof ffree);
        s->threadpool_fns = true;
    }
fail:
    return st;
}

hs_status hs_oracle_setup(const hs_oracle_opts *o, hs_oracle_session *s) {
    hs_status st = HS_OK;
    memset(s, 0, sizeof *s);
    g_verbose = o->verbose;
    llama_log_set(log_cb, NULL);
    FILE *f = fopen(o->model_path, "rb");
    if (!f) return HS_FAIL(HS_ERR_IO, "cannot open model '%s': %s", o->model_path, strerror(errno));
    fclose(f);
    HS_TRY(load_backends(o, s));
    llama_backend_init();
    s->backend_initialized = true;
    struct llama_model_params mp = llama_model_default_params();
    if (o->vulkan) {
        mp.n_gpu_layers = -1; /* all layers */
    } else {
        mp.n_gpu_layers = 0;
        s->no_devices[0] = NULL;
        mp.devices = s->no_devices; /* no offload device at all: the CPU backend computes everything */
    }
    s->model = llama_model_load_from_file(o->model_path, mp);
    if (!s->model)
        return HS_FAIL(HS_ERR_FORMAT, "llama.cpp could not load '%s' (run with -v for its log)",
                       o->model_path);
    s->vocab = llama_model_get_vocab(s->model);
    s->n_vocab = llama_vocab_n_tokens(s->vocab);
    if (s->n_vocab <= 0) return HS_FAIL(HS_ERR_FORMAT, "'%s' has an empty vocabulary", o->model_path);
fail:
    return st;
}

void hs_oracle_session_destroy(hs_oracle_session *s) {
    if (!s) return;
    if (s->model) llama_model_free(s->model);
    if (s->backend_initialized) llama_backend_free();
    s->model = NULL;
    s->backend_initialized = false;
}

hs_status hs_oracle_context(const hs_oracle_opts *o, hs_oracle_session *s, uint32_t n_ctx, uint32_t n_batch,
                            uint32_t n_ubatch, uint32_t n_seq, int kv_default, int fa_default,
                            struct llama_context **out) {
    return hs_oracle_context_cb(o, s, n_ctx, n_batch, n_ubatch, n_seq, kv_default, fa_default, NULL, NULL,
                                out);
}

hs_status hs_oracle_context_cb(const hs_oracle_opts *o, hs_oracle_session *s, uint32_t n_ctx,
                               uint32_t n_batch, uint32_t n_ubatch, uint32_t n_seq, int kv_default,
                               int fa_default, ggml_backend_sched_eval_callback cb, void *cb_data,
                               struct llama_context **out) {
    struct llama_context_params cp = llama_context_default_params();
    cp.cb_eval = cb;
    cp.cb_eval_user_data = cb_data;
    cp.n_ctx = n_ctx;
    cp.n_batch = n_batch;
    cp.n_ubatch = n_ubatch;
    cp.n_seq_max = n_seq;
    cp.kv_unified = n_seq <= 1;
    cp.n_threads = o->n_threads;
    cp.n_threads_batch = o->n_threads;
    cp.type_k = cp.type_v = (enum ggml_type)(o->kv_type >= 0 ? o->kv_type : kv_default);
    cp.flash_attn_type = (enum llama_flash_attn_type)(o->flash_attn != -2 ? o->flash_attn : fa_default);
    cp.offload_kqv = o->vulkan;
    cp.op_offload = o->vulkan;
    cp.no_perf = true;
    *out = llama_init_from_model(s->model, cp);
    if (!*out)
        return HS_FAIL(HS_ERR_INVALID_ARG,
                       "llama_init_from_model failed (n_ctx %u, n_batch %u, n_ubatch %u, kv %s)", n_ctx,
                       n_batch, n_ubatch, ggml_type_name(cp.type_k));
    return HS_OK;
}

/* ---- tokens ----------------------------------------------------------------------------- */

/* "1, 403,407" -> ids; every id must be in [0, n_vocab). */
static hs_status parse_token_list(const char *list, int32_t n_vocab, llama_token **out, int *n_out) {
    size_t cap = 1;
    for (const char *c = list; *c; c++)
        cap += *c == ',';
    llama_token *t = malloc(cap * sizeof *t);
    if (!t) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "token list of %zu ids", cap);
    int n = 0;
    const char *c = list;
    while (*c) {
        char *end = NULL;
        errno = 0;
        long v = strtol(c, &end, 10);
        if (end == c || errno || v < 0 || v >= n_vocab) {
            free(t);
            return HS_FAIL(HS_ERR_INVALID_ARG, "--tokens: bad id at '%.20s' (ids are integers in [0, %d))", c,
                           n_vocab);
        }
        t[n++] = (llama_token)v;
        while (*end == ' ')
            end++;
        if (*end == ',')
            end++;
        else if (*end != '\0') {
            free(t);
            return HS_FAIL(HS_ERR_INVALID_ARG, "--tokens: expected ',' at '%.20s'", end);
        }
        c = end;
    }
    *out = t;
    *n_out = n;
    return HS_OK;
}

/* The prompt's token ids (caller frees). */
static hs_status get_tokens(const hs_oracle_opts *o, const hs_oracle_session *s, llama_token **out,
                            int *n_out) {
    if (o->token_list) return parse_token_list(o->token_list, s->n_vocab, out, n_out);
    const char *text = o->prompt ? o->prompt : "";
    size_t len = strlen(text);
    if (len > INT32_MAX / 2) return HS_FAIL(HS_ERR_INVALID_ARG, "prompt too long (%zu bytes)", len);
    int32_t cap = (int32_t)len + 8, n = -1;
    llama_token *t = NULL;
    for (int attempt = 0; attempt < 2 && n < 0; attempt++) { /* a negative n is the size needed */
        free(t);
        t = malloc((size_t)cap * sizeof *t);
        if (!t) return HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "%d tokens", cap);
        n = llama_tokenize(s->vocab, text, (int32_t)len, t, cap, o->add_special, false);
        if (n < 0 && n != INT32_MIN) cap = -n;
    }
    if (n < 0) {
        free(t);
        return HS_FAIL(HS_ERR_INVALID_ARG, "llama_tokenize failed (%d) on the prompt", n);
    }
    *out = t;
    *n_out = n;
    return HS_OK;
}

static void print_ids(const char *label, const llama_token *t, int n) {
    printf("%s [", label);
    for (int i = 0; i < n; i++)
        printf(i ? ", %d" : "%d", t[i]);
    printf("]\n");
}

/* Prints the detokenized text as a C-escaped quoted string. */
static void print_text(const hs_oracle_session *s, const llama_token *t, int n) {
    printf("text \"");
    for (int i = 0; i < n; i++) {
        char piece[256];
        int32_t len = llama_token_to_piece(s->vocab, t[i], piece, sizeof piece, 0, false);
        for (int32_t j = 0; j < len; j++) {
            unsigned char ch = (unsigned char)piece[j];
            if (ch == '"' || ch == '\\')
                printf("\\%c", ch);
            else if (ch == '\n')
                printf("\\n");
            else if (ch < 0x20)
                printf("\\x%02x", ch);
            else
                putchar(ch);
        }
    }
    printf("\"\n");
}

/* ---- evaluation ------------------------------------------------------------------------- */

/* Where each position's logits go. */
typedef struct eval_out {
    FILE *file; /* binary logits file or NULL */
    int top_k;  /* print per position, 0: off */
    int32_t n_vocab;
    llama_token *tokens; /* evaluated tokens, n_rows of them */
    int n_rows;
    float *last; /* copy of the newest row (n_vocab) */
} eval_out;

llama_token hs_oracle_argmax(const float *row, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (row[i] > row[best]) best = i;
    return best;
}

uint64_t hs_oracle_now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int hs_oracle_top_ids(const float *row, int32_t n, int k, int32_t *idx) {
    int have = 0;
    if (k > n) k = n;
    for (int32_t i = 0; i < n; i++) { /* insertion into a sorted top list; ties: lower id first */
        if (have == k && row[i] <= row[idx[k - 1]]) continue;
        int j = have < k ? have++ : k - 1;
        while (j > 0 && row[idx[j - 1]] < row[i]) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    return have;
}

static void print_top_k(const float *row, int32_t n_vocab, int k, int pos, llama_token tok) {
    int32_t idx[64];
    const int have = hs_oracle_top_ids(row, n_vocab, k < 64 ? k : 64, idx);
    printf("pos %d token %d top", pos, tok);
    for (int j = 0; j < have; j++)
        printf(" %d:%.6f", idx[j], row[idx[j]]);
    printf("\n");
}

static hs_status emit_row(eval_out *e, const float *row, llama_token tok) {
    if (!row)
        return HS_FAIL(HS_ERR_INVALID_ARG, "llama_get_logits_ith returned no logits at position %d",
                       e->n_rows);
    if (e->file && fwrite(row, sizeof(float), (size_t)e->n_vocab, e->file) != (size_t)e->n_vocab)
        return HS_FAIL(HS_ERR_IO, "writing logits row %d: %s", e->n_rows, strerror(errno));
    if (e->top_k) print_top_k(row, e->n_vocab, e->top_k, e->n_rows, tok);
    memcpy(e->last, row, (size_t)e->n_vocab * sizeof(float));
    e->tokens[e->n_rows++] = tok;
    return HS_OK;
}

/* Decodes t[0..n) at positions pos0.. in batches of `chunk`, every position with logits. */
static hs_status decode_all(struct llama_context *ctx, eval_out *e, const llama_token *t, int n, int pos0,
                            int chunk) {
    hs_status st = HS_OK;
    struct llama_batch b = llama_batch_init(chunk, 0, 1);
    for (int done = 0; done < n; done += chunk) {
        int m = n - done < chunk ? n - done : chunk;
        b.n_tokens = m;
        for (int i = 0; i < m; i++) {
            b.token[i] = t[done + i];
            b.pos[i] = pos0 + done + i;
            b.n_seq_id[i] = 1;
            b.seq_id[i][0] = 0;
            b.logits[i] = 1;
        }
        int32_t rc = llama_decode(ctx, b);
        if (rc != 0) {
            st = HS_FAIL(HS_ERR_INVALID_ARG, "llama_decode failed (%d) at positions %d..%d", rc, pos0 + done,
                         pos0 + done + m - 1);
            goto fail;
        }
        for (int i = 0; i < m; i++)
            HS_TRY(emit_row(e, llama_get_logits_ith(ctx, i), t[done + i]));
    }
fail:
    llama_batch_free(b);
    return st;
}

/* Writes the header with room for the tokens; they are filled in by finish_logits_file. */
static hs_status open_logits_file(const char *path, int32_t n_vocab, int n_rows, FILE **out) {
    FILE *f = fopen(path, "wb");
    if (!f) return HS_FAIL(HS_ERR_IO, "cannot create logits file '%s': %s", path, strerror(errno));
    uint32_t head[3] = {HS_ORACLE_LOGITS_VERSION, (uint32_t)n_vocab, (uint32_t)n_rows};
    bool ok = fwrite(HS_ORACLE_LOGITS_MAGIC, 1, 4, f) == 4 && fwrite(head, sizeof head, 1, f) == 1;
    for (int i = 0; ok && i < n_rows; i++)
        ok = fwrite(&(int32_t){-1}, 4, 1, f) == 1;
    if (!ok) {
        fclose(f);
        return HS_FAIL(HS_ERR_IO, "writing the header of '%s': %s", path, strerror(errno));
    }
    *out = f;
    return HS_OK;
}

static hs_status finish_logits_file(const char *path, FILE *f, const llama_token *t, int n_rows) {
    if (fseek(f, 16, SEEK_SET) != 0)
        return HS_FAIL(HS_ERR_IO, "'%s' is not seekable (the logits file must be a regular file)", path);
    if (n_rows && fwrite(t, sizeof *t, (size_t)n_rows, f) != (size_t)n_rows)
        return HS_FAIL(HS_ERR_IO, "writing the tokens of '%s': %s", path, strerror(errno));
    return HS_OK;
}

/* Evaluates the prompt, then generates greedily, sending every row to `e`. */
static hs_status run_eval(const hs_oracle_opts *o, hs_oracle_session *s, const llama_token *prompt,
                          int n_prompt, eval_out *e, llama_token *gen) {
    hs_status st = HS_OK;
    struct llama_context *ctx = NULL;
    uint32_t n_ctx = (uint32_t)(n_prompt + o->n_generate);
    /* Default: the whole prompt in one batch, up to 512 positions (bounds the logits buffer). */
    uint32_t ub = o->ubatch ? (uint32_t)o->ubatch : (uint32_t)(n_prompt < 512 ? n_prompt : 512);
    HS_TRY(hs_oracle_context(o, s, n_ctx, ub, ub, 1, GGML_TYPE_F32, LLAMA_FLASH_ATTN_TYPE_DISABLED, &ctx));
    HS_TRY(decode_all(ctx, e, prompt, n_prompt, 0, (int)ub));
    for (int i = 0; i < o->n_generate; i++) {
        gen[i] = hs_oracle_argmax(e->last, s->n_vocab);
        if (i + 1 < o->n_generate) HS_TRY(decode_all(ctx, e, &gen[i], 1, n_prompt + i, 1));
    }
fail:
    if (ctx) llama_free(ctx);
    return st;
}

static hs_status cmd_eval(const hs_oracle_opts *o, hs_oracle_session *s) {
    hs_status st = HS_OK;
    llama_token *prompt = NULL, *gen = NULL;
    int n_prompt = 0;
    eval_out e = {.top_k = o->top_k, .n_vocab = s->n_vocab};
    HS_TRY(get_tokens(o, s, &prompt, &n_prompt));
    if (n_prompt == 0) {
        st = HS_FAIL(HS_ERR_INVALID_ARG,
                     "the prompt has no tokens to evaluate (empty prompt with --no-special?)");
        goto fail;
    }
    int n_rows = n_prompt + (o->n_generate > 0 ? o->n_generate - 1 : 0);
    e.tokens = malloc((size_t)n_rows * sizeof *e.tokens);
    e.last = malloc((size_t)s->n_vocab * sizeof *e.last);
    gen = malloc(((size_t)o->n_generate + 1) * sizeof *gen);
    if (!e.tokens || !e.last || !gen) {
        st = HS_FAIL(HS_ERR_OUT_OF_HOST_MEMORY, "buffers for %d positions", n_rows);
        goto fail;
    }
    if (o->logits_path) HS_TRY(open_logits_file(o->logits_path, s->n_vocab, n_rows, &e.file));
    HS_TRY(run_eval(o, s, prompt, n_prompt, &e, gen));
    if (e.file) HS_TRY(finish_logits_file(o->logits_path, e.file, e.tokens, e.n_rows));
    print_ids("prompt_ids", prompt, n_prompt);
    if (o->n_generate) {
        print_ids("generated_ids", gen, o->n_generate);
        print_text(s, gen, o->n_generate);
    }
    if (o->print_last_logits)
        for (int32_t i = 0; i < s->n_vocab; i++)
            printf("%.9g\n", e.last[i]);
fail:
    if (e.file && fclose(e.file) != 0 && st == HS_OK)
        st = HS_FAIL(HS_ERR_IO, "closing '%s': %s", o->logits_path, strerror(errno));
    free(prompt);
    free(gen);
    free(e.tokens);
    free(e.last);
    return st;
}

/* Converts the model to an all-f32 GGUF with llama.cpp's quantizer (which dequantizes every
 * quantized tensor through ggml's own to_float and stores it as f32). */
static hs_status cmd_dequantize(const hs_oracle_opts *o) {
    hs_status st = HS_OK;
    g_verbose = o->verbose;
    llama_log_set(log_cb, NULL);
    FILE *f = fopen(o->model_path, "rb");
    if (!f) return HS_FAIL(HS_ERR_IO, "cannot open model '%s': %s", o->model_path, strerror(errno));
    fclose(f);
    llama_backend_init();
    struct llama_model_quantize_params qp = llama_model_quantize_default_params();
    qp.nthread = o->n_threads;
    qp.ftype = LLAMA_FTYPE_ALL_F32;
    qp.allow_requantize = true; /* the inputs are quantized: dequantize them */
    qp.quantize_output_tensor = true;
    qp.pure = true; /* every tensor to f32, no per-tensor type rules */
    uint32_t rc = llama_model_quantize(o->model_path, o->dequant_path, &qp);
    llama_backend_free();
    if (rc != 0)
        return HS_FAIL(HS_ERR_FORMAT, "llama_model_quantize('%s' -> '%s', ALL_F32) failed with %u (run with -v)",
                       o->model_path, o->dequant_path, rc);
    return st;
}

static hs_status cmd_tokenize(const hs_oracle_opts *o, hs_oracle_session *s) {
    llama_token *t = NULL;
    int n = 0;
    hs_status st = get_tokens(o, s, &t, &n);
    if (st == HS_OK) print_ids("prompt_ids", t, n);
    free(t);
    return st;
}

int main(int argc, char **argv) {
    hs_oracle_opts o;
    hs_oracle_session s = {0};
    bool help = false;
    hs_status st = HS_OK;
    HS_TRY(parse_args(argc, argv, &o, &help));
    if (help) {
        fputs(USAGE, stdout);
        return 0;
    }
    if (o.mode == HS_ORACLE_DEQUANTIZE) {
        HS_TRY(cmd_dequantize(&o));
        goto fail;
    }
    HS_TRY(hs_oracle_setup(&o, &s));
    if (o.verbose) fprintf(stderr, "hs-oracle: llama.cpp %s, device %s\n", llama_version(), s.backend_desc);
    switch (o.mode) {
    case HS_ORACLE_EVAL: HS_TRY(cmd_eval(&o, &s)); break;
    case HS_ORACLE_TOKENIZE: HS_TRY(cmd_tokenize(&o, &s)); break;
    case HS_ORACLE_BENCH: HS_TRY(hs_oracle_bench(&o, &s)); break;
    case HS_ORACLE_DISTILL: HS_TRY(o.distill_refeed ? hs_oracle_refeed(&o, &s) : hs_oracle_distill(&o, &s)); break;
    case HS_ORACLE_DEQUANTIZE: break; /* handled above */
    }
fail:
    hs_oracle_session_destroy(&s);
    if (fflush(stdout) != 0 && st == HS_OK) st = HS_FAIL(HS_ERR_IO, "writing stdout: %s", strerror(errno));
    if (st != HS_OK) {
        fprintf(stderr, "hs-oracle: %s: %s\n", hs_status_string(st), hs_last_error());
        return 1;
    }
    return 0;
}
