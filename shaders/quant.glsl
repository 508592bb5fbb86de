/* quant.glsl — the device layout of weights (runtime/hs_quant.h, "device
 * layout") and the dequantization of one group of 8 weights for each type.
 *
 * A weight is stored per row group of G rows (G = lanes x rows per lane of the
 * matmul workgroup) and, inside a group, per device block of QK elements of a
 * row:
 *   Q (uvec4): Q[((group * nblk + block) * QP + plane) * G + row_in_group]
 *   S (uint):  S[(group * nblk + block) * G + row_in_group]        (QS = 1)
 * so the G rows of a group read neighbouring 16-byte words for the same plane.
 *
 *   type  QK  QP  planes                                      S word
 *   f32   32   8  p: elements 4p..4p+3 (float bits)            -
 *   f16   32   4  p: elements 8p..8p+7 (half pairs, low first) -
 *   q8_0  64   4  p: int8 of elements 16p..16p+15 (byte order) d0 | d1 << 16
 *   q4_0  64   2  p: 4-bit q of elements 32p..32p+31 (*)       d0 | d1 << 16
 *   q4_1  32   1  0: 4-bit q of elements 0..31 (*)             d | m << 16
 *   q4_K 256   9  0..7: 4-bit q of sub-block s (*);            d | dmin << 16
 *                 8: 6-bit scales (bytes 0..7) and mins (8..15) of the 8 sub-blocks
 *   q6_K 256  13  0..7: low 4 bits of sub-block s (*);         d
 *                 8..11: high 2 bits, sub-blocks 2i and 2i+1 in words xy and zw
 *                   (word t of a sub-block: bits 2u..2u+1 = element 16t + u);
 *                 12: the 16 int8 scales (one per 16 elements)
 * (*) word m, bits 4t..4t+3 hold element 8m + t of the 32-element sub-block.
 * Every value (f16 scales, 4/6/8-bit quants, 6-bit K scales) is ggml's, only
 * moved: the dequantized weights are bitwise those of ggml's dequantize_row_*.
 *
 * Before including, define TYPE (ggml type id) and, for the texel-buffer
 * variant, USE_TEXEL 1. Provides QK, QP, QS, QSUB (32-element sub-blocks per
 * block), the weight bindings (0: Q, 1: S) with their loads QV(i) (uvec4 i of
 * Q) and SV(i) (word i of S), and the helpers below.
 *
 * USE_TEXEL binds Q and S as uniform texel buffers of RGBA32UI (S as its
 * words in groups of four): on llvmpipe a texel fetch is one vector gather,
 * where a storage-buffer load is a loop over the lanes with a branch per
 * component, several times slower (bench-ops, "device memory read"). The
 * loaded bits are the same, so are the results.
 */
#ifndef HS_QUANT_GLSL
#define HS_QUANT_GLSL

#define HS_T_F32 0
#define HS_T_F16 1
#define HS_T_Q4_0 2
#define HS_T_Q4_1 3
#define HS_T_Q8_0 8
#define HS_T_Q4_K 12
#define HS_T_Q6_K 14

#if TYPE == HS_T_F32
#define QK 32
#define QP 8
#define QS 0
#elif TYPE == HS_T_F16
#define QK 32
#define QP 4
#define QS 0
#elif TYPE == HS_T_Q8_0
#define QK 64
#define QP 4
#define QS 1
#elif TYPE == HS_T_Q4_0
#define QK 64
#define QP 2
#define QS 1
#elif TYPE == HS_T_Q4_1
#define QK 32
#define QP 1
#define QS 1
#elif TYPE == HS_T_Q4_K
#define QK 256
#define QP 9
#define QS 1
#elif TYPE == HS_T_Q6_K
#define QK 256
#define QP 13
#define QS 1
#else
#error "unknown TYPE"
#endif
#define QSUB (QK / 32)

#ifndef USE_TEXEL
#define USE_TEXEL 0
#endif
#if USE_TEXEL
layout(binding = 0) uniform usamplerBuffer QT;
layout(binding = 1) uniform usamplerBuffer ST;
#define QV(i) texelFetch(QT, int(i))
#define SV(i) (texelFetch(ST, int((i) >> 2u))[(i)&3u])
#else
layout(std430, binding = 0) readonly buffer WQ { uvec4 Q[]; };
layout(std430, binding = 1) readonly buffer WS { uint S[]; };
#define QV(i) Q[i]
#define SV(i) S[i]
#endif

/* Unsigned nibble t (0..7) of a word, as float (exact). */
float hs_nib(uint w, uint t) { return float((w >> (4u * t)) & 15u); }

/* Signed byte t (0..3) of a word, as float (exact). */
float hs_i8(uint w, uint t) { return float(bitfieldExtract(int(w), int(8u * t), 8)); }

/* Unsigned byte t (0..3) of a word. */
uint hs_u8(uint w, uint t) { return (w >> (8u * t)) & 255u; }

/* ---- per-type dequantization, as macros (no loop is needed around them) ----
 * They expect in scope: buffers Q (uvec4[]) and S (uint[]); the constants G
 * (rows per group) and RW (rows handled); uint qb (Q index of plane 0, row 0
 * of the current block), uint sbk (S index of row 0 of the block), uint
 * ring[RW] (row in group of each handled row) and uint sub (sub-block).
 * HS_LOAD_BLOCK:  per row r, what a whole block shares (scale words).
 * HS_LOAD_SUB(s): per row r, the quants and scales of sub-block s.
 * HS_DEQ8(r, GI): float w[0..7] = the weights of elements 8 GI .. 8 GI + 7 of
 *   the sub-block of row r, bitwise as ggml's dequantize_row_* gives them. */
#if TYPE == HS_T_F32
#define HS_LOAD_BLOCK
#define HS_LOAD_SUB(s)
#define HS_DEQ8(r, GI)                                                                             \
    {                                                                                              \
        const uvec4 u0 = QV(qb + (8u * sub + 2u * GI) * G + ring[r]);                                 \
        const uvec4 u1 = QV(qb + (8u * sub + 2u * GI + 1u) * G + ring[r]);                            \
        w[0] = uintBitsToFloat(u0.x);                                                              \
        w[1] = uintBitsToFloat(u0.y);                                                              \
        w[2] = uintBitsToFloat(u0.z);                                                              \
        w[3] = uintBitsToFloat(u0.w);                                                              \
        w[4] = uintBitsToFloat(u1.x);                                                              \
        w[5] = uintBitsToFloat(u1.y);                                                              \
        w[6] = uintBitsToFloat(u1.z);                                                              \
        w[7] = uintBitsToFloat(u1.w);                                                              \
    }
#elif TYPE == HS_T_F16
#define HS_LOAD_BLOCK
#define HS_LOAD_SUB(s)
#define HS_DEQ8(r, GI)                                                                             \
    {                                                                                              \
        const uvec4 u0 = QV(qb + (4u * sub + GI) * G + ring[r]);                                      \
        const vec2 h0 = unpackHalf2x16(u0.x), h1 = unpackHalf2x16(u0.y);                           \
        const vec2 h2 = unpackHalf2x16(u0.z), h3 = unpackHalf2x16(u0.w);                           \
        w[0] = h0.x;                                                                               \
        w[1] = h0.y;                                                                               \
        w[2] = h1.x;                                                                               \
        w[3] = h1.y;                                                                               \
        w[4] = h2.x;                                                                               \
        w[5] = h2.y;                                                                               \
        w[6] = h3.x;                                                                               \
        w[7] = h3.y;                                                                               \
    }
#elif TYPE == HS_T_Q8_0
#define HS_LOAD_BLOCK                                                                              \
    uint sw[RW];                                                                                   \
    for (uint r = 0; r < RW; r++) sw[r] = SV(sbk + ring[r]);
#define HS_LOAD_SUB(s)                                                                             \
    uvec4 qd[RW], qe[RW];                                                                          \
    float sa[RW];                                                                                  \
    for (uint r = 0; r < RW; r++) {                                                                \
        qd[r] = QV(qb + (2u * s) * G + ring[r]);                                                    \
        qe[r] = QV(qb + (2u * s + 1u) * G + ring[r]);                                               \
        sa[r] = unpackHalf2x16(sw[r])[s];                                                          \
    }
#define HS_DEQ8(r, GI)                                                                             \
    {                                                                                              \
        const uvec2 u = GI < 2u ? (GI == 0u ? qd[r].xy : qd[r].zw) : (GI == 2u ? qe[r].xy : qe[r].zw); \
        for (uint t = 0; t < 4u; t++) {                                                            \
            w[t] = hs_i8(u.x, t) * sa[r];                                                          \
            w[4u + t] = hs_i8(u.y, t) * sa[r];                                                     \
        }                                                                                          \
    }
#elif TYPE == HS_T_Q4_0
#define HS_LOAD_BLOCK                                                                              \
    uint sw[RW];                                                                                   \
    for (uint r = 0; r < RW; r++) sw[r] = SV(sbk + ring[r]);
#define HS_LOAD_SUB(s)                                                                             \
    uvec4 qd[RW];                                                                                  \
    float sa[RW];                                                                                  \
    for (uint r = 0; r < RW; r++) {                                                                \
        qd[r] = QV(qb + s * G + ring[r]);                                                           \
        sa[r] = unpackHalf2x16(sw[r])[s];                                                          \
    }
#define HS_DEQ8(r, GI)                                                                             \
    for (uint t = 0; t < 8u; t++) w[t] = (hs_nib(qd[r][GI], t) - 8.0) * sa[r];
#elif TYPE == HS_T_Q4_1
#define HS_LOAD_BLOCK
#define HS_LOAD_SUB(s)                                                                             \
    uvec4 qd[RW];                                                                                  \
    float sa[RW], sb[RW];                                                                          \
    for (uint r = 0; r < RW; r++) {                                                                \
        qd[r] = QV(qb + ring[r]);                                                                   \
        const vec2 dm = unpackHalf2x16(SV(sbk + ring[r]));                          \
        sa[r] = dm.x;                                                                              \
        sb[r] = dm.y;                                                                              \
    }
#define HS_DEQ8(r, GI)                                                                             \
    for (uint t = 0; t < 8u; t++) w[t] = fma(hs_nib(qd[r][GI], t), sa[r], sb[r]);
#elif TYPE == HS_T_Q4_K
#define HS_LOAD_BLOCK                                                                              \
    vec2 dk[RW];                                                                                   \
    uvec4 hk[RW];                                                                                  \
    for (uint r = 0; r < RW; r++) {                                                                \
        dk[r] = unpackHalf2x16(SV(sbk + ring[r]));                                  \
        hk[r] = QV(qb + 8u * G + ring[r]);                                                          \
    }
/* d * sc and dmin * m are exact in f32 (11 x 6 bits), as ggml's d1 and m1. */
#define HS_LOAD_SUB(s)                                                                             \
    uvec4 qd[RW];                                                                                  \
    float sa[RW], sb[RW];                                                                          \
    for (uint r = 0; r < RW; r++) {                                                                \
        qd[r] = QV(qb + s * G + ring[r]);                                                           \
        sa[r] = dk[r].x * float(hs_u8(hk[r][s >> 2], s & 3u));                                     \
        sb[r] = dk[r].y * float(hs_u8(hk[r][2u + (s >> 2)], s & 3u));                              \
    }
#define HS_DEQ8(r, GI)                                                                             \
    for (uint t = 0; t < 8u; t++) w[t] = fma(sa[r], hs_nib(qd[r][GI], t), -sb[r]);
#elif TYPE == HS_T_Q6_K
#define HS_LOAD_BLOCK                                                                              \
    float dk[RW];                                                                                  \
    uvec4 hk[RW];                                                                                  \
    for (uint r = 0; r < RW; r++) {                                                                \
        dk[r] = unpackHalf2x16(SV(sbk + ring[r])).x;                                \
        hk[r] = QV(qb + 12u * G + ring[r]);                                                         \
    }
/* d * sc is exact in f32 (11 x 8 bits); the weight is (d * sc) * q as in ggml. */
#define HS_LOAD_SUB(s)                                                                             \
    uvec4 qd[RW];                                                                                  \
    uvec2 qe[RW];                                                                                  \
    float sa[RW], sb[RW];                                                                          \
    for (uint r = 0; r < RW; r++) {                                                                \
        qd[r] = QV(qb + s * G + ring[r]);                                                           \
        const uvec4 h = QV(qb + (8u + (s >> 1)) * G + ring[r]);                                     \
        qe[r] = (s & 1u) != 0u ? h.zw : h.xy;                                                      \
        sa[r] = dk[r] * hs_i8(hk[r][s >> 1], 2u * (s & 1u));                                       \
        sb[r] = dk[r] * hs_i8(hk[r][s >> 1], 2u * (s & 1u) + 1u);                                  \
    }
#define HS_DEQ8(r, GI)                                                                             \
    {                                                                                              \
        const uint hw = qe[r][GI >> 1] >> (16u * (GI & 1u));                                       \
        const float ds = GI < 2u ? sa[r] : sb[r];                                                  \
        for (uint t = 0; t < 8u; t++) {                                                            \
            const uint q6 = ((qd[r][GI] >> (4u * t)) & 15u) | (((hw >> (2u * t)) & 3u) << 4);       \
            w[t] = ds * float(int(q6) - 32);                                                       \
        }                                                                                          \
    }
#endif


#endif
