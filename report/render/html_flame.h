// Flame graph of leaked bytes for the HTML report: the leak stacks merged
// into a tree (root = all leaks; children from the outermost frame in),
// drawn as inline SVG, root on top. A node's width is proportional to the
// leaked bytes below it. In a Python process each stack is one mixed stack
// (process entry, interpreter, Python frames, framework, allocation API)
// with interpreter and framework frames folded as in the text report.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

// (label, where) per node, outermost first: the one stack layout of both
// flame graphs (this one and the page's live-memory one).
using FlamePath = std::vector<std::pair<std::string, std::string>>;
FlamePath flame_path(const std::vector<NativeFrame> &frames, const std::vector<PythonFrame> &py,
                     const std::string &api, bool python_process);

std::string flame_html(const std::vector<LeakEntry> &leaks, bool python_process);

}  // namespace torchseal
