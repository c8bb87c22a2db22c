// `torchseal report FILE --html OUT`: the report as one self-contained page
// (inline CSS, SVG and, with a history, one inline script, plus a small one
// when a verdict table has rows behind "show all"; no network: a
// Content-Security-Policy forbids loading anything). Every report string is
// HTML-escaped, and the script's data is JSON with '<' escaped.
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
  std::string data_json;  // bands_json() of the timeline's history: the page's script data
};

std::string render_html_report(const HtmlReportInput &in);

}  // namespace torchseal
