/* attention: softmax(q k^T * scale) v over the KV cache, with tree visibility.
 *
 * Query i (of n, capacity; the first n_used are live) sees the cache rows
 * 0 .. n_prefix-1 and the rows n_prefix + j for every bit j set in mask row i
 * (tree nodes live at rows n_prefix .. n_prefix + n_used - 1). n_prefix and
 * n_used are read from the info buffer at run time, so a recorded sequence is
 * replayed unchanged from one decoding step to the next. With live_word = 2
 * (hs_op_attention_cols) the live queries are counted apart, by info word 2,
 * and mask rows span n_cols tree columns instead of n: a draft level's few
 * queries see nodes of earlier levels.
 *
 * Exactness (DESIGN.md section 3): the visible keys of a query form ONE ordered
 * sequence -- prefix rows ascending, then its visible tree rows ascending --
 * and the work is split by a key's ordinal t in it, never by its cache row:
 * lane t % LANES takes key t. Each lane runs its own online softmax over its
 * keys in order, and the LANES partial states are merged in lane order. Every
 * step depends only on ordinals and loaded values and uses fma()/precise, so a
 * node verified inside a tree gives bitwise the output of the same node decoded
 * alone after its ancestors were compacted to the rows right after the prefix,
 * whatever n is.
 *
 * Cost shape (DESIGN.md section 9; on lavapipe every buffer load is paid per
 * lane, uniform or not, so what counts is how many heads share each loaded
 * K/V element): one workgroup per (query, block of HPW query heads sharing one
 * KV head); each row a lane loads serves its HPW heads. No cross-lane
 * operation per key; one barrier per workgroup (the merge), none with
 * SG_MERGE, whose merge through shuffles has the shared-memory merge as its
 * portable twin (the same bits).
 * (Blocking several queries per workgroup to share the prefix rows was tried
 * on lavapipe: the per-lane state outgrew what it keeps in registers, decode
 * became several times slower and pipeline compiles took minutes.)
 * Loops over head_dim are [[unroll]]ed: lavapipe ends an invocation's loops
 * after 65535 trips in total, and only the key loop may spend them.
 *
 * Defines: KV_F16 = 0 (f32 cache, vec4 loads), 2 (f16 cache read as uvec2:
 * four halves, low half first; head_dim % 4 == 0) or 4 (f16 read as uvec4:
 * eight halves; head_dim % 8 == 0). Halves are unpacked from uints, so no
 * 16-bit storage feature is needed. KV_CHUNKS = 1 (each cache one binding) or
 * 4: a layer larger than maxStorageBufferRange is bound as up to 4 windows of
 * chunk_rows rows each (op_elem.h, hs_kv_layer); window 0 at bindings 1/2,
 * window c >= 1 of K at 6 + 2 (c - 1), of V at 7 + 2 (c - 1). A row is read
 * from window row / chunk_rows; the ordinal split and the arithmetic do not
 * change, so the output is bitwise the unsplit kernel's.
 * KV_TEXEL = 1 (KV_F16 = 0 or 4, KV_CHUNKS = 1 only): Q, K and V are uniform
 * texel buffers of RGBA32UI, one texel per vec4 (f32) or per eight halves (f16):
 * on llvmpipe a texel fetch is one gather where a storage-buffer load loops
 * over the lanes (bench-ops attention, ctx 1024: about 2x faster at N = 1 and
 * N = 64). Same bits loaded, same results.
 * QBLOCK = 1 (KV_F16 = 0 or 4, KV_CHUNKS = 1): the queries of a tree share the
 * prefix's K/V loads. A workgroup takes QB queries (spec constant 4) and runs
 * for each exactly the lanes above: invocation (lane, j) is lane `lane` of
 * query j, with the same keys (ordinals lane, lane + LANES, ...), the same
 * merge, and for each head fold()'s operations in fold()'s order (the heads'
 * interleaved, each shuffled unit used by all of them at once), so every
 * output is bitwise the one-query kernel's.
 * The QB invocations of a lane sit side by side in one subgroup (index
 * gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID, QB dividing the
 * subgroup size), and the prefix is the same for all of them: each loads
 * KV_PER_ROW / QB units of a prefix row and subgroupShuffle hands the row
 * around (a shuffle is cheap on lavapipe, a load is a gather), so a prefix
 * row costs a lane 2 KV_PER_ROW / QB loads instead of 2 KV_PER_ROW. Tree keys
 * differ per query and are loaded as above, except in a block of a causal
 * chain (prompt processing, a chain's verification): there every live query
 * sees nodes 0 .. its own, so a node's ordinal is its row for all of them and
 * the block shares those rows' loads as well, each query folding only the
 * rows it sees (the others are exact no-ops). Units are shuffled as loaded
 * (eight halves of an f16 cache as one uvec4) and unpacked after, which is
 * exact. Needs KV_PER_ROW % QB == 0.
 * Spec constants: 0 = workgroup size (== LANES, QBLOCK: LANES * QB), 1 =
 * LANES, 2 = HEAD_DIM (multiple of 4), 3 = HPW (divides n_head / n_kv_head),
 * 4 = QB (QBLOCK).
 * Shared memory: QB * LANES * HPW * (HEAD_DIM + 2) floats (QB = 1 without
 * QBLOCK), plus QB * HPW * HEAD_DIM with OUT_Q8.
 */
#version 450
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_control_flow_attributes : require
#ifndef QBLOCK
#define QBLOCK 0
#endif
#ifndef SG_MERGE
#define SG_MERGE 0
#endif
#if QBLOCK || SG_MERGE
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#endif
#if QBLOCK
#if (KV_F16 != 0 && KV_F16 != 4) || (defined(KV_CHUNKS) && KV_CHUNKS != 1)
#error QBLOCK reads an unsplit f32 cache or an f16 one in eight-half units
#endif
#endif

#ifndef KV_CHUNKS
#define KV_CHUNKS 1
#endif
#if KV_CHUNKS != 1 && KV_CHUNKS != 4
#error KV_CHUNKS must be 1 or 4 (HS_KV_MAX_CHUNKS)
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint LANES = 8;
layout(constant_id = 2) const uint HEAD_DIM = 64;
layout(constant_id = 3) const uint HPW = 1;
#if QBLOCK
layout(constant_id = 4) const uint QB = 4;
/* The partial states pass through shared memory in MP parts of D4 / MP
 * columns each (MP divides D4), so that QB queries fit the device's limit. */
layout(constant_id = 5) const uint MP = 1;
#define QN QB
#else
#define QN 1u
#define MP 1u
#endif

const uint D4 = HEAD_DIM / 4u;                  /* vec4 columns of a head */
const uint D4P = D4 / MP;                            /* columns per merge part */
const uint NO = (HPW * D4P + LANES - 1u) / LANES; /* output vec4s per lane in a merge part */
const float NEG = -3.0e38;                      /* "minus infinity" that stays finite */

/* Mirrors hs_attn_push in runtime/op_attn.c. Offsets are in units of the
 * bound array's element (vec4 for q/out, the cache's load unit for k/v, uint
 * for info/mask), relative to the bound ranges: they absorb the slack of
 * aligning binding offsets down to minStorageBufferOffsetAlignment. */
layout(push_constant) uniform Push {
    uint n_ctx;      /* rows of the cache */
    uint n_kv_head;
    uint n_head;
    uint n;          /* query capacity (mask rows) */
    uint group;      /* n_head / n_kv_head */
    uint mask_words; /* ceil(n_cols / 32): uints per mask row */
    uint q_base;     /* first query of this dispatch (q, out bound from it) */
    float scale_log2; /* scale * log2(e): exp2 replaces exp */
    uint q_off;
    uint k_off;
    uint v_off;
    uint o_off;
    uint info_off;
    uint mask_off;
    uint chunk_rows; /* rows per cache window (KV_CHUNKS > 1) */
    uint n_cols;     /* tree columns (mask bits per row); n for hs_op_attention */
    uint live_word;  /* info word of the live query count: 1 (= n_used) or 2 */
    uint pad0;
} p;

#if KV_F16 == 4
#define KV_UNIT uvec4
#define KV_PER_ROW (HEAD_DIM / 8u)
#elif KV_F16 == 2
#define KV_UNIT uvec2
#define KV_PER_ROW (HEAD_DIM / 4u)
#else
#define KV_UNIT vec4
#define KV_PER_ROW (HEAD_DIM / 4u)
#endif

#ifndef KV_TEXEL
#define KV_TEXEL 0
#endif
#if KV_TEXEL && (KV_F16 == 2 || KV_CHUNKS != 1)
#error KV_TEXEL reads an unsplit f32 cache or an f16 one in eight-half units
#endif
#if KV_TEXEL
/* q as well: its HPW * D4 vec4s per lane are a gather each, not a loop over the lanes. */
layout(binding = 0) uniform usamplerBuffer QT;             /* [n][n_head][HEAD_DIM] */
#define Q_LOAD(i) uintBitsToFloat(texelFetch(QT, int(i)))
#else
layout(binding = 0) readonly buffer Q { vec4 q4[]; };       /* [n][n_head][HEAD_DIM] */
#define Q_LOAD(i) q4[i]
#endif
#if KV_TEXEL
layout(binding = 1) uniform usamplerBuffer KT;
layout(binding = 2) uniform usamplerBuffer VT;
#else
layout(binding = 1) readonly buffer K { KV_UNIT kc[]; };    /* [n_ctx][n_kv_head][HEAD_DIM] */
layout(binding = 2) readonly buffer V { KV_UNIT vc[]; };
#endif
layout(binding = 3) readonly buffer Info { uint info[]; };  /* {n_prefix, n_used[, n_live]} */
layout(binding = 4) readonly buffer Mask { uint mask[]; };  /* [n][mask_words] */
#ifndef OUT_Q8
#define OUT_Q8 0
#endif
#if OUT_Q8
/* OUT_Q8 (HEAD_DIM a multiple of 32): out is the 8-bit form of the q4_1
 * products (q8x.glsl), [n][n_head HEAD_DIM / 32 blocks][5 uvec4], bitwise what
 * matmul_pro's OUT_Q8 pass makes of the f32 output, without that pass. */
#include "q8x.glsl"
layout(binding = 5) writeonly buffer O { uvec4 oq4[]; };
#define OUT_UNITS (HEAD_DIM / 32u * 5u) /* out units per head */
#else
layout(binding = 5) writeonly buffer O { vec4 o4[]; };      /* [n][n_head][HEAD_DIM] */
#define OUT_UNITS D4
#endif
#if KV_CHUNKS > 1
/* Windows 1 .. 3 of the caches: rows [c chunk_rows, (c + 1) chunk_rows). */
layout(binding = 6) readonly buffer K1 { KV_UNIT kc1[]; };
layout(binding = 7) readonly buffer V1 { KV_UNIT vc1[]; };
layout(binding = 8) readonly buffer K2 { KV_UNIT kc2[]; };
layout(binding = 9) readonly buffer V2 { KV_UNIT vc2[]; };
layout(binding = 10) readonly buffer K3 { KV_UNIT kc3[]; };
layout(binding = 11) readonly buffer V3 { KV_UNIT vc3[]; };
#endif

/* Partial state of every lane, merged after the key loop. */
shared vec4 s_acc[QN * LANES * HPW * D4P]; /* [query][lane][head][column of the part] */
shared float s_m[QN * LANES * HPW];       /* [query][lane][head] running maximum (log2 units) */
shared float s_l[QN * LANES * HPW];       /* [query][lane][head] running sum */
#if OUT_Q8
shared vec4 s_o[QN * HPW * D4]; /* the merged output, quantized per block after */
#endif

/* Per-lane state of the workgroup's HPW heads. */
vec4 g_q[HPW * D4];   /* scaled queries */
vec4 g_acc[HPW * D4]; /* sum of p * v */
float g_m[HPW], g_l[HPW];
vec4 g_k[D4], g_v[D4]; /* the key row being folded in */

uint g_kvh;

/* Unit c of the row at kb / vb of the bound arrays KC / VC into g_k, g_v. */
#if KV_F16 == 4
#if KV_TEXEL
#define KV_FETCH(KC, VC, c) const uvec4 a = texelFetch(KT, int(kb + c)), b = texelFetch(VT, int(vb + c));
#else
#define KV_FETCH(KC, VC, c) const uvec4 a = KC[kb + c], b = VC[vb + c];
#endif
#define LOAD_UNIT(KC, VC, c)                                                                       \
    {                                                                                              \
        KV_FETCH(KC, VC, c)                                                                        \
        g_k[2u * c] = vec4(unpackHalf2x16(a.x), unpackHalf2x16(a.y));                              \
        g_k[2u * c + 1u] = vec4(unpackHalf2x16(a.z), unpackHalf2x16(a.w));                         \
        g_v[2u * c] = vec4(unpackHalf2x16(b.x), unpackHalf2x16(b.y));                              \
        g_v[2u * c + 1u] = vec4(unpackHalf2x16(b.z), unpackHalf2x16(b.w));                         \
    }
#elif KV_F16 == 2
#define LOAD_UNIT(KC, VC, c)                                                                       \
    {                                                                                              \
        const uvec2 a = KC[kb + c], b = VC[vb + c];                                                \
        g_k[c] = vec4(unpackHalf2x16(a.x), unpackHalf2x16(a.y));                                   \
        g_v[c] = vec4(unpackHalf2x16(b.x), unpackHalf2x16(b.y));                                   \
    }
#elif KV_TEXEL
#define LOAD_UNIT(KC, VC, c)                                                                       \
    {                                                                                              \
        g_k[c] = uintBitsToFloat(texelFetch(KT, int(kb + c)));                                     \
        g_v[c] = uintBitsToFloat(texelFetch(VT, int(vb + c)));                                     \
    }
#else
#define LOAD_UNIT(KC, VC, c)                                                                       \
    {                                                                                              \
        g_k[c] = KC[kb + c];                                                                       \
        g_v[c] = VC[vb + c];                                                                       \
    }
#endif
#define LOAD_ROW(KC, VC) [[unroll]] for (uint c = 0u; c < KV_PER_ROW; c++) LOAD_UNIT(KC, VC, c)

void load_row(uint row) {
#if KV_CHUNKS > 1
    const uint w = row / p.chunk_rows;
    row -= w * p.chunk_rows;
#endif
    const uint kb = p.k_off + (row * p.n_kv_head + g_kvh) * KV_PER_ROW;
    const uint vb = p.v_off + (row * p.n_kv_head + g_kvh) * KV_PER_ROW;
#if KV_CHUNKS == 1
    LOAD_ROW(kc, vc)
#else
    /* Constant indices only: no descriptor indexing feature needed. */
    if (w == 0u) LOAD_ROW(kc, vc)
    else if (w == 1u) LOAD_ROW(kc1, vc1)
    else if (w == 2u) LOAD_ROW(kc2, vc2)
    else LOAD_ROW(kc3, vc3)
#endif
}

/* The online softmax's step for score s of head slot h: returns the factor
 * alpha by which the accumulators are scaled before the key's term pr * v is
 * added (exp2(m - s) when s raises the running maximum m, else exactly 1.0),
 * sets pr = exp2(s - m) with m updated, and updates the running sum (sum *
 * alpha, then + pr: two roundings). The caller applies alpha to every
 * accumulator whether or not m grew, without a branch: llvmpipe runs both
 * sides of a branch that diverges across lanes, so a rescale behind `if`
 * cost a masked pass over every accumulator at every key. x * 1.0 is x, so
 * applying alpha always changes no bits. vis false (a key the query does not
 * see, in QBLOCK's chain blocks) keeps the state's bits: the maximum does not
 * grow, alpha is 1.0, pr +0.0. */
float rescale_vis(uint h, float s, bool vis, out float pr) {
    const bool grow = vis && s > g_m[h];
    const float alpha = grow ? exp2(g_m[h] - s) : 1.0;
    if (grow) g_m[h] = s;
    pr = vis ? exp2(s - g_m[h]) : 0.0;
    precise float ls = g_l[h] * alpha;
    precise float ls2 = ls + pr;
    g_l[h] = ls2;
    return alpha;
}
float rescale(uint h, float s, out float pr) { return rescale_vis(h, s, true, pr); }

/* Folds the loaded row into head slot h: the one update every key of every
 * query goes through, in ordinal order. */
void fold(uint h) {
    precise vec4 a = vec4(0.0);
    [[unroll]] for (uint c = 0u; c < D4; c++) a = fma(g_q[h * D4 + c], g_k[c], a);
    precise float s = (a.x + a.y) + (a.z + a.w);
    float pr;
    const float alpha = rescale(h, s, pr);
    [[unroll]] for (uint c = 0u; c < D4; c++) {
        precise vec4 x = g_acc[h * D4 + c] * alpha;
        precise vec4 y = fma(vec4(pr), g_v[c], x);
        g_acc[h * D4 + c] = y;
    }
}

/* ---- the tree part of one query's sequence ---- */

uint g_qi, g_n_used;
uint g_cw, g_cbits; /* cursor: current mask word and its bits not yet passed */

/* Mask word w of query g_qi, with the bits of nodes >= n_used cleared. */
uint mask_word(uint w) {
    if (w >= p.mask_words || w * 32u >= g_n_used) return 0u;
    const uint m = mask[p.mask_off + g_qi * p.mask_words + w];
    const uint lim = g_n_used - w * 32u;
    return lim >= 32u ? m : (m & ((1u << lim) - 1u));
}

/* Skips k - 1 visible nodes and returns the index of the k-th. */
uint take(uint k) {
    for (;;) {
        const uint c = uint(bitCount(g_cbits));
        if (c >= k || g_cw + 1u >= p.mask_words) break;
        k -= c;
        g_cbits = mask_word(++g_cw);
    }
    for (uint i = 1u; i < k; i++) g_cbits &= g_cbits - 1u;
    const uint j = uint(findLSB(g_cbits));
    g_cbits &= g_cbits - 1u;
    return g_cw * 32u + j;
}

/* Lane `lane` of query slot jq (0 without QBLOCK) leaves its running
 * maximum and sum, and columns part * D4P .. of its accumulators, in shared memory. */
void store_state(uint lane, uint jq, uint part) {
    [[unroll]] for (uint hh = 0u; hh < HPW; hh++) {
        const uint s = (jq * LANES + lane) * HPW + hh;
        s_m[s] = g_m[hh];
        s_l[s] = g_l[hh];
        [[unroll]] for (uint c = 0u; c < D4P; c++) s_acc[s * D4P + c] = g_acc[hh * D4 + part * D4P + c];
    }
}

/* After a barrier: query slot jq's output columns of merge part `part`, the
 * part's outputs lane, lane + LANES, ... merged in lane order, to out at ob
 * (or to s_o with OUT_Q8). */
void merge_out(uint lane, uint jq, uint ob, uint part) {
    const uint sb = jq * LANES * HPW;
    [[unroll]] for (uint j = 0u; j < NO; j++) {
        const uint op = lane + j * LANES;
        if (op >= HPW * D4P) break;
        const uint hh = op / D4P, cp = op % D4P, o = hh * D4 + part * D4P + cp;
        float mx = NEG;
        [[unroll]] for (uint w = 0u; w < LANES; w++) mx = max(mx, s_m[sb + w * HPW + hh]);
        precise float sum = 0.0;
        precise vec4 r = vec4(0.0);
        [[unroll]] for (uint w = 0u; w < LANES; w++) {
            const float e = exp2(s_m[sb + w * HPW + hh] - mx);
            sum = fma(s_l[sb + w * HPW + hh], e, sum);
            r = fma(vec4(e), s_acc[(sb + w * HPW + hh) * D4P + cp], r);
        }
        /* No visible key at all (empty prefix and mask row): zeros. */
#if OUT_Q8
        s_o[jq * HPW * D4 + o] = sum > 0.0 ? r / sum : vec4(0.0);
#else
        o4[ob + o] = sum > 0.0 ? r / sum : vec4(0.0);
#endif
    }
}

#if SG_MERGE
/* SG_MERGE (no QBLOCK; the workgroup is one subgroup of LANES invocations):
 * merge_out without shared memory, where a load is a loop over the lanes.
 * Every invocation merges every output of the workgroup's heads from the
 * lanes' states fetched by shuffles, with merge_out's operations in its order
 * (the same bits), and keeps its own outputs, lane, lane + LANES, ... To out
 * at ob, or to s_o with OUT_Q8. */
void merge_sg(uint lane, uint ob) {
    vec4 mine[NO];
    [[unroll]] for (uint j = 0u; j < NO; j++) mine[j] = vec4(0.0);
    [[unroll]] for (uint hh = 0u; hh < HPW; hh++) {
        float mx = NEG;
        [[unroll]] for (uint w = 0u; w < LANES; w++) mx = max(mx, subgroupShuffle(g_m[hh], w));
        precise float sum = 0.0;
        float e[LANES];
        [[unroll]] for (uint w = 0u; w < LANES; w++) {
            e[w] = exp2(subgroupShuffle(g_m[hh], w) - mx);
            sum = fma(subgroupShuffle(g_l[hh], w), e[w], sum);
        }
        [[unroll]] for (uint c = 0u; c < D4; c++) {
            precise vec4 r = vec4(0.0);
            [[unroll]] for (uint w = 0u; w < LANES; w++) r = fma(vec4(e[w]), subgroupShuffle(g_acc[hh * D4 + c], w), r);
            const uint o = hh * D4 + c;
            if (o % LANES == lane) mine[o / LANES] = sum > 0.0 ? r / sum : vec4(0.0);
        }
    }
    [[unroll]] for (uint j = 0u; j < NO; j++) {
        const uint o = lane + j * LANES;
        if (o >= HPW * D4) break;
#if OUT_Q8
        s_o[o] = mine[j];
#else
        o4[ob + o] = mine[j];
#endif
    }
}
#endif

#if OUT_Q8
/* After a barrier: the 8-bit blocks of query slot jq's merged output. */
void quantize_out(uint lane, uint jq, uint ob) {
    for (uint bb = lane; bb < HPW * D4 / 8u; bb += LANES) {
        vec4 v[8];
        for (uint i = 0u; i < 8u; i++) v[i] = s_o[jq * HPW * D4 + 8u * bb + i];
        uvec4 w[5];
        hs_q8_block(v, w);
        for (uint i = 0u; i < 5u; i++) oq4[ob + 5u * bb + i] = w[i];
    }
}
#endif

/* The zeros of a query slot beyond the live tree, for the ops downstream. */
void zero_out(uint lane, uint ob) {
#if OUT_Q8
    for (uint c = lane; c < HPW * OUT_UNITS; c += LANES) oq4[ob + c] = uvec4(0u); /* x8 of zeros */
#else
    for (uint c = lane; c < HPW * D4; c += LANES) o4[ob + c] = vec4(0.0);
#endif
}

/* Query g_qi's visible key count; sets the tree cursor to its first mask word. */
uint visible_keys(uint n_prefix) {
    uint n_vis = n_prefix;
    const uint used_words = min((g_n_used + 31u) / 32u, p.mask_words);
    for (uint w = 0u; w < used_words; w++) n_vis += uint(bitCount(mask_word(w)));
    g_cw = 0u;
    g_cbits = mask_word(0u);
    return n_vis;
}

/* Scaled queries of heads h0 .. h0 + HPW - 1 of q row ql, empty states. */
void init_state(uint ql, uint h0) {
    [[unroll]] for (uint hh = 0u; hh < HPW; hh++) {
        g_m[hh] = NEG;
        g_l[hh] = 0.0;
        [[unroll]] for (uint c = 0u; c < D4; c++) {
            g_acc[hh * D4 + c] = vec4(0.0);
            g_q[hh * D4 + c] = Q_LOAD(p.q_off + (ql * p.n_head + h0 + hh) * D4 + c) * p.scale_log2;
        }
    }
}

/* The cache row of query g_qi's tree key with ordinal t (>= n_prefix): a lane's
 * first tree key is the (t - n_prefix + 1)-th visible node, each later one LANES on. */
uint tree_row(uint t, uint n_prefix, inout bool first_tree) {
    const uint row = min(n_prefix + take(first_tree ? t - n_prefix + 1u : LANES), p.n_ctx - 1u);
    first_tree = false;
    return row;
}

#if QBLOCK
/* Whether query g_qi (< n_used) sees exactly the tree nodes 0 .. g_qi, as every query of a causal chain
 * (prompt processing, chain drafts) does: then the ordinal of its key in row r is r. */
bool chain_row() {
    const uint used_words = min((g_n_used + 31u) / 32u, p.mask_words), k = g_qi + 1u;
    bool ok = true;
    for (uint w = 0u; w < used_words; w++) {
        const uint want = k >= 32u * (w + 1u) ? 0xFFFFFFFFu : (k > 32u * w ? (1u << (k - 32u * w)) - 1u : 0u);
        ok = ok && mask_word(w) == want;
    }
    return ok;
}

/* Query g_qi's tree keys dealt to `lane` from ordinal t on (t >= n_prefix, t = lane mod LANES). */
void fold_tree(uint lane, uint t, uint n_prefix, uint n_vis) {
    bool first_tree = true;
    for (; t < n_vis; t += LANES) {
        load_row(tree_row(t, n_prefix, first_tree));
        [[unroll]] for (uint hh = 0u; hh < HPW; hh++) fold(hh);
    }
}
#endif

#if !QBLOCK
void main() {
#if SG_MERGE
    const uint lane = gl_SubgroupInvocationID; /* what the merge's shuffles index */
#else
    const uint lane = gl_LocalInvocationID.x;
#endif
    const uint nhb = p.group / HPW;
    g_kvh = gl_WorkGroupID.x / nhb;
    const uint h0 = g_kvh * p.group + (gl_WorkGroupID.x % nhb) * HPW;
    const uint ql = gl_WorkGroupID.y; /* q and out are bound from query q_base on */
    g_qi = p.q_base + ql;
    if (g_qi >= p.n) return; /* uniform per workgroup */
    const uint ob = p.o_off + (ql * p.n_head + h0) * OUT_UNITS;

    const uint n_prefix = min(info[p.info_off], p.n_ctx);
    g_n_used = min(min(info[p.info_off + 1u], p.n_cols), p.n_ctx - n_prefix);
    uint n_live = g_n_used;
    if (p.live_word != 1u) n_live = min(info[p.info_off + 2u], p.n); /* word 2 is bound only then */
    if (g_qi >= n_live) {
        zero_out(lane, ob);
        return; /* uniform per workgroup */
    }
    const uint n_vis = visible_keys(n_prefix);
    init_state(ql, h0);

    /* Keys t = lane, lane + LANES, ... of the visible sequence. One loop body
     * for prefix and tree keys: only the row differs, never the arithmetic
     * (one copy of the unrolled fold: the kernel every decoded token runs). */
    bool first_tree = true;
    for (uint t = lane; t < n_vis; t += LANES) {
        load_row(t < n_prefix ? t : tree_row(t, n_prefix, first_tree));
        [[unroll]] for (uint hh = 0u; hh < HPW; hh++) fold(hh);
    }

#if SG_MERGE
    merge_sg(lane, ob);
#else
    store_state(lane, 0u, 0u);
    barrier(); /* every lane's partial state is visible */
    merge_out(lane, 0u, ob, 0u);
#endif
#if OUT_Q8
    barrier(); /* the whole output is in s_o */
    quantize_out(lane, 0u, ob);
#endif
}
#else
/* Row t folded into every head by the QB slots of a lane together: slot j
 * loads units j, j + QB, ... of K and V, unit c comes from slot c % QB.
 * fold() for every head, each head's operations in fold's order, but
 * interleaved so that each shuffled K or V unit is used by all heads at once
 * (no copy of the row is kept: fewer live registers). CHECK: rows past a
 * slot's visible keys (t >= n_vis) leave its state as it was. */
#if KV_TEXEL && KV_F16 == 4
#define HS_KV_UNIT(KB, VB, i)                                                                      \
    kp[i] = texelFetch(KT, int(KB + j + i * QB));                                                  \
    vp[i] = texelFetch(VT, int(VB + j + i * QB));
#elif KV_TEXEL
#define HS_KV_UNIT(KB, VB, i)                                                                      \
    kp[i] = uintBitsToFloat(texelFetch(KT, int(KB + j + i * QB)));                                 \
    vp[i] = uintBitsToFloat(texelFetch(VT, int(VB + j + i * QB)));
#else
#define HS_KV_UNIT(KB, VB, i)                                                                      \
    kp[i] = kc[KB + j + i * QB];                                                                   \
    vp[i] = vc[VB + j + i * QB];
#endif
/* A shuffled cache unit as the vec4 columns it holds: one (f32) or two
 * (eight halves, low half first; unpacking is exact). */
#if KV_F16 == 4
#define VPU 2u
#define KV_SH uvec4
#define UNPACK_UNIT(u, out0, out1)                                                                 \
    out0 = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));                                         \
    out1 = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
#else
#define VPU 1u
#define KV_SH vec4
#define UNPACK_UNIT(u, out0, out1) out0 = u;
#endif
#define HS_SHARED_ROW(CHECK)                                                                       \
    {                                                                                              \
        const uint kb = p.k_off + (t * p.n_kv_head + g_kvh) * KV_PER_ROW;                          \
        const uint vb = p.v_off + (t * p.n_kv_head + g_kvh) * KV_PER_ROW;                          \
        KV_SH kp[PU], vp[PU];                                                                      \
        [[unroll]] for (uint i = 0u; i < PU; i++) { HS_KV_UNIT(kb, vb, i) }                        \
        precise vec4 a[HPW];                                                                       \
        [[unroll]] for (uint hh = 0u; hh < HPW; hh++) a[hh] = vec4(0.0);                           \
        [[unroll]] for (uint u = 0u; u < KV_PER_ROW; u++) {                                        \
            const KV_SH ku = subgroupShuffle(kp[u / QB], first + u % QB);                          \
            vec4 kk[2];                                                                            \
            UNPACK_UNIT(ku, kk[0], kk[1])                                                          \
            [[unroll]] for (uint e = 0u; e < VPU; e++)                                             \
                [[unroll]] for (uint hh = 0u; hh < HPW; hh++)                                      \
                    a[hh] = fma(g_q[hh * D4 + u * VPU + e], kk[e], a[hh]);                         \
        }                                                                                          \
        const bool vis = !(CHECK) || t < n_vis;                                                    \
        float pr[HPW], al[HPW];                                                                    \
        [[unroll]] for (uint hh = 0u; hh < HPW; hh++) {                                            \
            precise float s = (a[hh].x + a[hh].y) + (a[hh].z + a[hh].w);                           \
            al[hh] = rescale_vis(hh, s, vis, pr[hh]);                                              \
        }                                                                                          \
        [[unroll]] for (uint u = 0u; u < KV_PER_ROW; u++) {                                        \
            const KV_SH vu = subgroupShuffle(vp[u / QB], first + u % QB);                          \
            vec4 vv[2];                                                                            \
            UNPACK_UNIT(vu, vv[0], vv[1])                                                          \
            [[unroll]] for (uint e = 0u; e < VPU; e++)                                             \
                [[unroll]] for (uint hh = 0u; hh < HPW; hh++) {                                    \
                    const uint c = u * VPU + e;                                                    \
                    precise vec4 x = g_acc[hh * D4 + c] * al[hh];                                  \
                    precise vec4 y = fma(vec4(pr[hh]), vv[e], x);                                  \
                    g_acc[hh * D4 + c] = vis ? y : g_acc[hh * D4 + c];                             \
                }                                                                                  \
        }                                                                                          \
    }

void main() {
    /* Invocation (lane, j): lane `lane` of query slot j; the QB slots of a
     * lane are neighbours in one subgroup. */
    const uint idx = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
    const uint j = idx % QB, lane = idx / QB;
    const uint first = gl_SubgroupInvocationID - j; /* slot 0 of this lane in the subgroup */
    const uint nhb = p.group / HPW;
    g_kvh = gl_WorkGroupID.x / nhb;
    const uint h0 = g_kvh * p.group + (gl_WorkGroupID.x % nhb) * HPW;
    const uint qb0 = gl_WorkGroupID.y * QB; /* the block's first query, from q_base on */
    const uint ql = qb0 + j;
    g_qi = p.q_base + ql;
    const uint ob = p.o_off + (ql * p.n_head + h0) * OUT_UNITS;

    const uint n_prefix = min(info[p.info_off], p.n_ctx);
    g_n_used = min(min(info[p.info_off + 1u], p.n_cols), p.n_ctx - n_prefix);
    uint n_live = g_n_used;
    if (p.live_word != 1u) n_live = min(info[p.info_off + 2u], p.n); /* word 2 is bound only then */
    /* A slot past the queries or the live tree still loads its share of the
     * prefix rows (with the block's first query, whose row exists). */
    const bool in_range = g_qi < p.n, live = in_range && g_qi < n_live;
    const uint n_vis = live ? visible_keys(n_prefix) : n_prefix;
    init_state(live ? ql : qb0, h0);

    /* Prefix rows t = lane, lane + LANES, ... < n_prefix: the same trip count
     * for the QB slots of a lane (HS_SHARED_ROW). */
    const uint PU = KV_PER_ROW / QB;
    uint t = lane;
    for (; t < n_prefix; t += LANES) HS_SHARED_ROW(false)
    /* A block of a causal chain (every live slot sees tree nodes 0 .. its own, so a node's ordinal is its
     * row for each of them) shares its tree rows the same way: the rows up to its first node's, which
     * every live slot sees, as the prefix (a slot that is not live folds them too, into a state nobody
     * reads); then the rows of its other nodes, each folded by the slots that see it. For the others such
     * a key is a no-op, exactly: the maximum and the accumulators keep their bits, the sum gains +0.0
     * times 1.0. */
    const uint mine = uint(p.live_word == 1u && (!live || chain_row()));
    uint all = mine;
    [[unroll]] for (uint jj = 0u; jj < QB; jj++) all &= subgroupShuffle(mine, first + jj);
    const bool chain = all != 0u;
    const uint qf = p.q_base + qb0; /* the block's first node */
    if (chain && qf < g_n_used) {
        for (; t <= n_prefix + qf; t += LANES) HS_SHARED_ROW(false)
        const uint lim = n_prefix + min(qf + QB, g_n_used); /* past the block's last live node */
        for (; t < lim; t += LANES) HS_SHARED_ROW(true)
    } else if (live) {
        fold_tree(lane, t, n_prefix, n_vis);
    }

    [[unroll]] for (uint part = 0u; part < MP; part++) {
        if (part > 0u) barrier(); /* the last part is merged: its shared state may go */
        store_state(lane, j, part);
        barrier(); /* every slot's and lane's partial state of this part is visible */
        if (live) merge_out(lane, j, ob, part);
    }
    if (!live && in_range) zero_out(lane, ob);
#if OUT_Q8
    barrier(); /* the whole output is in s_o */
    if (live) quantize_out(lane, j, ob);
#endif
}
#endif
