#version 450
// Device read bandwidth (bench-ops): each invocation streams uvec4s with a
// grid stride and writes one word, so the loads cannot be optimised away.
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) readonly buffer In { uvec4 data[]; } src;
layout(std430, binding = 1) writeonly buffer Out { uint data[]; } dst;
layout(push_constant) uniform Push { uint n_vec4; uint stride; } pc;
void main() {
    uint i = gl_GlobalInvocationID.x;
    uvec4 acc = uvec4(0);
    for (uint j = i; j < pc.n_vec4; j += pc.stride) acc ^= src.data[j];
    dst.data[i] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
