// Unit check of libcupti's search order (cupti_search_path.h) on a fake
// file-system layout: explicit path, sonames, toolkit dirs, pip wheels.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "cupti_backend/cupti_search_path.h"
#include "expect.h"

using torchseal::cupti::for_each_cupti_candidate;

namespace {

void mkdirs(const std::string &path) {
  for (size_t i = 1; i <= path.size(); ++i)
    if (i == path.size() || path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
}

void touch(const std::string &path) {
  mkdirs(path.substr(0, path.rfind('/')));
  std::ofstream(path) << "";
}

size_t index_of(const std::vector<std::string> &v, const std::string &s) {
  for (size_t i = 0; i < v.size(); ++i)
    if (v[i] == s) return i;
  return v.size();
}

}  // namespace

int main() {
  char tmpl[] = "/tmp/tseal-cupti-path-XXXXXX";
  const char *root = mkdtemp(tmpl);
  if (!root) return 2;
  std::string r = root;
  touch(r + "/cuda/extras/CUPTI/lib64/libcupti.so.13");
  touch(r + "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
  touch(r + "/venv/lib/python3.12/site-packages/nvidia/cublas/lib/libcublas.so.13");
  setenv("CUDA_HOME", (r + "/cuda").c_str(), 1);
  unsetenv("CUDA_PATH");
  setenv("VIRTUAL_ENV", (r + "/venv").c_str(), 1);

  std::vector<std::string> all;
  bool found = for_each_cupti_candidate("/opt/custom/libcupti.so", [&](const std::string &c) {
    all.push_back(c);
    return false;
  });
  expect(!found, "nothing accepted");
  expect(all.size() >= 5, "at least five candidates");
  if (all.size() >= 3) {
    expect(all[0] == "/opt/custom/libcupti.so", "TORCHSEAL_CUPTI_PATH first");
    expect(all[1] == "libcupti.so.13" && all[2] == "libcupti.so", "then the sonames");
  }
  size_t toolkit = index_of(all, r + "/cuda/extras/CUPTI/lib64/libcupti.so.13");
  size_t wheel = index_of(all, r + "/venv/lib/python3.12/site-packages/nvidia/cu13/lib/libcupti.so.13");
  expect(toolkit < all.size(), "$CUDA_HOME/extras/CUPTI/lib64 searched");
  expect(wheel < all.size(), "$VIRTUAL_ENV's nvidia/*/lib searched");
  expect(toolkit < wheel, "toolkit before wheels");
  for (const std::string &c : all) expect(c.find("cublas") == std::string::npos, "only libcupti");

  // Lazy: stops at the first accepted candidate.
  int offered = 0;
  found = for_each_cupti_candidate("", [&](const std::string &) { return ++offered == 1; });
  expect(found && offered == 1, "stops at the first success");

  std::string cmd = "rm -rf '" + r + "'";
  if (std::system(cmd.c_str()) != 0) std::printf("warning: could not remove %s\n", root);
  if (g_failures) {
    for (const std::string &c : all) std::printf("  candidate: %s\n", c.c_str());
    std::printf("%d failure(s)\n", g_failures);
    return 1;
  }
  std::printf("PASS: search path, %zu candidates\n", all.size());
  return 0;
}
