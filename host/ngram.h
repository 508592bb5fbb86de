/* ngram — a store of the target's own continuations: HeteroSpec's third
 * source of candidates, beside the draft head and the context lookup.
 *
 * Built (heterospec ngram-build) from token sequences the target generated
 * itself (its greedy answers to training prompts, the self-distillation
 * data of its head), the store keeps, for every context of 1 .. order tokens
 * that occurred at least min_count times, the token that followed it most
 * often, that count and the context's total. hs_ngram_chain drafts a chain
 * from it as a back-off n-gram model: each next token is the store's best
 * continuation of the longest context it knows among the last order tokens
 * (drafted ones included). It costs microseconds on the host, so on a device
 * where the head's drafting does not pay it proposes where the context has no
 * match (REST-style retrieval, from a table instead of a suffix array).
 * Exactness is the target's verification's: a wrong store only wastes work.
 *
 * File (little-endian): "HSNG", u32 version 1, u32 order, u32 min_count,
 * u32 n_vocab, u32 0, u64 vocab hash (hs_ngram_vocab_hash of the model it was
 * built for), u64 tokens it was built from, u64 n_entries, then n_entries
 * entries {u64 key, i32 token, u16 count, u16 total (saturating)} sorted by
 * key, the key of a context being FNV-1a 64 over its length and its ids
 * (hs_ngram_key). Loading checks the size, the order and every entry.
 *
 * Ownership: hs_ngram_free. Thread-safety: read-only after load/build.
 */
#ifndef HS_NGRAM_H
#define HS_NGRAM_H

#include <stdbool.h>
#include <stdint.h>

#include "gguf.h"
#include "hs_status.h"

#define HS_NGRAM_MAX_ORDER 8u
/* Confidence buckets of a drafted token (count / total of its context):
 * < 0.4, < 0.6, < 0.8, >= 0.8. */
#define HS_NGRAM_CONF 4u

typedef struct hs_ngram hs_ngram;

typedef struct hs_ngram_info {
    uint32_t order, min_count, n_vocab;
    uint64_t vocab_hash, n_tokens, n_entries;
} hs_ngram_info;

/* Builds the store from ids[0 .. n): sequences separated by negative ids (a
 * context never spans a separator). order 1 .. HS_NGRAM_MAX_ORDER, min_count
 * >= 1; every id must be below n_vocab. */
hs_status hs_ngram_build(const int32_t *ids, uint64_t n, uint32_t order, uint32_t min_count, uint32_t n_vocab,
                         uint64_t vocab_hash, hs_ngram **out);
hs_status hs_ngram_save(const hs_ngram *g, const char *path);
/* HS_ERR_IO for a missing file, HS_ERR_FORMAT naming what is wrong with a
 * corrupt or truncated one. */
hs_status hs_ngram_load(const char *path, hs_ngram **out);
/* The header alone (what hs_ngram_load checks before the entries): for
 * finding a store by its vocabulary without reading it. */
hs_status hs_ngram_read_info(const char *path, hs_ngram_info *out);
void hs_ngram_free(hs_ngram *g);
hs_ngram_info hs_ngram_get_info(const hs_ngram *g);

/* FNV-1a 64 over the model's tokenizer.ggml.tokens (each text and a 0
 * byte): two models share a store exactly when their vocabularies are the
 * same texts in the same order. */
hs_status hs_ngram_vocab_hash(const hs_gguf *model, uint64_t *out);
/* HS_ERR_INVALID_ARG naming the mismatch when g was built for another
 * vocabulary. */
hs_status hs_ngram_check(const hs_ngram *g, const hs_gguf *model);

uint64_t hs_ngram_key(const int32_t *ctx, uint32_t k);
/* The store's best continuation of ctx[0 .. k): true with *token, *count and
 * *total when the context is in the store. */
bool hs_ngram_next(const hs_ngram *g, const int32_t *ctx, uint32_t k, int32_t *token, uint32_t *count,
                   uint32_t *total);
/* A chain of up to max_len tokens after hist[0 .. n) (see above), with each
 * token's confidence bucket in conf (may be NULL); stops where no context
 * is known. Returns its length. */
uint32_t hs_ngram_chain(const hs_ngram *g, const int32_t *hist, uint32_t n, uint32_t max_len, int32_t *out,
                        uint8_t *conf);
uint8_t hs_ngram_conf_bucket(uint32_t count, uint32_t total);

#endif
