// Memory by role in P.json (docs/report-format.md, "memory_by_role"): one
// spelling for the report's split, the peak's, each OOM's and the steps'.
#pragma once

#include <vector>

#include <nlohmann/json.hpp>

#include "report/model/report_model.h"

namespace torchseal {

// {"at", "step", "live_bytes", "roles": {"parameters": {...}, ...}}.
nlohmann::ordered_json role_split_json(const RoleSplit &split);

// [{"step", "at", "live_bytes", "bytes": {"parameters": N, ...}}]: the bars.
nlohmann::ordered_json role_steps_json(const std::vector<RoleSplit> &steps);

// The reverse of role_split_json (a report read back); false with `error`
// naming the key when the object is not one.
bool role_split_from_json(const nlohmann::json &j, RoleSplit &out, std::string &error);

}  // namespace torchseal
