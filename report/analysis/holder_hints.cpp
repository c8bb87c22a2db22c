#include "report/analysis/holder_hints.h"

#include <algorithm>
#include <cctype>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "common/util/fork_safe.h"
#include "common/util/path_name.h"
#include "report/analysis/python_source.h"
#include "report/analysis/shown_frames.h"

namespace torchseal {
namespace {

constexpr size_t kMaxHolders = 8;
constexpr size_t kMaxFileLines = 20000;  // a whole-file search stops here

// ---- a holder chain, parsed (the step formats of _holder_scan.py) ----------

enum class RootKind { Global, Local, ClassAttribute, Exception, Other };

struct Root {
  RootKind kind = RootKind::Other;
  std::string name, type;
  std::string where;     // Global: file basename or module; Local: file basename;
                         // ClassAttribute: "<file or module>.<class qualname>"
  std::string function;  // Local: the frame's function
  int line = 0;          // Local: the frame's current line
};

enum class StepKind {
  Element,    // `[3]`, `[0..11]`, `['key']`, `{<Tensor>}`, `.0..7 (Linear)`
  ObjectKey,  // `[<Parameter ...>]`: keyed by an object (an optimizer's state)
  Attribute,  // `.name (Type)`
  Graph,      // `.grad_fn (X)`, `.next_functions[0] (X)`, `._saved_self`, `.variable`
  Traceback,  // `.__traceback__`, `.tb_next`, `frame`, a local `(in a traceback)`
  Other,      // `.grad`, `key <Tensor>`, `<dict>`, `... 3 more`
};

struct Step {
  StepKind kind = StepKind::Other;
  std::string name, type;  // Attribute and module-list children
};

struct Chain {
  Root root;
  std::vector<Step> steps;  // between the root and the tensor
  std::string tensor;       // the last step: "Tensor float32 (256, 1024)"
  // Steps before the first Graph or Traceback step: the Python objects.
  size_t objects = 0;
  bool graph = false, traceback = false;
  // The chain ends in a local of a frame kept by a traceback:
  // `f() local 'x' (Tensor) at F:L (in a traceback)`.
  std::optional<Root> pinned_local;
};

struct Patterns {
  std::regex global{R"(^global '(\w+)' \(([\w.]+)\) in (.+)$)"};
  std::regex local{R"(^(.+)\(\) local '(\w+)' \(([\w.]+)\) at (.+):(\d+)$)"};
  std::regex class_attribute{R"(^class attribute (.+)\.(\w+) \(([\w.]+)\)$)"};
  std::regex exception{R"(^exception (\w+)$)"};
  std::regex attribute{R"(^\.(\w+|\d+\.\.\d+) \(([\w.]+)\)$)"};
  std::regex def_name{R"(^(?:async\s+)?(?:def|class)\s+(\w+))"};
  std::regex not_on_gpu{
      R"(\.(?:item|tolist|numpy|cpu)\(\)|\.(?:append|add)\(\s*(?:float|int|str|len|round|bool)\()"};
  std::regex detached{R"(\.(?:item|tolist|numpy|cpu|detach)\(\)|\b(?:float|int|round)\()"};
  std::regex eval_name{R"(valid|eval|test|infer|predict)",
                       std::regex::ECMAScript | std::regex::icase};
  std::regex backward{R"(\.backward\(|\bbackward\()"};
  std::regex except{R"(^except\b)"};
  std::regex loop{R"(^(?:async\s+)?(?:for|while)\b)"};
  std::regex for_targets{R"(^(?:async\s+)?for\s+(.+?)\s+in\b)"};
  std::regex targets{R"(^((?:\w+\s*,\s*)*\w+)\s*(?::[^=]+)?=(?!=))"};
  std::regex except_as{R"(^except\b.*\bas\s+(\w+)\s*:)"};
};

const Patterns &patterns() {
  // Never destroyed: the shim's exit report may run after static destructors.
  static constinit Lazy<const Patterns> p;
  return p.get();
}

bool is_container(const std::string &t) {
  for (const char *c : {"list", "dict", "deque", "set", "defaultdict", "OrderedDict", "ModuleList",
                        "ModuleDict", "ParameterList", "ParameterDict"}) {
    if (t == c) return true;
  }
  return false;
}

Step parse_step(const std::string &s) {
  const Patterns &P = patterns();
  Step st;
  if (s.starts_with(".grad_fn") || s.starts_with(".next_functions[") || s.starts_with("._saved_") ||
      s == ".variable") {
    st.kind = StepKind::Graph;
  } else if (s == ".__traceback__" || s == ".tb_next" || s == "frame" || s == ".__context__" ||
             s == ".__cause__" || s.find(" (in a traceback)") != std::string::npos) {
    st.kind = StepKind::Traceback;
  } else if (s.starts_with("[<")) {
    st.kind = StepKind::ObjectKey;
  } else if (s.starts_with("[") || s.starts_with("{<")) {
    st.kind = StepKind::Element;
  } else if (std::smatch m; search(s, P.attribute, &m)) {
    st.name = m[1].str();
    st.type = m[2].str();
    const bool child = std::isdigit(static_cast<unsigned char>(st.name[0]));
    st.kind = child ? StepKind::Element : StepKind::Attribute;
  }
  return st;
}

std::optional<Chain> parse_chain(const std::vector<std::string> &steps) {
  if (steps.size() < 2) return std::nullopt;
  const Patterns &P = patterns();
  Chain c;
  std::smatch m;
  const std::string &r = steps.front();
  if (search(r, P.global, &m)) {
    c.root = {RootKind::Global, m[1].str(), m[2].str(), m[3].str(), "", 0};
  } else if (search(r, P.local, &m)) {
    c.root = {RootKind::Local, m[2].str(), m[3].str(), m[4].str(), m[1].str(), 0};
    try {
      c.root.line = std::stoi(m[5].str());
    } catch (const std::exception &) {
      return std::nullopt;
    }
  } else if (search(r, P.class_attribute, &m)) {
    c.root = {RootKind::ClassAttribute, m[2].str(), m[3].str(), m[1].str(), "", 0};
  } else if (search(r, P.exception, &m)) {
    c.root = {RootKind::Exception, "", m[1].str(), "", "", 0};
  } else if (r == "sys.last_traceback") {
    c.traceback = true;
  }
  c.tensor = steps.back();
  c.objects = steps.size() - 2;
  for (size_t i = 1; i + 1 < steps.size(); ++i) {
    Step st = parse_step(steps[i]);
    if (st.kind == StepKind::Graph || st.kind == StepKind::Traceback) {
      c.objects = std::min(c.objects, i - 1);
      (st.kind == StepKind::Graph ? c.graph : c.traceback) = true;
    }
    c.steps.push_back(std::move(st));
  }
  if (c.root.kind == RootKind::Exception) c.traceback = true;
  const std::string &last = steps[steps.size() - 2];
  const std::string_view suffix = " (in a traceback)";
  // Matched in a copy that outlives `m` (its sub-matches point into it).
  const std::string bare = last.size() > suffix.size() && last.compare(last.size() - suffix.size(),
                                                                       suffix.size(), suffix) == 0
                               ? last.substr(0, last.size() - suffix.size())
                               : std::string();
  if (steps.size() > 2 && !bare.empty() && search(bare, P.local, &m)) {
    try {
      c.pinned_local = Root{RootKind::Local, m[2].str(), m[3].str(),
                            m[4].str(),      m[1].str(), std::stoi(m[5].str())};
    } catch (const std::exception &) {}
  }
  return c;
}

// The object that grows: the last container among the Python objects whose
// next step takes an element of it.
struct Container {
  std::string name, type;
  size_t element = 0;  // index in steps of the element step
};

std::optional<Container> container_of(const Chain &c) {
  std::optional<Container> found;
  std::string name = c.root.name, type = c.root.type;
  for (size_t i = 0; i < c.objects; ++i) {
    const Step &st = c.steps[i];
    if (st.kind == StepKind::Element && !name.empty() && is_container(type))
      found = Container{name, type, i};
    if (st.kind == StepKind::Attribute) {
      name = st.name;
      type = st.type;
    } else {
      name.clear();
      type.clear();
    }
  }
  return found;
}

bool has_object_key(const Chain &c) {
  return std::any_of(c.steps.begin(), c.steps.end(),
                     [](const Step &s) { return s.kind == StepKind::ObjectKey; });
}

// Parameters (a model's weights) at the end of the chain or on the way.
bool reaches_parameter(const Chain &c, size_t from) {
  if (c.tensor.starts_with("Parameter ")) return true;
  for (size_t i = from; i < c.steps.size(); ++i)
    if (c.steps[i].type == "Parameter") return true;
  return false;
}

// ---- where to look in the user's source -----------------------------------

// One line range of one file.
struct Place {
  const std::string *file;
  const Source *src;
  size_t begin, end;
};

struct Found {
  const std::string *file;
  const Source *src;
  size_t idx;
  std::string code;
};

struct Site {
  const std::vector<PythonFrame> &frames;
  SourceCache cache;
  std::vector<SourceFrame> user;
  std::vector<std::string> allocated;  // names assigned on the user frames' lines
  std::vector<std::string> caught;     // names bound by `except ... as NAME:` around them
};

// A file named in a chain (a basename, or a module name for globals of
// imported modules), resolved through the site's frames; nullptr if none.
const std::string *resolve(const Site &site, const std::string &where) {
  if (where.empty()) return nullptr;
  std::string module = where;
  std::replace(module.begin(), module.end(), '.', '/');
  for (const PythonFrame &f : site.frames) {
    if (f.file.empty() || is_installed_python(f.file)) continue;
    const std::string &p = f.file;
    if (basename_of(p) == where) return &p;
    for (const std::string &tail : {"/" + module + ".py", "/" + module + "/__init__.py"}) {
      if (p.size() >= tail.size() && p.compare(p.size() - tail.size(), tail.size(), tail) == 0)
        return &p;
    }
  }
  return nullptr;
}

// A class attribute's "<file or module>.<Class>": the file is a prefix.
const std::string *resolve_prefix(const Site &site, const std::string &where) {
  for (size_t dot = where.rfind('.'); dot != std::string::npos && dot > 0;
       dot = where.rfind('.', dot - 1)) {
    if (const std::string *f = resolve(site, where.substr(0, dot))) return f;
  }
  return nullptr;
}

const std::string *root_file(const Site &site, const Root &r) {
  if (r.kind == RootKind::ClassAttribute) return resolve_prefix(site, r.where);
  return resolve(site, r.where);
}

// Where a statement about the holder may be, best first: the root local's
// own function, the functions of the site's user frames, the root's file,
// then the user frames' files.
std::vector<Place> places(Site &site, const Root &r) {
  std::vector<Place> out;
  const std::string *file = root_file(site, r);
  const Source *src = file ? site.cache.get(*file) : nullptr;
  if (src && r.kind == RootKind::Local && r.line > 0 && size_t(r.line) <= src->lines.size()) {
    const BlockContext ctx = context_of(*src, size_t(r.line) - 1);
    out.push_back({file, src, ctx.scope_begin, ctx.scope_end});
  }
  for (const SourceFrame &u : site.user)
    out.push_back({&u.frame->file, u.src, u.ctx.scope_begin, u.ctx.scope_end});
  if (src) out.push_back({file, src, 0, std::min(src->lines.size(), kMaxFileLines)});
  for (const SourceFrame &u : site.user)
    out.push_back({&u.frame->file, u.src, 0, std::min(u.src->lines.size(), kMaxFileLines)});
  return out;
}

std::string def_name(const Source &src, size_t idx) {
  const BlockContext ctx = context_of(src, idx);
  if (ctx.headers.empty()) return {};
  std::smatch m;
  const std::string code = code_of(src.lines[ctx.headers.back()]);
  return search(code, patterns().def_name, &m) ? m[1].str() : std::string();
}

// The `size` characters at `at` in `code` are a name on their own (not part
// of a longer name or an attribute).
bool word_at(const std::string &code, size_t at, size_t size) {
  auto part = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  const size_t after = at + size;
  return (at == 0 || (!part(code[at - 1]) && code[at - 1] != '.')) &&
         (after >= code.size() || !part(code[after]));
}

bool has_word(const std::string &code, const std::string &word) {
  for (size_t at = code.find(word); at != std::string::npos; at = code.find(word, at + 1))
    if (word_at(code, at, word.size())) return true;
  return false;
}

// The first line in `where` that contains `name` and matches `re`, not
// `unless`, outside `__init__` (a model built once is not a leak). Within
// one place, a line naming one of `prefer` (what the site just allocated)
// beats an earlier one: a list may take other things too.
std::optional<Found> find_line(const std::vector<Place> &where, const std::string &name,
                               const std::regex &re, const std::regex *unless,
                               const std::vector<std::string> &prefer = {}) {
  for (const Place &p : where) {
    std::optional<Found> first;
    for (size_t i = p.begin; i < p.end && i < p.src->lines.size(); ++i) {
      if (p.src->lines[i].find(name) == std::string::npos) continue;
      std::string code = code_of(p.src->lines[i]);
      if (code.empty() || !search(code, re)) continue;
      if (unless && search(code, *unless)) continue;
      if (def_name(*p.src, i) == "__init__") continue;
      const bool preferred = std::any_of(prefer.begin(), prefer.end(), [&](const std::string &w) {
        return w != name && has_word(code, w);
      });
      if (preferred) return Found{p.file, p.src, i, std::move(code)};
      if (!first) first = Found{p.file, p.src, i, std::move(code)};
      if (prefer.empty()) break;
    }
    if (first) return first;
  }
  return std::nullopt;
}

// A pattern about one name: NAME in `tmpl` becomes it. Names in chains are
// identifiers (\w+), so they need no escaping.
std::optional<std::regex> about(const char *tmpl, const std::string &name) {
  std::string text;
  for (const char *p = tmpl; *p;) {
    if (std::string_view(p).rfind("NAME", 0) == 0) {
      text += name;
      p += 4;
    } else {
      text += *p++;
    }
  }
  try {
    return std::regex(text);
  } catch (const std::exception &) {
    return std::nullopt;
  }
}

// Adds to a container: NAME.append(...), NAME[k] = ..., NAME += [...].
constexpr const char *kStore =
    R"((?:^|[^\w])NAME\s*(?:\.\s*(?:append|extend|insert|appendleft|add|setdefault|update)\s*\(|\[.*\]\s*(?:=(?!=)|\+=)|\+=))";
// NAME += x, or NAME = NAME + x (also as an attribute: self.NAME).
constexpr const char *kAccumulate =
    R"(^(?:[\w\[\]'"]+\.)*NAME\s*(?:\+=|=\s*(?:[\w\[\]'"]+\.)*NAME\s*\+))";
// An assignment to NAME, alone or among several targets.
constexpr const char *kAssign =
    R"(^\(?\s*(?:[\w.\[\]*]+\s*,\s*)*NAME\s*(?:,\s*[\w.\[\]*]+\s*)*\)?\s*(?::[^=]+)?[-+*/@]?=(?!=))";

// The argument position of the word `name` in a call on this line, and the
// called function: `keep(outs, y)` -> ("keep", 0). `method` when called as
// an attribute (`self.keep(...)`: its def has a self parameter first).
struct Call {
  std::string callee;
  size_t arg = 0;
  bool method = false;
};

std::optional<Call> call_with(const std::string &code, const std::string &name) {
  for (size_t at = code.find(name); at != std::string::npos; at = code.find(name, at + 1)) {
    if (!word_at(code, at, name.size())) continue;
    size_t commas = 0;
    int depth = 0;
    for (size_t i = at; i-- > 0;) {
      const char ch = code[i];
      if (ch == ')' || ch == ']' || ch == '}') {
        ++depth;
      } else if (ch == '[' || ch == '{') {
        if (depth-- == 0) break;  // inside a literal, not an argument
      } else if (ch == ',' && depth == 0) {
        ++commas;
      } else if (ch == '(' && depth-- == 0) {
        size_t end = i;
        while (end > 0 && code[end - 1] == ' ') --end;
        size_t begin = end;
        while (begin > 0 && (std::isalnum(static_cast<unsigned char>(code[begin - 1])) ||
                             code[begin - 1] == '_'))
          --begin;
        if (begin == end) break;
        return Call{code.substr(begin, end - begin), commas, begin > 0 && code[begin - 1] == '.'};
      }
    }
  }
  return std::nullopt;
}

// The name of parameter `index` in a one-line `def f(a, b=1, *, c: int):`.
std::string parameter(const std::string &def, size_t index) {
  const size_t open = def.find('('), close = def.rfind(')');
  if (open == std::string::npos || close == std::string::npos || close < open) return {};
  std::vector<std::string> names;
  int depth = 0;
  std::string cur;
  for (size_t i = open + 1; i <= close; ++i) {
    const char ch = i == close ? ',' : def[i];
    if (ch == '(' || ch == '[') ++depth;
    if (ch == ')' || ch == ']') --depth;
    if (ch == ',' && depth == 0) {
      std::string n;
      for (char x : cur) {
        if (x == ':' || x == '=') break;
        if (std::isalnum(static_cast<unsigned char>(x)) || x == '_') n += x;
      }
      if (!n.empty() && cur.find('*') == std::string::npos) names.push_back(n);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  return index < names.size() ? names[index] : std::string();
}

struct Evidence {
  Site &site;
  const Chain &chain;
};

Hint make(const char *kind, const Found &f, const std::string &message) {
  return Hint{kind, message, *f.file, int(f.idx + 1)};
}

std::string quote_at(const Found &f) {
  return "`" + code_excerpt(f.code) + "` (" + std::string(basename_of(*f.file)) + ":" +
         std::to_string(f.idx + 1) + ")";
}

// Evaluation: a function named so among those involved, or no backward pass
// in any of them (outputs carry graphs nobody will use).
bool looks_like_eval(const Site &site, const Found &store) {
  const Patterns &P = patterns();
  if (search(def_name(*store.src, store.idx), P.eval_name)) return true;
  bool backward = false;
  auto scan = [&](const Source &src, size_t begin, size_t end) {
    for (size_t i = begin; i < end && i < src.lines.size() && !backward; ++i)
      if (src.lines[i].find("backward") != std::string::npos &&
          search(code_of(src.lines[i]), P.backward))
        backward = true;
  };
  for (const SourceFrame &u : site.user) {
    if (search(u.frame->function, P.eval_name)) return true;
    scan(*u.src, u.ctx.scope_begin, u.ctx.scope_end);
  }
  const BlockContext ctx = context_of(*store.src, store.idx);
  scan(*store.src, ctx.scope_begin, ctx.scope_end);
  return !backward;
}

// The line that adds to a container: in the places of its root, else in the
// helper it is passed to from there (`keep(outs, y)` -> `def keep(preds, y):`
// -> `preds.append(y)`).
std::optional<Found> find_store(Site &site, const Root &root, const std::string &name,
                                const std::regex *unless, const std::vector<std::string> &prefer) {
  auto re = about(kStore, name);
  if (!re) return std::nullopt;
  const std::vector<Place> where = places(site, root);
  if (std::optional<Found> f = find_line(where, name, *re, unless, prefer)) return f;
  for (const Place &p : where) {
    for (size_t i = p.begin; i < p.end && i < p.src->lines.size(); ++i) {
      if (p.src->lines[i].find(name) == std::string::npos) continue;
      std::optional<Call> call = call_with(code_of(p.src->lines[i]), name);
      if (!call) continue;
      auto def = about(R"(^(?:async\s+)?def\s+NAME\s*\()", call->callee);
      if (!def) continue;
      for (const Place &q : where) {
        for (size_t j = 0; j < q.src->lines.size() && j < kMaxFileLines; ++j) {
          if (q.src->lines[j].find(call->callee) == std::string::npos) continue;
          const std::string code = code_of(q.src->lines[j]);
          if (!search(code, *def)) continue;
          const std::string param = parameter(code, call->arg + (call->method ? 1 : 0));
          auto store = param.empty() ? std::nullopt : about(kStore, param);
          if (!store) continue;
          const std::vector<Place> body{{q.file, q.src, j, block_end(*q.src, j)}};
          if (std::optional<Found> f = find_line(body, param, *store, unless, prefer)) return f;
        }
      }
    }
  }
  return std::nullopt;
}

// Rule 5: the chain goes through an exception's traceback -> the `except`
// clause around the site, else the line that stores the exception.
std::optional<Hint> pinned_traceback(Evidence &e) {
  const Chain &c = e.chain;
  if (!c.traceback) return std::nullopt;
  const char *why =
      ": the exception's traceback pins the frames of the failed attempt and their tensors "
      "(OOM-retry pattern); retry after leaving the `except` block and do not keep the "
      "exception object";
  for (const SourceFrame &u : e.site.user) {
    for (size_t h : u.ctx.headers) {
      std::string code = code_of(u.src->lines[h]);
      if (search(code, patterns().except)) {
        Found f{&u.frame->file, u.src, h, std::move(code)};
        return make("exception-frame", f, quote_at(f) + why);
      }
    }
  }
  std::optional<Found> f;
  const std::vector<Place> where = places(e.site, c.root);
  if (std::optional<Container> box = container_of(c)) {
    f = find_store(e.site, c.root, box->name, nullptr, e.site.caught);
  } else if (c.root.kind == RootKind::Local || c.root.kind == RootKind::Global) {
    // `except X as e:` binding the name, else an assignment to it.
    if (auto re = about(R"(^except\b.*\bas\s+NAME\s*:)", c.root.name))
      f = find_line(where, c.root.name, *re, nullptr);
    if (!f)
      if (auto re = about(kAssign, c.root.name)) f = find_line(where, c.root.name, *re, nullptr);
  }
  if (!f) return std::nullopt;
  return make("exception-frame", *f, quote_at(*f) + why);
}

// Rule 4: parameters of modules (or parameters) added to a container every
// call -> the line that stores them.
std::optional<Hint> module_per_step(Evidence &e) {
  const Chain &c = e.chain;
  std::optional<Container> box = container_of(c);
  if (!box || has_object_key(c) || !reaches_parameter(c, box->element)) return std::nullopt;
  std::optional<Found> f = find_store(e.site, c.root, box->name, nullptr, e.site.allocated);
  if (!f) return std::nullopt;
  return make("module-per-step", *f,
              quote_at(*f) + " stores a new module or parameter in `" + box->name +
                  "` on every call, so their parameters accumulate; create it once in "
                  "`__init__` and reuse it");
}

// Rule 2: a tensor (not in a container) whose graph is alive -> the line
// that keeps adding to it.
std::optional<Hint> accumulated_graph(Evidence &e) {
  const Chain &c = e.chain;
  if (!c.graph || container_of(c) || has_object_key(c)) return std::nullopt;
  std::string name = c.root.name, type = c.root.type;
  for (size_t i = 0; i < c.objects; ++i) {
    if (c.steps[i].kind != StepKind::Attribute) return std::nullopt;
    name = c.steps[i].name;
    type = c.steps[i].type;
  }
  if (name.empty() || type != "Tensor") return std::nullopt;
  auto re = about(kAccumulate, name);
  if (!re) return std::nullopt;
  std::optional<Found> f = find_line(places(e.site, c.root), name, *re, &patterns().detached);
  if (!f) return std::nullopt;
  std::string message = quote_at(*f) + " adds to `" + name +
                        "` a tensor with its autograd graph, keeping every step's graph alive; "
                        "accumulate `loss.item()` (or `loss.detach()`) instead";
  if (looks_like_eval(e.site, *f)) message += ", and evaluate under `with torch.no_grad():`";
  return make("loss-accumulation", *f, message);
}

// Rules 1 and 3: tensors kept in a container -> the line that adds to it.
std::optional<Hint> growing_container(Evidence &e) {
  const Chain &c = e.chain;
  std::optional<Container> box = container_of(c);
  // Optimizer state (keyed by parameters) and a model's weights are not
  // growth: a correct program keeps them.
  if (!box || has_object_key(c) || reaches_parameter(c, 0)) return std::nullopt;
  const Patterns &P = patterns();
  std::optional<Found> f = find_store(e.site, c.root, box->name,
                                      c.graph ? &P.detached : &P.not_on_gpu, e.site.allocated);
  if (!f) return std::nullopt;
  if (c.graph && looks_like_eval(e.site, *f)) {
    const std::string fn = def_name(*f->src, f->idx);
    return make("eval-graph-kept", *f,
                quote_at(*f) + " keeps outputs with their autograd graphs (and saved activations)" +
                    (fn.empty() ? std::string() : " in `" + fn + "`") +
                    "; run evaluation under `with torch.no_grad():` (or "
                    "`torch.inference_mode()`), or keep `.detach()` copies");
  }
  const std::string what = "`" + box->name + "` (" + box->type + ")";
  if (c.graph) {
    return make("growing-container", *f,
                quote_at(*f) + " adds to " + what +
                    " tensors that keep their autograd graphs, so every step's graph and saved "
                    "activations stay alive; keep `.detach()` copies (`.item()` for numbers, "
                    "`.cpu()` off the GPU)");
  }
  return make("growing-container", *f,
              quote_at(*f) + " adds tensors to " + what +
                  " and nothing removes them, so its GPU memory grows; keep `.item()` for "
                  "numbers or `.cpu()` copies, or bound `" +
                  box->name + "`");
}

bool same_function(const std::string &frame_function, const std::string &chain_function) {
  if (frame_function == chain_function) return true;
  // co_name in one, co_qualname in the other (Python < 3.11 frames).
  const size_t a = frame_function.rfind('.'), b = chain_function.rfind('.');
  return frame_function.substr(a == std::string::npos ? 0 : a + 1) ==
         chain_function.substr(b == std::string::npos ? 0 : b + 1);
}

// Rule 6: a local of a site's frame, last assigned in a loop that ended
// before the frame's line -> that assignment.
std::optional<Hint> loop_local(Evidence &e) {
  const Chain &c = e.chain;
  // The local holding the tensor: the root, or, when an uncaught OOM left
  // only its traceback, the frame local the chain ends in.
  const Root *local = nullptr;
  if (c.root.kind == RootKind::Local && !c.traceback) local = &c.root;
  if (c.pinned_local) local = &*c.pinned_local;
  if (!local || container_of(c) || reaches_parameter(c, 0)) return std::nullopt;
  const Patterns &P = patterns();
  const std::string &name = local->name;
  auto assign = about(kAssign, name);
  auto word = about(R"((?:^|[^\w.])NAME\b)", name);
  if (!assign || !word) return std::nullopt;
  for (const SourceFrame &u : e.site.user) {
    if (basename_of(u.frame->file) != local->where ||
        !same_function(u.frame->function, local->function) || local->line <= 0 ||
        size_t(local->line) > u.src->lines.size())
      continue;
    const auto &L = u.src->lines;
    const size_t at = size_t(local->line) - 1;  // where the frame is now
    const size_t begin = context_of(*u.src, at).scope_begin;
    for (size_t i = at; i-- > begin;) {
      if (L[i].find(name) == std::string::npos) continue;
      std::string code = code_of(L[i]);
      std::smatch m;
      const bool loop_variable = search(code, P.for_targets, &m) && search(m[1].str(), *word);
      if (!loop_variable && !search(code, *assign)) continue;
      std::vector<size_t> loops;
      if (loop_variable) loops.push_back(i);
      for (size_t h : context_of(*u.src, i).headers)
        if (h >= begin && search(code_of(L[h]), P.loop)) loops.push_back(h);
      for (size_t h : loops) {
        if (block_end(*u.src, h) > at) continue;  // the frame is still in this loop
        Found f{&u.frame->file, u.src, i, std::move(code)};
        return make("loop-local", f,
                    quote_at(f) + ": `" + name + "` stays alive after its loop ends, holding " +
                        "its memory at line " + std::to_string(local->line) + "; `del " + name +
                        "` after the loop (or compute it in a smaller function)");
      }
      return std::nullopt;  // the last assignment is not in a finished loop
    }
  }
  return std::nullopt;
}

// What the site's own lines name: `x = torch.randn(...)` allocates x, and
// `except E as e:` around it binds e.
void names_of(Site &site) {
  const Patterns &P = patterns();
  for (const SourceFrame &u : site.user) {
    std::smatch m;
    const std::string line = code_of(u.src->lines[u.idx]);
    if (search(line, P.targets, &m)) {
      std::string t = m[1].str();
      for (size_t b = 0; b < t.size();) {
        size_t e = t.find(',', b);
        if (e == std::string::npos) e = t.size();
        std::string w = t.substr(b, e - b);
        w.erase(std::remove_if(w.begin(), w.end(), [](char c) { return c == ' ' || c == '\t'; }),
                w.end());
        if (!w.empty()) site.allocated.push_back(w);
        b = e + 1;
      }
    }
    for (size_t i = u.ctx.scope_begin; i < u.ctx.scope_end; ++i) {
      if (u.src->lines[i].find("except") == std::string::npos) continue;
      const std::string code = code_of(u.src->lines[i]);
      if (search(code, P.except_as, &m)) site.caught.push_back(m[1].str());
    }
  }
}

using HolderRule = std::optional<Hint> (*)(Evidence &);
// Most specific first: a traceback or a module list explains a chain that
// also looks like a growing container.
constexpr HolderRule kHolderRules[] = {pinned_traceback, module_per_step, accumulated_graph,
                                       growing_container, loop_local};

}  // namespace

std::optional<Hint> holder_rules(const HintEvidence &evidence) {
  if (evidence.holders.empty()) return std::nullopt;
  Site site{evidence.python_frames, {}, {}, {}, {}};
  site.user = user_frames(evidence.python_frames, site.cache);
  names_of(site);
  const size_t n = std::min(evidence.holders.size(), kMaxHolders);
  for (size_t i = 0; i < n; ++i) {
    std::optional<Chain> chain = parse_chain(evidence.holders[i].chain);
    if (!chain) continue;
    Evidence e{site, *chain};
    for (HolderRule rule : kHolderRules) {
      if (std::optional<Hint> h = rule(e)) return h;
    }
  }
  return std::nullopt;
}

}  // namespace torchseal
