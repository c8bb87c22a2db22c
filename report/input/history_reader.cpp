#include "report/input/history_reader.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "common/format/event_codec.h"
#include "report/input/chunk_reader.h"
#include "report/input/segmented_reader.h"

namespace torchseal {

bool looks_like_history(const std::string &path) {
  FILE *f = fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[8];
  bool ok = fread(magic, 1, 8, f) == 8 && memcmp(magic, tseal::kMagic, 8) == 0;
  fclose(f);
  return ok;
}

bool parse_step_range(const std::string &text, HistoryWindow &w, std::string &error) {
  size_t dots = text.find("..");
  auto number = [](const std::string &s, uint64_t &out) {
    if (s.empty()) return true;
    char *end = nullptr;
    errno = 0;
    unsigned long long v = strtoull(s.c_str(), &end, 10);
    if (errno || *end || s[0] == '-' || v == 0) return false;
    out = v;
    return true;
  };
  uint64_t a = 0, b = 0;
  if (dots == std::string::npos || !number(text.substr(0, dots), a) ||
      !number(text.substr(dots + 2), b) || (a && b && a > b) || (!a && !b)) {
    error = "--steps expects A..B with step numbers from 1 (A.. and ..B too), not '" + text + "'";
    return false;
  }
  w.by_steps = true;
  w.from_step = a;
  w.to_step = b;
  return true;
}

bool read_history(const std::string &path, HistoryListener &listener, std::string &error,
                  std::vector<std::string> &warnings, HistoryReadStats *stats,
                  void (*progress)(uint64_t, uint64_t), const HistoryWindow *window) {
  uint32_t flags = 0;
  std::unique_ptr<FILE, int (*)(FILE *)> f(open_history_file(path, flags, error), fclose);
  if (!f) return false;
  if (flags & (tseal::kFlagSegment | tseal::kFlagBase)) {
    error = path +
            " is one part of a capped history: read its main file (the name without "
            "the ." +
            std::string("NNNNNN suffix)");
    return false;
  }
  if (flags & tseal::kFlagSegmented)
    return read_segmented(path, f.get(), listener, error, warnings, stats, progress, window);

  fseeko(f.get(), 0, SEEK_END);
  uint64_t total = static_cast<uint64_t>(ftello(f.get()));
  fseeko(f.get(), tseal::kFileHeaderSize, SEEK_SET);
  ChunkReader reader(listener);
  ChunkFileResult res = read_chunk_file(f.get(), reader, [&](uint64_t done) {
    if (progress) progress(done, total);
  });
  listener.on_read_done();
  bool truncated = !res.damage.empty();
  if (truncated) {
    warnings.push_back("history file " + path + " is truncated or corrupt at byte " +
                       std::to_string(res.offset) + " (" + res.damage + "); using the " +
                       std::to_string(reader.events()) + " events before it");
  } else if (!reader.clean()) {
    truncated = true;
    warnings.push_back(no_clean_end(path, reader.events()));
  }
  if (stats) {
    stats->bytes = res.offset;
    stats->chunks = res.chunks;
    stats->events = reader.events();
    stats->clean_end = reader.clean();
    stats->truncated = truncated;
  }
  return true;
}

}  // namespace torchseal
