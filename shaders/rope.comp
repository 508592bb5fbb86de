/* rope: rotary position embedding, ggml's two modes, and the fused variant that
 * also writes the KV cache.
 *
 *   theta_i = freq_scale * (pos * freq_base^(-2i / n_rot)),  i in [0, n_rot / 2)
 *   normal: rotates (x[2i], x[2i+1]);  neox: rotates (x[i], x[i + n_rot/2])
 *   (x0, x1) -> (x0 cos - x1 sin, x0 sin + x1 cos); dims >= n_rot pass through.
 *
 * ROPE_KV = 0 (hs_op_rope): x [n][n_heads][head_dim] rotated in place; an
 *   invocation owns both elements of the pairs it rotates.
 * ROPE_KV = 1 (hs_op_rope_kv): qkv [n][(n_head + 2 n_kv) head_dim] (Q heads, K
 *   heads, V heads) -> q_out [n][n_head][head_dim] rotated, rotated K and plain V
 *   to row rows[t] of k_cache / v_cache [n_ctx][n_kv][head_dim]. Work items are
 *   pairs of adjacent outputs (2m, 2m+1), so an f16 cache is written as one
 *   packed uint per pair (packHalf2x16; in neox mode the two outputs belong to
 *   different rotations), without 16-bit storage and with the conversion the
 *   Q/K/V product's fused write uses (matmul.comp, XQ8_ROPE_F16), so the two
 *   writers store the same bits. Cache rows >= n_ctx are skipped.
 * Positions and cache rows are read from buffers: a recorded sequence is
 *   replayed with new values.
 *
 * One workgroup per token (gl_WorkGroupID.x): it first computes cos/sin of the
 * token's n_rot/2 angles into shared memory (every head shares them), then
 * loops over the token's work items. Few, busy workgroups: llvmpipe pays about
 * a microsecond per workgroup, and no integer division is needed (llvmpipe
 * scalarises it): the (head, pair) of an item advances incrementally.
 *
 * Frequencies: with a table (has_freqs) f_i = freqs[i], computed on the host
 * with powf exactly as the C reference, so the angles are bitwise the
 * reference's. Without one, f_i is computed here with an exp2 of our own
 * (float-float exponent, ~1 ulp) instead of pow(): Vulkan lets pow() be off by
 * (3 + 2|x|) ulp of exp2, i.e. ~30 ulp for base 10000, which at position 1e4
 * would move an angle by ~0.02 rad.
 *
 * Defines: ROPE_KV (0/1); with ROPE_KV: CACHE_F16 (0/1: halves packed in
 * uints), KV_CHUNKS (1, or 4: a
 * cache larger than maxStorageBufferRange bound as up to 4 windows of
 * chunk_rows rows, see hs_kv_layer in op_elem.h; window 0 at bindings 4/5,
 * window c >= 1 of K at 7 + 2 (c - 1), of V at 8 + 2 (c - 1)). Spec constant
 * 0 = WG.
 */
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef ROPE_KV
#define ROPE_KV 0
#endif
#ifndef CACHE_F16
#define CACHE_F16 0
#endif
#ifndef KV_CHUNKS
#define KV_CHUNKS 1
#endif
#if KV_CHUNKS != 1 && KV_CHUNKS != 4
#error KV_CHUNKS must be 1 or 4 (HS_KV_MAX_CHUNKS)
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

/* Largest n_rot / 2 (HS_ROPE_MAX_PAIRS in runtime/op_elem.c): 2 KiB. */
#define MAX_PAIRS 256u
shared vec2 cs_sh[MAX_PAIRS];

/* Mirrors hs_rope_push in runtime/op_elem.c. Offsets are in elements of the
 * binding's type (halves for an f16 cache), relative to the bound ranges. */
layout(push_constant) uniform Push {
    uint n_tok;    /* tokens in this dispatch */
    uint n_head;   /* heads of x (ROPE_KV = 0) or Q heads */
    uint n_kv;     /* K (= V) heads */
    uint head_dim;
    uint n_rot;
    uint neox;
    float freq_base;
    float freq_scale;
    uint n_ctx;    /* cache rows */
    uint x_off;    /* x or qkv */
    uint pos_off;
    uint rows_off;
    uint q_off;
    uint k_off;
    uint v_off;
    uint f_off;
    uint has_freqs;  /* 1: f_i = freqs[f_off + i] */
    float l2b_hi;    /* log2(freq_base) = l2b_hi + l2b_lo (from double on the host) */
    float l2b_lo;
    uint chunk_rows; /* cache rows per window (KV_CHUNKS > 1) */
} p;

#if ROPE_KV
layout(binding = 0) readonly buffer X { float x[]; };
#else
layout(binding = 0) buffer X { float x[]; };
#endif
layout(binding = 1) readonly buffer Pos { int pos[]; };
#if !ROPE_KV
layout(binding = 2) readonly buffer Freqs { float freqs[]; };
#else
layout(binding = 2) readonly buffer Rows { uint rows[]; };
layout(binding = 3) writeonly buffer Q { float q[]; };
#if CACHE_F16
#define KV_T uint
#else
#define KV_T float
#endif
layout(binding = 4) writeonly buffer KC { KV_T kc[]; };
layout(binding = 5) writeonly buffer VC { KV_T vc[]; };
layout(binding = 6) readonly buffer Freqs { float freqs[]; };
#if KV_CHUNKS > 1
/* Windows 1 .. 3 of the caches: rows [c chunk_rows, (c + 1) chunk_rows). */
layout(binding = 7) writeonly buffer KC1 { KV_T kc1[]; };
layout(binding = 8) writeonly buffer VC1 { KV_T vc1[]; };
layout(binding = 9) writeonly buffer KC2 { KV_T kc2[]; };
layout(binding = 10) writeonly buffer VC2 { KV_T vc2[]; };
layout(binding = 11) writeonly buffer KC3 { KV_T kc3[]; };
layout(binding = 12) writeonly buffer VC3 { KV_T vc3[]; };
#endif
#endif

#include "rope.glsl"

/* a * b exactly as hi + lo (Dekker; no fma needed, `precise` stops the
 * compiler from contracting or reassociating). */
vec2 two_prod(float a, float b) {
    precise float ph = a * b;
    precise float ta = 4097.0 * a;
    precise float ahi = ta - (ta - a);
    precise float alo = a - ahi;
    precise float tb = 4097.0 * b;
    precise float bhi = tb - (tb - b);
    precise float blo = b - bhi;
    precise float pl = ((ahi * bhi - ph) + ahi * blo + alo * bhi) + alo * blo;
    return vec2(ph, pl);
}

/* freq_base^e = 2^(e log2(base)) to about one ulp: the exponent in float-float,
 * then 2^n * 2^r with |r| <= 0.5 by a degree-7 Taylor series (error < 1e-8). */
float rope_pow_base(float e) {
    const vec2 y = two_prod(e, p.l2b_hi);
    precise float ylo = y.y + e * p.l2b_lo;
    precise float n = floor(y.x + 0.5);
    precise float r = (y.x - n) + ylo;
    precise float t = r * 0.69314718055994531;
    precise float q = 1.0 / 5040.0;
    q = q * t + 1.0 / 720.0;
    q = q * t + 1.0 / 120.0;
    q = q * t + 1.0 / 24.0;
    q = q * t + 1.0 / 6.0;
    q = q * t + 0.5;
    q = q * t + 1.0;
    q = q * t + 1.0;
    return ldexp(q, int(n));
}

/* Angle of rotation i at position ps, in the operation order of the C
 * reference (and of ggml): freq_scale * (pos * base^(-2i / n_rot)). */
float rope_theta(float ps, uint i) {
    float f;
    if (p.has_freqs != 0u) {
        f = freqs[p.f_off + i];
    } else {
        f = rope_pow_base(-2.0 * float(i) / float(p.n_rot));
    }
    return p.freq_scale * (ps * f);
}

/* Stores the outputs (o0, o1) = elements (e0, e0+1) of head slot s of token t. */
#if ROPE_KV
void store_pair(uint t, uint s, uint e0, float o0, float o1, uint row) {
    if (s < p.n_head) {
        const uint qb = p.q_off + (t * p.n_head + s) * p.head_dim + e0;
        q[qb] = o0;
        q[qb + 1u] = o1;
        return;
    }
    if (row >= p.n_ctx) return;
#if KV_CHUNKS > 1
    const uint w = row / p.chunk_rows;
    row -= w * p.chunk_rows;
#endif
    const bool is_k = s < p.n_head + p.n_kv;
    const uint kvh = is_k ? s - p.n_head : s - p.n_head - p.n_kv;
    const uint ce = (row * p.n_kv + kvh) * p.head_dim + e0; /* element in the (window of the) cache */
#if CACHE_F16
    /* head_dim is even and the offsets are whole uints, so (ce, ce+1) is one
     * uint; packHalf2x16 puts the first element in the low half, matching a
     * little-endian array of halves. */
    const uint packed = packHalf2x16(vec2(o0, o1));
#define STORE_KV(KC, VC)                                                                           \
    if (is_k) KC[(p.k_off + ce) / 2u] = packed;                                                    \
    else VC[(p.v_off + ce) / 2u] = packed;
#else
#define STORE_KV(KC, VC)                                                                           \
    if (is_k) {                                                                                    \
        KC[p.k_off + ce] = o0;                                                                     \
        KC[p.k_off + ce + 1u] = o1;                                                                \
    } else {                                                                                       \
        VC[p.v_off + ce] = o0;                                                                     \
        VC[p.v_off + ce + 1u] = o1;                                                                \
    }
#endif
#if KV_CHUNKS == 1
    STORE_KV(kc, vc)
#else
    /* Constant indices only: no descriptor indexing feature needed. */
    if (w == 0u) {
        STORE_KV(kc, vc)
    } else if (w == 1u) {
        STORE_KV(kc1, vc1)
    } else if (w == 2u) {
        STORE_KV(kc2, vc2)
    } else {
        STORE_KV(kc3, vc3)
    }
#endif
}
#endif

void main() {
    const uint t = gl_WorkGroupID.x;
    const uint lid = gl_LocalInvocationID.x;
    if (t >= p.n_tok) return; /* uniform per workgroup: the barrier stays legal */
    const float ps = float(pos[p.pos_off + t]);
    const uint half_rot = p.n_rot / 2u;

    for (uint i = lid; i < half_rot; i += WG) cs_sh[i] = rope_cos_sin(rope_theta(ps, i));
    barrier(); /* the token's cos/sin table is complete and visible */

#if !ROPE_KV
    /* Item = (head h, rotation i); i advances by WG, h carries. */
    uint h = 0u, i = lid;
    while (i >= half_rot && h < p.n_head) i -= half_rot, h++;
    for (; h < p.n_head; ) {
        const uint b = p.x_off + (t * p.n_head + h) * p.head_dim;
        const uint e0 = p.neox != 0u ? i : 2u * i;
        const uint e1 = p.neox != 0u ? i + half_rot : 2u * i + 1u;
        const vec2 cs = cs_sh[i];
        const vec2 o = rope_rotate(x[b + e0], x[b + e1], cs);
        x[b + e0] = o.x;
        x[b + e1] = o.y;
        i += WG;
        while (i >= half_rot && h < p.n_head) i -= half_rot, h++;
    }
#else
    const uint half_hd = p.head_dim / 2u;
    const uint n_slot = p.n_head + 2u * p.n_kv;
    const uint n_rope = p.n_head + p.n_kv; /* slots that rotate: Q and K */
    const uint row = rows[p.rows_off + t];
    /* Item = (head slot s, output pair m); m advances by WG, s carries. */
    uint s = 0u, m = lid;
    while (m >= half_hd && s < n_slot) m -= half_hd, s++;
    for (; s < n_slot; ) {
        const uint e0 = 2u * m;
        const uint b = p.x_off + (t * n_slot + s) * p.head_dim;
        float o0 = x[b + e0], o1 = x[b + e0 + 1u];
        if (s < n_rope && e0 < p.n_rot) {
            if (p.neox == 0u) {
                const vec2 o = rope_rotate(o0, o1, cs_sh[m]);
                o0 = o.x;
                o1 = o.y;
            } else {
                /* Output e of a neox rotation i: e = i gives x[i] cos - x[i+h] sin,
                 * e = i + h gives x[i] sin + x[i+h] cos (h = n_rot / 2). */
                const bool lo0 = e0 < half_rot, lo1 = e0 + 1u < half_rot;
                const uint i0 = lo0 ? e0 : e0 - half_rot, i1 = lo1 ? e0 + 1u : e0 + 1u - half_rot;
                const vec2 c0 = cs_sh[i0], c1 = cs_sh[i1];
                const float a0 = x[b + i0], a1 = x[b + i0 + half_rot];
                const float b0 = x[b + i1], b1 = x[b + i1 + half_rot];
                const vec2 ra = rope_rotate(a0, a1, c0), rb = rope_rotate(b0, b1, c1);
                o0 = lo0 ? ra.x : ra.y;
                o1 = lo1 ? rb.x : rb.y;
            }
        }
        store_pair(t, s, e0, o0, o1, row);
        m += WG;
        while (m >= half_hd && s < n_slot) m -= half_hd, s++;
    }
#endif
}
