// The user's Python source around a site's frames, as the hint rules read
// it (report/analysis/hints.h): a bounded, forgiving line view of a file and
// its block structure (the headers around a line, the function it is in).
// Missing, unreadable, huge or binary files read as "no source"; nothing
// here throws on odd input or runs Python.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

struct Source {
  std::vector<std::string> lines;
};

// Source files above 4 MiB are not Python a person wrote: nullopt.
std::optional<Source> load_source(const std::string &path);

// The code of a line: comment removed (outside string literals), trimmed.
// Empty for lines too long to search safely (libstdc++'s regex recurses per
// character).
std::string code_of(const std::string &line);

// A compound-statement header (`for ...:`, `except ...:`, `def ...`).
bool is_header(const std::string &code);
bool is_def(std::string_view code);
bool starts_with_word(std::string_view s, std::string_view w);

// The structure around one line: enclosing block headers (innermost first,
// ending at the enclosing def if any), decorators of that def, and the line
// range of the def (or of the outermost enclosing top-level statement).
struct BlockContext {
  std::vector<size_t> headers;
  std::vector<size_t> decorators;
  size_t scope_begin = 0, scope_end = 0;  // [begin, end)
};
BlockContext context_of(const Source &src, size_t idx);

// The end (exclusive) of the block a header line opens: the next line as far
// left as the header that is not a closing bracket. Bounded.
size_t block_end(const Source &src, size_t header);

// Files read once per report entry, by path.
class SourceCache {
 public:
  const Source *get(const std::string &path);

 private:
  std::map<std::string, std::optional<Source>> files_;
};

// A frame of the user's own code whose line is in a readable file.
struct SourceFrame {
  const PythonFrame *frame;
  const Source *src;
  size_t idx;  // 0-based line
  BlockContext ctx;
};

// The innermost user frames (not site-packages or the standard library),
// innermost first, at most 16.
std::vector<SourceFrame> user_frames(const std::vector<PythonFrame> &frames, SourceCache &cache);

// std::regex reports pathological inputs by throwing; that is "no match".
bool search(const std::string &text, const std::regex &re, std::smatch *m = nullptr);

// Code quoted in a hint, cut to a readable length.
std::string code_excerpt(const std::string &code);

}  // namespace torchseal
