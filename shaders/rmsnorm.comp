/* rmsnorm: y[r][:] = x[r][:] * (1 / sqrt(mean(x[r][:]^2) + eps)) * w[:]
 *
 * One workgroup per row (rows beyond the first grid dimension go to
 * gl_WorkGroupID.y). The row is read in chunks of four consecutive elements;
 * invocation lid takes chunks lid, lid + WG, lid + 2 WG, ... and adds the
 * squares in element order (Kahan-compensated), then reduce.glsl combines the
 * partials in a fixed order: the sum of a row does not depend on how many rows
 * the dispatch holds (batch invariance). Chunks are vec4 loads when every row
 * starts on a 16-byte boundary (use_vec4), scalar loads otherwise; both give
 * the same bits because the order of operations is the same (`precise`
 * forbids contraction).
 * y may alias x exactly (in place): every element is read by the invocation
 * that later writes it.
 *
 * Defines: USE_SUBGROUP (0/1). Spec constants: 0 = workgroup size, 1 = subgroup
 * size the host expects (informational; the reduction reads the real layout).
 */
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint SG = 1;

#define HS_REDUCE_WG WG
#include "reduce.glsl"

/* Mirrors hs_rmsnorm_push in runtime/op_elem.c. Offsets are in elements,
 * relative to the bound ranges (they absorb offset-alignment slack). */
layout(push_constant) uniform Push {
    uint n;     /* rows in this dispatch */
    uint dim;   /* elements per row */
    uint x_off;
    uint w_off;
    uint y_off;
    uint has_w; /* 0: no weight (w is bound to x and ignored) */
    float eps;
    uint use_vec4; /* 1: dim and all offsets are multiples of 4 */
} p;

/* Scalar and vec4 views of the same bindings. */
layout(binding = 0) readonly buffer X { float x[]; };
layout(binding = 0) readonly buffer X4 { vec4 x4[]; };
layout(binding = 1) readonly buffer W { float w[]; };
layout(binding = 1) readonly buffer W4 { vec4 w4[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
layout(binding = 2) writeonly buffer Y4 { vec4 y4[]; };

/* Chunk c (elements 4c .. 4c+3) of the row starting at element b; elements
 * past the row read as 0. */
vec4 load_x(uint b, uint c) {
    if (p.use_vec4 != 0u) return x4[b / 4u + c];
    const uint e = 4u * c;
    return vec4(x[b + e], e + 1u < p.dim ? x[b + e + 1u] : 0.0, e + 2u < p.dim ? x[b + e + 2u] : 0.0,
                e + 3u < p.dim ? x[b + e + 3u] : 0.0);
}

vec4 load_w(uint c) {
    if (p.has_w == 0u) return vec4(1.0);
    if (p.use_vec4 != 0u) return w4[p.w_off / 4u + c];
    const uint e = 4u * c, b = p.w_off;
    return vec4(w[b + e], e + 1u < p.dim ? w[b + e + 1u] : 0.0, e + 2u < p.dim ? w[b + e + 2u] : 0.0,
                e + 3u < p.dim ? w[b + e + 3u] : 0.0);
}

void main() {
    const uint row = gl_WorkGroupID.y * gl_NumWorkGroups.x + gl_WorkGroupID.x;
    if (row >= p.n) return; /* uniform per workgroup: barriers below stay legal */
    const uint lid = gl_LocalInvocationID.x;
    const uint xb = p.x_off + row * p.dim;
    const uint yb = p.y_off + row * p.dim;
    const uint chunks = (p.dim + 3u) / 4u;

    precise float acc = 0.0, comp = 0.0;
    for (uint c = lid; c < chunks; c += WG) {
        precise vec4 v = load_x(xb, c);
        precise vec4 sq = v * v;
        hs_kahan_add(acc, comp, sq.x);
        hs_kahan_add(acc, comp, sq.y);
        hs_kahan_add(acc, comp, sq.z);
        hs_kahan_add(acc, comp, sq.w);
    }
    const float ss = hs_wg_sum(acc);
    const float scale = 1.0 / sqrt(ss / float(p.dim) + p.eps);

    for (uint c = lid; c < chunks; c += WG) {
        const vec4 v = (load_x(xb, c) * scale) * load_w(c);
        if (p.use_vec4 != 0u) {
            y4[yb / 4u + c] = v;
        } else {
            const uint e = 4u * c;
            y[yb + e] = v.x;
            if (e + 1u < p.dim) y[yb + e + 1u] = v.y;
            if (e + 2u < p.dim) y[yb + e + 2u] = v.z;
            if (e + 3u < p.dim) y[yb + e + 3u] = v.w;
        }
    }
}
