// P.json: write a Report, and read one back (for `torchseal report`, and
// later check/diff/merge). The keys are the contract in docs/report-format.md.
#pragma once

#include <string>
#include <string_view>

#include "report/model/report_model.h"

namespace torchseal {

// Pretty-printed with a trailing newline. Never throws (a string that is not
// valid UTF-8, e.g. a mangled file name, is written with U+FFFD).
std::string report_to_json(const Report &r);

// Parse and validate. On failure returns false and sets `error` to one line
// naming what is wrong and where (e.g. "leaks[2].bytes: expected an
// unsigned integer"). Never throws; rejects inputs over kMaxReportBytes or
// nested deeper than any report can be, so memory and stack stay bounded.
bool report_from_json(std::string_view text, Report &out, std::string &error);

// Reads a file (refusing anything that is not a regular file or is too big)
// and calls report_from_json. Errors name the path.
bool read_report_file(const std::string &path, Report &out, std::string &error);

// A parsed JSON document takes several times its text size; this keeps a
// bogus or hostile input from exhausting memory. Real reports are far smaller.
inline constexpr size_t kMaxReportBytes = 256ull << 20;

}  // namespace torchseal
