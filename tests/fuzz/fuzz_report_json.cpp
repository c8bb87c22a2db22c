// libFuzzer target: the P.json reader (report/render/report_json.h). Untrusted
// input must never crash it or grow memory/stack without bound. Invariant:
// a report that parses writes back to JSON that parses again.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "report/render/report_json.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view text(reinterpret_cast<const char *>(data), size);
  torchseal::Report r;
  std::string error;
  if (!torchseal::report_from_json(text, r, error)) {
    if (error.empty()) abort();
    return 0;
  }
  std::string again = torchseal::report_to_json(r);
  torchseal::Report r2;
  std::string error2;
  if (!torchseal::report_from_json(again, r2, error2)) abort();
  return 0;
}
