#include "report/render/html_flame.h"

#include <algorithm>
#include <cinttypes>
#include <map>
#include <memory>

#include "report/analysis/shown_frames.h"
#include "report/render/html_escape.h"

namespace torchseal {
namespace {

struct Node {
  std::string label;  // function (merge key)
  std::string where;  // file:line or module+offset of the first frame seen
  uint64_t bytes = 0;
  uint64_t allocations = 0;
  std::vector<std::unique_ptr<Node>> children;  // insertion order
  std::map<std::string, size_t> index;

  Node &child(const std::string &key, const std::string &where_) {
    auto it = index.find(key);
    if (it != index.end()) return *children[it->second];
    index.emplace(key, children.size());
    children.push_back(std::make_unique<Node>());
    children.back()->label = key;
    children.back()->where = where_;
    return *children.back();
  }
};

std::string basename(const std::string &p) {
  auto s = p.find_last_of('/');
  return s == std::string::npos ? p : p.substr(s + 1);
}

std::pair<std::string, std::string> native_step(const NativeFrame &f) {
  std::string where = f.file.empty() ? basename(f.module) : f.file + ":" + std::to_string(f.line);
  std::string label = f.function;
  if (label.empty()) {
    label = (f.module.empty() ? std::string("??") : basename(f.module)) +
            html_format("@0x%" PRIx64, f.address);
  }
  return {label, where};
}

std::pair<std::string, std::string> python_step(const PythonFrame &f) {
  return {f.function.empty() ? "??" : f.function, f.file + ":" + std::to_string(f.line)};
}

// Today's layout for native programs: Python frames (none there), then the
// native stack, outermost first.
FlamePath plain_path(const std::vector<NativeFrame> &nf, const std::vector<PythonFrame> &py) {
  FlamePath path;
  for (auto it = py.rbegin(); it != py.rend(); ++it) path.push_back(python_step(*it));
  for (auto it = nf.rbegin(); it != nf.rend(); ++it) path.push_back(native_step(*it));
  return path;
}

// A Python process's stack as one mixed stack, outermost first: the process
// entry (`_start`, `main`), the interpreter's frames, the Python frames down
// to the user's innermost one, the framework frames (and torch's Python
// frames) below it, and the allocation API as the leaf. Runs of interpreter
// and framework frames are folded (shown_frames.h), as in the text report.
FlamePath python_path(const std::vector<NativeFrame> &nf, const std::vector<PythonFrame> &py,
                      const std::string &api) {
  struct Step {
    std::pair<std::string, std::string> node;
    bool folded;
  };
  std::vector<Step> steps;
  // outer = the outermost folded frame; Python runs inside the innermost
  // interpreter frame at or below it.
  long outer = -1, inner_interp = -1;
  for (size_t i = 0; i < nf.size(); ++i) {
    if (is_folded_native(nf[i])) outer = long(i);
  }
  for (long i = outer; i >= 0; --i) {
    if (is_interpreter_native(nf[size_t(i)])) inner_interp = i;
  }
  const long python_at = inner_interp >= 0 ? inner_interp : outer + 1;
  const long user = user_python_index(py);
  for (long i = long(nf.size()) - 1; i >= python_at; --i) {
    steps.push_back({native_step(nf[size_t(i)]), is_folded_native(nf[size_t(i)])});
  }
  for (long i = long(py.size()) - 1; i >= 0; --i) {
    steps.push_back({python_step(py[size_t(i)]), user >= 0 && i < user});
  }
  for (long i = python_at - 1; i >= 0; --i) {
    steps.push_back({native_step(nf[size_t(i)]), is_folded_native(nf[size_t(i)])});
  }
  steps.push_back({{api.empty() ? "??" : api, ""}, false});
  FlamePath path;
  for (size_t i = 0; i < steps.size();) {
    size_t j = i;
    while (j < steps.size() && steps[j].folded) ++j;
    if (j - i >= 2) {
      path.emplace_back(folded_label(j - i),
                        steps[i].node.first + " .. " + steps[j - 1].node.first);
      i = j;
    } else {
      path.push_back(steps[i].node);
      ++i;
    }
  }
  return path;
}

constexpr double kWidth = 1100, kRow = 18, kMinPx = 0.4;
const char *const kPalette[] = {"#f2a65a", "#eec170", "#e4843d", "#f7c59f", "#e9b872", "#dd9955"};

void draw(const Node &n, double x, double w, int depth, uint64_t total, std::string &out) {
  double y = depth * kRow;
  const char *fill = depth == 0 ? "#cfcfcf" : kPalette[(n.label.size() + depth) % 6];
  double pct = total ? 100.0 * static_cast<double>(n.bytes) / static_cast<double>(total) : 0;
  std::string title = n.label + (n.where.empty() ? "" : " (" + n.where + ")") + ": " +
                      html_bytes(n.bytes) + html_format(", %.1f%%, ", pct) +
                      std::to_string(n.allocations) + " allocation(s)";
  out += html_format(
      "<g><title>%s</title><rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
      "height=\"%.1f\" fill=\"%s\"/>",
      html_escape(title).c_str(), x, y, w, kRow - 1, fill);
  size_t chars = static_cast<size_t>(w / 6.5);
  if (chars >= 3) {
    std::string text = n.label;
    if (text.size() > chars) text = text.substr(0, chars - 2) + "..";
    out += html_format("<text x=\"%.2f\" y=\"%.1f\">%s</text>", x + 3, y + kRow - 5,
                       html_escape(text).c_str());
  }
  out += "</g>\n";
  double cx = x;
  for (const auto &c : n.children) {
    double cw = n.bytes ? w * static_cast<double>(c->bytes) / static_cast<double>(n.bytes) : 0;
    if (cw >= kMinPx) draw(*c, cx, cw, depth + 1, total, out);
    cx += cw;
  }
}

int depth_of(const Node &n) {
  int d = 0;
  for (const auto &c : n.children) d = std::max(d, depth_of(*c));
  return d + 1;
}

}  // namespace

FlamePath flame_path(const std::vector<NativeFrame> &frames, const std::vector<PythonFrame> &py,
                     const std::string &api, bool python_process) {
  FlamePath path =
      python_process || !py.empty() ? python_path(frames, py, api) : plain_path(frames, py);
  if (path.empty()) path.emplace_back("<no stack recorded>", "");
  return path;
}

std::string flame_html(const std::vector<LeakEntry> &leaks, bool python_process) {
  if (leaks.empty()) return "<p class=\"note\">No leaks: nothing to draw.</p>\n";
  Node root;
  root.label = "all leaks";
  for (const LeakEntry &l : leaks) {
    const FlamePath path = flame_path(l.frames, l.python_frames, l.api, python_process);
    Node *n = &root;
    n->bytes += l.bytes;
    n->allocations += l.allocations;
    for (const auto &[label, where] : path) {
      n = &n->child(label, where);
      n->bytes += l.bytes;
      n->allocations += l.allocations;
    }
  }
  // Widest children first, like the leak table.
  std::vector<Node *> stack{&root};
  while (!stack.empty()) {
    Node *n = stack.back();
    stack.pop_back();
    std::stable_sort(n->children.begin(), n->children.end(),
                     [](const auto &a, const auto &b) { return a->bytes > b->bytes; });
    for (auto &c : n->children) stack.push_back(c.get());
  }
  int depth = depth_of(root);
  std::string out = html_format(
      "<svg class=\"flame\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
      "aria-label=\"flame graph of leaked bytes\">\n",
      kWidth, depth * kRow);
  draw(root, 0, kWidth, 0, root.bytes, out);
  out += "</svg>\n";
  return out;
}

}  // namespace torchseal
