/* matmul: y[j][row] = (res[j][row] +) sum_k W[row][k] * x'[j][k]
 *
 * W is a device-layout weight (quant.glsl); x' is x, RMSNorm(x) * g or
 * silu(gate) * up (PROLOGUE). One workgroup of LANES invocations computes RW
 * rows per invocation (LANES * RW rows of one row group) for C columns.
 *
 * Why this shape (lavapipe, DESIGN.md section 9): every buffer load costs a
 * loop over the lanes, so loads are counted. Each invocation owns whole rows and
 * walks k in order, so a row needs no cross-lane reduction; the activations of
 * a 32-element sub-block are loaded once per subgroup (one vec4 per lane) and
 * handed around with subgroupShuffle, and every loaded weight is used for C
 * columns. The rows of a group are interleaved in memory, so neighbouring
 * lanes read neighbouring 16-byte words (coalesced on GPUs).
 *
 * Exactness: each output is one chain acc = fma(w, x', acc) over k = 0, 1, 2,
 * ... in increasing order, starting from +0 (precise, so the driver may not
 * re-associate; lavapipe lowers every fma to a multiply and an add, the same
 * in every variant), with weights dequantized exactly as ggml does. Nothing
 * depends on RW, C, n, the chunk, the subgroup size or USE_SUBGROUP, so a
 * column computed alone is bitwise equal to the same column in any batch.
 * RMSNorm's sum of squares uses 8 partial sums (one per vec4 slot of a
 * sub-block) combined in a fixed tree, the same with or without subgroups.
 *
 * Defines: TYPE (ggml type id), USE_SUBGROUP (0/1), USE_TEXEL (0/1: weights
 * from storage or uniform texel buffers, quant.glsl), USE_UBO_X (0/1: x from
 * a storage or a uniform buffer, matmul_x.glsl), XQ8 (0/1: q4_1 only, x is the
 * 8-bit form of matmul_pro's OUT_Q8 and the product multiplies integers, below),
 * XQ8_ROPE (0/1: with XQ8, the variant with EPILOGUE bit 3's bindings).
 * Spec constants: 0 LANES (workgroup size), 1 RL (rows per invocation in the
 * weight layout, G = LANES * RL), 2 RW (rows per invocation here, divides RL),
 * 3 C (columns per workgroup), 4 PROLOGUE (0 none, 1 rmsnorm, 2 swiglu),
 * 5 EPILOGUE (bit 0: residual add; bits 1 and 2, XQ8 only: also write x8n of
 * the output, or write x8 of SwiGLU of it instead; bit 3, XQ8 only: RoPE and the KV
 * write of a Q/K/V output instead of y, below), 6 XVEC4 (1: x, g offsets and strides
 * are multiples of 4 elements, load vec4), 7 XU_VEC4 (USE_UBO_X: vec4 in the
 * uniform x window).
 */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LANES = 8;
layout(constant_id = 1) const uint RL = 4;
layout(constant_id = 2) const uint RW = 4;
layout(constant_id = 3) const uint C = 1;
layout(constant_id = 4) const uint PROLOGUE = 0;
layout(constant_id = 5) const uint EPILOGUE = 0;
layout(constant_id = 6) const uint XVEC4 = 1;

#include "quant.glsl"

#include "matmul_x.glsl"
#if XQ8
#include "q8x.glsl"
#endif

layout(std430, binding = 3) writeonly buffer Y { float y[]; };
layout(std430, binding = 5) readonly buffer RES { float res[]; };

const uint G = LANES * RL;

/* x' of the sub-block at k0 for each column: with subgroups, lane v < 8 loads
 * slot v (elements 4v..4v+3) and HS_XGET fetches it with a shuffle; without,
 * every invocation loads what it needs. */
#if USE_SUBGROUP
#define HS_LOAD_X                                                                                  \
    vec4 xl[C];                                                                                    \
    if (sg)                                                                                        \
        for (uint c = 0; c < C; c++) xl[c] = sid < 8u ? x_in(cj[c], k0 + 4u * sid, scale[c]) : vec4(0.0);
#define HS_XGET(c, V) (sg ? subgroupShuffle(xl[c], V) : x_in(cj[c], k0 + 4u * (V), scale[c]))
#else
#define HS_LOAD_X
#define HS_XGET(c, V) x_in(cj[c], k0 + 4u * (V), scale[c])
#endif

/* Group GI: elements 8 GI .. 8 GI + 7, for every row and column. */
#define HS_GROUP(GI)                                                                               \
    {                                                                                              \
        vec4 xa[C], xb[C];                                                                         \
        for (uint c = 0; c < C; c++) {                                                             \
            xa[c] = HS_XGET(c, 2u * GI);                                                           \
            xb[c] = HS_XGET(c, 2u * GI + 1u);                                                      \
        }                                                                                          \
        for (uint r = 0; r < RW; r++) {                                                            \
            float w[8];                                                                            \
            HS_DEQ8(r, GI)                                                                         \
            for (uint c = 0; c < C; c++) {                                                         \
                const uint a = r * C + c;                                                          \
                acc[a] = fma(w[0], xa[c].x, acc[a]);                                               \
                acc[a] = fma(w[1], xa[c].y, acc[a]);                                               \
                acc[a] = fma(w[2], xa[c].z, acc[a]);                                               \
                acc[a] = fma(w[3], xa[c].w, acc[a]);                                               \
                acc[a] = fma(w[4], xb[c].x, acc[a]);                                               \
                acc[a] = fma(w[5], xb[c].y, acc[a]);                                               \
                acc[a] = fma(w[6], xb[c].z, acc[a]);                                               \
                acc[a] = fma(w[7], xb[c].w, acc[a]);                                               \
            }                                                                                      \
        }                                                                                          \
    }

/* Sub-block s (0 .. QSUB-1) of block b. */
#define HS_SUB(s)                                                                                  \
    {                                                                                              \
        const uint sub = (s);                                                                      \
        const uint k0 = b * QK + sub * 32u;                                                        \
        HS_LOAD_X                                                                                  \
        HS_LOAD_SUB(sub)                                                                           \
        HS_GROUP(0u)                                                                               \
        HS_GROUP(1u)                                                                               \
        HS_GROUP(2u)                                                                               \
        HS_GROUP(3u)                                                                               \
    }

/* What both mains share: the workgroup's tile (row group gl, its rows ring[]
 * per invocation, columns from colb), the accumulators, and the store. */
#if USE_SUBGROUP
/* Subgroups narrower than 8 lanes (or a driver that splits the workgroup that
 * way) cannot hold a sub-block's x: every lane loads its own. */
#define HS_TILE_SG                                                                                 \
    const bool sg = gl_SubgroupSize >= 8u;                                                         \
    const uint sid = gl_SubgroupInvocationID;
#else
#define HS_TILE_SG
#endif
#define HS_TILE_BEGIN                                                                              \
    const uint lane = gl_LocalInvocationID.x;                                                      \
    const uint gl = gl_WorkGroupID.x / (RL / RW); /* row group within the chunk */                 \
    const uint rsub = gl_WorkGroupID.x % (RL / RW);                                                \
    const uint colb = p.col0 + gl_WorkGroupID.y * C;                                               \
    const uint nblk = p.nblk;                                                                      \
    HS_TILE_SG                                                                                     \
    precise float acc[NH * RW * C];                                                                \
    [[unroll]] for (uint i = 0; i < NH * RW * C; i++) acc[i] = 0.0;                                \
    /* Row in group of (invocation, r): lanes are adjacent for each r. */                          \
    uint ring[RW];                                                                                 \
    [[unroll]] for (uint r = 0; r < RW; r++) ring[r] = (rsub * RW + r) * LANES + lane;
/* HS_COL_SCALE(v, c) and HS_KEEP(r, c, v) are each main's: the deferred
 * RMSNorm factor of an x8n input, and the output kept for the x8n epilogue. */
#define HS_TILE_STORE                                                                              \
    [[unroll]] for (uint r = 0; r < RW; r++) {                                                     \
        const uint row = (p.group0 + gl) * G + ring[r];                                            \
        if (row >= p.rows) continue;                                                               \
        [[unroll]] for (uint c = 0; c < C; c++) {                                                  \
            const uint j = colb + c;                                                               \
            if (j >= p.n) continue;                                                                \
            precise float v = acc[r * C + c];                                                      \
            HS_COL_SCALE(v, c)                                                                     \
            if ((EPILOGUE & 1u) != 0u) v = res[p.r_off + j * p.y_stride + row] + v;                \
            y[p.y_off + j * p.y_stride + row] = v;                                                 \
            HS_KEEP(r, c, v)                                                                       \
        }                                                                                          \
    }

#if XQ8
#if TYPE != HS_T_Q4_1
#error "XQ8 products are written for q4_1 weights"
#endif
/* x8 (matmul_pro.comp, OUT_Q8): column j's block b is five uvec4 at
 * x_off / 4 + (j - xcol0) * x_stride / 4 + 5 b: words 4m + t of the first four
 * hold X = xq[8m + t + 4] + 65536 xq[8m + t] (int, two's complement), the
 * fifth (d, s, -, sx): x = d xq, s = d sum(xq) as float bits, sx the sum of
 * the 16 words X modulo 2^32 (q8x.glsl).
 *
 * Two products per integer multiply: a weight word u holds the 4-bit q of
 * elements 8m .. 8m + 7 (quant.glsl), so P = (u >> 4t) & 0x000F000F is
 * q[8m+t] + 65536 q[8m+t+4]. With the q centred, q' = q - 8 (P' = P - B,
 * B = 0x00080008):
 *   P' X = q'[a] xq[b] + 65536 (q'[a] xq[a] + q'[b] xq[b]) + 2^32 (...)
 * with a = 8m + t, b = a + 4: bits 16..31 carry the two products' sum. Over
 * the 16 words of a block the low part L stays within +-16 * 8 * 127 < 2^15
 * and the high part H within +-32 * 8 * 127 < 2^15, so T = 2^15 + sum P' X
 * (modulo 2^32) is exactly 2^15 + L + 65536 H as an int and T >> 16
 * (arithmetic) is H. The kernel never forms P': sum P' X = sum P X - B sx
 * modulo 2^32, so each sum starts at 2^15 - B sx (xb0, once per column and
 * block) and adds the plain P X; the block's sum of q xq is then
 * H + 8 sum(xq) (xb8, from the two halves of sx). Integer sums are exact, so
 * each block's sum is the same in every variant and batch; the float part is
 * one fixed chain per output, as in the float path.
 *
 * PROLOGUE 1 here: x is x8n (q8x.glsl), h * g with each block's sum of squares
 * of h; the block sums are added in block order per column and the output is
 * multiplied by norm_scale of the total: RMSNorm without a pass of its own.
 *
 * EPILOGUE bit 1 (residual products feeding the next RMSNorm): the workgroup
 * owns whole 32-row blocks (G % 32 == 0, RW == RL), so after the store it
 * keeps its outputs (in registers under SGE, below; else in shared memory)
 * and writes x8n of them, with the gain g at binding 4 (g_off) and the
 * result at binding 6 (q_off, rows / 32 * 5
 * uvec4 per column): bitwise what matmul_pro's PROLOGUE 3 pass makes of y.
 *
 * EPILOGUE bit 2 (the gate/up product before SwiGLU): rows [0, rows) are gate
 * and rows [rows, 2 rows) up (p.rows is the half here), and the workgroup of
 * gate group gl also computes up group gl + p.pair (NH = 2 row sets per
 * invocation, one load of x for both). It writes no y: it keeps
 * silu(gate) * up (registers or shared memory, as bit 1) and writes its x8
 * for the next product
 * (q_off, rows / 32 * 5 uvec4 per column): bitwise what matmul_pro's SwiGLU
 * OUT_Q8 pass makes of the [gate | up] this product would have written.
 *
 * EPILOGUE bit 3 (the stacked Q/K/V product before attention): the output of
 * column j is [Q heads | K heads | V heads] of token j, and the workgroup owns
 * whole row groups (G even, so the adjacent pairs (2m, 2m + 1) of RoPE's
 * normal mode never straddle two workgroups). It writes no y: it keeps its
 * outputs (registers or shared memory, as bit 1), rotates the Q and K pairs
 * by the angles of
 * position pos[j] (rope.glsl, with the host's frequency table) and stores Q to
 * q_out [n][n_head][head_dim] and K and V to row rows[j] of the f32 caches
 * [n_ctx][n_kv][head_dim] (rows >= n_ctx skipped): bitwise what rope.comp's
 * ROPE_KV pass makes of the y this product would have written. XQ8_ROPE_F16
 * (0/1): the caches hold halves, each pair (2m, 2m + 1) stored as one
 * packHalf2x16 word at half index k_off + element (even: the offsets are
 * whole words), as rope.comp's CACHE_F16 pass stores it. Bindings 7..12
 * (pos, rows, freqs, q_out, K cache, V cache) exist in the XQ8_ROPE variants
 * only, so the other products keep seven. */
layout(std430, binding = 6) writeonly buffer Q8O { uvec4 q8o[]; };
#ifndef XQ8_ROPE
#define XQ8_ROPE 0
#endif
#if XQ8_ROPE
layout(std430, binding = 7) readonly buffer RPos { int rpos[]; };
layout(std430, binding = 8) readonly buffer RRows { uint rrows[]; };
layout(std430, binding = 9) readonly buffer RFreqs { float rfreqs[]; };
layout(std430, binding = 10) writeonly buffer RQ { float rq[]; };
#ifndef XQ8_ROPE_F16
#define XQ8_ROPE_F16 0
#endif
#if XQ8_ROPE_F16
layout(std430, binding = 11) writeonly buffer RK { uint rk[]; };
layout(std430, binding = 12) writeonly buffer RV { uint rv[]; };
#else
layout(std430, binding = 11) writeonly buffer RK { float rk[]; };
layout(std430, binding = 12) writeonly buffer RV { float rv[]; };
#endif
#include "rope.glsl"
#endif
shared float s_y[G * C]; /* [column][row in group] */
const uint NH = (EPILOGUE & 4u) != 0u ? 2u : 1u; /* row sets per invocation: gate and up */
#define HS_COL_SCALE(v, c)                                                                         \
    if (PROLOGUE == 1u) v = v * cscale[c];
#define HS_KEEP(r, c, v)                                                                           \
    if ((EPILOGUE & 2u) != 0u) {                                                                   \
        if (SGE)                                                                                   \
            kept[(r) * C + (c)] = v;                                                               \
        else                                                                                       \
            s_y[(c) * G + ring[r]] = v;                                                            \
    }

/* The epilogues (EPILOGUE bits 1..3) without shared memory: where the
 * workgroup is one subgroup, each lane keeps its outputs (row ring[r] =
 * r LANES + lane, RW == RL) in registers and takes the others' by shuffles,
 * which on llvmpipe cost a vector permute where a shared-memory access loops
 * over the lanes, and need no barrier. The same values reach the same
 * functions, so the bytes written are the same. SGE is a constant where the
 * driver's subgroup size is (lavapipe), so only one of the two ways is compiled. */
#if USE_SUBGROUP
#define SGE (gl_SubgroupSize == LANES)
#else
#define SGE false
#endif
/* vec4 V[8]: the 32 values of block bb (rows 32 bb .. 32 bb + 31 of the group)
 * whose row r LANES + l lane l holds in ARR[r * STRIDE + IDX]; every lane gets
 * them. */
#define HS_SG_BLOCK(V, ARR, STRIDE, IDX, bb)                                                       \
    [[unroll]] for (uint e = 0; e < 8u; e++)                                                       \
        [[unroll]] for (uint q = 0; q < 4u; q++) {                                                 \
            const uint k = 32u * (bb) + 4u * e + q;                                                \
            V[e][q] = subgroupShuffle(ARR[(k / LANES) * (STRIDE) + (IDX)], k % LANES);             \
        }
/* The same for column cr LANES + lane of ARR[r * C + c] (0 past C): lane l
 * gets column cr LANES + l, so the lanes share out the columns. */
#define HS_SG_TBLOCK(V, ARR, cr, bb)                                                               \
    [[unroll]] for (uint e = 0; e < 8u; e++)                                                       \
        [[unroll]] for (uint q = 0; q < 4u; q++) {                                                 \
            const uint k = 32u * (bb) + 4u * e + q;                                                \
            float tv = 0.0;                                                                        \
            [[unroll]] for (uint cc = 0; cc < LANES; cc++) {                                       \
                const uint c = (cr) * LANES + cc;                                                  \
                if (c < C) {                                                                       \
                    const float t = subgroupShuffle(ARR[(k / LANES) * C + c], k % LANES);          \
                    tv = sid == cc ? t : tv;                                                       \
                }                                                                                  \
            }                                                                                      \
            V[e][q] = tv;                                                                          \
        }

/* Block b of the rows ring[] of row group GQ into acc[A0 + r C + c]. The pair
 * words of a row are unpacked four at a time (one word of qd) and each is used
 * for every column before the next, so a row's unpacked words and the
 * columns' sums fit the registers; the columns' words are read where they lie.
 * Each output is loaded and stored once per block (llvmpipe blends every store
 * to a loop-carried value with the loop's mask). */
#define HS_X8_ROWS(GQ, A0)                                                                         \
    [[unroll]] for (uint r = 0; r < RW; r++) {                                                     \
        const uint bq = (GQ) * nblk + b;                                                           \
        const uvec4 qd = QV(bq * QP * G + ring[r]);                                                \
        const vec2 dm = unpackHalf2x16(SV(bq * G + ring[r]));                                      \
        uint tc[C];                                                                                \
        [[unroll]] for (uint c = 0; c < C; c++) tc[c] = xb0[c];                                    \
        [[unroll]] for (uint m = 0; m < 4u; m++) {                                                 \
            uint pw[4];                                                                            \
            [[unroll]] for (uint t = 0; t < 4u; t++) pw[t] = (qd[m] >> (4u * t)) & 0x000F000Fu;    \
            [[unroll]] for (uint c = 0; c < C; c++)                                                \
                [[unroll]] for (uint t = 0; t < 4u; t++) tc[c] += pw[t] * xv[4u * c + m][t];        \
        }                                                                                          \
        [[unroll]] for (uint c = 0; c < C; c++) {                                                  \
            const int sum = (int(tc[c]) >> 16) + xb8[c];                                           \
            const uint a = (A0) + r * C + c;                                                       \
            precise float sa = acc[a];                                                             \
            precise float v = float(sum) * (dm.x * xs[c].x);                                       \
            sa = sa + v;                                                                           \
            precise float mv = dm.y * xs[c].y;                                                     \
            sa = sa + mv;                                                                          \
            acc[a] = sa;                                                                           \
        }                                                                                          \
    }

/* The x of a block for the tile: XW = 5 C uvec4, word i = 5 c + v (uvec4 v of
 * column c's block); with subgroups, gather g loads words 8 g .. 8 g + 7 in
 * lanes 0..7 (surplus lanes repeat the last word) and every lane takes them by
 * shuffles. */
const uint XW = 5u * C;
const uint XG = (XW + 7u) / 8u;

void main() {
    HS_TILE_BEGIN
    float kept[RW * C]; /* SGE: this lane's outputs for the epilogue, [r][c] */
    [[unroll]] for (uint i = 0; i < RW * C; i++) kept[i] = 0.0;
    precise float ssq[C]; /* PROLOGUE 1: the columns' sums of squares, in block order */
    [[unroll]] for (uint c = 0; c < C; c++) ssq[c] = 0.0;
    uint cb[C]; /* uvec4 index of each column's block 0 (surplus columns redo n-1) */
    [[unroll]] for (uint c = 0; c < C; c++)
        cb[c] = (p.x_off + (min(colb + c, p.n - 1u) - p.xcol0) * p.x_stride) >> 2;
#if USE_SUBGROUP
    uint xo[XG]; /* this lane's uvec4 index in each gather of block 0 */
    [[unroll]] for (uint g = 0; g < XG; g++) {
        const uint i = min(8u * g + sid, XW - 1u);
        xo[g] = cb[i / 5u] + i % 5u;
    }
#endif

    for (uint b = 0; b < nblk; b++) {
        uvec4 xv[C * 4];
        vec4 xs[C]; /* d, d sum(xq), sum of squares (x8n), sx */
#if USE_SUBGROUP
        if (sg) {
            uvec4 xl[XG];
            [[unroll]] for (uint g = 0; g < XG; g++) xl[g] = xq4[xo[g] + 5u * b];
            [[unroll]] for (uint c = 0; c < C; c++) {
                [[unroll]] for (uint v = 0; v < 4u; v++) {
                    const uint i = 5u * c + v;
                    xv[4u * c + v] = subgroupShuffle(xl[i / 8u], i % 8u);
                }
                const uint i = 5u * c + 4u;
                xs[c] = uintBitsToFloat(subgroupShuffle(xl[i / 8u], i % 8u));
            }
        } else
#endif
        {
            [[unroll]] for (uint c = 0; c < C; c++) {
                const uint o = cb[c] + 5u * b;
                xv[4u * c] = xq4[o];
                xv[4u * c + 1u] = xq4[o + 1u];
                xv[4u * c + 2u] = xq4[o + 2u];
                xv[4u * c + 3u] = xq4[o + 3u];
                xs[c] = uintBitsToFloat(xq4[o + 4u]);
            }
        }
        if (PROLOGUE == 1u)
            [[unroll]] for (uint c = 0; c < C; c++) ssq[c] = ssq[c] + xs[c].z;
        /* Each column's bias terms (the comment above): xb0 starts every sum at
         * 2^15 - B sx, xb8 = 8 sum(xq) from the halves of sx. */
        uint xb0[C];
        int xb8[C];
        [[unroll]] for (uint c = 0; c < C; c++) {
            const uint sx = floatBitsToUint(xs[c].w);
            xb0[c] = 32768u - 0x00080008u * sx;
            const int lo = (int(sx) << 16) >> 16;
            xb8[c] = 8 * (lo + ((int(sx) - lo) >> 16));
        }
        HS_X8_ROWS(gl, 0u)
        if (NH == 2u) HS_X8_ROWS(gl + p.pair, RW * C) /* the up group (EPILOGUE bit 2) */
    }

    float cscale[C];
    [[unroll]] for (uint c = 0; c < C; c++) cscale[c] = PROLOGUE == 1u ? norm_scale(ssq[c]) : 1.0;
    if ((EPILOGUE & 4u) != 0u) {
#if USE_SUBGROUP
        if (SGE) {
            float sk[RW * C];
            [[unroll]] for (uint r = 0; r < RW; r++)
                [[unroll]] for (uint c = 0; c < C; c++) {
                    precise float gv = acc[r * C + c], uv = acc[(RW + r) * C + c];
                    HS_COL_SCALE(gv, c)
                    HS_COL_SCALE(uv, c)
                    precise float sv = hs_silu(gv) * uv;
                    sk[r * C + c] = sv;
                }
            [[unroll]] for (uint bb = 0; bb < G / 32u; bb++)
                [[unroll]] for (uint cr = 0; cr < (C + LANES - 1u) / LANES; cr++) {
                    vec4 v[8];
                    HS_SG_TBLOCK(v, sk, cr, bb)
                    uvec4 w[5];
                    hs_q8_block(v, w);
                    const uint c = cr * LANES + sid;
                    const uint j = colb + c, row0 = (p.group0 + gl) * G + 32u * bb;
                    if (c < C && j < p.n && row0 < p.rows) {
                        const uint o = p.q_off + j * (p.rows / 32u * 5u) + 5u * (row0 / 32u);
                        [[unroll]] for (uint e = 0; e < 5u; e++) q8o[o + e] = w[e];
                    }
                }
            return;
        }
#endif
        [[unroll]] for (uint r = 0; r < RW; r++)
            [[unroll]] for (uint c = 0; c < C; c++) {
                precise float gv = acc[r * C + c], uv = acc[(RW + r) * C + c];
                HS_COL_SCALE(gv, c)
                HS_COL_SCALE(uv, c)
                precise float sv = hs_silu(gv) * uv;
                s_y[c * G + ring[r]] = sv;
            }
        barrier(); /* every silu(gate) * up of the tile is in s_y */
        const uint nb = G / 32u;
        for (uint i = lane; i < C * nb; i += LANES) {
            const uint c = i / nb, bb = i % nb;
            const uint j = colb + c, row0 = (p.group0 + gl) * G + 32u * bb;
            if (j >= p.n || row0 >= p.rows) continue;
            vec4 v[8];
            [[unroll]] for (uint e = 0; e < 8u; e++) {
                const uint k = c * G + 32u * bb + 4u * e;
                v[e] = vec4(s_y[k], s_y[k + 1u], s_y[k + 2u], s_y[k + 3u]);
            }
            uvec4 w[5];
            hs_q8_block(v, w);
            const uint o = p.q_off + j * (p.rows / 32u * 5u) + 5u * (row0 / 32u);
            [[unroll]] for (uint e = 0; e < 5u; e++) q8o[o + e] = w[e];
        }
        return;
    }
#if XQ8_ROPE
    if ((EPILOGUE & 8u) != 0u) {
#if USE_SUBGROUP
        if (SGE) { /* each lane rotates its row's pair (the partner row is the next or previous lane) */
            const uint q_dim = p.rp_n_head * p.rp_head_dim, kv_dim = p.rp_n_kv * p.rp_head_dim;
            const bool odd = (lane & 1u) != 0u; /* rows r LANES + lane: odd lanes hold the pairs' second rows */
            float ps[C];
            uint crow[C];
            [[unroll]] for (uint c = 0; c < C; c++) {
                const uint jc = min(colb + c, p.n - 1u);
                ps[c] = float(rpos[p.rp_pos_off + jc]);
                crow[c] = rrows[p.rp_rows_off + jc];
            }
            [[unroll]] for (uint r = 0; r < RW; r++) {
                const uint row = (p.group0 + gl) * G + ring[r], row0 = row & ~1u;
                const uint e0 = row0 % p.rp_head_dim;
                const bool rot = row0 < q_dim + kv_dim && e0 < p.rp_n_rot;
                const float fr = rfreqs[p.rp_f_off + (rot ? e0 / 2u : 0u)];
                [[unroll]] for (uint c = 0; c < C; c++) {
                    precise float v = acc[r * C + c];
                    HS_COL_SCALE(v, c)
                    const float pv = subgroupShuffleXor(v, 1u);
                    vec2 o = odd ? vec2(pv, v) : vec2(v, pv);
                    if (rot) {
                        const float theta = p.rp_freq_scale * (ps[c] * fr);
                        o = rope_rotate(o.x, o.y, rope_cos_sin(theta));
                    }
                    const float val = odd ? o.y : o.x;
                    const uint j = colb + c;
                    if (j >= p.n || row0 >= p.rows) continue;
                    if (row < q_dim) {
                        rq[p.rp_q_off + j * q_dim + row] = val;
                    } else if (crow[c] < p.rp_n_ctx) {
#if XQ8_ROPE_F16
                        if (odd) continue; /* the even lane writes the pair */
                        const uint pk = packHalf2x16(o);
                        if (row < q_dim + kv_dim)
                            rk[(p.rp_k_off + crow[c] * kv_dim + (row0 - q_dim)) / 2u] = pk;
                        else
                            rv[(p.rp_v_off + crow[c] * kv_dim + (row0 - q_dim - kv_dim)) / 2u] = pk;
#else
                        if (row < q_dim + kv_dim)
                            rk[p.rp_k_off + crow[c] * kv_dim + (row - q_dim)] = val;
                        else
                            rv[p.rp_v_off + crow[c] * kv_dim + (row - q_dim - kv_dim)] = val;
#endif
                    }
                }
            }
            return;
        }
#endif
        [[unroll]] for (uint r = 0; r < RW; r++)
            [[unroll]] for (uint c = 0; c < C; c++) {
                precise float v = acc[r * C + c];
                HS_COL_SCALE(v, c)
                s_y[c * G + ring[r]] = v;
            }
        barrier(); /* every output of the tile is in s_y */
        const uint hp = G / 2u, q_dim = p.rp_n_head * p.rp_head_dim, kv_dim = p.rp_n_kv * p.rp_head_dim;
        for (uint i = lane; i < C * hp; i += LANES) {
            const uint c = i / hp, m = i % hp;
            const uint j = colb + c, row0 = (p.group0 + gl) * G + 2u * m;
            if (j >= p.n || row0 >= p.rows) continue;
            vec2 o = vec2(s_y[c * G + 2u * m], s_y[c * G + 2u * m + 1u]);
            const uint e0 = row0 % p.rp_head_dim;
            if (row0 < q_dim + kv_dim && e0 < p.rp_n_rot) {
                const float ps = float(rpos[p.rp_pos_off + j]);
                const float theta = p.rp_freq_scale * (ps * rfreqs[p.rp_f_off + e0 / 2u]);
                o = rope_rotate(o.x, o.y, rope_cos_sin(theta));
            }
            if (row0 < q_dim) {
                const uint qb = p.rp_q_off + j * q_dim + row0;
                rq[qb] = o.x;
                rq[qb + 1u] = o.y;
                continue;
            }
            const uint crow = rrows[p.rp_rows_off + j];
            if (crow >= p.rp_n_ctx) continue;
            if (row0 < q_dim + kv_dim) {
                const uint kb = p.rp_k_off + crow * kv_dim + (row0 - q_dim);
#if XQ8_ROPE_F16
                rk[kb / 2u] = packHalf2x16(o);
#else
                rk[kb] = o.x;
                rk[kb + 1u] = o.y;
#endif
            } else {
                const uint vb = p.rp_v_off + crow * kv_dim + (row0 - q_dim - kv_dim);
#if XQ8_ROPE_F16
                rv[vb / 2u] = packHalf2x16(o);
#else
                rv[vb] = o.x;
                rv[vb + 1u] = o.y;
#endif
            }
        }
        return;
    }
#endif
    HS_TILE_STORE
    if ((EPILOGUE & 2u) != 0u) {
#if USE_SUBGROUP
        if (SGE) {
            float gk[RW]; /* the gain of this lane's rows */
            [[unroll]] for (uint r = 0; r < RW; r++)
                gk[r] = g1[p.g_off + min((p.group0 + gl) * G + ring[r], p.rows - 1u)];
            [[unroll]] for (uint bb = 0; bb < G / 32u; bb++) {
                vec4 gv[8];
                HS_SG_BLOCK(gv, gk, 1u, 0u, bb)
                [[unroll]] for (uint cr = 0; cr < (C + LANES - 1u) / LANES; cr++) {
                    vec4 hv[8];
                    HS_SG_TBLOCK(hv, kept, cr, bb)
                    uvec4 w[5];
                    hs_q8n_block(hv, gv, w);
                    const uint c = cr * LANES + sid;
                    const uint j = colb + c, row0 = (p.group0 + gl) * G + 32u * bb;
                    if (c < C && j < p.n && row0 < p.rows) {
                        const uint o = p.q_off + j * (p.rows / 32u * 5u) + 5u * (row0 / 32u);
                        [[unroll]] for (uint e = 0; e < 5u; e++) q8o[o + e] = w[e];
                    }
                }
            }
            return;
        }
#endif
        barrier(); /* every output of the tile is in s_y */
        const uint nb = G / 32u;
        for (uint i = lane; i < C * nb; i += LANES) {
            const uint c = i / nb, bb = i % nb;
            const uint j = colb + c, row0 = (p.group0 + gl) * G + 32u * bb;
            if (j >= p.n || row0 >= p.rows) continue;
            vec4 hv[8], gv[8];
            [[unroll]] for (uint e = 0; e < 8u; e++) {
                const uint k = c * G + 32u * bb + 4u * e;
                hv[e] = vec4(s_y[k], s_y[k + 1u], s_y[k + 2u], s_y[k + 3u]);
                gv[e] = g4[(p.g_off + row0) / 4u + e];
            }
            uvec4 w[5];
            hs_q8n_block(hv, gv, w);
            const uint o = p.q_off + j * (p.rows / 32u * 5u) + 5u * (row0 / 32u);
            [[unroll]] for (uint e = 0; e < 5u; e++) q8o[o + e] = w[e];
        }
    }
}
#else
const uint NH = 1u;
#define HS_COL_SCALE(v, c)
#define HS_KEEP(r, c, v)
void main() {
    HS_TILE_BEGIN
    uint cj[C]; /* columns, clamped: surplus columns of the last tile redo n-1 */
    for (uint c = 0; c < C; c++) cj[c] = min(colb + c, p.n - 1u);

    float scale[C];
    for (uint c = 0; c < C; c++) scale[c] = 1.0;
    if (PROLOGUE == 1) {
        for (uint c = 0; c < C; c++) {
#if USE_SUBGROUP
            scale[c] = sg ? norm_of_sg(cj[c], sid) : norm_of(cj[c]);
#else
            scale[c] = norm_of(cj[c]);
#endif
        }
    }

    for (uint b = 0; b < nblk; b++) {
        const uint qb = (gl * nblk + b) * QP * G; /* Q index of plane 0, row 0 of this block */
        const uint sbk = (gl * nblk + b) * G;     /* S index of row 0 of this block */
        HS_LOAD_BLOCK
#if QSUB == 1
        HS_SUB(0u)
#elif QSUB == 2
        HS_SUB(0u)
        HS_SUB(1u)
#else
        for (uint s = 0; s < QSUB; s++) HS_SUB(s)
#endif
    }

    HS_TILE_STORE
}
#endif
