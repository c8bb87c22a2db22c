// `torchseal merge FILES... -o merged.json`: one report for a multi-process
// job, each site carrying its per-rank shares.
#include <cstdio>

#include "report/cli/commands.h"
#include "report/compare/merge.h"

namespace torchseal::cli {

CLI::App *add_merge_command(CLI::App &app, MergeOptions &opts) {
  CLI::App *cmd =
      app.add_subcommand("merge", "Combine the reports of several ranks or processes into one.");
  cmd->add_option("FILE", opts.reports, "leak reports (P.json) or histories (P.tseal)")->required();
  cmd->add_option("--output,-o", opts.output, "merged report to write (- for stdout)")->required();
  cmd->add_option("--suppressions", opts.suppressions, "file of leak:PATTERN lines");
  cmd->footer(help_footer(
      "  Identical sites (same symbolized frames, kind, api, device) across the inputs\n"
      "  become one entry with summed bytes and allocations. Each leak and growth entry\n"
      "  gains \"ranks\": {\"<rank>\": {\"bytes\", \"allocations\"}} (growth: \"bytes\",\n"
      "  \"bytes_per_step\") and \"uniform\": false when the site is not the same on every\n"
      "  input. The label is process.rank; \"R/pid:P\" when a rank has several processes\n"
      "  (e.g. DataLoader workers); \"pid:P\" without a rank. The output keeps the report\n"
      "  schema (summary sums; peak_bytes is the largest single peak) and adds\n"
      "  \"merged_from\". A note per non-uniform site is printed on stderr.\n",
      "0 merged; 2 bad usage, unusable input or the file cannot be written.",
      {"mpirun -np 4 torchseal run -o out/r%r-%p -- ./train",
       "torchseal merge out/*.json -o merged.json && torchseal check merged.json"}));
  return cmd;
}

int merge_command(const MergeOptions &opts) {
  std::vector<Report> reports;
  if (!load_inputs(opts.reports, opts.suppressions, reports)) return kExitUnusable;
  MergedReport m = merge_reports(reports);
  if (!write_output(opts.output, merged_to_json(m))) return kExitUnusable;
  std::fputs(merged_notes(m).c_str(), stderr);
  return kExitOk;
}

}  // namespace torchseal::cli
