// PyTorch awareness. In segments mode PyTorch's caching allocator keeps its
// cudaMalloc segments (and pinned-host cache) until exit by design, so memory
// live at exit is cache, not a leak; the verdict comes from growth. Tensors
// mode makes every tensor its own cudaMallocAsync/cudaFreeAsync.
#pragma once

#include <string>

namespace torchseal {

// Merges backend:cudaMallocAsync into an allocator config string, keeping the
// user's other settings (exposed for tests).
std::string with_async_backend(const std::string &conf);

// True when PyTorch's CUDA caching allocator is loaded and not switched to
// the cudaMallocAsync backend.
bool torch_caching_allocator_in_use();

// True when PyTorch's CUDA library (libc10_cuda) is loaded, in any mode.
bool torch_cuda_loaded();

}  // namespace torchseal
