// Hints (docs/pytorch.md): for a growing site or an OOM whose Python
// stack matches a classic PyTorch leak pattern, one line naming the likely
// cause and fix, and the statement that keeps the memory alive.
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
// huge files simply give no evidence. Rules come in families, tried in
// order: rules on the site's holders (holder_hints.h: what keeps the memory
// alive), then the name-based source rules (a table in hints.cpp), which only
// guess from names in the code.
#pragma once

#include <optional>
#include <vector>

#include "common/model/holder.h"
#include "report/model/report_model.h"

namespace torchseal {

// What a rule may look at for one site. Holders (who keeps the memory alive,
// largest first) are empty until the holder scanner has run.
struct HintEvidence {
  const std::vector<PythonFrame> &python_frames;  // innermost first
  const std::vector<Holder> &holders;
};

// The first matching rule's hint, or nullopt. The message is one line (no
// newline, control characters replaced). Reads source files; never throws.
std::optional<Hint> find_hint(const HintEvidence &evidence);
std::optional<Hint> find_hint(const std::vector<PythonFrame> &python_frames,
                              const std::vector<Holder> &holders = {});

}  // namespace torchseal
