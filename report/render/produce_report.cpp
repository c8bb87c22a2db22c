#include "report/render/produce_report.h"

#include <exception>

#include "common/symbols/symbolizer.h"
#include "report/render/output_writer.h"

namespace torchseal {

bool produce_report(const AnalysisInput &in, const std::string &prefix, const AnalysisOptions &opts,
                    Report *out, std::string &error) noexcept {
  try {
    Symbolizer sym(in.modules);
    Report r = analyze(in, sym, opts);
    bool ok = write_report_files(prefix, r, error);
    if (out) *out = std::move(r);
    return ok;
  } catch (const std::exception &e) {
    error = std::string("report failed: ") + e.what();
  } catch (...) {
    error = "report failed: unknown error";
  }
  return false;
}

}  // namespace torchseal
