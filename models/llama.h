/* llama — the Llama architecture (also SmolLM2) as a graph of runtime ops.
 *
 * Usage:
 *   hs_llama *m;  hs_llama_load(ops, gguf, &opt, &m);      // uploads weights, allocates the KV cache
 *   const float *logits;
 *   hs_llama_eval(m, tokens, n, NULL, true, true, &logits, NULL);
 *       // a prompt chunk or decoding step: causal (no parents), last row's
 *       // logits only, committed to the cache (n_past += n), no argmax
 *   hs_llama_destroy(m);
 *
 * One layer is six dispatches (DESIGN.md section 9: the dispatch count is the
 * speed on small models):
 *   qkv  = Wqkv rmsnorm(h)              matmul, RMSNorm prologue, stacked Q/K/V
 *   q, K/V cache rows = rope(qkv)       fused RoPE + KV write
 *   att  = attention(q, cache, mask)    tree/causal visibility from parents
 *   h   += Wo att                       matmul, residual epilogue
 *   gu   = Wgu rmsnorm(h)               matmul, RMSNorm prologue, stacked gate/up
 *   h   += Wdown swiglu(gu)             matmul, SwiGLU prologue, residual epilogue
 * plus the embedding gather and the tree mask before, the output norm + head
 * after. Stacking needs one weight type: when Q, K and V (or gate and up)
 * differ in type, as in Q4_K_M files, each run of one type is its own product
 * writing its slice of the same output (one more dispatch per extra run; the
 * results are bitwise those of the stacked product).
 *
 * A batch of n tokens is one recorded sequence, kept per (n, logits rows) and
 * replayed; what changes per call (token ids, positions, cache rows, parents,
 * prefix length) is written into a small host-visible step buffer.
 *
 * KV cache: per layer [n_ctx][n_kv_head][head_dim] f32, layers back to back in
 * one K and one V buffer. A layer larger than maxStorageBufferRange (long
 * contexts) is bound as up to HS_KV_MAX_CHUNKS windows by the KV ops, with
 * bitwise the same results (op_elem.h); a context needing more windows fails
 * at load with HS_ERR_VK_UNSUPPORTED. Weights past the range are split into
 * row chunks (op_matmul.h).
 *
 * Tokens of a call occupy cache rows n_past .. n_past+n-1. Without parents they
 * form a causal chain (prompt processing, decoding); with parents (tree
 * verification, DESIGN.md section 2) token i sees the prefix and its
 * ancestors, at position n_past + depth(i).
 *
 * Ownership: the model borrows ops and gguf only during hs_llama_load; the
 * logits pointer returned by eval stays valid until the next eval.
 * Thread-safety: one thread.
 */
#ifndef HS_LLAMA_H
#define HS_LLAMA_H

#include "gguf.h"
#include "hs_ops.h"
#include "op_elem.h"

typedef struct hs_llama_config {
    char arch[32];       /* general.architecture */
    uint32_t n_vocab;    /* rows of token_embd */
    uint32_t dim;        /* embedding_length */
    uint32_t n_layer;    /* block_count */
    uint32_t n_head;     /* attention.head_count */
    uint32_t n_kv_head;  /* attention.head_count_kv */
    uint32_t head_dim;   /* dim / n_head */
    uint32_t ff;         /* feed_forward_length */
    uint32_t n_ctx_train;/* context_length */
    uint32_t n_rot;      /* rope.dimension_count (default head_dim) */
    float rope_base;     /* rope.freq_base (default 10000) */
    float rope_scale;    /* 1 / rope.scale_linear (default 1) */
    float eps;           /* attention.layer_norm_rms_epsilon */
    hs_rope_mode rope_mode;
    bool tied_output;    /* no output.weight: the head is token_embd */
} hs_llama_config;

/* Tap layers of a draft head (DESIGN.md section 5): the hidden states at the
 * inputs of these layers, for every position of an eval, are kept on the
 * device side by side ([n][HS_LLAMA_TAPS][dim]) when hs_llama_options.taps is
 * set. EAGLE-3 taps the inputs of layers 2, L/2 and L-3. */
#define HS_LLAMA_TAPS 3u

typedef struct hs_llama_options {
    uint32_t n_ctx;     /* KV-cache rows; 0: min(n_ctx_train, 4096) */
    uint32_t max_batch; /* largest n of one eval; 0: 512 */
    bool taps;          /* keep the tap layers' hidden states (hs_llama_taps) */
    bool custom_taps;   /* use tap_layers instead of EAGLE-3's 2, L/2, L-3 */
    uint32_t tap_layers[HS_LLAMA_TAPS]; /* each < n_layer; the input of layer 0 is the embedding */
    hs_type kv_type; /* the KV cache's elements: HS_TYPE_F32 (0, the default) or HS_TYPE_F16 (half the
                      * memory and the attention's reads; K and V rounded to f16 as llama.cpp's default cache) */
} hs_llama_options;

typedef struct hs_llama hs_llama;

/* Reads the configuration of a llama-architecture GGUF without loading it. */
hs_status hs_llama_config_read(const hs_gguf *g, hs_llama_config *cfg);

hs_status hs_llama_load(hs_ops *ops, const hs_gguf *g, const hs_llama_options *opt, hs_llama **out);
void hs_llama_destroy(hs_llama *m);
const hs_llama_config *hs_llama_cfg(const hs_llama *m);
uint32_t hs_llama_n_ctx(const hs_llama *m);
uint32_t hs_llama_n_past(const hs_llama *m);
uint32_t hs_llama_max_batch(const hs_llama *m);
/* The token embedding table on the device (a draft head shares it). */
const struct hs_weight *hs_llama_token_embd(const hs_llama *m);
/* Forgets the context (n_past = 0). */
void hs_llama_reset(hs_llama *m);
/* Bytes of weights on the device. */
uint64_t hs_llama_weight_bytes(const hs_llama *m);

/* Evaluates n tokens at cache rows n_past.. (see above). parents: NULL for a
 * causal chain, else int32 [n] with parents[i] in [-1, i). With last_only the
 * logits of the last token are computed ([1][n_vocab]), else of all n tokens
 * ([n][n_vocab]). *logits points into model-owned memory (NULL-able
 * argument), already made visible to the host (invalidated where memory is
 * not coherent) and valid until the next call. Advances n_past by n when commit is true (prompt, decoding); a
 * tree verification passes false. *argmax (may be NULL) receives the argmax of
 * each logits row, computed on the device. */
hs_status hs_llama_eval(hs_llama *m, const int32_t *tokens, uint32_t n, const int32_t *parents, bool last_only,
                        bool commit, const float **logits, const uint32_t **argmax);

/* Tree verification with the output head on demand: the pass of
 * hs_llama_eval(m, tokens, n, parents, false, false, ...) (nothing committed),
 * but the head (output norm, the n_vocab x dim product, argmax) runs for row 0
 * (the root) only: *logits (NULL-able) points at its n_vocab logits, *argmax
 * (NULL-able) receives its argmax. Acceptance needs the head only at the
 * nodes it reaches (the accepted path and the node after it), which
 * hs_llama_head computes one by one: on a small model the head is a fifth of
 * a token's weights, and an all-rows pass would run it for every candidate
 * (and every inert slot of the capacity bucket). A row's logits are bitwise
 * those of the all-rows pass. */
hs_status hs_llama_eval_tree(hs_llama *m, const int32_t *tokens, uint32_t n, const int32_t *parents,
                             const float **logits, uint32_t *argmax);

/* The output head of row `row` (< n) of the last eval: *logits (NULL-able)
 * points at its n_vocab logits (valid until the next eval or head call of the
 * same row), *argmax (NULL-able) receives their argmax. One recorded
 * sequence per row, recorded on first use. Valid until the next eval (also
 * after hs_llama_accept, which moves only the KV cache). */
hs_status hs_llama_head(hs_llama *m, uint32_t row, const float **logits, uint32_t *argmax);

/* The output heads of rows row .. row + k - 1 (k = 1, 2, 4 .. HS_LLAMA_MAX_HEADS, within the last
 * eval) in one recorded sequence: each row's logits and argmax bitwise those hs_llama_head gives (a
 * product's column does not depend on its batch). *logits (NULL-able) points at row `row`'s logits, the
 * others following; argmax (NULL-able) receives k ids. Where the head costs less per row in a batch than
 * alone, a walk that expects to accept several nodes of a chain asks for them at once. One recorded
 * sequence per (row, k). */
#define HS_LLAMA_MAX_HEADS 8u /* = HS_TREE_HEADS_MAX (host/tree.h) */
hs_status hs_llama_heads(hs_llama *m, uint32_t row, uint32_t k, const float **logits, uint32_t *argmax);

/* Keeps the path nodes[0 .. n) of the tree evaluated last (with commit =
 * false): nodes are indices into that eval, increasing, nodes[0] a root-level
 * node and each next one a child of the one before. Their cache rows move to
 * n_past .. n_past + n - 1 (one recorded KV compaction over all layers, none
 * when the path is already there), then n_past += n. HS_ERR_INVALID_ARG,
 * naming the node, for anything else; n = 0 only drops the tree. */
hs_status hs_llama_accept(hs_llama *m, const uint32_t *nodes, uint32_t n);

/* The tap layers and the device buffer holding their hidden states for the
 * positions of the last eval: f32 [capacity][HS_LLAMA_TAPS][dim], row i is
 * position i of that eval. NULL binding when taps are off. */
hs_vk_binding hs_llama_taps(const hs_llama *m, uint32_t layers[HS_LLAMA_TAPS]);
/* Copies the taps of positions first .. first+n-1 of the last eval into out
 * ([n][HS_LLAMA_TAPS][dim]); for tests and tools. */
hs_status hs_llama_taps_read(hs_llama *m, uint32_t first, uint32_t n, float *out);

/* Graphs recorded so far. An eval with every row's logits (or the root's,
 * hs_llama_eval_tree) is recorded for a capacity bucket (hs_model_tree_bucket:
 * n itself up to HS_MODEL_EXACT_BUCKETS, then the next power of two, at most
 * max_batch) with the used count in the step data, so trees of changing size
 * reuse a few graphs; a last-row eval is recorded for its exact n;
 * hs_llama_head(s) record one graph per row and count they are asked for; and the KV
 * compaction hs_llama_accept records the first time a path moves rows. */
uint32_t hs_llama_graph_count(const hs_llama *m);

/* Records now, without running anything, every graph tree verification of up
 * to max_n rows can ask for: hs_llama_eval_tree's for each bucket of 1 ..
 * max_n rows, hs_llama_heads' for rows 1 .. max_n - 1 (each k) and hs_llama_accept's
 * KV compaction. Recording compiles the pipelines a new shape needs (on
 * lavapipe 50-200 ms per bucket), which a benchmark's warm-up wants done
 * before it times anything. */
hs_status hs_llama_prepare_tree(hs_llama *m, uint32_t max_n);

/* Records now the graphs of tree verification with every row's output head
 * (hs_llama_eval with last_only and commit false, which speculation runs
 * where the heads of a small tree cost less in its pass than on demand,
 * hs_tree_policy.eager) for each bucket of 1 .. max_n rows. */
hs_status hs_llama_prepare_tree_all(hs_llama *m, uint32_t max_n);

/* Number of dispatches of the last evaluated graph (for reports). */
uint32_t hs_llama_last_dispatches(const hs_llama *m);

/* How the model is bound on this device (for reports and tests): the most
 * row chunks of any weight (hs_weight_chunks) and the windows of one layer's
 * KV cache (hs_kv_split_plan); 1 each when everything fits one binding. */
typedef struct hs_llama_split {
    uint32_t weight_chunks;
    uint32_t kv_windows;
} hs_llama_split;
hs_llama_split hs_llama_split_info(const hs_llama *m);

#endif
