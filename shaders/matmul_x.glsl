/* matmul_x.glsl — the activations of a product as its kernels read them:
 * the push constants (mirroring hs_matmul_push in runtime/op_matmul.c), the x
 * and norm-gain bindings (2 and 4) and x' = the prologue of x (PROLOGUE 1:
 * RMSNorm(x) * g, 2: silu(gate) * up). matmul.comp applies it inside the
 * product; matmul_pro.comp writes it out once per column for the products the
 * tuning splits. Both use these functions, so x' is bitwise the same either
 * way. Needs the spec constants PROLOGUE and XVEC4 declared before, and
 * USE_SUBGROUP defined (0/1).
 *
 * USE_UBO_X 1 (needs XVEC4 = 1) binds x as a uniform buffer
 * of XU_VEC4 vec4 (spec constant 7) holding columns xcol0.. of this dispatch:
 * on llvmpipe a uniform-buffer load is one vector gather, where a
 * storage-buffer load loops over the lanes with a branch per lane and
 * component. The loaded bits are the same, so are the results. */
#ifndef HS_MATMUL_X_GLSL
#define HS_MATMUL_X_GLSL

/* Mirrors hs_matmul_push in runtime/op_matmul.c. Offsets are in elements from
 * the start of the bound ranges (they absorb offset alignment). */
layout(push_constant) uniform Push {
    uint rows;     /* valid rows of the weight (outputs per column) */
    uint cols;     /* k: elements per row (x' per column) */
    uint n;        /* columns */
    uint nblk;     /* device blocks per row */
    uint group0;   /* first row group of the bound chunk */
    uint col0;     /* first column of this dispatch */
    uint x_stride; /* floats between columns of x (cols, or 2 cols for swiglu) */
    uint x_off;
    uint y_off;
    uint g_off;
    uint r_off;
    float eps;
    uint y_stride; /* floats between columns of y and res (>= rows) */
    uint xcol0;    /* the column at x_off (the first of the bound window; 0 but with USE_UBO_X) */
    uint q_off;    /* uvec4 offset of the x8n / x8 output (matmul.comp, EPILOGUE bits 1, 2) */
    uint pair;     /* EPILOGUE bit 2: row groups between a gate group and its up group */
    /* EPILOGUE bit 3 (matmul.comp, the Q/K/V product's RoPE + KV write): element offsets of
     * pos, rows, freqs, the Q output and the K and V caches in their bindings, and the shape */
    uint rp_pos_off;
    uint rp_rows_off;
    uint rp_f_off;
    uint rp_q_off;
    uint rp_k_off;
    uint rp_v_off;
    uint rp_n_ctx;   /* cache rows */
    uint rp_head_dim;
    uint rp_n_head;  /* Q heads */
    uint rp_n_kv;    /* K (= V) heads */
    uint rp_n_rot;
    float rp_freq_scale;
} p;

#ifndef USE_UBO_X
#define USE_UBO_X 0
#endif
#ifndef XQ8
#define XQ8 0
#endif
#if USE_UBO_X
layout(constant_id = 7) const uint XU_VEC4 = 1;
#endif
#if XQ8
/* The product's x is the 8-bit form matmul_pro writes (OUT_Q8 there): per column,
 * per 32-element block, five uvec4: four of packed pairs, then d and s. */
#if USE_UBO_X
layout(std140, binding = 2) uniform XU { uvec4 xq4[XU_VEC4]; };
#else
layout(std430, binding = 2) readonly buffer XQ { uvec4 xq4[]; };
#endif
#elif USE_UBO_X
layout(std140, binding = 2) uniform XU { vec4 x4[XU_VEC4]; };
#else
layout(std430, binding = 2) readonly buffer X1 { float x1[]; };
layout(std430, binding = 2) readonly buffer X4 { vec4 x4[]; };
#endif
layout(std430, binding = 4) readonly buffer G1 { float g1[]; };
layout(std430, binding = 4) readonly buffer G4 { vec4 g4[]; };

/* The RMSNorm factor of a column whose sum of squares is ss. */
float norm_scale(float ss) {
    precise float r = 1.0 / sqrt(ss / float(p.cols) + p.eps);
    return r;
}

float hs_silu(float v) {
    precise float e = 1.0 + exp(-v);
    return v / e;
}

#if !XQ8

/* Four raw x elements k..k+3 (k a multiple of 4) of column j, 0 past cols. */
vec4 x_raw(uint j, uint k, uint extra) {
    const uint base = p.x_off + (j - p.xcol0) * p.x_stride + extra + k;
#if USE_UBO_X
    return k < p.cols ? x4[base >> 2] : vec4(0.0);
#else
    if (XVEC4 != 0) return k < p.cols ? x4[base >> 2] : vec4(0.0);
    vec4 v;
    for (uint e = 0; e < 4; e++) v[e] = k + e < p.cols ? x1[base + e] : 0.0;
    return v;
#endif
}

vec4 g_raw(uint k) {
    if (XVEC4 != 0) return k < p.cols ? g4[(p.g_off + k) >> 2] : vec4(0.0);
    vec4 v;
    for (uint e = 0; e < 4; e++) v[e] = k + e < p.cols ? g1[p.g_off + k + e] : 0.0;
    return v;
}

/* x'[j][k..k+3] after the prologue. scale: the RMSNorm factor of column j. */
vec4 x_in(uint j, uint k, float scale) {
    precise vec4 v = x_raw(j, k, 0u);
    if (PROLOGUE == 1) {
        v = (v * scale) * g_raw(k);
    } else if (PROLOGUE == 2) {
        const vec4 up = x_raw(j, k, p.cols);
        v = vec4(hs_silu(v.x), hs_silu(v.y), hs_silu(v.z), hs_silu(v.w)) * up;
    }
    return v;
}

/* Sum of squares of slot `slot` (elements 4 slot..4 slot+3 of every 32-element
 * sub-block) of column j, in k order. */
float sumsq_slot(uint j, uint slot) {
    precise float s = 0.0;
    for (uint k0 = 0; k0 < p.cols; k0 += 32u) {
        const vec4 v = x_raw(j, k0 + 4u * slot, 0u);
        s = fma(v.x, v.x, s);
        s = fma(v.y, v.y, s);
        s = fma(v.z, v.z, s);
        s = fma(v.w, v.w, s);
    }
    return s;
}

/* The RMSNorm factor of column j: the 8 slot sums combined in a fixed tree. */
float norm_of(uint j) {
    precise float q[8];
    for (uint v = 0; v < 8u; v++) q[v] = sumsq_slot(j, v);
    precise float t = ((q[0] + q[1]) + (q[2] + q[3])) + ((q[4] + q[5]) + (q[6] + q[7]));
    return norm_scale(t);
}

#if USE_SUBGROUP
/* norm_of with the subgroup's help (subgroups of at least 8 lanes): lane
 * sid < 8 sums slot sid, and shuffles with xor 1, 2, 4 add them in norm_of's
 * tree, so the factor is bitwise the same. Needs the subgroup shuffle
 * extensions enabled before the include. */
float norm_of_sg(uint j, uint sid) {
    precise float t = sid < 8u ? sumsq_slot(j, sid) : 0.0;
    t = t + subgroupShuffleXor(t, 1u);
    t = t + subgroupShuffleXor(t, 2u);
    t = t + subgroupShuffleXor(t, 4u);
    if (gl_SubgroupSize > 8u) t = subgroupShuffle(t, sid & 7u);
    return norm_scale(t);
}
#endif

#endif /* !XQ8 */

#endif
