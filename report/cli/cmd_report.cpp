// `torchseal report FILE`: show a saved report.
#include <cstdio>

#include "commands.h"
#include "load_report.h"
#include "report_json.h"
#include "report_text.h"

namespace torchseal::cli {
namespace {


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
  CLI::App *cmd = app.add_subcommand("report", "Print a saved report (P.json) or analyze a history (P.tseal), as text or JSON.");
  cmd->add_option("FILE", opts.file, "a leak report (P.json) or a history file (P.tseal)")->required();
  cmd->add_option("--format", opts.format, "output format: text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->footer(
      "DESCRIPTION\n"
      "  FILE is a leak report P.json written by the detector (or by `torchseal report\n"
      "  --format json`). It is validated and printed in LeakSanitizer style: one entry\n"
      "  per leak site, largest first, then OOM and invalid-free sections, ending with\n"
      "  `SUMMARY: torchseal: N byte(s) leaked in M allocation(s).`\n"
      "  A history file (P.tseal) is replayed through the same analysis the detector runs at\n"
      "  exit, so it gives the same leak set as P.json. A history cut short by a crash or\n"
      "  kill is read up to the damage, with a warning containing `truncated`.\n\n"
      "EXIT STATUS\n  0 printed; 2 the file is missing, not a report, or damaged.\n");
  return cmd;
}

int report_command(const ReportOptions &opts) {
  // One dispatch for both inputs: a P.tseal history is replayed through the
  // same analysis the shim runs at exit; a P.json is read back.
  Report r;
  std::string error;
  std::vector<std::string> warnings;
  bool ok = load_report(opts.file, r, error, warnings);
  for (const std::string &w : warnings) std::fprintf(stderr, "torchseal: warning: %s\n", w.c_str());
  if (!ok) {
    print_error(error);
    return kExitUnusable;
  }
  return print_report(r, opts.format);
}

}  // namespace torchseal::cli
