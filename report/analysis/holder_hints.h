// Hints from what holds the memory (docs/holders.md, "Hints"): the rule
// family find_hint tries before the name-based source rules. A site's
// holders (common/model/holder.h) say which Python object keeps its memory
// alive; each rule recognises one classic leak in a holder chain (a growing
// container, a loss summed with its graph, outputs kept with their graphs in
// evaluation, modules created every step, a traceback pinned by an OOM
// retry, a loop local still alive at an OOM) and points at the statement
// that keeps the memory alive, found in the user's source through the site's
// Python frames.
#pragma once

#include <optional>

#include "report/analysis/hints.h"

namespace torchseal {

// The hint of the first (largest) holder a rule recognises, or nullopt.
// Reads source files; never throws on odd chains or files.
std::optional<Hint> holder_rules(const HintEvidence &evidence);

}  // namespace torchseal
