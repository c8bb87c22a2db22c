// Writing report files into directories we do not control (the working
// directory, $TMPDIR) without following an attacker's symlink and without
// leaving a half-written file under the final name.
#pragma once

#include <string>

#include "report/model/report_model.h"

namespace torchseal {

// Writes `content` to `path` with mode 0600: a temp file in the same
// directory created O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC, then rename(2).
// A symlink already at `path` is refused, never followed. Returns false with
// a one-line `error` naming the path; never throws.
bool write_file_safely(const std::string &path, const std::string &content,
                       std::string &error) noexcept;

// P.json then P.txt for prefix P. Never throws.
bool write_report_files(const std::string &prefix, const Report &report,
                        std::string &error) noexcept;

}  // namespace torchseal
