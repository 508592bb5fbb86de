/* hs_quant: GGUF block formats, ggml-exact dequantization, reference
 * quantizers and the device-layout packing (see hs_quant.h). */
#include "hs_quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

/* ---- f16 ---- */

float hs_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1Fu, mant = h & 0x3FFu, x;
    if (exp == 0) {
        if (mant == 0) {
            x = sign;
        } else { /* subnormal: normalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400u)) {
                mant <<= 1;
                exp--;
            }
            x = sign | (exp << 23) | ((mant & 0x3FFu) << 13);
        }
    } else if (exp == 31) {
        x = sign | 0x7F800000u | (mant << 13);
    } else {
        x = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &x, 4);
    return f;
}

uint16_t hs_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t fexp = (x >> 23) & 0xFFu, mant = x & 0x7FFFFFu;
    if (fexp == 0xFF) return (uint16_t)(sign | 0x7C00u | (mant ? 0x200u | (mant >> 13) : 0));
    int32_t exp = (int32_t)fexp - 127 + 15;
    if (exp >= 31) return (uint16_t)(sign | 0x7C00u);
    if (exp <= 0) { /* subnormal half (or zero) */
        if (exp < -10) return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - exp);
        uint32_t h = mant >> shift, rem = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
        if (rem > half || (rem == half && (h & 1u))) h++;
        return (uint16_t)(sign | h);
    }
    uint32_t h = sign | ((uint32_t)exp << 10) | (mant >> 13), rem = mant & 0x1FFFu;
    if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) h++; /* may carry into inf: correct */
    return (uint16_t)h;
}

/* ---- per-element quants of the super-block formats ---- */

/* ggml's get_scale_min_k4: 6-bit scale and min of sub-block j (0..7). */
static void q4k_scale_min(const uint8_t *q, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *sc = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* The 4-bit quant of element e (0..255) of a q4_K block. */
static uint32_t q4k_q(const hs_block_q4_K *b, int e) {
    int c = e / 64, l = e % 64;
    return l < 32 ? b->qs[32 * c + l] & 0xFu : (uint32_t)(b->qs[32 * c + l - 32] >> 4);
}

/* The 6-bit quant (0..63, before the -32) of element e of a q6_K block. */
static uint32_t q6k_q(const hs_block_q6_K *b, int e) {
    int h = e / 128, l = e % 128, t = l / 32, l32 = l % 32;
    uint32_t ql = b->ql[64 * h + 32 * (t & 1) + l32];
    uint32_t lo = t < 2 ? ql & 0xFu : ql >> 4;
    uint32_t hi = (b->qh[32 * h + l32] >> (2 * t)) & 3u;
    return lo | hi << 4;
}

/* ---- dequantization ---- */

/* Blocks in a row of n elements of type; fails for an unsupported type or a
 * partial block. fn names the caller in the message. */
static hs_status row_blocks(const char *fn, hs_type type, uint64_t n, uint64_t *nb) {
    if (!hs_type_supported(type))
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "%s: unsupported type %u", fn, (unsigned)type);
    uint32_t be = hs_type_block_elems(type);
    if (n % be)
        return HS_FAIL(HS_ERR_INVALID_ARG, "%s: %llu elements is not a multiple of the %s block (%u)", fn,
                       (unsigned long long)n, hs_type_name(type), be);
    *nb = n / be;
    return HS_OK;
}

hs_status hs_dequantize_row(hs_type type, const void *src, float *dst, uint64_t n) {
    uint64_t nb = 0;
    hs_status st = row_blocks("hs_dequantize_row", type, n, &nb);
    if (st != HS_OK) return st;
    switch (type) {
    case HS_TYPE_F32: memcpy(dst, src, n * 4); break;
    case HS_TYPE_F16: {
        const uint16_t *h = src;
        for (uint64_t i = 0; i < n; i++) dst[i] = hs_f16_to_f32(h[i]);
        break;
    }
    case HS_TYPE_Q4_0: {
        const hs_block_q4_0 *b = src;
        for (uint64_t i = 0; i < nb; i++) {
            const float d = hs_f16_to_f32(b[i].d);
            for (int j = 0; j < 16; j++) {
                dst[i * 32 + j] = (float)((b[i].qs[j] & 0x0F) - 8) * d;
                dst[i * 32 + j + 16] = (float)((b[i].qs[j] >> 4) - 8) * d;
            }
        }
        break;
    }
    case HS_TYPE_Q4_1: {
        const hs_block_q4_1 *b = src;
        for (uint64_t i = 0; i < nb; i++) {
            const float d = hs_f16_to_f32(b[i].d), m = hs_f16_to_f32(b[i].m);
            for (int j = 0; j < 16; j++) {
                /* q * d is exact (4 x 11 bits): one rounding, fused or not */
                dst[i * 32 + j] = (float)(b[i].qs[j] & 0x0F) * d + m;
                dst[i * 32 + j + 16] = (float)(b[i].qs[j] >> 4) * d + m;
            }
        }
        break;
    }
    case HS_TYPE_Q8_0: {
        const hs_block_q8_0 *b = src;
        for (uint64_t i = 0; i < nb; i++) {
            const float d = hs_f16_to_f32(b[i].d);
            for (int j = 0; j < 32; j++) dst[i * 32 + j] = (float)b[i].qs[j] * d;
        }
        break;
    }
    case HS_TYPE_Q4_K: {
        const hs_block_q4_K *b = src;
        for (uint64_t i = 0; i < nb; i++) {
            const float d = hs_f16_to_f32(b[i].d), dmin = hs_f16_to_f32(b[i].dmin);
            for (int s = 0; s < 8; s++) {
                uint8_t sc, m;
                q4k_scale_min(b[i].scales, s, &sc, &m);
                const float d1 = d * (float)sc, m1 = dmin * (float)m; /* exact */
                for (int l = 0; l < 32; l++) dst[i * 256 + 32 * s + l] = d1 * (float)q4k_q(&b[i], 32 * s + l) - m1;
            }
        }
        break;
    }
    case HS_TYPE_Q6_K: {
        const hs_block_q6_K *b = src;
        for (uint64_t i = 0; i < nb; i++) {
            const float d = hs_f16_to_f32(b[i].d);
            for (int e = 0; e < 256; e++) {
                /* ggml: d * sc[is] * q, left to right; d * sc is exact */
                const float ds = d * (float)b[i].scales[e / 16];
                dst[i * 256 + e] = ds * (float)((int)q6k_q(&b[i], e) - 32);
            }
        }
        break;
    }
    }
    return HS_OK;
}

/* ---- reference quantizers (ggml's quantize_row_*_ref) ---- */

hs_status hs_quantize_row(hs_type type, const float *src, void *dst, uint64_t n) {
    uint64_t nb = 0;
    hs_status st = row_blocks("hs_quantize_row", type, n, &nb);
    if (st != HS_OK) return st;
    switch (type) {
    case HS_TYPE_F32: memcpy(dst, src, n * 4); break;
    case HS_TYPE_F16: {
        uint16_t *h = dst;
        for (uint64_t i = 0; i < n; i++) h[i] = hs_f32_to_f16(src[i]);
        break;
    }
    case HS_TYPE_Q4_0: {
        hs_block_q4_0 *b = dst;
        for (uint64_t i = 0; i < nb; i++) {
            const float *x = src + i * 32;
            float amax = 0.0f, max = 0.0f;
            for (int j = 0; j < 32; j++) {
                if (amax < fabsf(x[j])) {
                    amax = fabsf(x[j]);
                    max = x[j];
                }
            }
            const float d = max / -8, id = d ? 1.0f / d : 0.0f;
            b[i].d = hs_f32_to_f16(d);
            for (int j = 0; j < 16; j++) {
                int q0 = (int8_t)(x[j] * id + 8.5f), q1 = (int8_t)(x[j + 16] * id + 8.5f);
                q0 = q0 < 15 ? q0 : 15;
                q1 = q1 < 15 ? q1 : 15;
                b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
            }
        }
        break;
    }
    case HS_TYPE_Q4_1: {
        hs_block_q4_1 *b = dst;
        for (uint64_t i = 0; i < nb; i++) {
            const float *x = src + i * 32;
            float min = FLT_MAX, max = -FLT_MAX;
            for (int j = 0; j < 32; j++) {
                if (x[j] < min) min = x[j];
                if (x[j] > max) max = x[j];
            }
            const float d = (max - min) / 15, id = d ? 1.0f / d : 0.0f;
            b[i].d = hs_f32_to_f16(d);
            b[i].m = hs_f32_to_f16(min);
            for (int j = 0; j < 16; j++) {
                int q0 = (int8_t)((x[j] - min) * id + 0.5f), q1 = (int8_t)((x[j + 16] - min) * id + 0.5f);
                q0 = q0 < 15 ? q0 : 15;
                q1 = q1 < 15 ? q1 : 15;
                b[i].qs[j] = (uint8_t)(q0 | q1 << 4);
            }
        }
        break;
    }
    case HS_TYPE_Q8_0: {
        hs_block_q8_0 *b = dst;
        for (uint64_t i = 0; i < nb; i++) {
            const float *x = src + i * 32;
            float amax = 0.0f;
            for (int j = 0; j < 32; j++) amax = fabsf(x[j]) > amax ? fabsf(x[j]) : amax;
            const float d = amax / 127, id = d ? 1.0f / d : 0.0f;
            b[i].d = hs_f32_to_f16(d);
            for (int j = 0; j < 32; j++) b[i].qs[j] = (int8_t)roundf(x[j] * id);
        }
        break;
    }
    case HS_TYPE_Q4_K:
    case HS_TYPE_Q6_K:
        return HS_FAIL(HS_ERR_UNSUPPORTED_TYPE, "hs_quantize_row: no quantizer for %s", hs_type_name(type));
    }
    return HS_OK;
}

/* ---- device layout ---- */

hs_quant_layout hs_quant_device_layout(hs_type type) {
    switch (type) {
    case HS_TYPE_F32: return (hs_quant_layout){32, 8, 0};
    case HS_TYPE_F16: return (hs_quant_layout){32, 4, 0};
    case HS_TYPE_Q8_0: return (hs_quant_layout){64, 4, 1};
    case HS_TYPE_Q4_0: return (hs_quant_layout){64, 2, 1};
    case HS_TYPE_Q4_1: return (hs_quant_layout){32, 1, 1};
    case HS_TYPE_Q4_K: return (hs_quant_layout){256, 9, 1};
    case HS_TYPE_Q6_K: return (hs_quant_layout){256, 13, 1};
    }
    return (hs_quant_layout){0, 0, 0};
}

uint32_t hs_quant_device_blocks(hs_type type, uint32_t cols) {
    uint32_t qk = hs_quant_device_layout(type).qk;
    return (cols + qk - 1) / qk;
}

uint64_t hs_quant_group_q_bytes(hs_type type, uint32_t cols, uint32_t g) {
    return (uint64_t)hs_quant_device_blocks(type, cols) * hs_quant_device_layout(type).qp * g * 16;
}

uint64_t hs_quant_group_s_bytes(hs_type type, uint32_t cols, uint32_t g) {
    return (uint64_t)hs_quant_device_blocks(type, cols) * hs_quant_device_layout(type).qs * g * 4;
}

/* Packs 32 4-bit quants (q[e], e = 0..31) into a plane: word m, nibble t =
 * element 8 m + t. */
static void pack_nibbles(const uint8_t *q, uint32_t *plane) {
    for (int m = 0; m < 4; m++) {
        uint32_t w = 0;
        for (int t = 0; t < 8; t++) w |= (uint32_t)(q[8 * m + t] & 0xF) << (4 * t);
        plane[m] = w;
    }
}

void hs_quant_pack_row(hs_type type, const void *row, uint32_t cols, uint32_t g, uint32_t i, uint32_t *q,
                       uint32_t *s) {
    const hs_quant_layout L = hs_quant_device_layout(type);
    const uint32_t nblk = hs_quant_device_blocks(type, cols);
    /* word offset of (block, plane) for this row, and of the S word */
#define QW(blk, plane) (q + 4 * ((((size_t)(blk)) * L.qp + (plane)) * g + i))
#define SW(blk) (s + ((size_t)(blk)) * g + i)
    uint8_t qq[256];
    switch (type) {
    case HS_TYPE_F32: {
        const uint32_t *x = row;
        for (uint32_t e = 0; e < cols; e++) QW(e / 32, (e % 32) / 4)[e % 4] = x[e];
        break;
    }
    case HS_TYPE_F16: {
        const uint16_t *x = row;
        for (uint32_t e = 0; e < cols; e++) QW(e / 32, (e % 32) / 8)[(e % 8) / 2] |= (uint32_t)x[e] << (16 * (e % 2));
        break;
    }
    case HS_TYPE_Q8_0: {
        const hs_block_q8_0 *b = row;
        for (uint32_t gb = 0; gb < cols / 32; gb++) {
            uint32_t blk = gb / 2, h = gb % 2;
            memcpy(QW(blk, 2 * h), b[gb].qs, 16);
            memcpy(QW(blk, 2 * h + 1), b[gb].qs + 16, 16);
            *SW(blk) |= (uint32_t)b[gb].d << (16 * h);
        }
        (void)nblk;
        break;
    }
    case HS_TYPE_Q4_0:
    case HS_TYPE_Q4_1: {
        const uint32_t bytes = hs_type_block_bytes(type);
        for (uint32_t gb = 0; gb < cols / 32; gb++) {
            const uint8_t *blk = (const uint8_t *)row + (size_t)gb * bytes;
            const uint8_t *qs = blk + bytes - 16;
            for (int j = 0; j < 16; j++) {
                qq[j] = qs[j] & 0xF;
                qq[j + 16] = qs[j] >> 4;
            }
            uint16_t d, m = 0;
            memcpy(&d, blk, 2);
            if (type == HS_TYPE_Q4_1) {
                memcpy(&m, blk + 2, 2);
                pack_nibbles(qq, QW(gb, 0));
                *SW(gb) = d | (uint32_t)m << 16;
            } else {
                pack_nibbles(qq, QW(gb / 2, gb % 2));
                *SW(gb / 2) |= (uint32_t)d << (16 * (gb % 2));
            }
        }
        break;
    }
    case HS_TYPE_Q4_K: {
        const hs_block_q4_K *b = row;
        for (uint32_t blk = 0; blk < nblk; blk++) {
            for (int e = 0; e < 256; e++) qq[e] = (uint8_t)q4k_q(&b[blk], e);
            for (int sb = 0; sb < 8; sb++) pack_nibbles(qq + 32 * sb, QW(blk, sb));
            uint8_t sm[16];
            for (int sb = 0; sb < 8; sb++) q4k_scale_min(b[blk].scales, sb, &sm[sb], &sm[8 + sb]);
            memcpy(QW(blk, 8), sm, 16);
            *SW(blk) = b[blk].d | (uint32_t)b[blk].dmin << 16;
        }
        break;
    }
    case HS_TYPE_Q6_K: {
        const hs_block_q6_K *b = row;
        for (uint32_t blk = 0; blk < nblk; blk++) {
            for (int e = 0; e < 256; e++) qq[e] = (uint8_t)q6k_q(&b[blk], e);
            uint8_t lo[256];
            for (int e = 0; e < 256; e++) lo[e] = qq[e] & 0xF;
            for (int sb = 0; sb < 8; sb++) pack_nibbles(lo + 32 * sb, QW(blk, sb));
            for (int sb = 0; sb < 8; sb++) {
                uint32_t *hw = QW(blk, 8 + sb / 2) + 2 * (sb % 2);
                for (int e = 0; e < 32; e++) hw[e / 16] |= (uint32_t)(qq[32 * sb + e] >> 4) << (2 * (e % 16));
            }
            memcpy(QW(blk, 12), b[blk].scales, 16);
            *SW(blk) = b[blk].d;
        }
        break;
    }
    }
#undef QW
#undef SW
}
