// libFuzzer target: the LSan-style suppressions parser and its glob matcher
// (report/analysis/suppressions.h). Input: the file text; its first line, if any,
// doubles as a name to match. Invariants: never crashes or hangs (the
// matcher must stay linear-ish on hostile `*` patterns); a parse failure is
// a one-line error.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "report/analysis/suppressions.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  torchseal::Suppressions s;
  std::string error;
  if (!s.parse(text, "fuzz.supp", error)) {
    if (error.empty() || error.find('\n') != std::string::npos) abort();
    return 0;
  }
  std::string_view name = text.substr(0, std::min<size_t>(text.find('\n'), 256));
  size_t colon = text.find(':');
  std::string_view pattern = colon == std::string_view::npos ? text : text.substr(colon + 1, 64);
  torchseal::template_match(pattern, name);
  return 0;
}
