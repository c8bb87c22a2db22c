#include "report/analysis/hints.h"

#include <optional>
#include <regex>
#include <string_view>

#include "common/util/fork_safe.h"
#include "common/util/path_name.h"
#include "report/analysis/holder_hints.h"
#include "report/analysis/python_source.h"

namespace torchseal {
namespace {

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
  // destroyed: the shim's exit report runs from a destructor, after a static
  // built by an earlier dump would have been torn down.
  static constinit Lazy<const std::vector<Rule>> compiled;
  return compiled.get([] {
    std::vector<Rule> v;
    for (const RuleSpec &s : kRules) {
      Rule r{&s, std::regex(s.code), std::nullopt, std::nullopt};
      if (s.function) r.function.emplace(s.function, std::regex::ECMAScript | std::regex::icase);
      if (s.unless) r.unless.emplace(s.unless);
      v.push_back(std::move(r));
    }
    return v;
  });
}

std::string expand(const char *tmpl, const std::string &code, const std::string &where,
                   const std::string &function) {
  std::string out;
  for (const char *p = tmpl; *p;) {
    if (std::string_view(p).rfind("{code}", 0) == 0) {
      out += code_excerpt(code);
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
  return out;
}

// The name is given a plain (non-tensor) value somewhere in the scope, e.g.
// `batch_loss = loss.item()` or `batch_loss = float(loss)`.
bool assigned_plain_value(const SourceFrame &u, const std::string &name) {
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

bool unless_holds(const Rule &rule, const SourceFrame &self, const std::vector<SourceFrame> &all) {
  if (!rule.unless) return false;
  for (const SourceFrame &u : all) {
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

std::optional<Hint> try_rule(const Rule &rule, const SourceFrame &u,
                             const std::vector<SourceFrame> &all) {
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
    const std::string where = std::string(basename_of(u.frame->file)) + ":" + std::to_string(i + 1);
    return Hint{spec.id, expand(spec.message, code, where, u.frame->function), u.frame->file,
                int(i + 1)};
  }
  return std::nullopt;
}

// The name-based rules: the user's source around the site's Python frames.
std::optional<Hint> source_rules(const HintEvidence &evidence) {
  SourceCache files;
  const std::vector<SourceFrame> user = user_frames(evidence.python_frames, files);
  // Innermost evidence first: it is closest to the memory that grows.
  for (const SourceFrame &u : user) {
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
constexpr RuleFamily kFamilies[] = {holder_rules, source_rules};

// Source text and names are not ours: keep the hint one printable line.
void make_printable(std::string &text) {
  for (char &ch : text) {
    if (ch == '\t')
      ch = ' ';
    else if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f)
      ch = '?';
  }
}

}  // namespace

std::optional<Hint> find_hint(const HintEvidence &evidence) {
  try {
    for (RuleFamily family : kFamilies) {
      if (std::optional<Hint> h = family(evidence)) {
        make_printable(h->message);
        return h;
      }
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
