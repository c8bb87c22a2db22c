#include "common/symbols/runtime_libs.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "common/util/fork_safe.h"

// Made by meson.build from the install layout; builds outside Meson (the
// fuzz targets) get the common one.
#if __has_include("install_layout.h")
#include "install_layout.h"
#endif
#ifndef TORCHSEAL_SHIM_FROM_CLI
#define TORCHSEAL_SHIM_FROM_CLI "../lib/torchseal"
#endif

namespace torchseal::runtime_libs {
namespace {

// libunwind.so.8 -> libunwind-torchseal.so.8 (shim/bundled/bundle.py).
std::string bundled_name(const std::string &soname) {
  size_t at = soname.find(".so");
  if (at == std::string::npos) return soname;
  return soname.substr(0, at) + "-torchseal" + soname.substr(at);
}

bool is_dir(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The folder of the object this code is linked into: libtorchseal.so in a
// preloaded process, the `torchseal` executable in the CLI.
std::string own_dir() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&own_dir), &info) || !info.dli_fname) return {};
  std::string f = info.dli_fname;
  if (f.find('/') == std::string::npos) {
    // The main executable reports its name as given on the command line.
    char buf[4096];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return {};
    f.assign(buf, static_cast<size_t>(n));
  }
  return f.substr(0, f.rfind('/'));
}

std::string find_bundled_dir() {
  std::string dir = own_dir();
  if (dir.empty()) return {};
  // Beside the shim (build tree, `meson install`'s lib/torchseal, the
  // wheel's torchseal/lib), then from the CLI's bin/ or report/ folder.
  for (const char *rel : {"/bundled", "/../shim/bundled", "/" TORCHSEAL_SHIM_FROM_CLI "/bundled",
                          "/../lib/torchseal/bundled", "/../lib/bundled"}) {
    std::string p = dir + rel;
    if (is_dir(p)) return p;
  }
  return {};
}

std::mutex g_mu;
std::vector<std::string> g_degraded;
// A fork while another thread notes a degradation: the child's report still
// reads the list (and its own notes take the lock).
__attribute__((constructor(102))) void hold_degraded_across_fork() { hold_across_fork<g_mu>(); }

}  // namespace

std::string bundled_dir() {
  static constinit Lazy<std::string> dir;
  return dir.get(find_bundled_dir);
}

Opened open(const char *soname, int flags) {
  Opened o;
  std::string dir = bundled_dir();
  if (!dir.empty()) {
    std::string p = dir + "/" + bundled_name(soname);
    struct stat st;
    if (stat(p.c_str(), &st) == 0) {
      if ((o.handle = dlopen(p.c_str(), flags | RTLD_LOCAL))) {
        o.path = p;
        return o;
      }
      const char *e = dlerror();
      o.error = "bundled copy " + p + ": " + (e ? e : "dlopen failed") + "; ";
    } else {
      o.error = "no bundled copy in " + dir + "; ";
    }
  } else {
    o.error = "no bundled copy beside torchseal; ";
  }
  if ((o.handle = dlopen(soname, flags | RTLD_LOCAL))) {
    o.path = soname;
    o.error.clear();
    return o;
  }
  o.error += std::string("no ") + soname + " on this machine";
  return o;
}

void note_degraded(const std::string &what) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (std::find(g_degraded.begin(), g_degraded.end(), what) == g_degraded.end())
    g_degraded.push_back(what);
}

std::vector<std::string> degraded() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_degraded;
}

}  // namespace torchseal::runtime_libs
