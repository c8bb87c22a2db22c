// Memory that CUDA libraries keep for handles a framework owns for the
// process's life (docs/report-format.md, "library_held"). PyTorch creates a
// cuBLAS and a cuDNN handle per thread and device and never destroys them;
// their workspaces and buffers are live at exit by design, not leaked. The
// same calls made by a program of its own (cublasCreate without
// cublasDestroy) are a leak: the rule is keyed by what the stack shows.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

struct LibraryHolding {
  std::string library;  // "cuBLAS", "cuBLASLt", "cuDNN", "NCCL", "cuFFT"; empty: none
  // True when the library allocated it itself (a frame in the library's
  // module); false for a framework's own workspace for the library, which
  // its caching allocator may have carved from a shared segment.
  bool direct = false;
};

// The library holding memory allocated at this (symbolized) stack, innermost
// frame first:
//  * a frame in a library's module (libcublas, libcublasLt, libcudnn*,
//    libnccl, libcufft) with a framework frame (libtorch*, libc10*) further
//    out: the framework asked the library for a handle or a workspace;
//  * a framework frame that allocates a library's workspace (PyTorch's
//    at::cuda::allocateCUDABlasWorkspace, at::cuda::getCUDABlasLtWorkspace).
LibraryHolding library_holding(const std::vector<NativeFrame> &frames);

// A PyTorch library (libtorch*, libc10*, libshm*, torch's _C extension): its
// frames mark the framework's calls.
bool is_framework_module(std::string_view module);

}  // namespace torchseal
