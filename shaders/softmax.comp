/* softmax: y[r][:] = softmax(scale * x[r][:]) over rows of up to vocabulary size.
 *
 * One workgroup per row, two passes over the row:
 *   1. running maximum m and sum of exp(scale x - m), the sum rescaled by
 *      exp(m_old - m_new) whenever the maximum grows (online softmax)   (read x)
 *   2. y = exp(scale x - max) / sum                                   (read x, write y)
 * Two reads and one write per element: memory accesses are what costs on
 * lavapipe, extra exps are cheap (measured ~30% faster than max / exp+sum /
 * normalise in three passes).
 * The row is read in chunks of four consecutive elements; invocation lid takes
 * chunks lid, lid + WG, ... and sums in element order with Kahan compensation
 * (a vocabulary row gives each invocation thousands of terms, which a plain
 * float sum would get wrong by ~1e-4 relative); reduce.glsl combines the
 * partials in a fixed order. So a row gives bitwise the same result alone or
 * in a batch. Chunks are vec4 accesses when rows start on 16-byte boundaries
 * (use_vec4), scalar otherwise, with the same operations in the same order
 * (`precise`), hence the same bits. y may alias x exactly (in place).
 * A row whose maximum is -inf (fully masked) yields NaN, as the C reference.
 *
 * Defines: USE_SUBGROUP (0/1). Spec constants: 0 = workgroup size, 1 = expected
 * subgroup size (informational).
 */
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint SG = 1;

#define HS_REDUCE_WG WG
#include "reduce.glsl"

/* Mirrors hs_softmax_push in runtime/op_elem.c. */
layout(push_constant) uniform Push {
    uint n;
    uint dim;
    uint x_off;
    uint y_off;
    float scale;
    uint use_vec4; /* 1: dim and both offsets are multiples of 4 */
    uint pad0, pad1;
} p;

/* Scalar and vec4 views of the same bindings. */
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(binding = 1) writeonly buffer Y4 { vec4 y4[]; };

/* Chunk c of the row at element b, times scale; elements past the row are -inf
 * (they then add exp(-inf) = 0 and never win the max). */
vec4 load_x(uint b, uint c) {
    if (p.use_vec4 != 0u) return p.scale * x4[b / 4u + c];
    const uint e = 4u * c;
    const float ninf = -1.0 / 0.0;
    return vec4(p.scale * x[b + e], e + 1u < p.dim ? p.scale * x[b + e + 1u] : ninf,
                e + 2u < p.dim ? p.scale * x[b + e + 2u] : ninf, e + 3u < p.dim ? p.scale * x[b + e + 3u] : ninf);
}

void store_y(uint b, uint c, vec4 v) {
    if (p.use_vec4 != 0u) {
        y4[b / 4u + c] = v;
        return;
    }
    const uint e = 4u * c;
    y[b + e] = v.x;
    if (e + 1u < p.dim) y[b + e + 1u] = v.y;
    if (e + 2u < p.dim) y[b + e + 2u] = v.z;
    if (e + 3u < p.dim) y[b + e + 3u] = v.w;
}

void main() {
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n) return; /* uniform per workgroup */
    const uint lid = gl_LocalInvocationID.x;
    const uint xb = p.x_off + row * p.dim;
    const uint yb = p.y_off + row * p.dim;
    const uint chunks = (p.dim + 3u) / 4u;

    /* Pass 1: running maximum and compensated sum of exp(v - m), rescaled
     * whenever the maximum grows (online softmax). */
    const float ninf = -1.0 / 0.0;
    float m = ninf;
    precise float s = 0.0, comp = 0.0;
    for (uint c = lid; c < chunks; c += WG) {
        const vec4 v = load_x(xb, c);
        const float cm = max(max(v.x, v.y), max(v.z, v.w));
        if (cm > m) {
            precise float r = exp(m - cm);
            s *= r;
            comp *= r;
            m = cm;
        }
        if (m != ninf) {
            precise vec4 e = exp(v - m);
            hs_kahan_add(s, comp, e.x);
            hs_kahan_add(s, comp, e.y);
            hs_kahan_add(s, comp, e.z);
            hs_kahan_add(s, comp, e.w);
        }
    }
    const float mx = hs_wg_max(m);
    precise float sl = m == ninf ? 0.0 : s * exp(m - mx);
    const float total = hs_wg_sum(sl);

    /* Pass 2: y = exp(v - max) / sum. */
    const float inv = 1.0 / total;
    for (uint c = lid; c < chunks; c += WG) {
        precise vec4 e = exp(load_x(xb, c) - mx);
        store_y(yb, c, e * inv);
    }
}
