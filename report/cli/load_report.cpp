#include "report/cli/load_report.h"

#include <algorithm>
#include <unordered_map>

#include "common/symbols/symbolizer.h"
#include "report/input/history_reader.h"
#include "report/render/report_json.h"
#include "report/replay/analysis_replay.h"

namespace torchseal {

bool analyze_history(const std::string &path, Report &out, std::string &error,
                     std::vector<std::string> &warnings, const AnalysisOptions &opts,
                     const HistoryWindow *window) {
  AnalysisInput in;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> symbols;
  HistoryReadInfo info;
  if (!replay_history(path, in, symbols, error, warnings, window, &info)) return false;
  // The file's own symbol table wins: it was made where the binaries were.
  // Without one (a crash), symbolize against the recorded module map here.
  Symbolizer symbolizer(in.modules);
  for (auto &kv : symbols) symbolizer.preload(kv.first, std::move(kv.second));
  try {
    out = analyze(in, symbolizer, opts);
    out.history = info;
    // Symbolized here (no symbol table in the file): this reader's own
    // lack of libdw costs the report its lines too.
    const std::string no_lines = "no line numbers: libdw unavailable";
    auto &d = out.process.degraded;
    if (symbols.empty() && !libdw_available() && std::find(d.begin(), d.end(), no_lines) == d.end())
      d.push_back(no_lines);
  } catch (const std::exception &e) {
    error = path + ": analysis failed: " + e.what();
    return false;
  }
  return true;
}

bool load_report(const std::string &path, Report &out, std::string &error,
                 std::vector<std::string> &warnings, const AnalysisOptions &opts,
                 const HistoryWindow *window) {
  // The content decides; a .tseal name that is not a history gets the
  // history reader's own "not a torchseal history file" error.
  bool tseal_name = path.size() >= 6 && path.compare(path.size() - 6, 6, ".tseal") == 0;
  if (tseal_name || looks_like_history(path))
    return analyze_history(path, out, error, warnings, opts, window);
  if (window && window->any()) {
    error = path + " is a report: --from, --to and --steps read a window of a history (P.tseal)";
    return false;
  }
  return read_report_file(path, out, error);
}

}  // namespace torchseal
