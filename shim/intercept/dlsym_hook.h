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

}  // namespace torchseal
