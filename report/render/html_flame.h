// Flame graph of leaked bytes for the HTML report: the leak stacks merged
// into a tree (root = all leaks; children from the outermost frame in:
// Python frames, then native frames), drawn as inline SVG, root on top.
// A node's width is proportional to the leaked bytes below it.
#pragma once

#include <string>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

std::string flame_html(const std::vector<LeakEntry> &leaks);

}  // namespace torchseal
