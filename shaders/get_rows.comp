/* get_rows: out[j][:] = dequantized row ids[j] of a device-layout table
 * (quant.glsl), or zeros when ids[j] >= rows.
 *
 * One workgroup per token; invocation t dequantizes 32-element sub-blocks t,
 * t + WG, ... of the row. Ids are read on the device, so a recorded sequence
 * replays with new ids. A table split in chunks gets one dispatch per chunk:
 * each writes the tokens whose row lies in its chunk, and the dispatch with
 * ZERO_INVALID set also writes the zero rows of invalid ids, so every output
 * row is written exactly once. The values are bitwise ggml's dequantization.
 *
 * Defines: TYPE (ggml type id). Spec constants: 0 WG (workgroup size),
 * 1 G (rows per group of the table layout).
 */
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;
layout(constant_id = 1) const uint G = 32;
const uint RW = 1;

#include "quant.glsl"

/* Mirrors hs_get_rows_push in runtime/op_matmul.c. */
layout(push_constant) uniform Push {
    uint rows;         /* rows of the table */
    uint cols;
    uint n;            /* tokens in this dispatch */
    uint nblk;         /* device blocks per row */
    uint group0;       /* first row group of the bound chunk */
    uint ngroups;      /* row groups in the chunk */
    uint tok0;         /* first token of this dispatch */
    uint ids_off;      /* elements */
    uint out_off;      /* elements */
    uint zero_invalid; /* 1: this dispatch writes the zero rows */
    uint pad0, pad1;
} p;

layout(std430, binding = 2) readonly buffer IDS { uint ids[]; };
layout(std430, binding = 3) writeonly buffer OUT { float outv[]; };

void main() {
    const uint j = p.tok0 + gl_WorkGroupID.x;
    if (gl_WorkGroupID.x >= p.n) return;
    const uint id = ids[p.ids_off + j];
    const uint obase = p.out_off + j * p.cols;
    const uint nsub = p.nblk * QSUB;

    if (id >= p.rows) {
        if (p.zero_invalid != 0u)
            for (uint e = gl_LocalInvocationID.x; e < p.cols; e += WG) outv[obase + e] = 0.0;
        return;
    }
    const uint grp = id / G;
    if (grp < p.group0 || grp >= p.group0 + p.ngroups) return; /* another chunk's row */
    const uint gl = grp - p.group0;
    const uint nblk = p.nblk;
    uint ring[1];
    ring[0] = id % G;

    for (uint t = gl_LocalInvocationID.x; t < nsub; t += WG) {
        const uint b = t / QSUB, sub = t % QSUB;
        const uint qb = (gl * nblk + b) * QP * G;
        const uint sbk = (gl * nblk + b) * G;
        HS_LOAD_BLOCK
        HS_LOAD_SUB(sub)
        const uint e0 = b * QK + sub * 32u;
        for (uint gi = 0; gi < 4u; gi++) {
            float w[8];
            /* HS_DEQ8 wants a constant group: expand the four cases */
            if (gi == 0u) {
                HS_DEQ8(0, 0u)
            } else if (gi == 1u) {
                HS_DEQ8(0, 1u)
            } else if (gi == 2u) {
                HS_DEQ8(0, 2u)
            } else {
                HS_DEQ8(0, 3u)
            }
            for (uint t8 = 0; t8 < 8u; t8++) {
                const uint e = e0 + 8u * gi + t8;
                if (e < p.cols) outv[obase + e] = w[t8];
            }
        }
    }
}
