/* argmax: out[r] = index of the largest logit of row r, ties to the lowest index.
 *
 * One workgroup per row. Every invocation walks its chunks of 4 elements
 * (chunk c goes to invocation c mod WG; vec4 loads when rows start 16-byte
 * aligned) keeping its best (value, id); subgroupMax then subgroupMin on the
 * ids that hold the maximum combine a subgroup; with several subgroups their
 * winners meet in shared memory after the only barrier. (value desc, id asc)
 * is a total order, so the result does not depend on the traversal or the
 * subgroup layout. Inputs must be NaN-free. One loop trip per chunk: the host
 * widens the workgroup for vocabularies long enough to reach llvmpipe's limit
 * of loop trips per invocation (runtime/op_select.c).
 *
 * Defines: USE_SUBGROUP (0/1; 0 treats every invocation as its own subgroup),
 * USE_TEXEL (0/1: the logits through a uniform texel buffer of RGBA32UI texels,
 * the host choosing it only for rows of whole texels; on lavapipe a texel fetch
 * is one gather for the lanes, a storage-buffer load a loop over them).
 * Spec constants: 0 = workgroup size, 1 = expected subgroup size
 * (informational), 2 = MAX_LISTS (shared slots, >= the number of subgroups).
 */
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef USE_SUBGROUP
#error "argmax.comp: define USE_SUBGROUP (0 or 1)"
#endif
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 8;
layout(constant_id = 1) const uint SG = 8;
layout(constant_id = 2) const uint MAX_LISTS = 8;

#define NONE 0xFFFFFFFFu
#define NEG_BIG (-3.402823466e38) /* ties with a real -FLT_MAX lose on the id */

/* Mirrors hs_argmax_push in runtime/op_select.c. */
layout(push_constant) uniform Push {
    uint n_rows;
    uint vocab;
    uint in_base;  /* elements from the binding start to row 0 */
    uint out_base; /* words from the binding start to out[0] */
} p;

#ifndef USE_TEXEL
#define USE_TEXEL 0
#endif
#if USE_TEXEL
layout(binding = 0) uniform usamplerBuffer LT; /* in_base is a multiple of 4 */
#define LOAD4(i) uintBitsToFloat(texelFetch(LT, int(i)))
#else
layout(std430, binding = 0) readonly buffer Logits { float lg[]; };
layout(std430, binding = 0) readonly buffer Logits4 { vec4 lg4[]; };
#define LOAD4(i) lg4[i]
#endif
layout(std430, binding = 1) writeonly buffer Out { uint dst[]; };

#if USE_SUBGROUP
#define SG_ID gl_SubgroupID
#define SG_LANE gl_SubgroupInvocationID
#define SG_SIZE gl_SubgroupSize
#define N_SG gl_NumSubgroups
#define SG_MAX(x) subgroupMax(x)
#define SG_MIN(x) subgroupMin(x)
#else
#define SG_ID gl_LocalInvocationID.x
#define SG_LANE 0u
#define SG_SIZE 1u
#define N_SG WG
#define SG_MAX(x) (x)
#define SG_MIN(x) (x)
#endif

shared float s_val[MAX_LISTS];
shared uint s_id[MAX_LISTS];

float b_val = NEG_BIG;
uint b_id = NONE;

void consider(float v, uint id) {
    /* ids arrive in increasing order per invocation: strict > keeps the first */
    if (v > b_val || b_id == NONE) {
        b_val = v;
        b_id = id;
    }
}

/* Winner of the subgroup: largest value, lowest id among equal values. */
uint subgroup_best(float v, uint id, out float bv) {
    bv = SG_MAX(v);
    return SG_MIN(v == bv ? id : NONE);
}

void main() {
    const uint row = gl_WorkGroupID.x;
    if (row >= p.n_rows) return; /* uniform per workgroup */
    const uint vocab = p.vocab;
    const uint base = p.in_base + row * vocab;
    const uint n_chunks = (vocab + 3u) / 4u;

    if ((vocab & 3u) == 0u && (p.in_base & 3u) == 0u) {
        const uint b4 = base >> 2;
        for (uint c = gl_LocalInvocationID.x; c < n_chunks; c += WG) {
            const vec4 v = LOAD4(b4 + c);
            consider(v.x, 4u * c);
            consider(v.y, 4u * c + 1u);
            consider(v.z, 4u * c + 2u);
            consider(v.w, 4u * c + 3u);
        }
    }
#if !USE_TEXEL
    else {
        /* No inner loop: llvmpipe counts every loop trip (see op_select.c). */
        for (uint c = gl_LocalInvocationID.x; c < n_chunks; c += WG) {
            const uint i0 = 4u * c;
            consider(lg[base + i0], i0);
            if (i0 + 1u < vocab) consider(lg[base + i0 + 1u], i0 + 1u);
            if (i0 + 2u < vocab) consider(lg[base + i0 + 2u], i0 + 2u);
            if (i0 + 3u < vocab) consider(lg[base + i0 + 3u], i0 + 3u);
        }
    }
#endif

    float bv;
    uint bid = subgroup_best(b_val, b_id, bv);
    if (N_SG > 1u) {
        if (N_SG > MAX_LISTS) {
            /* More subgroups than the host planned for: fail visibly. */
            if (gl_LocalInvocationID.x == 0u) dst[p.out_base + row] = NONE;
            return;
        }
        if (SG_LANE == 0u) {
            s_val[SG_ID] = bv;
            s_id[SG_ID] = bid;
        }
        barrier(); /* every subgroup's winner is visible to subgroup 0 */
        if (SG_ID != 0u) return;
        float v = NEG_BIG;
        uint id = NONE;
        for (uint l = SG_LANE; l < N_SG; l += SG_SIZE)
            if (s_id[l] != NONE && (s_val[l] > v || (s_val[l] == v && s_id[l] < id))) {
                v = s_val[l];
                id = s_id[l];
            }
        bid = subgroup_best(v, id, bv);
    }
    if (SG_LANE == 0u) dst[p.out_base + row] = bid;
}
