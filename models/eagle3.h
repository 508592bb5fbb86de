/* eagle3 — the EAGLE-3 draft head (DESIGN.md section 5) as a graph of runtime
 * ops, next to its target (models/llama).
 *
 * Usage:
 *   hs_eagle3 *h;  HS_TRY(hs_eagle3_load(ops, head_gguf, target, &opt, &h));  // checks the fit
 *   // after the target evaluated (with taps on) and kept positions, feed them:
 *   HS_TRY(hs_eagle3_consume(h, tap_slots, next_tokens, n, &root));  // root: Top-K of the next token
 *   // draft a level of the tree: w new nodes, each a (parent slot, token)
 *   HS_TRY(hs_eagle3_draft(h, parent_slots, tokens, w, &topk));      // topk[i]: children of new node i
 *   hs_eagle3_destroy(h);
 *
 * ---- Positions, rows and slots ----
 * The head's row j pairs the target's taps at position j with the token at
 * position j + 1 and predicts the token at j + 2 (EAGLE's shifted input).
 * After the target keeps positions 0 .. n-1 and the bonus token x_n is known,
 * the head has consumed rows 0 .. n-1 (hs_eagle3_n_past() == n): consume
 * pairs the taps of each newly kept position with the token after it. Its
 * last row's prediction is the distribution of x_{n+1}: the root's children.
 *
 * Drafting: node slot 0 is the last consumed row (the root, token x_n);
 * hs_eagle3_draft appends nodes at slots 1, 2, ... in call order. A node at
 * depth d (slot s, d >= 1: a child of the root has d = 1) carries the token
 * x_{n+d}, takes its parent's head output as its hidden input, sits at
 * position n - 1 + d, writes its K/V at head cache row n + s - 1 (uncommitted,
 * past the consumed rows) and sees the consumed rows plus its ancestors'
 * rows and its own. Its Top-K is the distribution of x_{n+d+1}. Drafted rows
 * are never kept: the next consume (with the target's real taps) overwrites
 * them and hs_eagle3_reset_tree() forgets them; the head's committed cache
 * only ever holds rows computed from the target's taps, as in EAGLE.
 *
 * ---- Computation (per row) ----
 *   x   = fc(taps)              consume: taps [3 * target_dim] -> dim
 *         hidden(parent)        draft: the parent's layer output (below)
 *   e   = embed(token)          the target's token_embd (shared, as EAGLE-3)
 *   u   = [rmsnorm(e) * attn_norm, rmsnorm(x) * hidden_norm]     (2 dim)
 *         (computed as W u = W[:, :dim] rmsnorm(e).. + W[:, dim:] rmsnorm(x)..
 *         for W = the stacked Wq, Wk, Wv: two products with RMSNorm
 *         prologues, the second adding to the first; no u buffer)
 *   x  += Wo attention(rope(Wq u), rope(Wk u), Wv u)
 *   x  += Wdown swiglu(Wgate, Wup; rmsnorm(x) * ffn_norm)
 *   hidden = x                   (kept per slot: the input of its children)
 *   logits = Wout (rmsnorm(x) * output_norm)     over the draft vocabulary
 *   Top-K + entropy of softmax(logits) (hs_op_topk, temperature 1); draft id
 *   i maps to target id i + d2t[i]. Only the K ids, K probabilities, the tail
 *   mass and the entropy per node come back to the host.
 *
 * ---- Dispatches (DESIGN.md section 9: the count is the speed) ----
 *   consume (13): gather taps by slot; fc; embedding rows; Q/K/V embedding
 *     half; Q/K/V hidden half (+=); RoPE + KV write; attention; Wo (+= x);
 *     gate/up; down (+= x); last row -> hidden slot 0; output; Top-K
 *   cache-only consume (6): the consume's first six
 *   draft level (12): gather the parents' hidden rows; embedding rows; the
 *     same layer (7); the rows -> their hidden slots; output; Top-K
 * Past maxStorageBufferRange, a weight in row chunks adds one product per
 * extra chunk and the target's taps buffer one gather per extra window.
 * Each is one recorded sequence per capacity bucket (the next power of two of
 * n or w, at most max_batch or max_nodes), replayed with a small host-written
 * step buffer (tokens, positions, cache rows, slot lists, attention info and
 * mask); the bucket's extra rows are inert. A node's results are bitwise the
 * same whatever the level's width or bucket (batch-invariant kernels; the
 * attention sees the same rows in the same order), and a consume in chunks
 * gives bitwise what one consume gives.
 *
 * ---- Head file (GGUF, general.architecture = "eagle3") ----
 * keys (prefix "eagle3."): embedding_length (dim), feed_forward_length,
 *   attention.head_count, attention.layer_norm_rms_epsilon,
 *   rope.freq_base, context_length, vocab_size (the target's), draft_vocab_size,
 *   target_hidden_size, target_layers (int32 array of HS_LLAMA_TAPS layers);
 *   optional: attention.head_count_kv (default head_count),
 *   attention.key_length (head_dim; default dim / head_count; a multiple of 4,
 *   at most 256), target_name (the target GGUF's general.name, for finding a
 *   head automatically).
 * tensors: fc.weight [dim][3 target_hidden_size], blk.0.attn_norm.weight,
 *   blk.0.hidden_norm.weight, blk.0.attn_q.weight [q_dim][2 dim],
 *   blk.0.attn_k.weight, blk.0.attn_v.weight [kv_dim][2 dim],
 *   blk.0.attn_output.weight [dim][q_dim], blk.0.ffn_norm.weight,
 *   blk.0.ffn_gate.weight, blk.0.ffn_up.weight [ff][dim],
 *   blk.0.ffn_down.weight [dim][ff], output_norm.weight,
 *   output.weight [draft_vocab][dim], d2t (i32 [draft_vocab]; every
 *   i + d2t[i] inside the vocabulary; may be left out only when draft_vocab
 *   == vocab_size, meaning the identity).
 *   Norm vectors f32; matrices in any type hs_type_supported() takes, with
 *   attn_q, attn_k, attn_v of one type (stacked into one product, whose
 *   2 dim columns are split at dim: dim a multiple of the type's block) and
 *   ffn_gate, ffn_up of one type. A file that breaks any of this fails to
 *   load with HS_ERR_FORMAT (HS_ERR_UNSUPPORTED_TYPE for types) naming it.
 *   Q and K rows are in the checkpoint's (Hugging Face) order, not permuted
 *   as llama.cpp permutes a target's: the head rotates with HS_ROPE_NEOX
 *   (pairs i, i + head_dim/2; rotate_half), n_rot = head_dim.
 *   (Shapes as [rows][cols]; GGUF ne = {cols, rows}.)
 *
 * Ownership: the head borrows ops, gguf only during load, and the target for
 * its whole life (its token_embd weight and taps buffer). Thread-safety: one
 * thread, the same one as the target's.
 */
#ifndef HS_EAGLE3_H
#define HS_EAGLE3_H

#include "gguf.h"
#include "hs_ops.h"
#include "llama.h"
#include "op_select.h"

typedef struct hs_eagle3_config {
    uint32_t dim, n_head, n_kv_head, head_dim, ff, n_ctx_train;
    uint32_t n_vocab;       /* target vocabulary */
    uint32_t n_draft_vocab; /* rows of output.weight */
    uint32_t target_dim;    /* the taps are HS_LLAMA_TAPS * target_dim wide */
    uint32_t tap_layers[HS_LLAMA_TAPS];
    /* eagle3.train_row_length: the rows (positions) of the sequences the head
     * was trained on, prompt and answer together; 0 when the file does not
     * say (a converted checkpoint). Sets the head's default window over the
     * prompt (host/spec: hs_spec_head_window). */
    uint32_t n_rows_train;
    float eps, rope_base;
    char target_name[128]; /* "" when the file names none */
} hs_eagle3_config;

/* The head's matrices on the device. */
typedef enum hs_eagle3_weights {
    HS_EAGLE3_WEIGHTS_AUTO = 0, /* q4_1 where the device's tuning computes with 8-bit activations
                                   (q8), else as stored */
    HS_EAGLE3_WEIGHTS_FILE,     /* as stored in the file */
    HS_EAGLE3_WEIGHTS_Q4_1,     /* f32 / f16 / q8_0 matrices quantized to q4_1 at load (ggml's
                                   reference rounding), products on 8-bit activations where the
                                   tuning allows: a cheaper draft, not the file's exact one */
} hs_eagle3_weights;

typedef struct hs_eagle3_options {
    uint32_t n_ctx;     /* head cache rows; 0: the target's n_ctx */
    uint32_t max_batch; /* most rows of one consume; 0: the target's max_batch */
    uint32_t max_nodes; /* most drafted slots per tree (slot 0 excluded), also the
                           width of the attention mask of a level; 0: 128 */
    uint32_t top_k;     /* K of the Top-K per node, <= HS_TOPK_MAX_K and <= the
                           draft vocabulary; 0: 10 */
    hs_eagle3_weights weights;
} hs_eagle3_options;

typedef struct hs_eagle3 hs_eagle3;

/* Reads a head file's configuration without loading it. HS_ERR_FORMAT for a
 * file that is not an eagle3 head, naming what is missing. */
hs_status hs_eagle3_config_read(const hs_gguf *g, hs_eagle3_config *c);

/* The head's sizes against a target's configuration, before loading either:
 * HS_ERR_INVALID_ARG naming every mismatch (hidden size, dim, vocabulary, a
 * tap layer past the target's layers). */
hs_status hs_eagle3_check_config(const hs_eagle3_config *c, const hs_llama_config *t);

/* HS_ERR_INVALID_ARG naming every mismatch (hidden size, dim, vocabulary,
 * taps off, tap layers; the target must have been loaded with taps at the
 * head's layers: hs_llama_options.taps, and custom_taps unless they are
 * EAGLE-3's 2, L/2, L-3). */
hs_status hs_eagle3_check_target(const hs_eagle3_config *c, const hs_llama *target);

/* Reads the configuration, checks the fit (hs_eagle3_check_target), uploads
 * the weights and allocates the cache. opt may be NULL (all defaults). On
 * failure *out is NULL and nothing is left alive. */
hs_status hs_eagle3_load(hs_ops *ops, const hs_gguf *g, hs_llama *target, const hs_eagle3_options *opt,
                         hs_eagle3 **out);
void hs_eagle3_destroy(hs_eagle3 *h);
const hs_eagle3_config *hs_eagle3_cfg(const hs_eagle3 *h);
uint32_t hs_eagle3_top_k(const hs_eagle3 *h);
uint32_t hs_eagle3_n_past(const hs_eagle3 *h);
/* Forgets everything (n_past = 0, no tree). */
void hs_eagle3_reset(hs_eagle3 *h);
/* Forgets the drafted nodes (the next draft starts at slot 1 again). */
void hs_eagle3_reset_tree(hs_eagle3 *h);

/* Consumes n rows at n_past .. n_past + n - 1: row i pairs the target's taps
 * at slot tap_slots[i] of the target's last eval (hs_llama_taps: the row of
 * that eval, e.g. an accepted node's index in the verified tree; below the
 * target's max_batch) with the token next_tokens[i]. Call it before the
 * target's next eval overwrites the taps. Commits the rows (n_past += n),
 * drops any drafted nodes, makes the last row slot 0 and returns its Top-K
 * (*root, target ids, valid until the next call; root may be NULL).
 * n <= max_batch; HS_ERR_OUT_OF_RANGE when the head's cache is full. On an
 * error nothing changes. */
hs_status hs_eagle3_consume(hs_eagle3 *h, const uint32_t *tap_slots, const int32_t *next_tokens, uint32_t n,
                            const hs_topk_result **root);

/* Commits n rows exactly as hs_eagle3_consume does (the same K/V cache rows,
 * bitwise), but computes only what the cache needs: the rows' K and V, not
 * the rest of the layer, the output or the Top-K (6 of the consume's 13
 * ops; about a fifth of its arithmetic). For rounds that will not
 * draft: drafting needs a full consume first (hs_eagle3_draft refuses
 * until then). Same arguments and errors as hs_eagle3_consume. */
hs_status hs_eagle3_consume_cache(hs_eagle3 *h, const uint32_t *tap_slots, const int32_t *next_tokens,
                                  uint32_t n);

/* Drafts one tree level: w new nodes at the next free slots; node i has the
 * parent slot parent_slots[i] (an existing slot: 0 .. hs_eagle3_n_slots(),
 * not one of this call's) and the target token tokens[i]. One recorded
 * sequence (per capacity bucket of w). *topk receives w results (target
 * ids), valid until the next call. Needs a consumed root (n_past >= 1), room
 * for w more slots under max_nodes and in the head's cache
 * (n_past + n_slots + w <= n_ctx, HS_ERR_OUT_OF_RANGE otherwise). */
hs_status hs_eagle3_draft(hs_eagle3 *h, const uint32_t *parent_slots, const int32_t *tokens, uint32_t w,
                          const hs_topk_result **topk);

/* Records now, without running anything, the graphs of consumes (full and
 * cache-only) of 1 .. max_rows rows and of draft levels of 1 .. max_width
 * nodes (each capacity bucket once; limited to max_batch and max_nodes):
 * recording compiles the pipelines a new shape needs, which a benchmark's
 * warm-up wants done before it times anything. */
hs_status hs_eagle3_prepare(hs_eagle3 *h, uint32_t max_rows, uint32_t max_width);

/* Slots drafted so far (excluding slot 0). */
uint32_t hs_eagle3_n_slots(const hs_eagle3 *h);
uint32_t hs_eagle3_max_nodes(const hs_eagle3 *h);
/* Dispatches of the last consume or draft (for reports). */
uint32_t hs_eagle3_last_dispatches(const hs_eagle3 *h);
/* Bytes of the head's own weights on the device (token_embd is the target's). */
uint64_t hs_eagle3_weight_bytes(const hs_eagle3 *h);

/* Whether the head's matrices were quantized to q4_1 at load (hs_eagle3_options.weights). */
bool hs_eagle3_quantized(const hs_eagle3 *h);
/* Graphs recorded so far (one per kind and capacity bucket). */
uint32_t hs_eagle3_graph_count(const hs_eagle3 *h);

#endif
