/* rope.glsl: the rotation of RoPE, shared by rope.comp and the Q/K/V product's
 * epilogue (matmul.comp, EPILOGUE bit 3), so the two give the same bits.
 *
 * rope_cos_sin(theta): cos and sin of theta. Drivers only promise accuracy for
 * sin/cos within [-pi, pi] and positions reach tens of thousands of radians, so
 * reduce by 2 pi first (Cody-Waite: 6.28125 has 8 significant bits, so
 * k * 6.28125 is exact for |k| < 2^16, i.e. |theta| < 4e5; `precise` keeps the
 * compiler from reassociating the steps).
 * rope_rotate(x0, x1, cs): (x0 cos - x1 sin, x0 sin + x1 cos), `precise` so
 * that no variant contracts it into a fused multiply-add differently.
 */
vec2 rope_cos_sin(float theta) {
    precise float k = floor(theta * 0.15915494309189535 + 0.5);
    precise float r = theta - k * 6.28125;
    r = r - k * 1.935307169e-3;
    r = r - k * 1.025313168e-11;
    return vec2(cos(r), sin(r));
}

vec2 rope_rotate(float x0, float x1, vec2 cs) {
    precise float o0 = x0 * cs.x - x1 * cs.y;
    precise float o1 = x0 * cs.y + x1 * cs.x;
    return vec2(o0, o1);
}
