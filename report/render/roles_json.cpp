#include "report/render/roles_json.h"

#include "report/analysis/roles.h"
#include "report/render/site_json.h"

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

bool scan_role(const std::string &role) {
  return role == "parameters" || role == "buffers" || role == "gradients" ||
         role == "optimizer_state" || role == "saved_activations" || role == "user_held";
}
bool site_role(const std::string &role) {
  return role == "library_held" || role == "outside_framework";
}

ojson step_json(uint64_t step) { return step ? ojson(step) : ojson(nullptr); }

}  // namespace

void put_role_split(ojson &obj, const std::string &key, const RoleSplit &split) {
  ojson roles = ojson::object();
  for (const RoleEntry &e : split.roles) {
    ojson r;
    r["bytes"] = e.bytes;
    // Every role has a tensor count (DESIGN's `{bytes, tensors}`): storages
    // for what the scan found; none for the cache's free bytes and for
    // memory that is no tensor's, which counts allocations instead.
    r["tensors"] = scan_role(e.role) || e.role == "other_tensors" ? e.count : 0;
    if (site_role(e.role)) r["allocations"] = e.count;
    if (e.role == "parameters" || e.role == "buffers" || e.role == "gradients" ||
        e.role == "optimizer_state")
      r["modules"] = entries_json(e.modules, [](ojson &m, const RoleShare &s) {
        m["module"] = s.name;
        m["bytes"] = s.bytes;
        m["tensors"] = s.tensors;
      });
    if (e.role == "user_held")
      r["holders"] = entries_json(e.holders, [](ojson &h, const Holder &x) {
        h["chain"] = x.chain;
        h["bytes"] = x.bytes;
        h["tensors"] = x.tensors;
      });
    if (e.role == "outside_framework")
      r["sites"] = entries_json(e.sites, [](ojson &s, const SiteTotal &t) {
        s["bytes"] = t.bytes;
        s["allocations"] = t.allocations;
        put_stacks(s, t, FrameAddress::Hex);
      });
    roles[e.role] = std::move(r);
  }
  obj[key] = std::move(roles);
  ojson scan;
  scan["at"] = split.at;
  scan["step"] = step_json(split.step);
  scan["live_bytes"] = split.live_bytes;
  scan["before_tracking"] = split.before_tracking;
  if (split.allocator_stats) {
    scan["torch_allocated_bytes"] = split.torch_allocated;
    scan["torch_reserved_bytes"] = split.torch_reserved;
  }
  obj[key + "_scan"] = std::move(scan);
}

ojson role_steps_json(const std::vector<RoleSplit> &steps) {
  return entries_json(steps, [](ojson &j, const RoleSplit &s) {
    j["step"] = step_json(s.step);
    j["at"] = s.at;
    j["live_bytes"] = s.live_bytes;
    ojson bytes = ojson::object();
    for (const RoleEntry &e : s.roles) bytes[e.role] = e.bytes;
    j["bytes"] = std::move(bytes);
  });
}

bool get_role_split(const json &obj, const std::string &key, RoleSplit &out, std::string &error) {
  auto found = obj.find(key);
  if (found == obj.end()) return true;
  // Only what the text and HTML show is read back: the totals, the modules
  // and the holders (sites are the JSON's to list).
  try {
    out = RoleSplit{};
    const json &scan = obj.at(key + "_scan");
    out.at = scan.at("at").get<std::string>();
    out.step = scan.at("step").is_null() ? 0 : scan.at("step").get<uint64_t>();
    out.live_bytes = scan.at("live_bytes").get<uint64_t>();
    // Reports before these keys: no older memory counted, no counts shown.
    out.before_tracking = scan.value("before_tracking", false);
    if (scan.contains("torch_reserved_bytes")) {
      out.allocator_stats = true;
      out.torch_allocated = scan.at("torch_allocated_bytes").get<uint64_t>();
      out.torch_reserved = scan.at("torch_reserved_bytes").get<uint64_t>();
    }
    const json &roles = *found;
    for (size_t r = 0; r < kRoles; ++r) {
      RoleEntry e;
      e.role = role_name(static_cast<MemoryRole>(r));
      if (auto it = roles.find(e.role); it != roles.end()) {
        e.bytes = it->at("bytes").get<uint64_t>();
        if (it->contains("tensors")) e.count = it->at("tensors").get<uint64_t>();
        if (it->contains("allocations")) e.count = it->at("allocations").get<uint64_t>();
        if (it->contains("modules"))
          for (const json &m : it->at("modules"))
            e.modules.push_back({m.at("module").get<std::string>(), m.at("bytes").get<uint64_t>(),
                                 m.at("tensors").get<uint64_t>()});
        if (it->contains("holders"))
          for (const json &h : it->at("holders"))
            e.holders.push_back({h.at("chain").get<std::vector<std::string>>(),
                                 h.at("bytes").get<uint64_t>(), h.at("tensors").get<uint64_t>()});
      }
      out.roles.push_back(std::move(e));
    }
    return true;
  } catch (const std::exception &e) {
    out = RoleSplit{};
    error = e.what();
    return false;
  }
}

}  // namespace torchseal
