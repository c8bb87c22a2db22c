// Memory by role in P.json (docs/report-format.md, "Memory by role"): one
// spelling for the report's split (`roles`), each OOM's (`ooms[].roles`),
// the peak's (`summary.peak_roles`) and the step scans' (`roles_steps`).
// Each split is two keys: the roles themselves, an object of role entries
// only (so a reader can add up its values), and `<key>_scan`, when and
// where the split was taken and the live total it adds up to.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/model/report_model.h"

namespace torchseal {

// Writes obj[key] = {"parameters": {"bytes", "tensors", ...}, ...} and
// obj[key + "_scan"] = {"at", "step", "live_bytes", "before_tracking", and
// "torch_allocated_bytes", "torch_reserved_bytes" when PyTorch answered}.
void put_role_split(nlohmann::ordered_json &obj, const std::string &key, const RoleSplit &split);

// [{"step", "at", "live_bytes", "bytes": {"parameters": N, ...}}]: the bars.
nlohmann::ordered_json role_steps_json(const std::vector<RoleSplit> &steps);

// The reverse of put_role_split (a report read back): false with `error`
// when obj[key] or obj[key + "_scan"] is not what it wrote; `out` stays
// empty when obj has no `key`.
bool get_role_split(const nlohmann::json &obj, const std::string &key, RoleSplit &out,
                    std::string &error);

}  // namespace torchseal
