#include "cupti_backend/cupti_search_path.h"

#include <dirent.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "shim/core/loader_walk.h"

namespace torchseal::cupti {
namespace {

// Bounds: this runs once, at the first CUDA call, and must stay cheap even
// in a process with thousands of loaded objects or a huge nvidia/ directory.
constexpr size_t kMaxSiteDirs = 8;
constexpr size_t kMaxWheelEntries = 64;

const char *const kSonames[] = {"libcupti.so.13", "libcupti.so"};

void add_unique(std::vector<std::string> &v, std::string s) {
  if (s.empty()) return;
  if (std::find(v.begin(), v.end(), s) == v.end()) v.push_back(std::move(s));
}

bool is_file(const std::string &p) { return access(p.c_str(), R_OK) == 0; }

bool is_dir(const std::string &p) {
  DIR *d = opendir(p.c_str());
  if (!d) return false;
  closedir(d);
  return true;
}

std::string dirname_of(const std::string &p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? std::string() : p.substr(0, slash);
}

std::string basename_of(const std::string &p) {
  size_t slash = p.rfind('/');
  return slash == std::string::npos ? p : p.substr(slash + 1);
}

// "python3.12" out of "libpython3.12.so.1.0" or "python3.12"; "" otherwise.
std::string python_version_tag(const std::string &base) {
  std::string s = base;
  if (s.rfind("lib", 0) == 0) s = s.substr(3);
  if (s.rfind("python3.", 0) != 0) return {};
  size_t end = 8;
  while (end < s.size() && isdigit(static_cast<unsigned char>(s[end]))) ++end;
  if (end == 8) return {};
  return s.substr(0, end);
}

// <prefix>/lib/python3.*/site-packages for every python3.* under prefix/lib.
void add_prefix_site_dirs(std::vector<std::string> &out, const std::string &prefix) {
  if (prefix.empty() || out.size() >= kMaxSiteDirs) return;
  std::string lib = prefix + "/lib";
  DIR *d = opendir(lib.c_str());
  if (!d) return;
  while (dirent *e = readdir(d)) {
    if (out.size() >= kMaxSiteDirs) break;
    if (std::strncmp(e->d_name, "python3.", 8) != 0) continue;
    std::string site = lib + "/" + e->d_name + "/site-packages";
    if (is_dir(site)) add_unique(out, site);
  }
  closedir(d);
}

struct PhdrScan {
  std::vector<std::string> *out;
  std::vector<std::string> prefixes;  // from libpythonX.Y: <prefix>/lib/pythonX.Y
};

int scan_object(struct dl_phdr_info *info, size_t, void *data) {
  auto *scan = static_cast<PhdrScan *>(data);
  if (!info->dlpi_name || !*info->dlpi_name) return 0;
  std::string path = info->dlpi_name;
  // An extension module or wheel library: everything up to site-packages.
  size_t at = path.find("/site-packages/");
  if (at != std::string::npos && scan->out->size() < kMaxSiteDirs)
    add_unique(*scan->out, path.substr(0, at + std::strlen("/site-packages")));
  std::string tag = python_version_tag(basename_of(path));
  if (!tag.empty()) scan->prefixes.push_back(dirname_of(path) + "/" + tag + "/site-packages");
  return 0;
}

}  // namespace

std::vector<std::string> python_site_dirs() {
  std::vector<std::string> out;
  for (const char *var : {"VIRTUAL_ENV", "CONDA_PREFIX"}) {
    const char *v = std::getenv(var);
    if (v && *v) add_prefix_site_dirs(out, v);
  }
  PhdrScan scan{&out, {}};
  {
    LoaderWalkGuard walking;
    dl_iterate_phdr(scan_object, &scan);
  }
  for (const std::string &site : scan.prefixes)
    if (out.size() < kMaxSiteDirs && is_dir(site)) add_unique(out, site);
  // The executable itself: <prefix>/bin/python3.12 -> <prefix>/lib/python3.12.
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    exe[n] = '\0';
    std::string path(exe);
    std::string tag = python_version_tag(basename_of(path));
    if (!tag.empty() && out.size() < kMaxSiteDirs) {
      std::string site = dirname_of(dirname_of(path)) + "/lib/" + tag + "/site-packages";
      if (is_dir(site)) add_unique(out, site);
    }
  }
  return out;
}

bool for_each_cupti_candidate(const std::string &explicit_path,
                              const std::function<bool(const std::string &)> &try_one) {
  std::vector<std::string> tried;
  auto offer = [&](const std::string &c) {
    if (c.empty() || std::find(tried.begin(), tried.end(), c) != tried.end()) return false;
    tried.push_back(c);
    return try_one(c);
  };
  if (offer(explicit_path)) return true;
  for (const char *so : kSonames)
    if (offer(so)) return true;

  std::vector<std::string> roots;
  for (const char *var : {"CUDA_HOME", "CUDA_PATH"}) {
    const char *v = std::getenv(var);
    if (v && *v) add_unique(roots, v);
  }
  add_unique(roots, "/usr/local/cuda");
  for (const std::string &root : roots)
    for (const char *sub : {"/lib64/", "/extras/CUPTI/lib64/"})
      for (const char *so : kSonames)
        if (is_file(root + sub + so) && offer(root + sub + so)) return true;

  for (const std::string &site : python_site_dirs()) {
    std::string nvidia = site + "/nvidia";
    DIR *d = opendir(nvidia.c_str());
    if (!d) continue;
    std::vector<std::string> found;
    size_t seen = 0;
    while (dirent *e = readdir(d)) {
      if (++seen > kMaxWheelEntries) break;
      if (e->d_name[0] == '.') continue;
      for (const char *so : kSonames) {
        std::string p = nvidia + "/" + e->d_name + "/lib/" + so;
        if (is_file(p)) found.push_back(p);
      }
    }
    closedir(d);
    // Directory order is arbitrary: sort so the choice is reproducible.
    std::sort(found.begin(), found.end());
    for (const std::string &p : found)
      if (offer(p)) return true;
  }
  return false;
}

}  // namespace torchseal::cupti
