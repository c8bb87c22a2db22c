// `torchseal report FILE`: show a saved report.
#include <cstdio>

#include "commands.h"
#include "report_json.h"
#include "report_text.h"

namespace torchseal::cli {
namespace {

bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

int print_report(const Report &r, const std::string &format) {
  std::string out = format == "json" ? report_to_json(r) : report_to_text(r);
  if (std::fwrite(out.data(), 1, out.size(), stdout) != out.size() || std::fflush(stdout) != 0) {
    print_error("cannot write to standard output");
    return kExitUnusable;
  }
  return kExitOk;
}

}  // namespace

CLI::App *add_report_command(CLI::App &app, ReportOptions &opts) {
  CLI::App *cmd = app.add_subcommand("report", "Print a saved report (P.json) as text or JSON.");
  cmd->add_option("FILE", opts.file, "report file (P.json)")->required();
  cmd->add_option("--format", opts.format, "output format: text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->footer(
      "DESCRIPTION\n"
      "  FILE is a leak report P.json written by the detector (or by `torchseal report\n"
      "  --format json`). It is validated and printed in LeakSanitizer style: one entry\n"
      "  per leak site, largest first, then OOM and invalid-free sections, ending with\n"
      "  `SUMMARY: torchseal: N byte(s) leaked in M allocation(s).`\n"
      "  History files (P.tseal) will be analyzed the same way; they are not supported yet.\n\n"
      "EXIT STATUS\n  0 printed; 2 the file is missing, not a report, or damaged.\n");
  return cmd;
}

int report_command(const ReportOptions &opts) {
  // Input dispatch: history files will be replayed into an AnalysisInput and
  // analyzed here, once the .tseal reader exists.
  if (ends_with(opts.file, ".tseal")) {
    print_error(opts.file + ": history files are not supported yet");
    return kExitUnusable;
  }
  Report r;
  std::string error;
  if (!read_report_file(opts.file, r, error)) {
    print_error(error);
    return kExitUnusable;
  }
  return print_report(r, opts.format);
}

}  // namespace torchseal::cli
