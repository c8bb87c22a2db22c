// One entry point for every CLI command that takes "a report": a P.json is
// parsed; a P.tseal history is replayed and analyzed by the same code the
// shim runs at exit, so both give the same leak set.
#pragma once

#include <string>
#include <vector>

#include "report/analysis/analysis.h"
#include "report/model/report_model.h"

namespace torchseal {

// `window`: only that part of a history's run (an error for a P.json).
bool load_report(const std::string &path, Report &out, std::string &error,
                 std::vector<std::string> &warnings, const AnalysisOptions &opts = {},
                 const HistoryWindow *window = nullptr);

// Analysis of a history file only (report from the replayed state).
bool analyze_history(const std::string &path, Report &out, std::string &error,
                     std::vector<std::string> &warnings, const AnalysisOptions &opts = {},
                     const HistoryWindow *window = nullptr);

}  // namespace torchseal
