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
 * Windows: with KV_CHUNKS = 4 one layer larger than maxStorageBufferRange is
 * bound as up to 4 windows of chunk_rows rows (op_elem.h, hs_kv_layer; window
 * 0 at bindings 0/1, window c >= 1 of K at 3 + 2 (c - 1), of V at
 * 4 + 2 (c - 1)), one layer per dispatch. A row is only ever accessed through
 * its own window, so the in-place argument above holds unchanged: accesses
 * through two windows never touch the same memory.
 *
 * Defines: VEC4 (1: the unit is a uvec4, 0: a uint), KV_CHUNKS (1 or 4). Spec
 * constants: 0 = workgroup size. Grid: x = columns, y = layers, z = cache
 * (0: K, 1: V).
 */
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

#if VEC4
#define UNIT uvec4
#else
#define UNIT uint
#endif
#ifndef KV_CHUNKS
#define KV_CHUNKS 1
#endif
#if KV_CHUNKS != 1 && KV_CHUNKS != 4
#error KV_CHUNKS must be 1 or 4 (HS_KV_MAX_CHUNKS)
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
    uint chunk_rows; /* rows per window (KV_CHUNKS > 1) */
} p;

layout(binding = 0) buffer K { UNIT kc[]; };
layout(binding = 1) buffer V { UNIT vc[]; };
layout(binding = 2) readonly buffer G { uint g[]; }; /* {dst_base, m, src[cap]} */
#if KV_CHUNKS > 1
layout(binding = 3) buffer K1 { UNIT kc1[]; };
layout(binding = 4) buffer V1 { UNIT vc1[]; };
layout(binding = 5) buffer K2 { UNIT kc2[]; };
layout(binding = 6) buffer V2 { UNIT vc2[]; };
layout(binding = 7) buffer K3 { UNIT kc3[]; };
layout(binding = 8) buffer V3 { UNIT vc3[]; };

/* Row `row` of the layer's cache, column lb: window and index in it. Constant
 * window indices only: no descriptor indexing feature needed. */
#define WINDOW(row) const uint w = (row) / p.chunk_rows, i = off + lb + ((row) - w * p.chunk_rows) * p.row_units
#define DEFINE_ACCESS(NAME, C0, C1, C2, C3)                                                        \
    UNIT load_##NAME(uint off, uint lb, uint row) {                                                \
        WINDOW(row);                                                                               \
        if (w == 0u) return C0[i];                                                                 \
        if (w == 1u) return C1[i];                                                                 \
        if (w == 2u) return C2[i];                                                                 \
        return C3[i];                                                                              \
    }                                                                                              \
    void store_##NAME(uint off, uint lb, uint row, UNIT x) {                                       \
        WINDOW(row);                                                                               \
        if (w == 0u) C0[i] = x;                                                                    \
        else if (w == 1u) C1[i] = x;                                                               \
        else if (w == 2u) C2[i] = x;                                                               \
        else C3[i] = x;                                                                            \
    }
DEFINE_ACCESS(k, kc, kc1, kc2, kc3)
DEFINE_ACCESS(v, vc, vc1, vc2, vc3)
#define COPY_K(dst, src) store_k(p.k_off, lb, dst, load_k(p.k_off, lb, src))
#define COPY_V(dst, src) store_v(p.v_off, lb, dst, load_v(p.v_off, lb, src))
#else
#define COPY_K(dst, src) kc[p.k_off + lb + (dst) * p.row_units] = kc[p.k_off + lb + (src) * p.row_units]
#define COPY_V(dst, src) vc[p.v_off + lb + (dst) * p.row_units] = vc[p.v_off + lb + (src) * p.row_units]
#endif

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
            if (src != dst) COPY_K(dst, src);
        }
    } else {
        for (uint i = 0u; i < m; i++) {
            const uint src = g[p.info_off + 2u + i];
            if (dst_base >= p.n_ctx || i >= p.n_ctx - dst_base || src >= p.n_ctx) continue;
            const uint dst = dst_base + i;
            if (src != dst) COPY_V(dst, src);
        }
    }
}
