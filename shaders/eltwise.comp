/* eltwise: element-wise ops over flat f32 arrays, and the gated MLP activations.
 *
 *   OP_ADD    y = a + b            OP_MUL    y = a * b
 *   OP_SCALE  y = s * a            OP_GELU   y = gelu(a)
 *   OP_SILU   y = silu(a)
 *   OP_SWIGLU y[t][j] = silu(a[t][j]) * a[t][ff + j]    (a = gate | up per token)
 *   OP_GEGLU  y[t][j] = gelu(a[t][j]) * a[t][ff + j]
 *
 * gelu is the tanh approximation (gelu_pytorch_tanh, ggml's GGML_OP_GELU),
 * written as x * (1 - 1 / (exp(2u) + 1)) so that it saturates to x or 0 instead
 * of producing NaN when exp overflows.
 *
 * Work comes in chunks of four consecutive elements: one vec4 access per
 * operand when all offsets (and ff) are multiples of 4 (use_vec4), scalar
 * accesses otherwise (with bounds checks on the last chunk). Invocations loop
 * over chunks with a grid stride, so a few workgroups cover any count
 * (llvmpipe pays about a microsecond per workgroup). Gated ops: token =
 * gl_WorkGroupID.y, so no integer division is needed (llvmpipe scalarises it).
 * y may alias a (or b) exactly, not the gated input.
 *
 * Bindings: binary ops a = 0, b = 1, y = 2; the others a = 0, y = 1.
 * Spec constants: 0 = workgroup size.
 */
#version 450
#extension GL_GOOGLE_include_directive : require

#define OP_ADD 1
#define OP_MUL 2
#define OP_SCALE 3
#define OP_GELU 4
#define OP_SILU 5
#define OP_SWIGLU 6
#define OP_GEGLU 7

#ifndef OP
#error "eltwise.comp: define OP"
#endif
#define BINARY (OP == OP_ADD || OP == OP_MUL)
#define GATED (OP == OP_SWIGLU || OP == OP_GEGLU)

layout(local_size_x_id = 0) in;
layout(constant_id = 0) const uint WG = 64;

/* Mirrors hs_eltwise_push in runtime/op_elem.c. */
layout(push_constant) uniform Push {
    uint count;    /* flat: elements in this dispatch; gated: tokens */
    uint ff;       /* gated: outputs per token; a has 2 * ff per token */
    uint a_off;
    uint b_off;
    uint y_off;
    float s;
    uint use_vec4; /* 1: every offset (and ff) is a multiple of 4 */
    uint pad;
} p;

/* Scalar and vec4 views of the same bindings. */
layout(binding = 0) readonly buffer A { float a[]; };
layout(binding = 0) readonly buffer A4 { vec4 a4[]; };
#if BINARY
layout(binding = 1) readonly buffer B { float b[]; };
layout(binding = 1) readonly buffer B4 { vec4 b4[]; };
layout(binding = 2) writeonly buffer Y { float y[]; };
layout(binding = 2) writeonly buffer Y4 { vec4 y4[]; };
#else
layout(binding = 1) writeonly buffer Y { float y[]; };
layout(binding = 1) writeonly buffer Y4 { vec4 y4[]; };
#endif

vec4 gelu(vec4 v) {
    const float GELU_COEF_A = 0.044715;
    const float SQRT_2_OVER_PI = 0.79788456080286535587989211986876;
    const vec4 u = SQRT_2_OVER_PI * v * (1.0 + GELU_COEF_A * v * v);
    return v * (1.0 - 1.0 / (exp(2.0 * u) + 1.0));
}

vec4 silu(vec4 v) { return v / (1.0 + exp(-v)); }

/* Elements e .. e+3 (e a multiple of 4 when use_vec4) of a view, only the first
 * `valid` of them in the scalar path. */
vec4 load_a(uint e, uint valid) {
    if (p.use_vec4 != 0u) return a4[e / 4u];
    return vec4(a[e], valid > 1u ? a[e + 1u] : 0.0, valid > 2u ? a[e + 2u] : 0.0, valid > 3u ? a[e + 3u] : 0.0);
}

#if BINARY
vec4 load_b(uint e, uint valid) {
    if (p.use_vec4 != 0u) return b4[e / 4u];
    return vec4(b[e], valid > 1u ? b[e + 1u] : 0.0, valid > 2u ? b[e + 2u] : 0.0, valid > 3u ? b[e + 3u] : 0.0);
}
#endif

void store_y(uint e, uint valid, vec4 v) {
    if (p.use_vec4 != 0u) {
        y4[e / 4u] = v;
        return;
    }
    y[e] = v.x;
    if (valid > 1u) y[e + 1u] = v.y;
    if (valid > 2u) y[e + 2u] = v.z;
    if (valid > 3u) y[e + 3u] = v.w;
}

void main() {
    const uint stride = gl_NumWorkGroups.x * WG;
#if GATED
    const uint t = gl_WorkGroupID.y;
    if (t >= p.count) return;
    const uint chunks = (p.ff + 3u) / 4u;
    for (uint c = gl_GlobalInvocationID.x; c < chunks; c += stride) {
        const uint j = 4u * c;
        const uint valid = min(p.ff - j, 4u);
        const uint g = p.a_off + t * 2u * p.ff + j;
        const vec4 gate = load_a(g, valid), up = load_a(g + p.ff, valid);
#if OP == OP_SWIGLU
        store_y(p.y_off + t * p.ff + j, valid, silu(gate) * up);
#else
        store_y(p.y_off + t * p.ff + j, valid, gelu(gate) * up);
#endif
    }
#else
    const uint chunks = (p.count + 3u) / 4u;
    for (uint c = gl_GlobalInvocationID.x; c < chunks; c += stride) {
        const uint i = 4u * c;
        const uint valid = min(p.count - i, 4u);
        const vec4 va = load_a(p.a_off + i, valid);
#if OP == OP_ADD
        store_y(p.y_off + i, valid, va + load_b(p.b_off + i, valid));
#elif OP == OP_MUL
        store_y(p.y_off + i, valid, va * load_b(p.b_off + i, valid));
#elif OP == OP_SCALE
        store_y(p.y_off + i, valid, p.s * va);
#elif OP == OP_GELU
        store_y(p.y_off + i, valid, gelu(va));
#elif OP == OP_SILU
        store_y(p.y_off + i, valid, silu(va));
#else
#error "eltwise.comp: unknown OP"
#endif
    }
#endif
}
