// settings_doc: the settings table of docs/configuration.md, made from
// settings.def (the same table the shim parses and `torchseal run` offers).
//
//   settings_doc                 prints the markdown table
//   settings_doc --update FILE   rewrites the table between FILE's markers
//   settings_doc --check FILE    exit 1 (saying how to regenerate) when
//                                FILE's table is not the generated one
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/settings/settings.h"

namespace {

using torchseal::settings::Kind;
using torchseal::settings::Spec;

constexpr const char *kBegin =
    "<!-- BEGIN settings table: made from common/settings/settings.def by "
    "`meson compile -C build settings-doc`; do not edit by hand -->\n";
constexpr const char *kEnd = "<!-- END settings table -->\n";
constexpr const char *kRegenerate = "meson compile -C build settings-doc";

std::string cell(const std::string &text) {
  std::string out;
  for (char c : text) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string code(const std::string &text) { return "`" + text + "`"; }

std::string accepted_cell(const Spec &s) {
  if (s.kind != Kind::Choice) return torchseal::settings::accepted(s);
  std::string out;
  for (const std::string &name : torchseal::settings::choice_names(s))
    out += (out.empty() ? "" : ", ") + code(name);
  return out;
}

std::string option_cell(const Spec &s) {
  if (!s.option) return "";
  std::string out, names = s.option;
  size_t start = 0;
  while (start <= names.size()) {
    size_t comma = names.find(',', start);
    if (comma == std::string::npos) comma = names.size();
    out += (out.empty() ? "" : ", ") + code(names.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

std::string table() {
  std::string out = kBegin;
  out += "| variable | accepted values | default | `torchseal run` option | meaning |\n";
  out += "|---|---|---|---|---|\n";
  for (const Spec &s : torchseal::settings::kTable) {
    out += "| " + code(s.var) + " | " + cell(accepted_cell(s)) + " | " +
           (s.default_value ? code(s.default_value) : std::string("unset")) + " | " +
           option_cell(s) + " | " + cell(s.doc) + " |\n";
  }
  return out + kEnd;
}

bool read_file(const char *path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// Splits `doc` around its table; false when the markers are missing.
bool split(const std::string &doc, std::string &before, std::string &current, std::string &after) {
  size_t b = doc.find(kBegin);
  size_t e = doc.find(kEnd, b == std::string::npos ? 0 : b);
  if (b == std::string::npos || e == std::string::npos) return false;
  before = doc.substr(0, b);
  current = doc.substr(b, e + std::string(kEnd).size() - b);
  after = doc.substr(e + std::string(kEnd).size());
  return true;
}

// The first line where `a` and `b` differ ("" past the end of one).
void first_difference(const std::string &a, const std::string &b, std::string &line_a,
                      std::string &line_b) {
  std::istringstream sa(a), sb(b);
  while (true) {
    bool more_a = static_cast<bool>(std::getline(sa, line_a));
    bool more_b = static_cast<bool>(std::getline(sb, line_b));
    if (!more_a) line_a.clear();
    if (!more_b) line_b.clear();
    if (line_a != line_b || (!more_a && !more_b)) return;
  }
}

}  // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (argc == 1) {
    std::fputs(table().c_str(), stdout);
    return 0;
  }
  if (argc != 3 || (mode != "--update" && mode != "--check")) {
    std::fprintf(stderr, "usage: settings_doc [--update FILE | --check FILE]\n");
    return 2;
  }
  const char *path = argv[2];
  std::string doc, before, current, after;
  if (!read_file(path, doc)) {
    std::fprintf(stderr, "settings_doc: cannot read %s\n", path);
    return 2;
  }
  if (!split(doc, before, current, after)) {
    std::fprintf(stderr, "settings_doc: %s has no settings table markers (%s... %s)\n", path,
                 "<!-- BEGIN settings table", "<!-- END settings table -->");
    return 2;
  }
  std::string wanted = table();
  if (mode == "--check") {
    if (current == wanted) return 0;
    std::string have_line, want_line;
    first_difference(current, wanted, have_line, want_line);
    std::fprintf(
        stderr,
        "settings_doc: the settings table in %s differs from common/settings/settings.def; "
        "regenerate it with `%s`\n  it has:   %s\n  it needs: %s\n",
        path, kRegenerate, have_line.c_str(), want_line.c_str());
    return 1;
  }
  if (current == wanted) return 0;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << before << wanted << after;
  if (!out.flush()) {
    std::fprintf(stderr, "settings_doc: cannot write %s\n", path);
    return 2;
  }
  std::fprintf(stderr, "settings_doc: updated %s\n", path);
  return 0;
}
