/* hs_quant — weight formats on the host: ggml's GGUF block layouts, f16
 * conversion, dequantization exactly as ggml does it, simple round-to-nearest
 * quantizers (for tests and tools), and the repacking of GGUF rows into the
 * device layout the matmul and get_rows shaders read (shaders/quant.glsl).
 *
 * Usage:
 *   float row[4096];
 *   hs_dequantize_row(HS_TYPE_Q4_1, gguf_row_bytes, row, 4096);   // reference values
 *   hs_quantize_row(HS_TYPE_Q8_0, row, buf, 4096);                 // tests
 *
 * Exactness: hs_dequantize_row gives bitwise the floats of ggml's
 * dequantize_row_* (every product there that could round is computed in the
 * same order here), and the device layout only moves bits, so the shaders use
 * exactly these weights. Ownership: callers own every buffer. Thread-safety:
 * all functions are pure.
 */
#ifndef HS_QUANT_H
#define HS_QUANT_H

#include <assert.h>
#include <stdint.h>

#include "hs_ops.h"

/* ---- GGUF blocks (ggml's layouts; f16 values are IEEE binary16 bits) ---- */
#define HS_QK4_0 32
#define HS_QK4_1 32
#define HS_QK8_0 32
#define HS_QK_K 256

typedef struct hs_block_q4_0 {
    uint16_t d;      /* scale */
    uint8_t qs[16];  /* element j: low nibble of qs[j]; element j + 16: high nibble */
} hs_block_q4_0;     /* w = (q - 8) * d */

typedef struct hs_block_q4_1 {
    uint16_t d, m;   /* scale, minimum */
    uint8_t qs[16];  /* nibbles as q4_0 */
} hs_block_q4_1;     /* w = q * d + m */

typedef struct hs_block_q8_0 {
    uint16_t d;
    int8_t qs[32];
} hs_block_q8_0;     /* w = q * d */

typedef struct hs_block_q4_K {
    uint16_t d, dmin;    /* super-block scales of the 6-bit scales and mins */
    uint8_t scales[12];  /* 8 x (6-bit scale, 6-bit min), packed (ggml's get_scale_min_k4) */
    uint8_t qs[128];     /* 64-element chunk c: low nibbles = elements 0..31, high = 32..63 */
} hs_block_q4_K;         /* w = (d * sc) * q - dmin * m, per 32-element sub-block */

typedef struct hs_block_q6_K {
    uint8_t ql[128];     /* low 4 bits */
    uint8_t qh[64];      /* high 2 bits */
    int8_t scales[16];   /* one per 16 elements */
    uint16_t d;
} hs_block_q6_K;         /* w = (d * sc) * (q - 32) */

static_assert(sizeof(hs_block_q4_0) == 18, "q4_0 block is 18 bytes");
static_assert(sizeof(hs_block_q4_1) == 20, "q4_1 block is 20 bytes");
static_assert(sizeof(hs_block_q8_0) == 34, "q8_0 block is 34 bytes");
static_assert(sizeof(hs_block_q4_K) == 144, "q4_K block is 144 bytes");
static_assert(sizeof(hs_block_q6_K) == 210, "q6_K block is 210 bytes");

/* IEEE binary16 <-> f32. hs_f16_to_f32 is exact (subnormals, inf, NaN);
 * hs_f32_to_f16 rounds to nearest even (as ggml's conversion). */
float hs_f16_to_f32(uint16_t h);
uint16_t hs_f32_to_f16(float f);

/* Dequantizes n elements (a multiple of the type's block) of one GGUF row.
 * HS_ERR_INVALID_ARG for a bad n, HS_ERR_UNSUPPORTED_TYPE for other types. */
hs_status hs_dequantize_row(hs_type type, const void *src, float *dst, uint64_t n);

/* Quantizes n elements into GGUF blocks as ggml's reference quantizers do
 * (quantize_row_*_ref): f32, f16, q8_0, q4_0, q4_1. Other types:
 * HS_ERR_UNSUPPORTED_TYPE. */
hs_status hs_quantize_row(hs_type type, const float *src, void *dst, uint64_t n);

/* ---- device layout (see shaders/quant.glsl for the plane contents) ----
 * Rows are stored in groups of g rows; a row is cut into device blocks of qk
 * elements (the last one zero-padded when cols is not a multiple of qk). Per
 * group, per block, per plane: g uvec4 (one per row); per group, per block: g
 * uint scale words when qs = 1. Element offsets in 32-bit words:
 *   Q word of (group, block, plane, row i) = 4 * (((group * nblk + block) * qp + plane) * g + i)
 *   S word of (group, block, row i)        = (group * nblk + block) * g + i */
typedef struct hs_quant_layout {
    uint32_t qk; /* elements per device block */
    uint32_t qp; /* uvec4 planes per block and row */
    uint32_t qs; /* uint scale words per block and row (0 or 1) */
} hs_quant_layout;

hs_quant_layout hs_quant_device_layout(hs_type type);
/* Device blocks per row of cols elements: ceil(cols / qk). */
uint32_t hs_quant_device_blocks(hs_type type, uint32_t cols);
/* Bytes of one row group in the device layout (Q and S parts). */
uint64_t hs_quant_group_q_bytes(hs_type type, uint32_t cols, uint32_t g);
uint64_t hs_quant_group_s_bytes(hs_type type, uint32_t cols, uint32_t g);

/* Writes one GGUF row (cols elements) as row i of a group whose Q part starts
 * at q and S part at s (s unused when qs = 0). The group must be zeroed
 * beforehand for the padding to be zero. */
void hs_quant_pack_row(hs_type type, const void *row, uint32_t cols, uint32_t g, uint32_t i, uint32_t *q,
                       uint32_t *s);

#endif
