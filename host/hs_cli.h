/* hs_cli — the subcommands of the heterospec CLI. Each takes argv with
 * argv[0] = the command name and returns the process exit code. */
#ifndef HS_CLI_H
#define HS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cJSON.h>

#include "eagle3.h"
#include "engine.h"
#include "heterospec.h"
#include "hs_status.h"
#include "hs_vk.h"
#include "spec.h"
#include "tokenizer.h"
#include "tree.h"

/* The default model, relative to the cache folder ($HS_HOME). */
#define HS_CLI_DEFAULT_MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

/* buf = given, or the default model in the cache folder when given is NULL. */
hs_status hs_cli_model_path(const char *given, char *buf, size_t n);
/* The prompt's token ids (*ids malloc'ed): text as it is, or wrapped in the
 * model's chat template as one user turn; *rendered (NULL-able) receives the
 * text that was tokenized (malloc'ed). */
hs_status hs_cli_prompt_ids(const hs_gguf *g, const hs_tok *tok, const char *text, bool chat, char **rendered,
                            int32_t **ids, size_t *n);
/* Option values as numbers: the whole of v (no trailing characters, no
 * overflow) within [lo, hi], else a message naming cmd ("heterospec CMD:
 * OPT V: expected ...", just "heterospec:" when cmd is NULL) on stderr and
 * false. */
bool hs_cli_int(const char *cmd, const char *opt, const char *v, long lo, long hi, int *out);
/* hs_cli_int's test alone, without a message (for callers that report their own). */
bool hs_cli_parse_int(const char *v, long lo, long hi, int *out);
/* The index of o in names[0..n), -1 when it is none of them (the option parsers' table of valued options). */
int hs_cli_option_index(const char *o, const char *const *names, int n);
bool hs_cli_real(const char *cmd, const char *opt, const char *v, double lo, double hi, float *out);
/* --kv-type f32|f16 (the target's KV cache, hs_llama_options.kv_type): 0 when o is not it, 2 when it
 * consumed o and v, -1 on a missing or unknown value (printed with cmd's name). */
int hs_cli_kv_option(const char *cmd, const char *o, const char *v, hs_type *out);
/* The commands' cache type when --kv-type is not given: f16 (half the memory and the attention
 * reads of f32, and as fast or faster at every depth measured; the library's default,
 * hs_llama_options' zero, stays f32, the exact reference). */
#define HS_CLI_KV_DEFAULT HS_TYPE_F16
/* The help line of --kv-type, for the commands that take it. */
#define HS_CLI_KV_HELP                                                                             \
    "  --kv-type T      the target's KV cache: f16 (default: K and V rounded to halves, as\n"     \
    "                   llama.cpp's default) or f32 (twice the memory and attention reads)\n"
bool hs_cli_u64(const char *cmd, const char *opt, const char *v, uint64_t *out);
/* The whole file at path as a NUL-terminated string (*out, malloc'ed). */
hs_status hs_cli_read_text(const char *path, char **out);

/* The question sets bench-spec and calibrate run on:
 *   --data DIR (default ../shared/data/bench)  --sets A,B,.. (default the
 *   five)  --questions F-T (1-based, file order; default 1-10)  --no-chat */
typedef struct hs_cli_qset {
    const char *data, *sets;
    int q_from, q_to;
    bool no_chat;
} hs_cli_qset;
void hs_cli_qset_defaults(hs_cli_qset *q);
/* 0: not one of these; 1: consumed o (a flag); 2: consumed o and its value
 * v; -1: an error, printed with cmd's name. */
int hs_cli_qset_option(hs_cli_qset *q, const char *cmd, const char *o, const char *v);

/* The first turn and id of each question FROM..TO (1-based, file order) of
 * a question.jsonl in EAGLE's format (*out calloc'ed, *n entries). */
typedef struct hs_cli_question {
    int id;
    char *text;
} hs_cli_question;
hs_status hs_cli_questions_read(const char *path, int from, int to, hs_cli_question **out, int *n);
void hs_cli_questions_free(hs_cli_question *qs, int n);
/* The questions FROM..TO of every set of q, in --sets order (*out allocated, *n sets; free with
 * hs_cli_sets_free): read before anything is loaded or timed, so that a wrong --data or --sets fails at once. */
typedef struct hs_cli_set {
    char name[64];
    hs_cli_question *qs;
    int n;
} hs_cli_set;
hs_status hs_cli_qset_read(const hs_cli_qset *q, hs_cli_set **out, int *n);
void hs_cli_sets_free(hs_cli_set *sets, int n);

/* Speculative options of generate and bench-spec (host/cli_spec.c):
 *   --spec auto|none|chain|static|eagle2|heterospec  --head FILE  --depth D
 *   --draft-top-k K  --tree-size N  --tree B1,B2,...  (static: children per
 *   node per level)  --calibration FILE (heterospec)
 * -1 / NULL: the method's default. auto (the default): heterospec when a
 * head fits the model, else none. sampling: the run samples (temperature >
 * 0), which picks the calibration of that mode. */
typedef struct hs_cli_spec {
    const char *method, *head, *tree, *calib;
    const char *head_weights; /* auto | file | q4_1 (hs_eagle3_weights); NULL: auto */
    const char *store;        /* --store FILE | none: the n-gram store; NULL: found in $HS_HOME/ngram */
    int depth, top_k, tree_size;
    int lookup; /* --lookup N: heterospec's context lookup chain length (0: off); -1: the calibration's */
    int eager;  /* --eager N: hs_tree_policy.eager (0: off); -1: the method's (heterospec: calibrated) */
    float p_min; /* --p-min P: eagle2's floor on path probability (hs_tree_policy.p_min; 0: off) */
    int rest;    /* --rest R: eagle2's plain rounds after one that verified nothing (hs_tree_policy.rest) */
    int head_window; /* --head-window W: the head consumes only the prompt's last W rows (0: all;
                      * -1: the head's default, hs_spec_window_of) */
    bool sampling;
} hs_cli_spec;
void hs_cli_spec_defaults(hs_cli_spec *s);
/* 0: not a speculative option; 2: consumed o and its value v; -1: error printed. */
int hs_cli_spec_option(hs_cli_spec *s, const char *o, const char *v);
bool hs_cli_spec_on(const hs_cli_spec *s);
/* --head-window W (bench-spec's /wW) onto a policy: -1 (not given) keeps the head's default, 0 is the
 * whole prompt (HS_HEAD_WINDOW_ALL), W > 0 the prompt's last W rows. */
void hs_cli_set_head_window(hs_tree_policy *p, int w);
/* --head-weights NAME: auto, file or q4_1; HS_ERR_INVALID_ARG naming the choices otherwise. */
hs_status hs_cli_head_weights(const char *name, hs_eagle3_weights *out);
/* What a loaded head computes with, as statistics and JSON name it: "q4_1" or "file" ("" without a head). */
const char *hs_cli_head_weights_name(const hs_eagle3 *head);
hs_status hs_cli_spec_policy(const hs_cli_spec *s, hs_tree_policy *out);
/* Whether hs_cli_spec_policy builds a policy for this method name (chain, static, eagle2, heterospec,
 * lookup): what a caller with a vocabulary of its own (bench-spec's methods) asks before naming an error. */
bool hs_cli_spec_builds(const char *method);
/* The first head (in $HS_HOME/heads, then the source tree's models/heads,
 * subfolders one level deep, name order) whose file fits the model: same
 * hidden size and vocabulary, tap layers inside it, and, when the head names
 * its target, the model's general.name. */
hs_status hs_cli_head_find(const hs_gguf *model, char *out, size_t n);
/* The first n-gram store (*.hsng in $HS_HOME/ngram, name order) built for
 * the model's vocabulary; HS_ERR_IO when there is none. */
hs_status hs_cli_store_find(const hs_gguf *model, char *out, size_t n);
/* The store to draft from: given ("none": none), else the one found (none,
 * said on stderr as [who], when there is none), loaded and checked against
 * the model; *out NULL (path "") without one. */
hs_status hs_cli_store_open(const char *given, const hs_gguf *model, const char *who, char *path, size_t n,
                            hs_ngram **out);

/* HeteroSpec calibrations (host/cli_hx.c). A calibration file is keyed by
 * the device (UUID, driver version and info), the model file and the head
 * file (FNV-1a 64 of their bytes), the mode (greedy or sample) and the
 * target's KV cache type (its costs differ):
 * $HS_HOME/calib/<device>-<model>-<head>-<mode>-<kv>.json. */
typedef struct hs_cli_hx_id {
    uint64_t device, model, head;
} hs_cli_hx_id;
typedef struct hs_cli_hx {
    hs_hx_model model;
    bool have_eagle2;      /* the calibration chose an EAGLE-2 setting */
    hs_tree_policy eagle2; /* ... this one (bench-spec's eagle2-tuned) */
    char source[1600];     /* the file loaded, or the built-in defaults */
    char for_model[17];    /* the file's model.fnv1a64 ("" if none) */
} hs_cli_hx;
hs_status hs_cli_hx_identity(const hs_vk_caps *caps, const char *model_path, const char *head_path,
                             hs_cli_hx_id *id);
hs_status hs_cli_hx_cache_path(const hs_cli_hx_id *id, bool sampling, hs_type kv, char *buf, size_t n);
/* device, model, head, mode and kv_type fields of a calibration file. */
cJSON *hs_cli_hx_identity_json(const hs_vk_caps *caps, const hs_cli_hx_id *id, const char *model_path,
                               const char *head_path, bool sampling, hs_type kv);
/* given (must exist) or: this device's calibration in the cache (the mode
 * asked, then greedy; in each, the cache type kv, then the other), the
 * defaults committed beside the head (heterospec-sample.json /
 * heterospec-greedy.json), the built-in defaults. The source says which,
 * and the cache type it was measured with when that is not kv. */
hs_status hs_cli_hx_load(const hs_vk_caps *caps, const char *model_path, const char *head_path,
                         const char *given, bool sampling, hs_type kv, hs_cli_hx *out);

/* The target (with taps when speculating), its head and the round. */
typedef struct hs_cli_spec_models {
    hs_llama *target;
    hs_gguf *head_gguf;
    hs_eagle3 *head;
    hs_spec *spec; /* NULL without speculation */
    hs_tree_policy policy;
    char head_path[1200];
    hs_cli_hx hx; /* heterospec: its calibration (policy.state points here) */
    hs_ngram *store; /* the n-gram store, when the policy drafts from one and one fits */
    char store_path[1200];
} hs_cli_spec_models;
hs_status hs_cli_spec_load(const hs_cli_spec *s, hs_ops *ops, const hs_gguf *model, const hs_llama_options *lo,
                           hs_cli_spec_models *out);
void hs_cli_spec_unload(hs_cli_spec_models *m);
/* tau (new tokens per target pass) and tokens verified per round; a run
 * without speculation rounds (plain decoding: zeroed stats) counts 1 and 1. */
double hs_spec_tau(const hs_spec_stats *s);
double hs_spec_verified_per_round(const hs_spec_stats *s);
/* The draft statistics after a run (nothing without speculation). */
void hs_cli_spec_print(FILE *f, const hs_cli_spec_models *m, const hs_gen_result *r);
/* spec, head, rounds, tau, verified_per_round, drafted, accepted,
 * accept_per_depth, draft_s, verify_s into o. */
void hs_cli_spec_json(cJSON *o, const hs_cli_spec_models *m, const hs_gen_result *r);

int hs_cli_devices(int argc, char **argv);
int hs_cli_generate(int argc, char **argv);
int hs_cli_bench(int argc, char **argv);
int hs_cli_info(int argc, char **argv);
int hs_cli_tokenize(int argc, char **argv);
int hs_cli_bench_ops(int argc, char **argv);
int hs_cli_bench_spec(int argc, char **argv);
int hs_cli_logits(int argc, char **argv);
int hs_cli_calibrate(int argc, char **argv);
int hs_cli_ngram_build(int argc, char **argv);

#endif
