// Hints (docs/pytorch.md): for a growing site whose Python stack matches a
// classic PyTorch leak pattern, one line naming the likely cause and fix.
//
// Evidence is the site's Python frames (innermost first) and, where the
// source file is readable on this machine, the code around them: the
// frame's own line, the headers of the blocks enclosing it (`except`,
// `with torch.no_grad()`, `def`), and the body of its enclosing function
// (or top-level loop). Scanning the function matters: the memory that grows
// is usually allocated in the forward pass, while the line that keeps it
// alive (`total_loss += loss`, `outputs.append(out)`) is elsewhere in the
// same training loop.
//
// Frames in installed libraries (site-packages, dist-packages, the standard
// library) are not user code and are never scanned. Missing, unreadable or
// huge files simply give no evidence. The rules are a table in hints.cpp.
#pragma once

#include <string>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

// One line (no newline, control characters replaced), or empty when no rule
// matches. Reads source files; never throws.
std::string hint_for(const GrowthEntry &entry);

// The same, from Python frames alone (innermost first).
std::string hint_for(const std::vector<PythonFrame> &python_frames);

}  // namespace torchseal
