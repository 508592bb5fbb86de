/* gather_rows: dst row d_i := src row s_i (cols floats) for the entries i of
 * this dispatch; s_i and d_i are read on the device from index lists, or are
 * the entry's index itself, so a recorded sequence replays with new rows.
 *
 *   s_i >= src_rows: the row is written as zeros (by the dispatch flagged
 *                    zero_invalid only, so every row is written once)
 *   d_i >= dst_rows: the entry is skipped
 * A source larger than maxStorageBufferRange is bound in windows of rows, one
 * dispatch per window: an entry whose source row lies outside this dispatch's
 * window is another dispatch's. Without an index list a side is bound from the
 * dispatch's first entry on (row = entry).
 *
 * One workgroup per entry (2-D grid past maxComputeWorkGroupCount[0]); lanes
 * take vec4s (use_vec4: cols, strides and offsets multiples of 4) or floats of
 * the row. A copy: no arithmetic, bitwise the source.
 *
 * Spec constants: 0 = workgroup size.
 */
#version 450

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

/* Mirrors hs_gather_rows_push in runtime/op_elem.c. Offsets in floats, from
 * the bound ranges (the slack of aligning binding offsets down). */
layout(push_constant) uniform Push {
    uint n;          /* entries in this dispatch */
    uint i0;         /* index of its first entry */
    uint cols;
    uint src_stride; /* floats between rows */
    uint dst_stride;
    uint src_rows;   /* rows of the whole source; ids at or past it give zeros */
    uint dst_rows;   /* rows of the whole destination; ids at or past it are skipped */
    uint src_row0;   /* rows of the bound source window: [src_row0, src_row0 + src_nrows) */
    uint src_nrows;
    uint dst_row0;   /* first row of the bound destination */
    uint src_off;
    uint dst_off;
    uint sids_off;
    uint dids_off;
    uint flags;      /* 1: source index list, 2: destination index list, 4: zero_invalid, 8: use_vec4 */
    uint pad;
} p;

layout(binding = 0) readonly buffer S { float src[]; };
layout(binding = 0) readonly buffer S4 { vec4 src4[]; };
layout(binding = 1) readonly buffer SI { uint sids[]; };
layout(binding = 2) readonly buffer DI { uint dids[]; };
layout(binding = 3) writeonly buffer D { float dst[]; };
layout(binding = 3) writeonly buffer D4 { vec4 dst4[]; };

void main() {
    const uint e = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
    if (e >= p.n) return; /* uniform per workgroup */
    const uint gi = p.i0 + e;
    const uint s = (p.flags & 1u) != 0u ? sids[p.sids_off + e] : gi;
    const uint d = (p.flags & 2u) != 0u ? dids[p.dids_off + e] : gi;
    if (d >= p.dst_rows) return;
    const uint db = p.dst_off + (d - p.dst_row0) * p.dst_stride;
    const bool v4 = (p.flags & 8u) != 0u;
    if (s >= p.src_rows) {
        if ((p.flags & 4u) == 0u) return;
        if (v4)
            for (uint c = gl_LocalInvocationID.x; c < p.cols / 4u; c += WG) dst4[db / 4u + c] = vec4(0.0);
        else
            for (uint c = gl_LocalInvocationID.x; c < p.cols; c += WG) dst[db + c] = 0.0;
        return;
    }
    if (s < p.src_row0 || s - p.src_row0 >= p.src_nrows) return; /* another window's row */
    const uint sb = p.src_off + (s - p.src_row0) * p.src_stride;
    if (v4)
        for (uint c = gl_LocalInvocationID.x; c < p.cols / 4u; c += WG) dst4[db / 4u + c] = src4[sb / 4u + c];
    else
        for (uint c = gl_LocalInvocationID.x; c < p.cols; c += WG) dst[db + c] = src[sb + c];
}
