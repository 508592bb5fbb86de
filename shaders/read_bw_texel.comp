#version 450
// Device read bandwidth through a uniform texel buffer (bench-ops): as
// read_bw.comp, but every uvec4 is a texelFetch of an RGBA32UI texel. On
// llvmpipe a texel fetch is a vector gather, where a storage-buffer load is a
// loop over the lanes.
layout(local_size_x_id = 0) in;
layout(binding = 0) uniform usamplerBuffer src;
layout(std430, binding = 1) writeonly buffer Out { uint data[]; } dst;
layout(push_constant) uniform Push { uint n_vec4; uint stride; } pc;
void main() {
    uint i = gl_GlobalInvocationID.x;
    uvec4 acc = uvec4(0);
    for (uint j = i; j < pc.n_vec4; j += pc.stride) acc ^= texelFetch(src, int(j));
    dst.data[i] = acc.x ^ acc.y ^ acc.z ^ acc.w;
}
