// `torchseal report FILE --html OUT`: the report as one self-contained page
// (inline CSS and SVG, no script, no network; a Content-Security-Policy
// forbids loading anything). Every report string is HTML-escaped.
#pragma once

#include <string>

#include "report/model/report_model.h"
#include "report/render/html_timeline.h"

namespace torchseal {

struct HtmlReportInput {
  const Report *report = nullptr;
  std::string source;                  // the FILE argument, shown in the header
  const Timeline *timeline = nullptr;  // null: no history (say why in `no_timeline`)
  std::string no_timeline;
};

std::string render_html_report(const HtmlReportInput &in);

}  // namespace torchseal
