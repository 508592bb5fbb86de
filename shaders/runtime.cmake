# Kernels of the runtime itself: benchmarks of the device, and the barrier of split execution.
hs_shader(noop noop.comp)
hs_shader(read_bw read_bw.comp)
hs_shader(read_bw_texel read_bw_texel.comp)
hs_shader(spin spin.comp)
