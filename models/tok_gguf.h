/* tok_gguf — creates the tokenizer (models/tokenizer.h) of a GGUF model file (models/gguf.h) from its
 * tokenizer.ggml.* metadata, read the way llama.cpp's llama_vocab::load reads it:
 *
 *   tokenizer.ggml.tokens      required; array of strings: the vocabulary texts, id = index
 *   tokenizer.ggml.model       required; string: "llama" (SPM) or "gpt2" (BPE)
 *   tokenizer.ggml.pre         string: the BPE pre-tokenizer (absent: "default")
 *   tokenizer.ggml.scores      array of f32/f64 or of integers, >= n_tokens entries: SPM merge scores
 *   tokenizer.ggml.token_type  array of integers (i32 range), >= n_tokens entries: hs_tok_type values
 *   tokenizer.ggml.merges      required for "gpt2"; array of strings "left right", rank = index
 *   tokenizer.ggml.bos_token_id, eos_token_id, unknown_token_id, padding_token_id
 *                              any integer type: special token ids
 *   tokenizer.ggml.add_bos_token, add_eos_token, add_space_prefix
 *                              bool (absent: the default of the model and pre-tokenizer)
 *
 * A missing required key or a key of another type gives HS_ERR_FORMAT with a message naming the file and the
 * key ("tokenizer.ggml.tokens missing: this GGUF has no tokenizer"); fewer scores or types than tokens too.
 * As in llama.cpp, a special token id outside the vocabulary (or negative) is ignored, so the id keeps its
 * default (SPM: BOS 1, EOS 2, unknown 0; otherwise none), and a text with a NUL byte ends at that byte.
 * Everything hs_tok_create checks (unsupported model or pre-tokenizer, malformed merges, ...) fails as there.
 *
 * Usage:
 *   hs_gguf *g;  HS_TRY(hs_gguf_open(path, &g));
 *   hs_tok *tok; HS_TRY(hs_tok_from_gguf(g, &tok));
 *   hs_gguf_close(g);          // the tokenizer keeps its own copy of everything
 *   ... hs_tok_encode(tok, ...) ...
 *   hs_tok_destroy(tok);
 *
 * Ownership: the tokenizer is the caller's (hs_tok_destroy); g is only read, and may be closed as soon as
 * hs_tok_from_gguf returns. On failure *out is NULL.
 *
 * Thread-safety: reads g only (several threads may build tokenizers from one hs_gguf at once); error messages
 * are per thread.
 */
#ifndef HS_TOK_GGUF_H
#define HS_TOK_GGUF_H

#include "gguf.h"
#include "hs_status.h"
#include "tokenizer.h"

hs_status hs_tok_from_gguf(const hs_gguf *g, hs_tok **out);

#endif
