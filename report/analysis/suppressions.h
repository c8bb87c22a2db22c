// LeakSanitizer-style suppressions (TORCHSEAL_SUPPRESSIONS, `check
// --suppressions`, `report --suppressions`).
//
// File format, as LSan's: one `leak:PATTERN` per line; `#` starts a comment
// line; blank lines and surrounding spaces are ignored. Any other line is an
// error (a typo must not silently suppress nothing).
//
// Matching, as LSan's TemplateMatch: `*` matches any run of characters; `^`
// at the start / `$` at the end anchor the pattern; otherwise the pattern may
// match anywhere (so a plain word matches as a substring). A site is
// suppressed when any of its frames matches: a native frame's function, file
// or module, a Python frame's function or file. The first matching pattern in
// file order is the one credited in "Suppressions used".
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/analysis/analysis.h"
#include "report/model/report_model.h"

namespace torchseal {

bool template_match(std::string_view pattern, std::string_view text);

class Suppressions {
 public:
  // Parse file text; `source` names it in errors ("f.supp:3: ...").
  bool parse(std::string_view text, const std::string &source, std::string &error);
  // Read and parse a file (regular file, at most 1 MiB).
  bool load(const std::string &path, std::string &error);

  // The matching pattern (as written after `leak:`), or nullptr.
  const std::string *match(const std::vector<NativeFrame> &frames,
                           const std::vector<PythonFrame> &python_frames) const;

  bool empty() const { return patterns_.empty(); }
  const std::vector<std::string> &patterns() const { return patterns_; }

 private:
  std::vector<std::string> patterns_;
};

// Makes `opts` apply `s` during analysis (both hooks; `s` must outlive opts).
void install_suppressions(AnalysisOptions &opts, const Suppressions &s);

// Applies `s` to an already-analyzed report (a P.json read back): matching
// leak entries move to summary.suppressed_bytes and suppressions_used, as if
// the analysis had suppressed them. Idempotent.
void apply_suppressions(Report &r, const Suppressions &s);

// Adds one suppressed leak entry to r.suppressions_used (per pattern).
void record_suppression_use(Report &r, const std::string &pattern, uint64_t bytes,
                            uint64_t allocations);

}  // namespace torchseal
