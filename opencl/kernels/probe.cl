// A trivial kernel built once per device before it is chosen automatically: some OpenCL drivers list a
// device but cannot compile for it (an old LLVM that does not know the host CPU), and such a device must be
// skipped with a clear reason rather than fail later inside a layer.
__kernel void probe(__global float* x) { x[get_global_id(0)] += 1.0f; }
