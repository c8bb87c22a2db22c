// `torchseal report FILE`: show a saved report.
#include <cstdio>

#include "report/cli/commands.h"
#include "report/render/renderer.h"

namespace torchseal::cli {
namespace {

// Report outputs come from the registry (report/render/registry.cpp).
std::string report_formats() {
  std::string names;
  for (const Renderer &r : renderers()) {
    if (r.input != RenderInput::Report) continue;
    names += names.empty() ? "" : ", ";
    names += r.name;
  }
  return names;
}

}  // namespace

CLI::App *add_report_command(CLI::App &app, ReportOptions &opts) {
  CLI::App *cmd = app.add_subcommand(
      "report", "Print a saved report (P.json) or analyze a history (P.tseal), as text or JSON.");
  cmd->add_option("FILE", opts.file, "a leak report (P.json) or a history file (P.tseal)")
      ->required();
  std::vector<std::string> formats;
  for (const Renderer &r : renderers()) {
    if (r.input == RenderInput::Report) formats.emplace_back(r.name);
  }
  cmd->add_option("--format", opts.format,
                  "output format on standard output: " + report_formats() + " (default text)")
      ->check(CLI::IsMember(formats));
  cmd->add_option("--suppressions", opts.suppressions,
                  "file of leak:PATTERN lines; matching sites move to \"Suppressions used\"");
  add_window_options(cmd, opts.window);
  cmd->add_option("--html", opts.html,
                  "write a self-contained HTML page (timeline, leak table, flame graph) to PATH "
                  "instead of printing; - = stdout");
  cmd->footer(help_footer(
      "  FILE is a leak report P.json written by the detector (or by `torchseal report\n"
      "  --format json`). It is validated and printed in LeakSanitizer style: one entry\n"
      "  per leak site, largest first, then OOM and invalid-free sections, ending with\n"
      "  `SUMMARY: torchseal: N byte(s) leaked in M allocation(s).`\n"
      "  A history file (P.tseal) is replayed through the same analysis the detector runs at\n"
      "  exit, so it gives the same leak set as P.json. A history cut short by a crash or\n"
      "  kill is read up to the damage, with a warning containing `truncated`.\n"
      "  --suppressions applies LSan-style `leak:PATTERN` lines (see `torchseal check\n"
      "  --help`) on top of those the process used; the text report then ends with a\n"
      "  \"Suppressions used:\" table (count, bytes, pattern).\n"
      "  --html PATH writes one self-contained page (no network access needed): header,\n"
      "  live-bytes timeline per (device, kind) with step/OOM/mark markers (P.tseal only),\n"
      "  leak table with collapsible stacks, growing sites and a flame graph of leaked bytes.\n"
      "  --from/--to (seconds since the process started) or --steps A..B report one window\n"
      "  of a history: what was live at its start is set aside as pre-existing, and its\n"
      "  leaks are the allocations made in it and still live at its end. A capped\n"
      "  history (TORCHSEAL_HISTORY_LIMIT) opens only the segments the window needs.\n",
      "0 printed; 2 the file is missing, not a report, or damaged.",
      {"torchseal report torchseal-1234.json",
       "torchseal report --format json --suppressions ci.supp torchseal-1234.tseal",
       "torchseal report --steps 1000..1100 torchseal-1234.tseal"}));
  return cmd;
}

int report_command(const ReportOptions &opts) {
  // One dispatch for both inputs: a P.tseal history is replayed through the
  // same analysis the shim runs at exit; a P.json is read back.
  std::vector<Report> r;
  HistoryWindow window;
  if (!resolve_window(opts.window, window)) return kExitUnusable;
  if (!load_inputs({opts.file}, opts.suppressions, r, &window)) return kExitUnusable;
  RenderRequest req;
  req.source = opts.file;
  req.window = window;
  req.report = &r[0];
  const Renderer *renderer =
      find_renderer(opts.html.empty() ? opts.format : "html", RenderInput::Report);
  const std::string &path = opts.html.empty() ? std::string("-") : opts.html;
  return write_output(path, renderer->render_report(req)) ? kExitOk : kExitUnusable;
}

}  // namespace torchseal::cli
