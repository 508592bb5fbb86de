#version 450
// Empty kernel: measures the fixed cost of a dispatch (bench-ops).
layout(local_size_x = 1) in;
layout(std430, binding = 0) buffer Out { uint data[]; } out_buf;
void main() {
    if (gl_GlobalInvocationID.x == 0xFFFFFFFFu) out_buf.data[0] = 1u; // never true; keeps the binding live
}
