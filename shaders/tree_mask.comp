/* tree_mask: ancestor bit mask and depth of every node of a draft tree.
 *
 * mask[i][j / 32] bit j % 32 is set iff node j is node i or one of its
 * ancestors; depth[i] is the number of ancestors (root-level nodes, parent -1,
 * have depth 0). Parents are topological (parent[i] < i; the host validates);
 * a parent outside -1 .. i-1 is read as -1, so garbage in unused slots can
 * neither loop nor reach outside the arrays. A chain (parent[i] = i - 1) gives
 * the causal mask.
 *
 * One invocation per node walks its ancestor chain once. Ancestors come in
 * decreasing order, so the row's words are produced from the highest down and
 * each is written exactly once (no clearing pass, no atomics): O(depth + words)
 * work per node, no shared memory, no barrier.
 *
 * Spec constants: 0 = workgroup size.
 */
#version 450
#extension GL_GOOGLE_include_directive : require

layout(local_size_x_id = 0) in;

/* Mirrors hs_tree_mask_push in runtime/op_attn.c. Offsets are in uints,
 * relative to the bound ranges (binding-offset alignment slack). */
layout(push_constant) uniform Push {
    uint n;     /* nodes */
    uint words; /* ceil(n / 32): uints per mask row */
    uint parents_off;
    uint mask_off;
    uint depth_off;
    uint pad0;
} p;

layout(binding = 0) readonly buffer P { int parents[]; }; /* [n] */
layout(binding = 1) writeonly buffer M { uint mask[]; };  /* [n][words] */
layout(binding = 2) writeonly buffer D { int depth[]; };  /* [n] */

void main() {
    const uint i = gl_GlobalInvocationID.x;
    if (i >= p.n) return;
    const uint row = p.mask_off + i * p.words;

    for (uint w = p.words - 1u; w > (i >> 5); w--) mask[row + w] = 0u;

    uint cur = i >> 5;            /* word being assembled */
    uint bits = 1u << (i & 31u);
    uint d = 0u;
    int j = int(i);
    for (;;) {
        const int par = parents[p.parents_off + uint(j)];
        if (par < 0 || par >= j) break;
        d++;
        const uint pw = uint(par) >> 5;
        if (pw != cur) {
            mask[row + cur] = bits;
            for (uint w = cur - 1u; w > pw; w--) mask[row + w] = 0u;
            cur = pw;
            bits = 0u;
        }
        bits |= 1u << (uint(par) & 31u);
        j = par;
    }
    mask[row + cur] = bits;
    for (uint w = 0u; w < cur; w++) mask[row + w] = 0u;
    depth[p.depth_off + i] = int(d);
}
