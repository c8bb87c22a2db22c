// Flame graph of leaked bytes for the HTML report: the leak stacks merged
// into a tree (root = all leaks; children from the outermost frame in),
// drawn as inline SVG, root on top. A node's width is proportional to the
// leaked bytes below it. In a Python process each stack is one mixed stack
// (process entry, interpreter, Python frames, framework, allocation API)
// with interpreter and framework frames folded as in the text report.
#pragma once

#include <string>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

std::string flame_html(const std::vector<LeakEntry> &leaks, bool python_process);

}  // namespace torchseal
