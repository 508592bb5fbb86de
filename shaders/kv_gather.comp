/* kv_gather: KV-cache compaction after a speculative round.
 *
 * For i = 0 .. m-1: row dst_base + i := row src[i], in the K and the V cache of
 * every layer, in one dispatch. dst_base, m and src[] are read at run time
 * from one uint buffer laid out as {dst_base, m, src[0 .. cap-1]}, so the
 * recorded sequence is replayed unchanged every round; m is clamped to cap, and
 * a pair whose source or destination row is outside n_ctx is skipped.
 *
 * In place: one invocation owns one word column of one layer of one cache and
 * copies the m rows of that column in increasing i. When src is increasing and
 * dst_base + i <= src[i] (the accepted path: rows only move towards the
 * prefix), iteration i' < i writes row dst_base + i' < dst_base + i <= src[i],
 * so no write clobbers a row still to be read in that column; other columns
 * belong to other invocations, so no cross-invocation ordering is needed. The
 * buffers are deliberately not `restrict`: the compiler must keep each load
 * after the earlier stores of the same invocation.
 *
 * Defines: VEC4 (1: the unit is a uvec4, 0: a uint). Spec constants:
 * 0 = workgroup size. Grid: x = columns, y = layers, z = cache (0: K, 1: V).
 */
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

#if VEC4
#define UNIT uvec4
#else
#define UNIT uint
#endif

/* Mirrors hs_kv_gather_push in runtime/op_attn.c. Sizes and offsets are in
 * units (uvec4 or uint) except info_off (uints). */
layout(push_constant) uniform Push {
    uint row_units;   /* one cache row (position) of one layer */
    uint layer_units; /* distance between the layers' caches */
    uint n_ctx;       /* rows per layer */
    uint cap;         /* capacity of src[] */
    uint k_off;
    uint v_off;
    uint info_off;
    uint pad0;
} p;

layout(binding = 0) buffer K { UNIT kc[]; };
layout(binding = 1) buffer V { UNIT vc[]; };
layout(binding = 2) readonly buffer G { uint g[]; }; /* {dst_base, m, src[cap]} */

void main() {
    const uint col = gl_GlobalInvocationID.x;
    if (col >= p.row_units) return;
    const uint dst_base = g[p.info_off];
    const uint m = min(g[p.info_off + 1u], p.cap);
    const uint lb = gl_WorkGroupID.y * p.layer_units + col;

    if (gl_WorkGroupID.z == 0u) {
        for (uint i = 0u; i < m; i++) {
            const uint src = g[p.info_off + 2u + i];
            if (dst_base >= p.n_ctx || i >= p.n_ctx - dst_base || src >= p.n_ctx) continue;
            const uint dst = dst_base + i;
            if (src != dst) kc[p.k_off + lb + dst * p.row_units] = kc[p.k_off + lb + src * p.row_units];
        }
    } else {
        for (uint i = 0u; i < m; i++) {
            const uint src = g[p.info_off + 2u + i];
            if (dst_base >= p.n_ctx || i >= p.n_ctx - dst_base || src >= p.n_ctx) continue;
            const uint dst = dst_base + i;
            if (src != dst) vc[p.v_off + lb + dst * p.row_units] = vc[p.v_off + lb + src * p.row_units];
        }
    }
}
