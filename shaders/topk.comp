/* topk: per row of logits, the K largest probabilities of q = softmax(logits / T)
 * with their ids, the tail mass r = 1 - sum(q_j), the Top-K entropy
 * H_K = -(sum_j q_j log q_j + r log r) / log(K + 1) (DESIGN.md section 4), the
 * maximum logit and lse = log sum_i exp(l_i / T). The full distribution is
 * never written: only 2K + 4 words per row go back to the host.
 *
 * One workgroup per row, one pass over the row, no workgroup barrier when the
 * workgroup is one subgroup, one otherwise:
 *   A. each subgroup keeps one sorted top-K list in shared memory (entry j is
 *      handled by lane j mod SG_SIZE) and walks blocks of chunks of 4
 *      elements: chunk c goes to invocation c mod WG; a block is one chunk
 *      per lane, vec4 loads when rows are 16-byte aligned. An element that
 *      does not beat the list's k-th entry can never enter: it goes straight
 *      to the invocation's tail sum of exp((l - head) / T), so the hot loop is
 *      one compare and one exp per element. A block where some lane holds a
 *      candidate leaves the hot loop; its candidates are inserted one per
 *      trip, best first, with subgroup operations and no inner loop; after
 *      each insertion the candidates that no longer beat the k-th entry go to
 *      the tail (so a block costs at most min(k, 4 * SG_SIZE) insertions);
 *      evicted entries join the tail, and a new list head rescales it.
 *   B. the subgroup's tail = sum of its lanes' tails;
 *   C. with several subgroups, subgroup 0 merges the subgroup lists in k
 *      rounds of subgroupMax / subgroupMin after the only barrier; what is not
 *      popped joins the tail.
 * The tail is thus summed from exactly the elements outside the final top-K,
 * never as 1 - sum(q_j), so a peaked row keeps a precise tiny tail mass.
 *
 * lavapipe: llvmpipe runs every branch of a SIMD lane group (masked) and ends
 * the loops of an invocation after 65535 trips in total. Hence the shape
 * above: rare work sits outside the hot loop, every per-entry loop has a
 * constant trip count (unrolled), and the host widens the workgroup with the
 * vocabulary so the worst case (every element a candidate, e.g. an ascending
 * row) stays below the trip limit (runtime/op_select.c, topk_trips).
 *
 * Determinism: ties go to the lower id ((value desc, id asc) is a total order,
 * so the chosen ids do not depend on the traversal). Every sum has a fixed
 * order that depends only on the position inside the row, the workgroup size
 * and the device's subgroup layout; the vec4 and scalar load paths feed the
 * same values in the same order. A row gives bitwise the same record alone,
 * in a batch, or at any buffer offset.
 *
 * Subgroups: counts and ids come from gl_SubgroupSize / gl_NumSubgroups. The
 * per-entry loops cover KMAX entries with SG-strided lanes, so a subgroup
 * smaller than the SG constant, or more subgroups than MAX_LISTS, cannot be
 * handled: the kernel then writes a poison record (ids 0xFFFFFFFF, NaN)
 * instead of a silently wrong one. The host pins the subgroup size where the
 * device allows it.
 *
 * Inputs must be finite (very negative values such as -1e30 work as masks).
 *
 * Defines: USE_SUBGROUP (0/1; 0 treats every invocation as its own subgroup),
 * USE_TEXEL (0/1: the logits through a uniform texel buffer of RGBA32UI texels,
 * which the host chooses only for rows of whole texels: on lavapipe a texel
 * fetch is one gather for the lanes, a storage-buffer load a loop over them;
 * the same values in the same order).
 * Spec constants: 0 = workgroup size, 1 = smallest subgroup size handled
 * (1 for USE_SUBGROUP=0), 2 = MAX_LISTS (shared lists, >= subgroups).
 */
#version 450
#extension GL_GOOGLE_include_directive : require

#ifndef USE_SUBGROUP
#error "topk.comp: define USE_SUBGROUP (0 or 1)"
#endif
#if USE_SUBGROUP
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 8;
layout(constant_id = 1) const uint SG = 8;
layout(constant_id = 2) const uint MAX_LISTS = 1;

#define KMAX 32u /* HS_TOPK_MAX_K */
/* List entries per lane: the per-entry loops run T times (constant: unrolled). */
const uint T = (KMAX + SG - 1u) / SG;
#define NONE 0xFFFFFFFFu
/* Sentinel below every finite logit; ties with a real -FLT_MAX lose on the id. */
#define NEG_BIG (-3.402823466e38)

/* Mirrors hs_topk_push in runtime/op_select.c. */
layout(push_constant) uniform Push {
    uint n_rows;
    uint vocab;
    uint k;
    uint in_base;  /* elements from the binding start to row 0 */
    uint out_base; /* words from the binding start to record 0 */
    float inv_temp;
} p;

/* Two views of the same binding: vec4 loads when rows start 16-byte aligned. */
#ifndef USE_TEXEL
#define USE_TEXEL 0
#endif
#if USE_TEXEL
layout(binding = 0) uniform usamplerBuffer LT; /* in_base and vocab multiples of 4 */
#define LOAD4(i) uintBitsToFloat(texelFetch(LT, int(i)))
#else
layout(std430, binding = 0) readonly buffer Logits { float lg[]; };
layout(std430, binding = 0) readonly buffer Logits4 { vec4 lg4[]; };
#define LOAD4(i) lg4[i]
#endif
/* Per row: ids[k], probs[k], tail, entropy, max, lse (floats as bits). */
layout(std430, binding = 1) writeonly buffer Out { uint dst[]; };

#if USE_SUBGROUP
#define SG_ID gl_SubgroupID
#define SG_LANE gl_SubgroupInvocationID
#define SG_SIZE gl_SubgroupSize
#define N_SG gl_NumSubgroups
#define SG_MAX(x) subgroupMax(x)
#define SG_MIN(x) subgroupMin(x)
#define SG_ADD(x) subgroupAdd(x)
/* Orders a subgroup's accesses to its own list in shared memory (lavapipe runs
 * a subgroup as one SIMD thread: nearly free). */
#define SG_SYNC()                                                                                  \
    subgroupMemoryBarrierShared();                                                                 \
    subgroupBarrier()
#else
#define SG_ID gl_LocalInvocationID.x
#define SG_LANE 0u
#define SG_SIZE 1u
#define N_SG WG
#define SG_MAX(x) (x)
#define SG_MIN(x) (x)
#define SG_ADD(x) (x)
#define SG_SYNC()
#endif

/* Subgroup lists (MAX_LISTS x KMAX), then the final list of stage C (KMAX). */
shared float s_val[(MAX_LISTS + 1u) * KMAX];
shared uint s_id[(MAX_LISTS + 1u) * KMAX];
shared uint s_cnt[MAX_LISTS];
shared float s_tail[MAX_LISTS]; /* relative to the list's head value */
shared uint s_head[MAX_LISTS];  /* stage C pop position, owned by one lane */

/* The subgroup's list, sorted by (value desc, id asc), at s_val[L...]; all
 * but ltail are uniform in the subgroup. */
uint L = 0u;
uint cnt = 0u;
float thr_v = NEG_BIG; /* entry k - 1 once the list is full */
uint thr_id = NONE;
float head = 0.0;  /* entry 0 once the list is not empty */
float ltail = 0.0; /* per invocation: sum of exp((l - head) / T) over its elements outside the list */

bool better(float v, uint id, float bv, uint bid) { return v > bv || (v == bv && id < bid); }

/* Inserts (v, id), uniform in the subgroup and better than the k-th entry if
 * the list is full. No loop with a data-dependent trip count. */
void list_add(float v, uint id) {
    const uint k = p.k;
    const float it = p.inv_temp;
    const bool full = cnt == k;
    uint c = 0u;
    for (uint t = 0u; t < T; t++) {
        const uint j = SG_LANE + SG_SIZE * t;
        if (j < cnt && better(s_val[L + j], s_id[L + j], v, id)) c++;
    }
    const uint pos = SG_ADD(c);
    const uint ncnt = full ? k : cnt + 1u;
    /* Entries (pos, ncnt) take their predecessor: all reads, then all writes. */
    float tv[T];
    uint ti[T];
    for (uint t = 0u; t < T; t++) {
        const uint j = SG_LANE + SG_SIZE * t;
        tv[t] = 0.0;
        ti[t] = 0u;
        if (j > pos && j < ncnt) {
            tv[t] = s_val[L + j - 1u];
            ti[t] = s_id[L + j - 1u];
        }
    }
    SG_SYNC();
    for (uint t = 0u; t < T; t++) {
        const uint j = SG_LANE + SG_SIZE * t;
        if (j > pos && j < ncnt) {
            s_val[L + j] = tv[t];
            s_id[L + j] = ti[t];
        }
    }
    if (SG_LANE == 0u) {
        s_val[L + pos] = v;
        s_id[L + pos] = id;
    }
    SG_SYNC(); /* the list is consistent for every lane again */
    const bool had = cnt > 0u;
    cnt = ncnt;
    if (pos == 0u) {
        if (had) ltail *= exp((head - v) * it);
        head = v;
    }
    /* The evicted old entry k - 1 joins the tail (of lane 0: any fixed lane). */
    if (full && SG_LANE == 0u) ltail += exp((thr_v - head) * it);
    if (cnt == k) {
        thr_v = s_val[L + k - 1u];
        thr_id = s_id[L + k - 1u];
    }
}

void poison(uint ob, uint k) {
    for (uint r = gl_LocalInvocationID.x; r < 2u * k + 4u; r += WG) dst[ob + r] = r < k ? NONE : 0x7FC00000u;
}

void main() {
    const uint row = gl_WorkGroupID.x;
    if (row >= p.n_rows) return; /* uniform per workgroup */
    const uint k = p.k;
    const float it = p.inv_temp;
    const uint vocab = p.vocab;
    const uint base = p.in_base + row * vocab;
    const uint n_chunks = (vocab + 3u) / 4u;
    const uint ob = p.out_base + row * (2u * k + 4u);
    if (N_SG > MAX_LISTS || SG_SIZE < SG) {
        poison(ob, k); /* a layout the host did not plan for (see the top) */
        return;
    }
    const uint g = SG_ID;
    L = g * KMAX;

    /* ---- A ---- */
    const bool vec_ok = (vocab & 3u) == 0u && (p.in_base & 3u) == 0u;
    const uint lid = gl_LocalInvocationID.x;
    uint c0 = 0u; /* block start, uniform in the subgroup */
    for (;;) {
        vec4 v = vec4(NEG_BIG);
        bvec4 ok = bvec4(false), cand = bvec4(false);
        bool found = false;
        /* Hot loop: blocks without a candidate. */
        for (; c0 < n_chunks; c0 += WG) {
            const uint c = c0 + lid;
            const uint i0 = 4u * c;
            v = vec4(NEG_BIG);
            ok = bvec4(false);
            if (c < n_chunks) {
                if (USE_TEXEL != 0 || vec_ok) {
                    v = LOAD4((base >> 2) + c);
                    ok = bvec4(true);
                }
#if !USE_TEXEL
                else {
                    ok = lessThan(uvec4(i0) + uvec4(0u, 1u, 2u, 3u), uvec4(vocab));
                    v.x = lg[base + i0];
                    if (ok.y) v.y = lg[base + i0 + 1u];
                    if (ok.z) v.z = lg[base + i0 + 2u];
                    if (ok.w) v.w = lg[base + i0 + 3u];
                }
#endif
            }
            /* Against the list as it stands: its entries have lower ids than
             * this block, so an equal value loses. */
            const bool open = cnt < k;
            cand = bvec4(ok.x && (open || v.x > thr_v), ok.y && (open || v.y > thr_v),
                         ok.z && (open || v.z > thr_v), ok.w && (open || v.w > thr_v));
            if (SG_MAX(any(cand) ? 1u : 0u) != 0u) {
                found = true;
                break;
            }
            /* No candidate: the list is full (head is set), all go to the tail. */
            if (ok.x) ltail += exp((v.x - head) * it);
            if (ok.y) ltail += exp((v.y - head) * it);
            if (ok.z) ltail += exp((v.z - head) * it);
            if (ok.w) ltail += exp((v.w - head) * it);
        }
        if (!found) break;

        /* A block with candidates. */
        const uint i0 = 4u * (c0 + lid);
        if (ok.x && !cand.x) ltail += exp((v.x - head) * it);
        if (ok.y && !cand.y) ltail += exp((v.y - head) * it);
        if (ok.z && !cand.z) ltail += exp((v.z - head) * it);
        if (ok.w && !cand.w) ltail += exp((v.w - head) * it);
        while (SG_MAX(any(cand) ? 1u : 0u) != 0u) {
            float bv = NEG_BIG;
            uint bi = NONE;
            if (cand.x && better(v.x, i0, bv, bi)) { bv = v.x; bi = i0; }
            if (cand.y && better(v.y, i0 + 1u, bv, bi)) { bv = v.y; bi = i0 + 1u; }
            if (cand.z && better(v.z, i0 + 2u, bv, bi)) { bv = v.z; bi = i0 + 2u; }
            if (cand.w && better(v.w, i0 + 3u, bv, bi)) { bv = v.w; bi = i0 + 3u; }
            const float gv = SG_MAX(bv);
            const uint gi = SG_MIN(bv == gv ? bi : NONE);
            if (gi == i0) cand.x = false;
            if (gi == i0 + 1u) cand.y = false;
            if (gi == i0 + 2u) cand.z = false;
            if (gi == i0 + 3u) cand.w = false;
            list_add(gv, gi);
            if (cnt == k) {
                /* Candidates that no longer beat the k-th entry never will. */
                if (cand.x && !better(v.x, i0, thr_v, thr_id)) { cand.x = false; ltail += exp((v.x - head) * it); }
                if (cand.y && !better(v.y, i0 + 1u, thr_v, thr_id)) { cand.y = false; ltail += exp((v.y - head) * it); }
                if (cand.z && !better(v.z, i0 + 2u, thr_v, thr_id)) { cand.z = false; ltail += exp((v.z - head) * it); }
                if (cand.w && !better(v.w, i0 + 3u, thr_v, thr_id)) { cand.w = false; ltail += exp((v.w - head) * it); }
            }
        }
        c0 += WG;
    }

    /* ---- B: the subgroup's tail, relative to its list head ---- */
    float m = head;
    float tail = SG_ADD(ltail);

    uint list = L; /* the final list in s_val / s_id */
    if (N_SG > 1u) {
        if (SG_LANE == 0u) {
            s_cnt[g] = cnt;
            s_tail[g] = tail;
        }
        barrier(); /* every subgroup's list, count and tail are visible to subgroup 0 */
        if (g != 0u) return;

        /* ---- C: subgroup 0 merges the subgroup lists; lane owns lists lane + j*SG_SIZE ---- */
        list = MAX_LISTS * KMAX;
        for (uint l = SG_LANE; l < N_SG; l += SG_SIZE) s_head[l] = 0u;
        cnt = 0u;
        for (uint r = 0u; r < k; r++) {
            float cv = NEG_BIG;
            uint cid = NONE, cl = 0u;
            for (uint l = SG_LANE; l < N_SG; l += SG_SIZE) {
                const uint h = s_head[l];
                if (h < s_cnt[l] && better(s_val[l * KMAX + h], s_id[l * KMAX + h], cv, cid)) {
                    cv = s_val[l * KMAX + h];
                    cid = s_id[l * KMAX + h];
                    cl = l;
                }
            }
            const float bv = SG_MAX(cv);
            const uint bid = SG_MIN(cv == bv ? cid : NONE);
            if (bid == NONE) break;
            if (cid == bid) s_head[cl]++;
            if (r % SG_SIZE == SG_LANE) {
                s_val[list + r] = bv;
                s_id[list + r] = bid;
            }
            if (r == 0u) m = bv;
            cnt = r + 1u;
        }
        float t = 0.0;
        for (uint l = SG_LANE; l < N_SG; l += SG_SIZE) {
            const uint c = s_cnt[l];
            if (c == 0u) continue;
            t += s_tail[l] * exp((s_val[l * KMAX] - m) * it);
            for (uint i = s_head[l]; i < c; i++) t += exp((s_val[l * KMAX + i] - m) * it);
        }
        tail = SG_ADD(t);
    }

    /* ---- final: probabilities, tail mass, entropy. The list is visible to
     * this lane: stage A ends every change with SG_SYNC, and stage C's entry r
     * is read back by the lane that wrote it (r % SG_SIZE). ---- */
    float e_sum = 0.0;
    for (uint r = SG_LANE; r < cnt; r += SG_SIZE) e_sum += exp((s_val[list + r] - m) * it);
    const float s = SG_ADD(e_sum) + tail;
    const float log_s = log(s);
    float ent = 0.0;
    for (uint r = SG_LANE; r < k; r += SG_SIZE) {
        uint id = NONE;
        float q = 0.0;
        if (r < cnt) {
            const float x = (s_val[list + r] - m) * it;
            id = s_id[list + r];
            q = exp(x) / s;
            /* 0 log 0 = 0; x may be -inf for masked logits */
            if (q > 0.0) ent += q * (x - log_s);
        }
        dst[ob + r] = id;
        dst[ob + k + r] = floatBitsToUint(q);
    }
    ent = SG_ADD(ent);
    if (SG_LANE == 0u) {
        const float rm = tail / s;
        if (tail > 0.0) ent += rm * (log(tail) - log_s);
        const float h = clamp(-ent / log(float(k + 1u)), 0.0, 1.0);
        dst[ob + 2u * k] = floatBitsToUint(rm);
        dst[ob + 2u * k + 1u] = floatBitsToUint(h);
        dst[ob + 2u * k + 2u] = floatBitsToUint(m);
        dst[ob + 2u * k + 3u] = floatBitsToUint(m * it + log_s);
    }
}
