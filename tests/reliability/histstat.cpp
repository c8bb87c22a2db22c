// histstat FILE.tseal: reads a history file with the report library's reader
// and prints one JSON object with what the reliability tests compare:
//   events_read        every event decoded
//   allocs, frees, ooms, invalid_frees, steps, other   by kind
//   user_events        allocs + frees + ooms + invalid_frees (what
//                      summary.events counts: one per user-visible call)
//   end_events         the End chunk's total (-1 without an End chunk)
//   clean_end, truncated, warnings[], error
//   live_at_end        allocations never freed in the history
// Exit status: 0 read (possibly with warnings), 2 unusable file.
#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "report/input/history_reader.h"

namespace {

struct Counter : torchseal::HistoryListener {
  uint64_t n = 0, allocs = 0, frees = 0, ooms = 0, invalid = 0, steps = 0, other = 0;
  int64_t end_events = -1;
  std::unordered_set<uint64_t> live;
  void on_event(const torchseal::Event &e) override {
    ++n;
    switch (e.op) {
      case torchseal::Op::Alloc: ++allocs; live.insert(e.addr); break;
      case torchseal::Op::Free: ++frees; live.erase(e.addr); break;
      case torchseal::Op::OomFail: ++ooms; break;
      case torchseal::Op::InvalidFree: ++invalid; break;
      case torchseal::Op::Step: ++steps; break;
      default: ++other; break;
    }
  }
  void on_end(double, uint64_t events, bool) override { end_events = static_cast<int64_t>(events); }
};

std::string quote(const std::string &s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += static_cast<char>(c);
    else if (c < 0x20) { char b[8]; std::snprintf(b, sizeof b, "\\u%04x", c); o += b; }
    else o += static_cast<char>(c);
  }
  return o + "\"";
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: histstat FILE.tseal\n");
    return 2;
  }
  Counter c;
  std::string error;
  std::vector<std::string> warnings;
  torchseal::HistoryReadStats st;
  bool ok = torchseal::read_history(argv[1], c, error, warnings, &st);
  std::printf("{\"ok\": %s, \"error\": %s, \"events_read\": %llu, \"allocs\": %llu, "
              "\"frees\": %llu, \"ooms\": %llu, \"invalid_frees\": %llu, \"steps\": %llu, "
              "\"other\": %llu, \"user_events\": %llu, \"end_events\": %lld, "
              "\"clean_end\": %s, \"truncated\": %s, \"chunks\": %llu, \"live_at_end\": %zu, "
              "\"warnings\": [",
              ok ? "true" : "false", quote(error).c_str(), (unsigned long long)c.n,
              (unsigned long long)c.allocs, (unsigned long long)c.frees,
              (unsigned long long)c.ooms, (unsigned long long)c.invalid,
              (unsigned long long)c.steps, (unsigned long long)c.other,
              (unsigned long long)(c.allocs + c.frees + c.ooms + c.invalid),
              (long long)c.end_events, st.clean_end ? "true" : "false",
              st.truncated ? "true" : "false", (unsigned long long)st.chunks, c.live.size());
  for (size_t i = 0; i < warnings.size(); ++i)
    std::printf("%s%s", i ? ", " : "", quote(warnings[i]).c_str());
  std::printf("]}\n");
  return ok ? 0 : 2;
}
