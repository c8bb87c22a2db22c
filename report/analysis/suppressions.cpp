#include "report/analysis/suppressions.h"

#include <algorithm>
#include <cstring>

#include "common/util/read_file.h"

namespace torchseal {
namespace {

constexpr size_t kMaxSuppressionsFile = 1 << 20;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// `*`-glob match of the whole of `text` against `pat`, iterative with one
// backtrack point (linear-ish, no recursion on hostile patterns).
bool glob_full(std::string_view pat, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pat.size() && pat[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pat.size() && pat[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pat.size() && pat[p] == '*') ++p;
  return p == pat.size();
}

}  // namespace

bool template_match(std::string_view pattern, std::string_view text) {
  if (pattern.empty() || text.empty()) return false;
  bool anchor_start = pattern.front() == '^';
  if (anchor_start) pattern.remove_prefix(1);
  bool anchor_end = !pattern.empty() && pattern.back() == '$';
  if (anchor_end) pattern.remove_suffix(1);
  // Unanchored ends behave like a leading/trailing `*` (LSan's rule).
  std::string full;
  if (!anchor_start) full += '*';
  full += pattern;
  if (!anchor_end) full += '*';
  return glob_full(full, text);
}

bool Suppressions::parse(std::string_view text, const std::string &source, std::string &error) {
  std::vector<std::string> out;
  size_t lineno = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++lineno;
    if (line.empty() || line.front() == '#') continue;
    constexpr std::string_view kPrefix = "leak:";
    if (line.substr(0, kPrefix.size()) != kPrefix) {
      error = source + ":" + std::to_string(lineno) + ": expected `leak:PATTERN`, got `" +
              std::string(line.substr(0, 80)) + "`";
      return false;
    }
    std::string_view pat = trim(line.substr(kPrefix.size()));
    if (pat.empty() || pat == "^" || pat == "$" || pat == "^$") {
      error = source + ":" + std::to_string(lineno) + ": empty pattern after `leak:`";
      return false;
    }
    out.emplace_back(pat);
  }
  patterns_ = std::move(out);
  return true;
}

bool Suppressions::load(const std::string &path, std::string &error) {
  std::string text;
  int err = 0;
  FileRead got = read_small_file(path, kMaxSuppressionsFile, text, err);
  if (got == FileRead::CannotOpen || got == FileRead::ReadError) {
    error = "suppressions file " + path + ": " + std::strerror(err);
    return false;
  }
  if (got != FileRead::Ok) {
    error = "suppressions file " + path + ": not a regular file of at most 1 MiB";
    return false;
  }
  return parse(text, path, error);
}

const std::string *Suppressions::match(const std::vector<NativeFrame> &frames,
                                       const std::vector<PythonFrame> &python_frames) const {
  for (const std::string &p : patterns_) {
    for (const NativeFrame &f : frames) {
      if (template_match(p, f.function) || template_match(p, f.file) ||
          template_match(p, f.module)) {
        return &p;
      }
    }
    for (const PythonFrame &f : python_frames) {
      if (template_match(p, f.function) || template_match(p, f.file)) return &p;
    }
  }
  return nullptr;
}

void install_suppressions(AnalysisOptions &opts, const Suppressions &s) {
  if (s.empty()) return;
  const Suppressions *sp = &s;
  opts.match_suppression = [sp](const std::vector<NativeFrame> &f,
                                const std::vector<PythonFrame> &p) { return sp->match(f, p); };
  // Consumers that only know the yes/no hook (e.g. growth) see the same rules.
  opts.is_suppressed = [sp](const std::vector<NativeFrame> &f, const std::vector<PythonFrame> &p) {
    return sp->match(f, p) != nullptr;
  };
}

void record_suppression_use(Report &r, const std::string &pattern, uint64_t bytes,
                            uint64_t allocations) {
  auto it = std::find_if(r.suppressions_used.begin(), r.suppressions_used.end(),
                         [&](const SuppressionUse &u) { return u.pattern == pattern; });
  if (it == r.suppressions_used.end()) {
    r.suppressions_used.push_back({pattern, 0, 0});
    it = r.suppressions_used.end() - 1;
  }
  it->bytes += bytes;
  it->allocations += allocations;
}

void apply_suppressions(Report &r, const Suppressions &s) {
  if (s.empty()) return;
  std::vector<LeakEntry> kept;
  for (LeakEntry &e : r.leaks) {
    if (const std::string *p = s.match(e.frames, e.python_frames)) {
      r.summary.suppressed_bytes += e.bytes;
      r.summary.leaked_bytes -= std::min(r.summary.leaked_bytes, e.bytes);
      r.summary.leaked_allocations -= std::min(r.summary.leaked_allocations, e.allocations);
      record_suppression_use(r, *p, e.bytes, e.allocations);
    } else {
      kept.push_back(std::move(e));
    }
  }
  r.leaks = std::move(kept);
  r.summary.leak_sites = r.leaks.size();
  // As in-process (analysis.cpp): a suppressed site's growth, and a growing
  // graph allocated there, do not count either.
  std::erase_if(r.growth, [&](const GrowthEntry &g) {
    return s.match(g.frames, g.python_frames) != nullptr;
  });
}

}  // namespace torchseal
