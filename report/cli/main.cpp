// torchseal: run a program under the leak detector, and read its reports.
#include <cstdio>
#include <string>

#include "report/cli/commands.h"

namespace torchseal::cli {

void print_error(const std::string &msg) {
  std::fprintf(stderr, "torchseal: error: %s\n", msg.c_str());
}

}  // namespace torchseal::cli

int main(int argc, char **argv) {
  using namespace torchseal::cli;
  CLI::App app{
      "torchseal finds CUDA memory leaks: allocations still live at exit or at context\n"
      "teardown, with the native and Python stacks that made them.\n\n"
      "  torchseal run [OPTIONS] -- CMD...    run CMD with the detector preloaded\n"
      "  torchseal attach PID                track a running Python process, then detach\n"
      "  torchseal report FILE               print the report stored in FILE\n"
      "  torchseal export P.tseal ...        convert a history for memory_viz / Perfetto\n"
      "  torchseal check REPORT...           CI gate: exit 1 on leaks over the limits\n"
      "  torchseal baseline REPORT... -o B   record known leak sites for check --baseline\n"
      "  torchseal diff A B                  new, gone, grown and shrunk sites\n"
      "  torchseal merge FILES... -o M       combine ranks and processes into one report",
      "torchseal"};
  app.set_version_flag("--version", std::string(TORCHSEAL_VERSION));
  app.require_subcommand(1);
  app.footer(
      "EXIT STATUS\n"
      "  0 success; 1 `check` (or `run --fail-on-leak`) found leaks over a limit;\n"
      "  2 bad usage or unusable input. `run` exits with CMD's own status.\n\n"
      "Run `torchseal SUBCOMMAND --help` for each subcommand's options.\n");

  RunOptions run_opts;
  ReportOptions report_opts;
  CLI::App *run = add_run_command(app, run_opts);
  CLI::App *report = add_report_command(app, report_opts);
  ExportOptions export_opts;
  CLI::App *export_cmd = add_export_command(app, export_opts);
  CheckOptions check_opts;
  CLI::App *check = add_check_command(app, check_opts);
  BaselineOptions baseline_opts;
  CLI::App *baseline = add_baseline_command(app, baseline_opts);
  DiffOptions diff_opts;
  CLI::App *diff = add_diff_command(app, diff_opts);
  MergeOptions merge_opts;
  CLI::App *merge = add_merge_command(app, merge_opts);
  AttachOptions attach_opts;
  CLI::App *attach = add_attach_command(app, attach_opts);

  // CLI11 would call an unknown word a missing subcommand; say what it is.
  auto known = [&app](const std::string &word) {
    for (const CLI::App *sub : app.get_subcommands([](CLI::App *) { return true; })) {
      if (sub->check_name(word)) return true;
    }
    return false;
  };
  if (argc > 1 && argv[1][0] != '-' && !known(argv[1])) {
    print_error(std::string("unknown command '") + argv[1] + "' (see torchseal --help)");
    return kExitUnusable;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    std::string msg = e.what();
    for (char &c : msg) {
      if (c == '\n') c = ' ';
    }
    print_error(msg + " (see torchseal --help)");
    return kExitUnusable;
  }
  if (run->parsed()) return run_command(run_opts);
  if (report->parsed()) return report_command(report_opts);
  if (export_cmd->parsed()) return export_command(export_opts);
  if (check->parsed()) return check_command(check_opts);
  if (baseline->parsed()) return baseline_command(baseline_opts);
  if (diff->parsed()) return diff_command(diff_opts);
  if (merge->parsed()) return merge_command(merge_opts);
  if (attach->parsed()) return attach_command(attach_opts);
  return kExitUnusable;
}
