// Memory by role on the HTML page (docs/roles.md): a stacked bar per step
// scan, and the split at each unrecovered OOM, at the peak and at the
// report's scan. Static SVG: no script needed.
#pragma once

#include <string>

#include "report/model/report_model.h"

namespace torchseal {

// The "Memory by role" section; empty when the report has no split.
std::string roles_html(const Report &r);

// The CSS the section uses (one colour per role).
extern const char kRolesStyle[];

}  // namespace torchseal
