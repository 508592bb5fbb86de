#version 450
// The barrier of split execution (runtime/vk_seq.c): each part's queue runs
// this one workgroup where the sequence has a barrier; it counts its part in
// and waits until every part has arrived (count >= parts x the barrier's
// number; the host zeroes the counters before each submit). Split execution
// runs only on lavapipe, whose parts are CPU threads on one coherent memory,
// so the atomics and buffer barriers here order the parts' writes.
// One invocation per lane of the driver's vector (local_size_x_id 0: the
// subgroup size, 8 with 256-bit vectors, 16 with 512), all waiting alike: with
// fewer, llvmpipe's loops also run the vector's idle lanes and exit only at its
// loop limit, so every barrier would wait that long (tests/wide_vectors). That
// limit (65535 iterations of all loops of one invocation together) bounds a
// workgroup's wait, so the dispatch is indirect, its workgroups run one after
// the other by the part's thread, each waiting on while the barrier is not
// reached (one that finds it reached returns at once), and each iteration reads
// the counter 64 times. The host asks for 4 workgroups, and for 64 on a
// sequence's first submit, where a part may compile a shader variant the others
// do not wait for in their own compiles (llvmpipe compiles on first use; a wait
// of 16 reads per iteration, 4 workgroups, was once exceeded under
// AddressSanitizer). Measured (test_runtime's split_stall, 2-core VMs): 4
// workgroups wait 3-6 s on one, about half a second on a faster one. A wait
// that ends without every part counts in `late`, which the host turns into an
// error rather than use what the parts computed (a part descheduled that long,
// or a lost device).
layout(local_size_x_id = 0) in;
layout(std430, binding = 0) buffer Sync {
    uint count;
    uint late;
    uint pad0, pad1;
    uvec4 groups; // the indirect dispatch's arguments (x, 1, 1), set by the host
} s;
layout(push_constant) uniform Push {
    uint target;
} pc;

#define READ done = done || atomicAdd(s.count, 0u) >= pc.target;
#define READ4 READ READ READ READ
#define READ16 READ4 READ4 READ4 READ4
#define READ64 READ16 READ16 READ16 READ16

void main() {
    memoryBarrierBuffer(); // this part's writes before its arrival
    if (gl_WorkGroupID.x == 0u && gl_LocalInvocationIndex == 0u) atomicAdd(s.count, 1u);
    bool done = atomicAdd(s.count, 0u) >= pc.target;
    for (uint i = 0u; i < 65000u && !done; i++) {
        READ64
    }
    if (!done && gl_WorkGroupID.x == gl_NumWorkGroups.x - 1u && gl_LocalInvocationIndex == 0u) atomicAdd(s.late, 1u);
    memoryBarrierBuffer(); // the others' writes before this part's next reads
}
