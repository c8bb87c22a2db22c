// The analysis input of a history file: what `torchseal report P.tseal`
// analyzes, so it and the in-process report (P.json) agree.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/model/history_window.h"
#include "report/model/report_model.h"

namespace torchseal {

// Replays a history into the analysis input the in-process report uses.
// `symbols` receives the file's symbol table (empty if the process did not
// exit cleanly).
// `window`: only that part of the run (history_window.h); `info` receives
// what was read.
bool replay_history(const std::string &path, AnalysisInput &out,
                    std::unordered_map<uint64_t, std::vector<NativeFrame>> &symbols,
                    std::string &error, std::vector<std::string> &warnings,
                    const HistoryWindow *window = nullptr, HistoryReadInfo *info = nullptr);

}  // namespace torchseal
