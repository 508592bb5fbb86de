/* q8x.glsl — the 8-bit form of one 32-element block of activations (x8), as
 * q4_1 products on 8-bit activations read it (matmul.comp, XQ8): xq =
 * roundEven(v * 127 / amax), d = amax / 127, four uvec4 of pairs (word 4m + t:
 * xq[8m + t + 4] + 65536 xq[8m + t]) and a fifth (d, d * sum(xq), 0, sx):
 * d and d * sum(xq) as float bits, sx the sum of the 16 pair words modulo
 * 2^32 (the products' bias terms, matmul.comp). Every writer of x8 (matmul_pro's OUT_Q8, attention's OUT_Q8) uses
 * this one function, so the same block gives the same bits.
 *
 * x8n (hs_q8n_block) is the input of a product whose RMSNorm is deferred: the
 * block of h * g in that form, with the block's sum of squares of h in the
 * fifth uvec4's z. The product sums the blocks' z in block order, takes
 * 1 / sqrt(sum / cols + eps) and multiplies its result by it (matmul.comp,
 * XQ8 with PROLOGUE 1): the 8-bit integers of h * g and of RMSNorm(h) * g are
 * the same up to the rounding of the division by amax, so the norm needs no
 * pass of its own, and a residual product can write x8n of its output in its
 * epilogue. */
#ifndef HS_Q8X_GLSL
#define HS_Q8X_GLSL

void hs_q8_block(vec4 v[8], out uvec4 w[5]) {
    float amax = 0.0;
    for (uint i = 0; i < 8u; i++) {
        const vec4 a = abs(v[i]);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    const float d = amax / 127.0;
    const float id = amax > 0.0 ? 127.0 / amax : 0.0;
    int q[32];
    int sum = 0;
    for (uint i = 0; i < 32u; i++) {
        q[i] = int(roundEven(v[i >> 2][i & 3u] * id));
        sum += q[i];
    }
    uint sx = 0u;
    for (uint m = 0; m < 4u; m++)
        for (uint t = 0; t < 4u; t++) {
            w[m][t] = uint(q[8u * m + t + 4u]) + (uint(q[8u * m + t]) << 16);
            sx += w[m][t];
        }
    w[4] = uvec4(floatBitsToUint(d), floatBitsToUint(d * float(sum)), 0u, sx);
}

/* x8n of one block: v = h * g rounded as hs_q8_block, z = sum of h^2 in
 * element order (one fma chain from +0). */
void hs_q8n_block(vec4 h[8], vec4 g[8], out uvec4 w[5]) {
    vec4 v[8];
    precise float ss = 0.0;
    for (uint i = 0; i < 8u; i++) {
        precise vec4 t = h[i] * g[i];
        v[i] = t;
        ss = fma(h[i].x, h[i].x, ss);
        ss = fma(h[i].y, h[i].y, ss);
        ss = fma(h[i].z, h[i].z, ss);
        ss = fma(h[i].w, h[i].w, ss);
    }
    hs_q8_block(v, w);
    w[4].z = floatBitsToUint(ss);
}

#endif
