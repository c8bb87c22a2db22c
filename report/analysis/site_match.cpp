#include "report/analysis/site_match.h"

#include "common/util/path_name.h"
#include "report/analysis/shown_frames.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <tuple>

namespace torchseal {
namespace {

void field(std::string &key, std::string_view s) {
  // Length-prefixed, so no name can forge a separator.
  key += std::to_string(s.size());
  key += ':';
  key += s;
}

std::vector<int> lines_of(const SiteView &s) {
  std::vector<int> v;
  v.reserve(s.frames->size() + s.python_frames->size());
  for (const NativeFrame &f : *s.frames) v.push_back(f.line);
  for (const PythonFrame &f : *s.python_frames) v.push_back(f.line);
  return v;
}

// Sum of line moves, or -1 when some frame moved more than kLineSlack (or
// lost/gained its line info).
long line_distance(const std::vector<int> &a, const std::vector<int> &b, int slack) {
  long total = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] == 0) != (b[i] == 0)) return -1;
    long d = std::labs(long(a[i]) - long(b[i]));
    if (d > slack) return -1;
    total += d;
  }
  return total;
}

}  // namespace

SiteView site_view(const LeakEntry &e, std::string extra) {
  return {e.kind, e.api, std::move(extra), &e.frames, &e.python_frames};
}
SiteView site_view(const GrowthEntry &e, std::string extra) {
  return {e.kind, e.api, std::move(extra), &e.frames, &e.python_frames};
}

std::string site_chain(const SiteView &s) {
  std::string key;
  field(key, s.kind);
  field(key, s.api);
  field(key, s.extra);
  for (const NativeFrame &f : *s.frames) {
    if (f.function.empty() && f.file.empty()) {
      // A frame without symbols is known by its module only: its address
      // moves with ASLR from run to run (a stripped library's thread start),
      // and the report does not keep the module's base to make it relative.
      key += 'A';
      field(key, basename_of(f.module));
    } else {
      key += 'N';
      field(key, f.function);
      field(key, basename_of(f.file));
    }
  }
  key += '|';
  for (const PythonFrame &f : *s.python_frames) {
    key += 'P';
    field(key, f.function);
    field(key, basename_of(f.file));
  }
  return key;
}

std::vector<long> match_sites(const std::vector<SiteView> &a, const std::vector<SiteView> &b,
                              int slack) {
  std::vector<long> result(b.size(), -1);
  std::map<std::string, std::vector<size_t>> a_by_chain;
  for (size_t i = 0; i < a.size(); ++i) a_by_chain[site_chain(a[i])].push_back(i);

  // Candidate pairs (distance, b, a) within one chain; exact ones have
  // distance 0 and so are taken first. Ties resolve in input order, which
  // keeps the result reproducible.
  std::vector<std::tuple<long, size_t, size_t>> pairs;
  std::vector<std::vector<int>> a_lines(a.size());
  for (size_t i = 0; i < a.size(); ++i) a_lines[i] = lines_of(a[i]);
  for (size_t j = 0; j < b.size(); ++j) {
    auto it = a_by_chain.find(site_chain(b[j]));
    if (it == a_by_chain.end()) continue;
    std::vector<int> bl = lines_of(b[j]);
    for (size_t i : it->second) {
      long d = line_distance(a_lines[i], bl, slack);
      if (d >= 0) pairs.emplace_back(d, j, i);
    }
  }
  std::sort(pairs.begin(), pairs.end());
  std::vector<bool> a_used(a.size(), false);
  for (const auto &[d, j, i] : pairs) {
    if (result[j] >= 0 || a_used[i]) continue;
    result[j] = long(i);
    a_used[i] = true;
  }
  return result;
}

UserFrame user_frame(const std::vector<NativeFrame> &frames,
                     const std::vector<PythonFrame> &python_frames) {
  if (long i = user_python_index(python_frames); i >= 0) {
    const PythonFrame &p = python_frames[size_t(i)];
    return {p.function, p.file, p.line};
  }
  // Only torch's and the standard library's frames: the innermost still says
  // which Python operation allocated.
  if (!python_frames.empty() && !python_frames[0].file.empty()) {
    return {python_frames[0].function, python_frames[0].file, python_frames[0].line};
  }
  for (const NativeFrame &f : frames) {
    // frames[0] is the user's call site by contract; skip only frames that
    // carry no location at all.
    if (!f.file.empty() || !f.function.empty()) return {f.function, f.file, f.line};
  }
  return {};
}

std::string site_label(const std::vector<NativeFrame> &frames,
                       const std::vector<PythonFrame> &python_frames, size_t depth) {
  std::string out;
  auto add = [&](const std::string &fn, const std::string &file, int line) {
    if (!out.empty()) out += " <- ";
    out += fn.empty() ? "??" : fn;
    if (!file.empty()) {
      out += " (";
      out += basename_of(file);
      if (line > 0) out += ":" + std::to_string(line);
      out += ")";
    }
  };
  size_t n = 0;
  for (const PythonFrame &p : python_frames) {
    if (n++ == depth) break;
    add(p.function, p.file, p.line);
  }
  n = 0;
  for (const NativeFrame &f : frames) {
    if (n++ == depth) break;
    add(f.function, f.file, f.line);
  }
  return out.empty() ? std::string("<no stack recorded>") : out;
}

}  // namespace torchseal
