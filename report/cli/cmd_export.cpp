// `torchseal export P.tseal --memory-viz OUT.pickle --perfetto OUT.json`:
// convert a history file for PyTorch's memory_viz and for Perfetto.
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "report/cli/commands.h"
#include "report/render/export_memory_viz.h"
#include "report/render/renderer.h"

namespace torchseal::cli {
namespace {

// A one-line progress bar on stderr, shown only on a terminal and only once
// an export has run for a second (a quick export prints nothing).
class ProgressBar {
 public:
  explicit ProgressBar(std::string label)
      : label_(std::move(label)),
        tty_(isatty(STDERR_FILENO) == 1),
        start_(std::chrono::steady_clock::now()) {}
  ~ProgressBar() { clear(); }

  std::function<void(uint64_t, uint64_t)> callback() {
    if (!tty_) return {};
    return [this](uint64_t done, uint64_t total) { update(done, total); };
  }

  void clear() {
    if (shown_) std::fputs("\r\033[K", stderr);
    shown_ = false;
  }

 private:
  void update(uint64_t done, uint64_t total) {
    auto now = std::chrono::steady_clock::now();
    if (now - start_ < std::chrono::seconds(1) || !total) return;
    int pct = static_cast<int>(done >= total ? 100 : done * 100 / total);
    if (shown_ && pct == last_pct_) return;
    constexpr int kWidth = 30;
    int fill = pct * kWidth / 100;
    std::fprintf(stderr, "\rtorchseal: %s [%.*s%*s] %3d%%", label_.c_str(), fill,
                 "##############################", kWidth - fill, "", pct);
    std::fflush(stderr);
    shown_ = true;
    last_pct_ = pct;
  }

  std::string label_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  bool shown_ = false;
  int last_pct_ = -1;
};

void print_warnings(std::vector<std::string> &warnings) {
  for (const std::string &w : warnings) std::fprintf(stderr, "torchseal: warning: %s\n", w.c_str());
  warnings.clear();
}

}  // namespace

CLI::App *add_export_command(CLI::App &app, ExportOptions &opts) {
  CLI::App *cmd = app.add_subcommand(
      "export", "Convert a history file (P.tseal) for PyTorch's memory_viz or for Perfetto.");
  cmd->add_option("FILE", opts.file, "history file (P.tseal)")->required();
  // One --NAME OUT option per history renderer in the registry.
  for (const Renderer &r : renderers()) {
    if (r.input == RenderInput::History) {
      cmd->add_option("--" + std::string(r.name), opts.outputs[std::string(r.name)],
                      std::string(r.help));
    }
  }
  add_window_options(cmd, opts.window);
  cmd->add_option("--device", opts.device, "memory-viz: only this CUDA device")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--since", opts.since,
                  "memory-viz: drop trace entries before this time (see TIMES)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--until", opts.until,
                  "memory-viz: end the trace here; the snapshot is the state at this time")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-entries", opts.max_entries,
                  "memory-viz: keep only the newest N trace entries (0 = all)");
  cmd->add_option("--min-slice-bytes", opts.min_slice_bytes,
                  "perfetto: draw a lifetime slice for allocations of at least this many bytes "
                  "(default 1048576)");
  cmd->footer(
      "DESCRIPTION\n"
      "  Reads FILE, the allocator-event history written next to a report, and writes\n"
      "  one or both of:\n"
      "    --memory-viz OUT   a PyTorch memory snapshot. Open it at pytorch.org/memory_viz\n"
      "                       or with torch/cuda/_memory_viz.py. Each allocation is one\n"
      "                       segment holding one block; the snapshot's segments are what\n"
      "                       is live at the end. Device, stream-ordered, managed and VMM\n"
      "                       (cuMemCreate, at synthetic addresses from 2^52) memory is\n"
      "                       shown; pinned host memory is not.\n"
      "    --perfetto OUT     a JSON trace: live-bytes counters per device and kind,\n"
      "                       OOM/step/mark/invalid-free instants, and lifetime slices of\n"
      "                       allocations of at least --min-slice-bytes.\n"
      "  The browser viewer struggles past about 600k trace entries or 1 GB: bound a\n"
      "  long run's snapshot with --device, --since/--until or --max-entries.\n\n"
      "TIMES\n"
      "  --since and --until take seconds from the start of the process (e.g. 12.5),\n"
      "  or absolute unix seconds (any value of at least 1000000000).\n"
      "  --from/--to (seconds since the process started) or --steps A..B read only that\n"
      "  window of the history (a capped history opens only the segments it needs): what\n"
      "  was live at its start appears as allocated then, and nothing after it is read.\n\n"
      "EXIT STATUS\n"
      "  0 written; 2 bad usage, FILE is missing or not a history file, or an output\n"
      "  cannot be written.\n");
  return cmd;
}

int export_command(const ExportOptions &opts) {
  auto output_of = [&](std::string_view name) {
    auto it = opts.outputs.find(std::string(name));
    return it == opts.outputs.end() ? std::string() : it->second;
  };
  bool any = false;
  std::string usage;
  for (const Renderer &r : renderers()) {
    if (r.input != RenderInput::History) continue;
    any = any || !output_of(r.name).empty();
    usage += (usage.empty() ? "give --" : " and/or --") + std::string(r.name) + " OUT";
  }
  if (!any) {
    print_error("export: nothing to do: " + usage);
    return kExitUnusable;
  }
  if (opts.since >= 0 && opts.until >= 0 &&
      ((opts.since >= TimeBound::kEpochThreshold) == (opts.until >= TimeBound::kEpochThreshold)) &&
      opts.since > opts.until) {
    print_error("export: --since is after --until");
    return kExitUnusable;
  }
  HistoryWindow window;
  if (!resolve_window(opts.window, window)) return kExitUnusable;
  bool first = true;
  for (const Renderer &r : renderers()) {
    if (r.input != RenderInput::History) continue;
    const std::string out = output_of(r.name);
    if (out.empty()) continue;
    RenderRequest req;
    req.source = opts.file;
    req.window = window;
    req.out_path = out;
    req.device = opts.device;
    req.since = opts.since;
    req.until = opts.until;
    req.max_entries = opts.max_entries;
    req.min_slice_bytes = opts.min_slice_bytes;
    ProgressBar bar("exporting " + out);
    req.progress = bar.callback();
    std::string summary, error;
    std::vector<std::string> warnings;
    bool ok = r.render_history(req, summary, error, warnings);
    bar.clear();
    // Every export reads the same history: its damage is reported once.
    if (first) print_warnings(warnings);
    first = false;
    if (!ok) {
      print_error(error);
      return kExitUnusable;
    }
    std::printf("torchseal: %s\n", summary.c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitUnusable;
}

}  // namespace torchseal::cli
