#include "shim/runtime/torch_mode.h"
#include "shim/core/loader_walk.h"

#include <link.h>

#include <cstdlib>
#include <cstring>

#include "common/settings/config.h"

namespace torchseal {

std::string with_async_backend(const std::string &conf) {
  std::string out;
  size_t start = 0;
  while (start <= conf.size()) {
    size_t comma = conf.find(',', start);
    if (comma == std::string::npos) comma = conf.size();
    std::string item = conf.substr(start, comma - start);
    size_t b = item.find_first_not_of(' ');
    std::string key = b == std::string::npos ? "" : item.substr(b, item.find(':', b) - b);
    if (!item.empty() && key != "backend") {
      if (!out.empty()) out += ',';
      out += item;
    }
    start = comma + 1;
  }
  if (!out.empty()) out += ',';
  return out + "backend:cudaMallocAsync";
}

bool torch_cuda_loaded() {
  bool loaded = false;
  LoaderWalkGuard walking;
  dl_iterate_phdr(
      [](dl_phdr_info *info, size_t, void *data) {
        if (info->dlpi_name && strstr(info->dlpi_name, "libc10_cuda.so")) {
          *static_cast<bool *>(data) = true;
          return 1;
        }
        return 0;
      },
      &loaded);
  return loaded;
}

bool torch_caching_allocator_in_use() {
  if (!torch_cuda_loaded()) return false;
  for (const char *var : {"PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF"}) {
    const char *conf = getenv(var);
    if (conf && strstr(conf, "backend:cudaMallocAsync")) return false;
  }
  // Caching turned off: every tensor is its own cudaMalloc and cudaFree
  // (c10's forceUncachedAllocator reads the value "1").
  const char *uncached = getenv("PYTORCH_NO_CUDA_MEMORY_CACHING");
  if (uncached && strcmp(uncached, "1") == 0) return false;
  return true;
}

namespace {

// Before the program's main (and so before Python reads its environment),
// which is before the settings are parsed (the first CUDA call): this one
// setting is read here on its own.
__attribute__((constructor)) void apply_tensors_mode() {
  const settings::Spec &torch = settings::spec(settings::Id::torch);
  const char *mode = settings::from_environment(torch);
  if (!mode || settings::choice_index(torch, mode) != static_cast<int>(TorchMode::Tensors)) return;
  const char *conf = getenv("PYTORCH_CUDA_ALLOC_CONF");
  setenv("PYTORCH_CUDA_ALLOC_CONF", with_async_backend(conf ? conf : "").c_str(), 1);
}

}  // namespace
}  // namespace torchseal
