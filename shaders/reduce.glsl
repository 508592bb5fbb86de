/* reduce.glsl — workgroup-wide reductions (sum, max) with a fixed order.
 *
 * Usage: before including, define
 *   USE_SUBGROUP   1: subgroup arithmetic + one shared-memory step across subgroups;
 *                  0: portable path, shared memory only (no subgroup extension needed)
 *   HS_REDUCE_WG   the workgroup size (usually the local_size_x_id spec constant)
 * and call the functions from uniform control flow: every invocation of the
 * workgroup must reach them (they contain barrier()). Every invocation gets the
 * same result.
 *
 * Order: the result depends only on the values each invocation passes in, the
 * workgroup size and the device's subgroup layout, never on which workgroup or
 * how many workgroups run, so a row reduced alone and the same row reduced in a
 * batch give bitwise the same value (DESIGN.md section 3). The cross-subgroup
 * step adds the subgroup partials sequentially in subgroup-id order; the
 * portable path adds all invocations' values sequentially in invocation order.
 * Both take at most two barriers, instead of the log2(WG) of a shared tree.
 * hs_kahan_add is the compensated step for an invocation's own partial sum.
 *
 * The number of subgroups is read from gl_NumSubgroups rather than derived from
 * a subgroup-size constant, so a driver that picks a smaller subgroup than
 * expected still stays within the shared array.
 */
#ifndef HS_REDUCE_GLSL
#define HS_REDUCE_GLSL

#ifndef USE_SUBGROUP
#error "reduce.glsl: define USE_SUBGROUP (0 or 1)"
#endif
#ifndef HS_REDUCE_WG
#error "reduce.glsl: define HS_REDUCE_WG (the workgroup size)"
#endif

#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

/* One slot per invocation is enough for both paths (one per subgroup is used
 * on the subgroup path); HS_REDUCE_WG floats stay far below 16 KiB. */
shared float hs_red_buf[HS_REDUCE_WG];

#if USE_SUBGROUP

#define HS_RED_DEFINE(NAME, SG_OP, COMBINE)                                                        \
    float NAME(float v) {                                                                          \
        v = SG_OP(v);                                                                              \
        if (gl_NumSubgroups == 1u) return v;                                                       \
        if (subgroupElect()) hs_red_buf[gl_SubgroupID] = v;                                        \
        barrier(); /* partials of all subgroups are visible */                                     \
        float r = hs_red_buf[0];                                                                   \
        for (uint i = 1u; i < gl_NumSubgroups; i++) r = COMBINE(r, hs_red_buf[i]);                 \
        barrier(); /* every invocation has read them: the buffer may be reused */                  \
        return r;                                                                                  \
    }

#else

#define HS_RED_DEFINE(NAME, SG_OP, COMBINE)                                                        \
    float NAME(float v) {                                                                          \
        hs_red_buf[gl_LocalInvocationID.x] = v;                                                    \
        barrier(); /* values of all invocations are visible */                                     \
        float r = hs_red_buf[0];                                                                   \
        for (uint i = 1u; i < gl_WorkGroupSize.x; i++) r = COMBINE(r, hs_red_buf[i]);              \
        barrier(); /* every invocation has read them: the buffer may be reused */                  \
        return r;                                                                                  \
    }

#endif

/* (s, comp) += v with Kahan compensation, for long per-invocation sums (a
 * plain float sum of 10^4 terms is off by ~1e-4 relative). `precise` keeps
 * the compiler from simplifying the compensation away. */
void hs_kahan_add(inout precise float s, inout precise float comp, float v) {
    precise float t = v - comp;
    precise float u = s + t;
    comp = (u - s) - t;
    s = u;
}

#define HS_RED_ADD(a, b) ((a) + (b))
#define HS_RED_MAX(a, b) max((a), (b))

/* Sum over the workgroup. */
HS_RED_DEFINE(hs_wg_sum, subgroupAdd, HS_RED_ADD)
/* Maximum over the workgroup (NaN handling as GLSL max()). */
HS_RED_DEFINE(hs_wg_max, subgroupMax, HS_RED_MAX)

#endif
