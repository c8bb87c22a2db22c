#include "shim/core/python/python_runtime.h"
#include "shim/core/loader_walk.h"

#include <dlfcn.h>
#include <link.h>

#include <climits>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace torchseal::py {
namespace {

// Where CPython's symbols are visible. Usually the global scope (python
// executables export them with -export-dynamic; libpython is loaded
// RTLD_GLOBAL by the executable). An embedding application may instead have
// dlopen'ed libpython RTLD_LOCAL; then find it by name among loaded objects.
struct SymbolScope {
  void *handle = RTLD_DEFAULT;
  void *find(const char *name) const { return dlsym(handle, name); }
};

int find_libpython_cb(struct dl_phdr_info *info, size_t, void *data) {
  const char *path = info->dlpi_name;
  if (!path || !*path) return 0;
  const char *base = std::strrchr(path, '/');
  base = base ? base + 1 : path;
  // libpython3.so is the stable-ABI forwarder and exports no data symbols.
  if (std::strncmp(base, "libpython3.", 11) != 0 || std::strncmp(base, "libpython3.so", 13) == 0)
    return 0;
  std::snprintf(static_cast<char *>(data), PATH_MAX, "%s", path);
  return 1;
}

bool locate(SymbolScope &scope) {
  if (dlsym(RTLD_DEFAULT, "Py_IsInitialized")) return true;
  char path[PATH_MAX] = {};
  {
    LoaderWalkGuard walking;
    if (!dl_iterate_phdr(find_libpython_cb, path)) return false;
  }
  // RTLD_NOLOAD: only a handle on the already-loaded copy. It is never
  // closed: it pins libpython so the function pointers we keep stay valid.
  void *h = dlopen(path, RTLD_NOLOAD | RTLD_LAZY | RTLD_LOCAL);
  if (!h || !dlsym(h, "Py_IsInitialized")) return false;
  scope.handle = h;
  return true;
}

// 3.11+ exports Py_Version (PY_VERSION_HEX). 3.10 has only Py_GetVersion(),
// whose text starts with PY_VERSION ("3.10.13 (main, ...").
uint32_t read_version(const SymbolScope &scope) {
  if (auto *v = static_cast<const unsigned long *>(scope.find("Py_Version")))
    return static_cast<uint32_t>(*v);
  auto get = reinterpret_cast<const char *(*)()>(scope.find("Py_GetVersion"));
  if (!get) return 0;
  const char *s = get();
  unsigned major = 0, minor = 0, micro = 0;
  if (!s || std::sscanf(s, "%u.%u.%u", &major, &minor, &micro) < 2) return 0;
  // Release level is not needed for layout selection; report it as final.
  return (major << 24) | (minor << 16) | (micro << 8) | 0xf0;
}

void format_version(uint32_t hex, char (&out)[32]) {
  unsigned major = hex >> 24, minor = (hex >> 16) & 0xff, micro = (hex >> 8) & 0xff;
  unsigned level = (hex >> 4) & 0xf, serial = hex & 0xf;
  const char *tag = level == 0xa ? "a" : level == 0xb ? "b" : level == 0xc ? "rc" : "";
  if (*tag)
    std::snprintf(out, sizeof out, "%u.%u.%u%s%u", major, minor, micro, tag, serial);
  else
    std::snprintf(out, sizeof out, "%u.%u.%u", major, minor, micro);
}

template <typename Fn>
Fn fn(const SymbolScope &scope, const char *name) {
  return reinterpret_cast<Fn>(scope.find(name));
}

int dl_adds_cb(struct dl_phdr_info *info, size_t size, void *data) {
  if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds)
    *static_cast<uint64_t *>(data) = info->dlpi_adds;
  return 1;  // the counters are global: the first object is enough
}

}  // namespace

uint64_t loaded_object_generation() {
  uint64_t adds = 0;
  LoaderWalkGuard walking;
  dl_iterate_phdr(dl_adds_cb, &adds);
  return adds;
}

void *python_symbol(const char *name) {
  SymbolScope scope;
  if (!locate(scope)) return nullptr;
  return scope.find(name);
}

ProbeResult probe_interpreter(Interp &out, std::string &why) {
  SymbolScope scope;
  if (!locate(scope)) return ProbeResult::Absent;

  out = Interp{};
  out.version_hex = read_version(scope);
  if (!out.version_hex) {
    why = "Python version unknown; native frames only";
    return ProbeResult::Unsupported;
  }
  format_version(out.version_hex, out.version);
  unsigned minor = (out.version_hex >> 16) & 0xff;
  char ver[16];
  std::snprintf(ver, sizeof ver, "%u.%u", out.version_hex >> 24, minor);

  if ((out.version_hex >> 24) != 3 || minor < 10) {
    why = std::string("Python ") + ver + " frames are not supported; native frames only";
    return ProbeResult::Unsupported;
  }
  out.is_initialized = fn<int (*)()>(scope, "Py_IsInitialized");
  out.is_finalizing = fn<int (*)()>(scope, minor >= 13 ? "Py_IsFinalizing" : "_Py_IsFinalizing");
  out.this_thread_state = fn<void *(*)()>(scope, "PyGILState_GetThisThreadState");
  out.main_interp = fn<void *(*)()>(scope, "PyInterpreterState_Main");
  out.thread_head = fn<void *(*)(void *)>(scope, "PyInterpreterState_ThreadHead");
  out.thread_next = fn<void *(*)(void *)>(scope, "PyThreadState_Next");
  out.code_type = reinterpret_cast<uintptr_t>(scope.find("PyCode_Type"));
  out.unicode_type = reinterpret_cast<uintptr_t>(scope.find("PyUnicode_Type"));
  out.bytes_type = reinterpret_cast<uintptr_t>(scope.find("PyBytes_Type"));
  if (!out.is_initialized || !out.is_finalizing || !out.this_thread_state || !out.code_type ||
      !out.unicode_type || !out.bytes_type) {
    why = std::string("Python ") + ver + " lacks an expected symbol; native frames only";
    return ProbeResult::Unsupported;
  }
  // 3.13+ describes its own layout (_Py_DebugOffsets): a build that disagrees
  // with the reader (free-threaded, patched, a future minor that moved a
  // field) is refused rather than misread.
  std::string detail;
  out.layout = resolve_layout(out.version_hex,
                              reinterpret_cast<uintptr_t>(scope.find("_PyRuntime")), detail);
  if (!out.layout) {
    why = std::string("Python ") + out.version + " frames are not supported (" + detail +
          "); native frames only";
    return ProbeResult::Unsupported;
  }
  return ProbeResult::Found;
}

}  // namespace torchseal::py
