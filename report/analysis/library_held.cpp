#include "report/analysis/library_held.h"
#include "common/util/path_name.h"

#include <string_view>

namespace torchseal {
namespace {

// Longest prefix first: libcublasLt before libcublas.
struct ModuleRule {
  std::string_view prefix;
  const char *library;
};
constexpr ModuleRule kModules[] = {
    {"libcublasLt.", "cuBLASLt"}, {"libcublas.", "cuBLAS"}, {"libcudnn", "cuDNN"},
    {"libnccl.", "NCCL"},         {"libcufft.", "cuFFT"},
};

const char *library_of_module(std::string_view module) {
  std::string_view base = basename_of(module);
  for (const ModuleRule &r : kModules)
    if (base.starts_with(r.prefix)) return r.library;
  return nullptr;
}

// PyTorch's own workspaces for cuBLAS(Lt), allocated through its allocator
// and kept per (handle, stream) until the process ends. Matched innermost
// first, so the function that allocates names the library. The names differ
// between PyTorch releases: 2.11 (H100 run) allocates the cuBLAS handle's
// workspace in setWorkspaceForHandle under getCurrentCUDABlasHandle, 2.15
// in allocateCUDABlasWorkspace.
struct FunctionRule {
  std::string_view function;
  const char *library;
};
constexpr FunctionRule kFunctions[] = {
    {"at::cuda::allocateCUDABlasWorkspace", "cuBLAS"},
    {"at::cuda::setWorkspaceForHandle", "cuBLAS"},
    {"at::cuda::getCurrentCUDABlasHandle", "cuBLAS"},
    {"at::cuda::getCUDABlasLtWorkspace", "cuBLASLt"},
    {"at::cuda::getCurrentCUDABlasLtHandle", "cuBLASLt"},
};

}  // namespace

bool is_framework_module(std::string_view module) {
  std::string_view b = basename_of(module);
  if (b.starts_with("libtorch") || b.starts_with("libc10") || b.starts_with("libshm")) return true;
  // torch's Python extension, torch/_C.cpython-312-x86_64-linux-gnu.so.
  return b.starts_with("_C.") && module.find("/torch/") != std::string_view::npos;
}

LibraryHolding library_holding(const std::vector<NativeFrame> &frames) {
  for (size_t i = 0; i < frames.size(); ++i) {
    const char *library = library_of_module(frames[i].module);
    if (library) {
      for (size_t j = i + 1; j < frames.size(); ++j)
        if (is_framework_module(frames[j].module)) return {library, true};
      return {};  // the program's own handle: a leak if never destroyed
    }
    if (!is_framework_module(frames[i].module)) continue;
    for (const FunctionRule &r : kFunctions)
      if (frames[i].function.starts_with(r.function)) return {r.library, false};
  }
  return {};
}

}  // namespace torchseal
