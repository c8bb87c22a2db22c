// P.txt: the report in LeakSanitizer's layout, so people and log scrapers
// that know LSan output can read it. First line "==PID==torchseal: ...",
// last line "SUMMARY: torchseal: N byte(s) leaked in M allocation(s)."
#pragma once

#include <string>

#include "report/model/report_model.h"

namespace torchseal {

std::string report_to_text(const Report &r);

}  // namespace torchseal
