// `torchseal diff A B`: leak and growth sites that are new, gone, grown or
// shrunk between two runs.
#include "report/cli/commands.h"
#include "report/compare/diff.h"

namespace torchseal::cli {

CLI::App *add_diff_command(CLI::App &app, DiffOptions &opts) {
  CLI::App *cmd = app.add_subcommand("diff", "Compare two reports or histories site by site.");
  cmd->add_option("A", opts.a, "the earlier report (P.json) or history (P.tseal)")->required();
  cmd->add_option("B", opts.b, "the later report or history")->required();
  cmd->add_option("--format", opts.format, "output format: text (default) or json")
      ->check(CLI::IsMember({"text", "json"}));
  cmd->add_option("--suppressions", opts.suppressions,
                  "file of leak:PATTERN lines applied to both sides");
  cmd->footer(help_footer(
      "  Matches the leak sites of A and B (per kind, api and device) and the growth\n"
      "  sites (per kind and api) by their symbolized frames, as `check --baseline`\n"
      "  does, so two builds of one program compare cleanly. Prints each changed site:\n"
      "  new (only in B), gone (only in A), grown or shrunk (bytes, or bytes/step for\n"
      "  growth), with the deltas, then the count of unchanged sites. JSON output\n"
      "  (format \"torchseal-diff\") has the same content with full stacks.\n",
      "0 compared (whatever the differences); 2 bad usage or unusable input.",
      {"torchseal diff main.json pr.json",
       "torchseal diff --format json before.tseal after.tseal > delta.json"}));
  return cmd;
}

int diff_command(const DiffOptions &opts) {
  std::vector<Report> reports;
  if (!load_inputs({opts.a, opts.b}, opts.suppressions, reports)) return kExitUnusable;
  ReportDiff d = diff_reports(reports[0], reports[1]);
  d.path_a = opts.a;
  d.path_b = opts.b;
  return write_output("-", opts.format == "json" ? diff_to_json(d) : diff_to_text(d))
             ? kExitOk
             : kExitUnusable;
}

}  // namespace torchseal::cli
