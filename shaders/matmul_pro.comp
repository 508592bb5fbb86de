/* matmul_pro: x'[j][k] = the prologue of a product (matmul_x.glsl), written
 * out once per column for the products the tuning splits (runtime/op_matmul.c,
 * split_prologue; on lavapipe all of them). Fused into the product, every
 * workgroup of a column recomputes RMSNorm's sum of squares or SwiGLU's
 * exponentials for its own rows; written out, they are computed once and the
 * product reads x' plainly.
 * The values are matmul_x.glsl's, so the products' results are bitwise those
 * of the fused prologue.
 *
 * One workgroup per column (gl_WorkGroupID.y, from col0); its LANES
 * invocations write vec4 k = 4 lane, 4 (lane + LANES), ... of x'. y_off and
 * y_stride place column j at y[y_off + j * y_stride].
 * Defines: USE_SUBGROUP (0/1: the norm's 8 slot sums one per lane and a
 * shuffle tree, or all 8 in every lane; the same tree, the same bits),
 * USE_UBO_X (0/1: x from a storage or a uniform buffer, matmul_x.glsl),
 * OUT_Q8 (0/1: x' as f32, or rounded to the 8-bit form of matmul.comp's XQ8
 * products, one 32-element block per invocation).
 * Spec constants: 0 LANES, 4 PROLOGUE (1 rmsnorm, 2 swiglu, 3 (OUT_Q8 only): x8n
 * of x * g for a product that applies the norm itself, q8x.glsl), 6 XVEC4 (1: x, g
 * and y offsets and strides are multiples of 4 elements), 7 XU_VEC4
 * (USE_UBO_X: vec4 in the uniform x window). */
#version 450
#extension GL_GOOGLE_include_directive : require
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint LANES = 8;
layout(constant_id = 4) const uint PROLOGUE = 1;
layout(constant_id = 6) const uint XVEC4 = 1;

#include "matmul_x.glsl"
#include "q8x.glsl"

layout(std430, binding = 3) writeonly buffer Y1 { float y1[]; };
layout(std430, binding = 3) writeonly buffer Y4 { vec4 y4[]; };
#ifndef OUT_Q8
#define OUT_Q8 0
#endif
layout(std430, binding = 3) writeonly buffer YQ { uvec4 yq4[]; };

void main() {
    const uint j = p.col0 + gl_WorkGroupID.y;
    if (j >= p.n) return;
    float scale = 1.0;
    if (PROLOGUE == 1) {
#if USE_SUBGROUP
        scale = gl_SubgroupSize >= 8u ? norm_of_sg(j, gl_SubgroupInvocationID) : norm_of(j);
#else
        scale = norm_of(j);
#endif
    }
#if OUT_Q8
    /* x8 for the XQ8 products (matmul.comp): each 32-element block b of x'
     * as int8 xq = roundEven(x' * 127 / amax) with d = amax / 127, packed in
     * pairs, and s = d * sum(xq); y_off and y_stride are in uvec4 here. */
    for (uint b = gl_LocalInvocationID.x; b < p.cols / 32u; b += LANES) {
        vec4 v[8];
        uvec4 w[5];
        if (PROLOGUE == 3) { /* x8n: h * g and the block's sum of squares, the norm deferred */
            vec4 g[8];
            for (uint i = 0; i < 8u; i++) {
                v[i] = x_raw(j, 32u * b + 4u * i, 0u);
                g[i] = g_raw(32u * b + 4u * i);
            }
            hs_q8n_block(v, g, w);
        } else {
            for (uint i = 0; i < 8u; i++) v[i] = x_in(j, 32u * b + 4u * i, scale);
            hs_q8_block(v, w);
        }
        const uint o = p.y_off + j * p.y_stride + 5u * b;
        for (uint i = 0; i < 5u; i++) yq4[o + i] = w[i];
    }
#else
    for (uint k = 4u * gl_LocalInvocationID.x; k < p.cols; k += 4u * LANES) {
        const vec4 v = x_in(j, k, scale);
        const uint o = p.y_off + j * p.y_stride + k;
        if (XVEC4 != 0) {
            y4[o >> 2] = v;
        } else {
            for (uint e = 0; e < 4u && k + e < p.cols; e++) y1[o + e] = v[e];
        }
    }
#endif
}
