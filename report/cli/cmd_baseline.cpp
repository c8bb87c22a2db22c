// `torchseal baseline REPORT... -o B.json`: record today's leak sites so
// `check --baseline` fails only on new ones.
#include <cstdio>

#include "report/cli/commands.h"
#include "report/compare/baseline.h"

namespace torchseal::cli {

CLI::App *add_baseline_command(CLI::App &app, BaselineOptions &opts) {
  CLI::App *cmd =
      app.add_subcommand("baseline", "Write a leak baseline from reports, for `check --baseline`.");
  cmd->add_option("REPORT", opts.reports, "leak reports (P.json) or histories (P.tseal)")
      ->required();
  cmd->add_option("--output,-o", opts.output, "baseline file to write (- for stdout)")->required();
  cmd->add_option("--suppressions", opts.suppressions,
                  "file of leak:PATTERN lines; suppressed sites are left out");
  cmd->footer(help_footer(
      "  Collects every leak and growth site of the REPORTs (one entry per distinct\n"
      "  site, with the largest bytes seen) into a small JSON file:\n"
      "  {\"format\": \"torchseal-baseline\", \"version\": 1, \"sites\": [{\"type\", \"kind\",\n"
      "  \"api\", \"bytes\", \"allocations\", \"frames\", \"python_frames\"}]}. Commit it next to\n"
      "  the code; sites are matched by function, file name and line (see `torchseal\n"
      "  check --help`), never by address.\n",
      "0 written; 2 bad usage, unusable input or the file cannot be written.",
      {"torchseal run -o base-%p -- ./tests && torchseal baseline base-*.json -o "
       "leaks-baseline.json"}));
  return cmd;
}

int baseline_command(const BaselineOptions &opts) {
  std::vector<Report> reports;
  if (!load_inputs(opts.reports, opts.suppressions, reports)) return kExitUnusable;
  Baseline b = baseline_from_reports(reports);
  if (!write_output(opts.output, baseline_to_json(b))) return kExitUnusable;
  if (opts.output != "-") {
    std::fprintf(stderr, "torchseal: baseline of %zu site(s) written to %s\n", b.sites.size(),
                 opts.output.c_str());
  }
  return kExitOk;
}

}  // namespace torchseal::cli
