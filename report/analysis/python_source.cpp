#include "report/analysis/python_source.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "report/analysis/shown_frames.h"

namespace torchseal {
namespace {

// Bounds: a report must never stall or blow the stack on odd input.
constexpr std::uintmax_t kMaxFileBytes = 4u << 20;
constexpr size_t kMaxLineChars = 600;
constexpr size_t kMaxScopeLines = 2000;  // lines scanned each way from a frame
constexpr size_t kMaxUserFrames = 16;    // innermost user frames examined (a framework outside
                                         // site-packages can take several)
constexpr size_t kMaxCodeInHint = 80;

// Leading blanks as columns (tab to the next multiple of 8, as Python does);
// -1 for a blank or comment-only line, which says nothing about structure.
int indent_of(const std::string &line) {
  int col = 0;
  for (char c : line) {
    if (c == ' ') {
      ++col;
    } else if (c == '\t') {
      col = (col / 8 + 1) * 8;
    } else if (c == '\f') {
      col = 0;
    } else {
      return c == '#' ? -1 : col;
    }
  }
  return -1;
}

}  // namespace

std::optional<Source> load_source(const std::string &path) {
  std::error_code ec;
  // A regular file only: a FIFO or device named in a frame must not block.
  if (!std::filesystem::is_regular_file(path, ec) || ec) return std::nullopt;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || size > kMaxFileBytes) return std::nullopt;
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  Source s;
  std::string line;
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    s.lines.push_back(std::move(line));
  }
  return s;
}

std::string code_of(const std::string &line) {
  if (line.size() > kMaxLineChars) return {};
  char quote = 0;
  size_t end = line.size();
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == '\\') {
        ++i;
      } else if (c == quote) {
        quote = 0;
      }
    } else if (c == '\'' || c == '"') {
      quote = c;
    } else if (c == '#') {
      end = i;
      break;
    }
  }
  size_t b = 0;
  while (b < end && (line[b] == ' ' || line[b] == '\t' || line[b] == '\f')) ++b;
  while (end > b && (line[end - 1] == ' ' || line[end - 1] == '\t')) --end;
  return line.substr(b, end - b);
}

bool starts_with_word(std::string_view s, std::string_view w) {
  return s.substr(0, w.size()) == w &&
         (s.size() == w.size() ||
          !(std::isalnum(static_cast<unsigned char>(s[w.size()])) || s[w.size()] == '_'));
}

bool is_def(std::string_view code) {
  if (starts_with_word(code, "async")) {
    code.remove_prefix(5);
    while (!code.empty() && (code.front() == ' ' || code.front() == '\t')) code.remove_prefix(1);
  }
  return starts_with_word(code, "def") || starts_with_word(code, "class");
}

// A def may span lines (its signature), so it counts without the trailing
// colon; others must end with ':'.
bool is_header(const std::string &code) {
  if (is_def(code)) return true;
  if (code.empty() || code.back() != ':') return false;
  for (const char *kw : {"for", "async", "while", "if", "elif", "else", "try", "except", "finally",
                         "with", "match", "case"}) {
    if (starts_with_word(code, kw)) return true;
  }
  return false;
}

size_t block_end(const Source &src, size_t header) {
  const auto &L = src.lines;
  if (header >= L.size()) return L.size();
  int header_indent = indent_of(L[header]);
  if (header_indent < 0) header_indent = 0;
  // A `)` closing a multi-line signature does not end the block.
  size_t end = header + 1;
  const size_t limit = std::min(L.size(), header + 1 + kMaxScopeLines);
  while (end < limit) {
    const int ind = indent_of(L[end]);
    if (ind >= 0 && ind <= header_indent) {
      const std::string code = code_of(L[end]);
      if (!code.empty() && code[0] != ')' && code[0] != ']' && code[0] != '}') break;
    }
    ++end;
  }
  return end;
}

BlockContext context_of(const Source &src, size_t idx) {
  BlockContext c;
  const auto &L = src.lines;
  int level = indent_of(L[idx]);
  if (level < 0) level = 0;
  size_t outer = idx;
  const size_t stop = idx > kMaxScopeLines ? idx - kMaxScopeLines : 0;
  for (size_t i = idx; i-- > stop && level > 0;) {
    const int ind = indent_of(L[i]);
    if (ind < 0 || ind >= level) continue;
    const std::string code = code_of(L[i]);
    // A less-indented line that is not a header is part of a multi-line
    // expression (a closing bracket, a continued argument): skip it.
    if (!is_header(code)) continue;
    c.headers.push_back(i);
    level = ind;
    outer = i;
    if (is_def(code)) {
      // Decorators sit directly above, at the def's indentation.
      for (size_t j = i; j-- > stop;) {
        if (indent_of(L[j]) != ind) break;
        if (code_of(L[j]).rfind('@', 0) != 0) break;
        c.decorators.push_back(j);
      }
      break;
    }
  }
  if (c.headers.empty()) {
    // A top-level line with no block around it: only itself.
    c.scope_begin = idx;
    c.scope_end = idx + 1;
    return c;
  }
  c.scope_begin = std::min(c.decorators.empty() ? outer : c.decorators.back(), idx);
  c.scope_end = std::max(block_end(src, outer), idx + 1);
  return c;
}

const Source *SourceCache::get(const std::string &path) {
  auto it = files_.find(path);
  if (it == files_.end()) it = files_.emplace(path, load_source(path)).first;
  return it->second ? &*it->second : nullptr;
}

std::vector<SourceFrame> user_frames(const std::vector<PythonFrame> &frames, SourceCache &cache) {
  std::vector<SourceFrame> user;
  for (const PythonFrame &f : frames) {
    if (user.size() >= kMaxUserFrames) break;
    if (f.line <= 0 || is_installed_python(f.file)) continue;
    const Source *src = cache.get(f.file);
    if (!src || size_t(f.line) > src->lines.size()) continue;
    const size_t idx = size_t(f.line) - 1;
    user.push_back({&f, src, idx, context_of(*src, idx)});
  }
  return user;
}

bool search(const std::string &text, const std::regex &re, std::smatch *m) {
  try {
    std::smatch local;
    return std::regex_search(text, m ? *m : local, re);
  } catch (const std::exception &) {
    return false;
  }
}

std::string code_excerpt(const std::string &code) {
  if (code.size() <= kMaxCodeInHint) return code;
  return code.substr(0, kMaxCodeInHint - 3) + "...";
}

}  // namespace torchseal
