// libFuzzer target: the .tseal history reader (report/input/history_reader.h) and
// the replay of what it reads (report/replay/)
// on a file holding the fuzz input. An untrusted history must never crash
// the reader, read out of bounds or allocate without bound; damage ends the
// read with a warning. Both the streaming reader and the replay into an
// AnalysisInput (what `torchseal report P.tseal` runs) are exercised.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>
#include <vector>

#include "report/input/history_reader.h"
#include "report/replay/analysis_replay.h"

namespace {
// Never destroyed: the atexit cleanup below runs after static destructors.
const std::string &temp_path() {
  static const std::string *path = [] {
    const char *dir = getenv("TMPDIR");
    auto *p = new std::string(std::string(dir && *dir ? dir : "/tmp") + "/tseal-fuzz-hist-XXXXXX");
    int fd = mkstemp(p->data());
    if (fd < 0) abort();
    close(fd);
    atexit([] { unlink(temp_path().c_str()); });
    return p;
  }();
  return *path;
}

struct NullListener : torchseal::HistoryListener {
  uint64_t n = 0;
  void on_event(const torchseal::Event &) override { ++n; }
};
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string &path = temp_path();
  int fd = open(path.c_str(), O_WRONLY | O_TRUNC);
  if (fd < 0) abort();
  size_t off = 0;
  while (off < size) {
    ssize_t w = write(fd, data + off, size - off);
    if (w <= 0) abort();
    off += static_cast<size_t>(w);
  }
  close(fd);
  {
    NullListener listener;
    std::string error;
    std::vector<std::string> warnings;
    torchseal::HistoryReadStats st;
    torchseal::read_history(path, listener, error, warnings, &st);
    if (st.events != 0 && st.events < listener.n) abort();  // stats disagree with delivery
  }
  {
    torchseal::AnalysisInput in;
    std::unordered_map<uint64_t, std::vector<torchseal::NativeFrame>> symbols;
    std::string error;
    std::vector<std::string> warnings;
    torchseal::replay_history(path, in, symbols, error, warnings);
  }
  return 0;
}
