// dlsym interposition: how programs that never call an exported CUDA symbol
// (static cudart, cuBLAS, NCCL, JAX) are seen. Only exact names of driver
// functions we wrap are intercepted (never a "cu" prefix: cudnn*, cublas*
// pass through untouched), and every other lookup, RTLD_NEXT included,
// reaches the real dlsym by a tail jump so it still resolves relative to the
// original caller.
#pragma once

namespace torchseal {

// glibc's dlsym, found with dlvsym so our own interposer is skipped.
void *real_dlsym(void *handle, const char *name);

// Whether the shim's symbols win the global lookup, i.e. it was preloaded
// (LD_PRELOAD) rather than loaded through CUDA_INJECTION64_PATH alone: only
// then do the hooks see the program's calls.
bool shim_interposed();

}  // namespace torchseal
