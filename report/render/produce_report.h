// The shim's single exit-time entry point: symbolize, analyze, write P.json
// and P.txt. Kept separate so the shim needs no knowledge of the pieces.
#pragma once

#include <string>

#include "common/model/analysis_input.h"
#include "report/analysis/analysis.h"
#include "report/model/report_model.h"

namespace torchseal {

// `in.modules` must be filled (capture_module_map() in-process). On success
// `*out` (if non-null) receives the report, e.g. to decide the exit code from
// out->summary.leaked_allocations. Returns false with a one-line `error`;
// never throws.
bool produce_report(const AnalysisInput &in, const std::string &prefix, const AnalysisOptions &opts,
                    Report *out, std::string &error) noexcept;

}  // namespace torchseal
