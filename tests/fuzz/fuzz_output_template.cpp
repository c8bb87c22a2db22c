// libFuzzer target: the TORCHSEAL_OUTPUT template expander
// (shim/runtime/output_path.h). Input: byte 0 picks the variables, the rest is the
// template. Invariants: never crashes; on success the result is non-empty,
// does not end in '/', and a '/' in it comes from the template (the
// hostname can never smuggle one in); on failure there is a one-line error.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "shim/runtime/output_path.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  torchseal::TemplateVars v;
  uint8_t sel = data[0];
  v.pid = (sel & 1) ? 4194304 : 1;
  v.rank = (sel & 2) ? -1 : 7;
  v.host = (sel & 4) ? "../../etc/evil/host" : "node-01";
  v.start_time = (sel & 8) ? INT64_MIN : 1700000000;
  std::string tmpl(reinterpret_cast<const char *>(data + 1), size - 1);
  std::string out, error;
  if (torchseal::expand_output_template(tmpl, v, out, error)) {
    if (out.empty() || out.back() == '/') abort();
    size_t slashes_in = 0, slashes_out = 0;
    for (char c : tmpl) slashes_in += c == '/';
    for (char c : out) slashes_out += c == '/';
    if (slashes_out != slashes_in) abort();  // a placeholder produced a '/'
  } else {
    if (error.empty() || error.find('\n') != std::string::npos) abort();
  }
  return 0;
}
