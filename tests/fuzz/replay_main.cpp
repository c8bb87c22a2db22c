// Corpus replay driver: runs a libFuzzer target over every file in the given
// files/directories once (deterministic, no mutation), so crash inputs kept
// in tests/fuzz/corpus/<target>/ are regression tests in the normal gcc
// build (meson suite 'fuzz'). Exit 0 when every input ran.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void collect(const std::string &path, std::vector<std::string> &out) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return;
  if (S_ISREG(st.st_mode)) {
    out.push_back(path);
    return;
  }
  if (!S_ISDIR(st.st_mode)) return;
  DIR *d = opendir(path.c_str());
  if (!d) return;
  while (dirent *e = readdir(d))
    if (e->d_name[0] != '.') collect(path + "/" + e->d_name, out);
  closedir(d);
}

int main(int argc, char **argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) collect(argv[i], files);
  std::sort(files.begin(), files.end());
  if (files.empty()) {
    std::fprintf(stderr, "replay: no inputs\n");
    return 77;
  }
  for (const auto &f : files) {
    std::ifstream in(f, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
  }
  std::printf("replayed %zu input(s)\n", files.size());
  return 0;
}
