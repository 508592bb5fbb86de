/* q8x.glsl — the 8-bit form of one 32-element block of activations (x8), as
 * q4_1 products on 8-bit activations read it (matmul.comp, XQ8): xq =
 * roundEven(v * 127 / amax), d = amax / 127, four uvec4 of pairs (word 4m + t:
 * xq[8m + t + 4] + 65536 xq[8m + t]) and a fifth (d, d * sum(xq), 0, 0) as
 * bits. Every writer of x8 (matmul_pro's OUT_Q8, attention's OUT_Q8) uses
 * this one function, so the same block gives the same bits. */
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
    for (uint m = 0; m < 4u; m++)
        for (uint t = 0; t < 4u; t++) w[m][t] = uint(q[8u * m + t + 4u]) + (uint(q[8u * m + t]) << 16);
    w[4] = uvec4(floatBitsToUint(d), floatBitsToUint(d * float(sum)), 0u, 0u);
}

#endif
