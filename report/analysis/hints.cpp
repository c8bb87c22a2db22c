#include "report/analysis/hints.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <string_view>
#include <system_error>
#include <unordered_map>

#include "report/analysis/shown_frames.h"

namespace torchseal {
namespace {

// Bounds: a report must never stall or blow the stack on odd input. Source
// files above this size are not Python a person wrote; libstdc++'s regex
// recurses per character, so very long (minified, generated) lines are
// skipped rather than searched.
constexpr std::uintmax_t kMaxFileBytes = 4u << 20;
constexpr size_t kMaxLineChars = 600;
constexpr size_t kMaxScopeLines = 2000;  // lines scanned each way from a frame
constexpr size_t kMaxUserFrames = 16;    // innermost user frames examined (a framework outside
                                         // site-packages can take several)
constexpr size_t kMaxCodeInHint = 80;

// Where a rule looks, relative to one user frame.
enum class Scope {
  Line,       // the frame's own line (where the allocation was made)
  Enclosing,  // headers of the blocks around that line, up to its `def`
  Function,   // every line of the enclosing function (or top-level statement)
};

// A hint rule. All regexes are ECMAScript and are searched in one line of
// code with its comment stripped and surrounding blanks trimmed.
struct RuleSpec {
  const char *id;
  Scope scope;
  const char *code;      // must match a line in `scope`
  const char *function;  // if set, must match the frame's function name (case-insensitive)
  // If set and it matches a block header or decorator of any examined user
  // frame, or any line of this frame's function, the rule does not apply
  // (e.g. validation already under torch.no_grad()).
  const char *unless;
  // If > 0, this capture group of `code` names the value being kept; the
  // rule does not apply when that name is assigned a plain number in the
  // function (`batch_loss = loss.item()`), so it is not a tensor.
  int name_group;
  // {code}: the matching line, {where}: its file:line, {function}: the frame's function.
  const char *message;
};

// Not turned into a plain number or detached copy somewhere on the line.
#define TS_NOT_DETACHED R"((?!.*\.(?:item|detach|cpu|tolist|numpy)\(\)))"
// Names that, in a training loop, are tensors: loss, out/outputs, preds, logits, ...
#define TS_TENSORISH \
  R"((?:self\.)?(?:\w+_)?(?:loss|out|pred|logit|hidden|feat|emb|activ|grad|score|prob|hat|tensor|attn|state|latent)\w*)"

constexpr RuleSpec kRules[] = {
    {"exception-frame", Scope::Enclosing, R"(^except\b)", nullptr, nullptr, 0,
     "allocated while handling an exception (`{code}` at {where}): the exception's traceback "
     "pins the failed attempt's tensors (OOM-retry pattern); retry after leaving the `except` "
     "block and do not keep the exception object"},
    {"tensor-append", Scope::Line,
     R"(\.(?:append|extend)\()" TS_NOT_DETACHED R"((?!\s*(?:float|int|str|len|round|bool)\())",
     nullptr, nullptr, 0,
     "`{code}` ({where}) appends a tensor to a list every step, keeping its memory (and its "
     "autograd graph) alive; append `.item()` for numbers, or `.cpu()` to keep a copy off the GPU "
     "(`.detach()` drops the graph but keeps the device memory)"},
    {"validation-with-grad", Scope::Line,
     R"((?:^|[^\w.])(?:self\.)?\w*(?:model|net|module|encoder|decoder)\w*\s*\()",
     R"(valid|eval|test|infer|predict)", R"(no_grad|inference_mode|set_grad_enabled\(\s*False)", 0,
     "`{code}` ({where}) runs the model in `{function}` with autograd on, so every output kept "
     "holds its graph; wrap validation in `with torch.no_grad():` (or `torch.inference_mode()`)"},
    {"loss-accumulation", Scope::Function,
     "^" TS_NOT_DETACHED
     R"([\w.\[\]'"]+\s*\+=\s*((?:self\.)?(?:\w+_)?loss\w*)(?:\(.*\))?(?:\s*[*/]\s*[\w.()\[\]]+)?$)",
     nullptr, nullptr, 1,
     "`{code}` ({where}) keeps every step's autograd graph alive; accumulate `loss.item()` (or "
     "`loss.detach()`) instead"},
    {"loss-accumulation", Scope::Function,
     "^" TS_NOT_DETACHED
     R"(([\w.]+)\s*=\s*\1\s*\+\s*((?:self\.)?(?:\w+_)?loss\w*)(?:\(.*\))?(?:\s*[*/]\s*[\w.()\[\]]+)?$)",
     nullptr, nullptr, 2,
     "`{code}` ({where}) keeps every step's autograd graph alive; accumulate `loss.item()` (or "
     "`loss.detach()`) instead"},
    {"tensor-append", Scope::Function,
     R"(\.(?:append|extend)\(\s*)" TS_NOT_DETACHED "(" TS_TENSORISH R"()\s*[)\[,(])", nullptr,
     nullptr, 1,
     "`{code}` ({where}) appends a tensor to a list every step, keeping its memory (and its "
     "autograd graph) alive; append `.item()` for numbers, or `.cpu()` to keep a copy off the GPU "
     "(`.detach()` drops the graph but keeps the device memory)"},
};

#undef TS_NOT_DETACHED
#undef TS_TENSORISH

struct Rule {
  const RuleSpec *spec;
  std::regex code;
  std::optional<std::regex> function, unless;
};

const std::vector<Rule> &rules() {
  // Compiled once; const regexes are safe to share between threads. Never
  // destroyed: the shim's exit report runs from a destructor, after a
  // function-local static built by an earlier dump would have been torn down.
  static const std::vector<Rule> *compiled = [] {
    auto *v = new std::vector<Rule>;
    for (const RuleSpec &s : kRules) {
      Rule r{&s, std::regex(s.code), std::nullopt, std::nullopt};
      if (s.function) r.function.emplace(s.function, std::regex::ECMAScript | std::regex::icase);
      if (s.unless) r.unless.emplace(s.unless);
      v->push_back(std::move(r));
    }
    return v;
  }();
  return *compiled;
}

bool search(const std::string &text, const std::regex &re, std::smatch *m = nullptr) {
  // std::regex reports pathological inputs by throwing; that is "no match".
  try {
    std::smatch local;
    return std::regex_search(text, m ? *m : local, re);
  } catch (const std::exception &) {
    return false;
  }
}

// ---- a bounded, forgiving view of a Python source file ----------------------

struct Source {
  std::vector<std::string> lines;
};

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

// The code of a line: comment removed (outside string literals), trimmed.
// Empty for lines too long to search safely.
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

// A compound-statement header. A `def` may span lines (its signature), so
// it counts without the trailing colon; others must end with ':'.
bool is_header(const std::string &code) {
  if (is_def(code)) return true;
  if (code.empty() || code.back() != ':') return false;
  for (const char *kw : {"for", "async", "while", "if", "elif", "else", "try", "except", "finally",
                         "with", "match", "case"}) {
    if (starts_with_word(code, kw)) return true;
  }
  return false;
}

// The structure around one line: enclosing block headers (innermost first,
// ending at the enclosing def if any), decorators of that def, and the line
// range of the def (or of the outermost enclosing top-level statement).
struct Context {
  std::vector<size_t> headers;
  std::vector<size_t> decorators;
  size_t scope_begin = 0, scope_end = 0;  // [begin, end)
};

Context context_of(const Source &src, size_t idx) {
  Context c;
  const auto &L = src.lines;
  int level = indent_of(L[idx]);
  if (level < 0) level = 0;
  size_t outer = idx;
  int outer_indent = level;
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
    outer_indent = ind;
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
  c.scope_begin = c.decorators.empty() ? outer : c.decorators.back();
  // The block ends before the next line as far left as its header (a
  // `)` closing a multi-line signature does not end it).
  size_t end = outer + 1;
  const size_t limit = std::min(L.size(), idx + kMaxScopeLines);
  while (end < limit) {
    const int ind = indent_of(L[end]);
    if (ind >= 0 && ind <= outer_indent) {
      const std::string code = code_of(L[end]);
      if (!code.empty() && code[0] != ')' && code[0] != ']' && code[0] != '}') break;
    }
    ++end;
  }
  c.scope_begin = std::min(c.scope_begin, idx);
  c.scope_end = std::max(end, idx + 1);
  return c;
}

struct UserFrame {
  const PythonFrame *frame;
  const Source *src;
  size_t idx;  // 0-based line
  Context ctx;
};

std::string basename_of(const std::string &path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string shorten(const std::string &code) {
  if (code.size() <= kMaxCodeInHint) return code;
  return code.substr(0, kMaxCodeInHint - 3) + "...";
}

std::string expand(const char *tmpl, const std::string &code, const std::string &where,
                   const std::string &function) {
  std::string out;
  for (const char *p = tmpl; *p;) {
    if (std::string_view(p).rfind("{code}", 0) == 0) {
      out += shorten(code);
      p += 6;
    } else if (std::string_view(p).rfind("{where}", 0) == 0) {
      out += where;
      p += 7;
    } else if (std::string_view(p).rfind("{function}", 0) == 0) {
      out += function;
      p += 10;
    } else {
      out += *p++;
    }
  }
  // Source text and names are not ours: keep the hint one printable line.
  for (char &ch : out) {
    if (ch == '\t')
      ch = ' ';
    else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      ch = '?';
  }
  return out;
}

// The name is given a plain (non-tensor) value somewhere in the scope, e.g.
// `batch_loss = loss.item()` or `batch_loss = float(loss)`.
bool assigned_plain_value(const UserFrame &u, const std::string &name) {
  std::string escaped;
  for (char ch : name) {
    if (ch == '.') escaped += '\\';
    escaped += ch;
  }
  std::regex plain;
  try {
    plain = std::regex("^" + escaped +
                       R"(\s*=\s*(?:(?:float|int|round)\(|.*\.(?:item|tolist)\(\)\s*$))");
  } catch (const std::exception &) {
    return false;
  }
  for (size_t i = u.ctx.scope_begin; i < u.ctx.scope_end; ++i) {
    if (search(code_of(u.src->lines[i]), plain)) return true;
  }
  return false;
}

bool unless_holds(const Rule &rule, const UserFrame &self, const std::vector<UserFrame> &all) {
  if (!rule.unless) return false;
  for (const UserFrame &u : all) {
    for (size_t i : u.ctx.headers)
      if (search(code_of(u.src->lines[i]), *rule.unless)) return true;
    for (size_t i : u.ctx.decorators)
      if (search(code_of(u.src->lines[i]), *rule.unless)) return true;
  }
  // e.g. torch.set_grad_enabled(False) as a statement earlier in the function.
  for (size_t i = self.ctx.scope_begin; i < self.ctx.scope_end; ++i)
    if (search(code_of(self.src->lines[i]), *rule.unless)) return true;
  return false;
}

std::optional<Hint> try_rule(const Rule &rule, const UserFrame &u,
                             const std::vector<UserFrame> &all) {
  const RuleSpec &spec = *rule.spec;
  if (rule.function && !search(u.frame->function, *rule.function)) return std::nullopt;
  std::vector<size_t> candidates;
  switch (spec.scope) {
    case Scope::Line:
      candidates.push_back(u.idx);
      break;
    case Scope::Enclosing:
      candidates = u.ctx.headers;
      break;
    case Scope::Function:
      for (size_t i = u.ctx.scope_begin; i < u.ctx.scope_end; ++i) candidates.push_back(i);
      break;
  }
  for (size_t i : candidates) {
    const std::string code = code_of(u.src->lines[i]);
    if (code.empty()) continue;
    std::smatch m;
    if (!search(code, rule.code, &m)) continue;
    if (spec.name_group > 0 && size_t(spec.name_group) < m.size() &&
        assigned_plain_value(u, m[size_t(spec.name_group)].str())) {
      continue;
    }
    if (unless_holds(rule, u, all)) return std::nullopt;
    const std::string where = basename_of(u.frame->file) + ":" + std::to_string(i + 1);
    return Hint{spec.id, expand(spec.message, code, where, u.frame->function), u.frame->file,
                int(i + 1)};
  }
  return std::nullopt;
}

// The name-based rules: the user's source around the site's Python frames.
std::optional<Hint> source_rules(const HintEvidence &evidence) {
  std::unordered_map<std::string, std::optional<Source>> files;
  std::vector<UserFrame> user;
  for (const PythonFrame &f : evidence.python_frames) {
    if (user.size() >= kMaxUserFrames) break;
    if (f.line <= 0 || is_installed_python(f.file)) continue;
    auto it = files.find(f.file);
    if (it == files.end()) it = files.emplace(f.file, load_source(f.file)).first;
    if (!it->second || size_t(f.line) > it->second->lines.size()) continue;
    const Source &src = *it->second;
    const size_t idx = size_t(f.line) - 1;
    user.push_back({&f, &src, idx, context_of(src, idx)});
  }
  // Innermost evidence first: it is closest to the memory that grows.
  for (const UserFrame &u : user) {
    for (const Rule &rule : rules()) {
      if (std::optional<Hint> h = try_rule(rule, u, user)) return h;
    }
  }
  return std::nullopt;
}

// Rule families, most direct evidence first: rules on the site's holders (who
// keeps the memory alive) belong before the source rules, which only guess
// from names in the code.
using RuleFamily = std::optional<Hint> (*)(const HintEvidence &);
constexpr RuleFamily kFamilies[] = {source_rules};

}  // namespace

std::optional<Hint> find_hint(const HintEvidence &evidence) {
  try {
    for (RuleFamily family : kFamilies) {
      if (std::optional<Hint> h = family(evidence)) return h;
    }
  } catch (...) {
    // A hint is a nicety; no input may take the report down with it.
  }
  return std::nullopt;
}

std::optional<Hint> find_hint(const std::vector<PythonFrame> &python_frames,
                              const std::vector<Holder> &holders) {
  return find_hint(HintEvidence{python_frames, holders});
}

}  // namespace torchseal
