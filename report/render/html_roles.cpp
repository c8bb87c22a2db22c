#include "report/render/html_roles.h"

#include <algorithm>

#include "report/render/html_escape.h"
#include "report/render/roles_text.h"

namespace torchseal {

const char kRolesStyle[] = R"css(
svg.roles{width:100%;height:auto;display:block}svg.roles text{font-size:11px;fill:#555}
.r0{fill:#1f77b4;background:#1f77b4}.r1{fill:#aec7e8;background:#aec7e8}.r2{fill:#ff7f0e;background:#ff7f0e}
.r3{fill:#ffbb78;background:#ffbb78}.r4{fill:#2ca02c;background:#2ca02c}.r5{fill:#d62728;background:#d62728}
.r6{fill:#9467bd;background:#9467bd}.r7{fill:#c7c7c7;background:#c7c7c7}.r8{fill:#8c564b;background:#8c564b}
.r9{fill:#e377c2;background:#e377c2}
.legend i.role{height:10px}
)css";

namespace {

constexpr int kWidth = 1000;

std::string legend(const RoleSplit &any) {
  std::string h = "<div class=\"legend\">";
  for (size_t k = 0; k < any.roles.size(); ++k)
    h += "<span class=\"key\"><i class=\"role r" + std::to_string(k) + "\"></i>" +
         html_escape(any.roles[k].role) + "</span>";
  return h + "</div>\n";
}

// One horizontal bar: the split of one moment, with its title.
std::string split_bar(const RoleSplit &s, const std::string &title) {
  std::string h = "<p>" + html_escape(title) + ": " + html_bytes(s.live_bytes) + " live";
  std::string parts;
  for (const RoleEntry &e : s.roles)
    if (e.bytes)
      parts += (parts.empty() ? "" : ", ") + html_escape(e.role) + " " + html_bytes(e.bytes);
  h += " (" + parts + ")</p>\n<svg class=\"roles\" viewBox=\"0 0 " + std::to_string(kWidth) +
       " 22\" role=\"img\">";
  double x = 0;
  const double total = s.live_bytes ? static_cast<double>(s.live_bytes) : 1.0;
  for (size_t k = 0; k < s.roles.size(); ++k) {
    double w = kWidth * static_cast<double>(s.roles[k].bytes) / total;
    if (w <= 0) continue;
    h += html_format(
             "<rect class=\"r%zu\" x=\"%.1f\" y=\"0\" width=\"%.1f\" height=\"20\">"
             "<title>",
             k, x, w) +
         html_escape(s.roles[k].role) + " " + html_bytes(s.roles[k].bytes) + "</title></rect>";
    x += w;
  }
  return h + "</svg>\n";
}

// A stacked column per step scan, heights against the largest live total.
std::string step_bars(const std::vector<RoleSplit> &steps) {
  uint64_t top = 1;
  for (const RoleSplit &s : steps) top = std::max(top, s.live_bytes);
  const int height = 160;
  const double col = static_cast<double>(kWidth) / static_cast<double>(steps.size());
  std::string h = "<svg class=\"roles\" viewBox=\"0 0 " + std::to_string(kWidth) + " " +
                  std::to_string(height + 16) + "\" role=\"img\">";
  for (size_t i = 0; i < steps.size(); ++i) {
    const RoleSplit &s = steps[i];
    double y = height;
    for (size_t k = 0; k < s.roles.size(); ++k) {
      double bh = height * static_cast<double>(s.roles[k].bytes) / static_cast<double>(top);
      if (bh <= 0) continue;
      y -= bh;
      h += html_format(
               "<rect class=\"r%zu\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
               "height=\"%.1f\"><title>step %llu: ",
               k, col * static_cast<double>(i) + col * 0.1, y, col * 0.8, bh,
               static_cast<unsigned long long>(s.step)) +
           html_escape(s.roles[k].role) + " " + html_bytes(s.roles[k].bytes) + "</title></rect>";
    }
    h += html_format("<text x=\"%.1f\" y=\"%d\">%llu</text>", col * static_cast<double>(i),
                     height + 13, static_cast<unsigned long long>(s.step));
  }
  return h + "</svg>\n";
}

}  // namespace

std::string roles_html(const Report &r) {
  const RoleSplit *any = !r.roles.roles.empty()        ? &r.roles
                         : !r.peak_roles.roles.empty() ? &r.peak_roles
                                                       : nullptr;
  for (const OomEntry &o : r.ooms)
    if (!any && !o.roles.roles.empty()) any = &o.roles;
  if (!any) return {};
  std::string h = "<h2>Memory by role</h2>\n" + legend(*any);
  for (size_t k = 0; k < r.ooms.size(); ++k)
    if (!r.ooms[k].recovered && !r.ooms[k].roles.roles.empty())
      h += split_bar(r.ooms[k].roles, "At OOM " + std::to_string(k + 1) + " (asking " +
                                          html_bytes(r.ooms[k].requested_bytes) + ")");
  if (!r.peak_roles.roles.empty())
    h += split_bar(r.peak_roles,
                   "At the highest live total scanned" +
                       (r.peak_roles.step ? " (step " + std::to_string(r.peak_roles.step) + ")"
                                          : std::string()));
  if (!r.roles.roles.empty()) h += split_bar(r.roles, "At this report's scan (" + r.roles.at + ")");
  if (!r.role_steps.empty()) h += "<p>Per step scan:</p>\n" + step_bars(r.role_steps);
  if (roles_before_tracking(r, false)) h += "<p>" + html_escape(kRolesSinceStart) + "</p>\n";
  return h;
}

}  // namespace torchseal
