// `torchseal export P.tseal --memory-viz OUT.pickle --perfetto OUT.json`:
// convert a history file for PyTorch's memory_viz and for Perfetto.
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>

#include "report/cli/commands.h"
#include "report/render/export_memory_viz.h"
#include "report/render/export_perfetto.h"

namespace torchseal::cli {
namespace {

// A one-line progress bar on stderr, shown only on a terminal and only once
// an export has run for a second (a quick export prints nothing).
class ProgressBar {
 public:
  explicit ProgressBar(std::string label)
      : label_(std::move(label)), tty_(isatty(STDERR_FILENO) == 1),
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

std::string human(uint64_t n) {
  char buf[32];
  if (n >= (1u << 20)) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1 << 20));
  else if (n >= 1024) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024);
  else std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
  return buf;
}

void print_warnings(std::vector<std::string> &warnings) {
  for (const std::string &w : warnings) std::fprintf(stderr, "torchseal: warning: %s\n", w.c_str());
  warnings.clear();
}

}  // namespace

CLI::App *add_export_command(CLI::App &app, ExportOptions &opts) {
  CLI::App *cmd = app.add_subcommand(
      "export", "Convert a history file (P.tseal) for PyTorch's memory_viz or for Perfetto.");
  cmd->add_option("FILE", opts.file, "history file (P.tseal)")->required();
  cmd->add_option("--memory-viz", opts.memory_viz,
                  "write a PyTorch memory snapshot (pickle) for pytorch.org/memory_viz");
  cmd->add_option("--perfetto", opts.perfetto,
                  "write a Chrome/Perfetto JSON trace for ui.perfetto.dev");
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
      "  or absolute unix seconds (any value of at least 1000000000).\n\n"
      "EXIT STATUS\n"
      "  0 written; 2 bad usage, FILE is missing or not a history file, or an output\n"
      "  cannot be written.\n");
  return cmd;
}

int export_command(const ExportOptions &opts) {
  if (opts.memory_viz.empty() && opts.perfetto.empty()) {
    print_error("export: nothing to do: give --memory-viz OUT and/or --perfetto OUT");
    return kExitUnusable;
  }
  if (opts.since >= 0 && opts.until >= 0 &&
      ((opts.since >= TimeBound::kEpochThreshold) == (opts.until >= TimeBound::kEpochThreshold)) &&
      opts.since > opts.until) {
    print_error("export: --since is after --until");
    return kExitUnusable;
  }
  std::vector<std::string> warnings;
  if (!opts.memory_viz.empty()) {
    MemoryVizOptions mv;
    mv.device = opts.device;
    if (opts.since >= 0) mv.since = {true, opts.since};
    if (opts.until >= 0) mv.until = {true, opts.until};
    mv.max_entries = opts.max_entries;
    ProgressBar bar("exporting " + opts.memory_viz);
    mv.progress = bar.callback();
    ExportStats st;
    std::string error;
    bool ok = export_memory_viz(opts.file, opts.memory_viz, mv, st, error, warnings);
    bar.clear();
    print_warnings(warnings);
    if (!ok) {
      print_error(error);
      return kExitUnusable;
    }
    std::printf("torchseal: wrote %s: %" PRIu64 " trace entries on %d device(s), %" PRIu64
                " live segment(s), %s\n",
                opts.memory_viz.c_str(), st.entries, st.devices, st.segments,
                human(st.bytes).c_str());
  }
  if (!opts.perfetto.empty()) {
    PerfettoOptions po;
    po.min_slice_bytes = opts.min_slice_bytes;
    ProgressBar bar("exporting " + opts.perfetto);
    po.progress = bar.callback();
    ExportStats st;
    std::string error;
    bool ok = export_perfetto(opts.file, opts.perfetto, po, st, error, warnings);
    bar.clear();
    // The memory-viz pass already reported the same damage.
    if (opts.memory_viz.empty()) print_warnings(warnings);
    if (!ok) {
      print_error(error);
      return kExitUnusable;
    }
    std::printf("torchseal: wrote %s: %" PRIu64 " trace events, %s\n", opts.perfetto.c_str(),
                st.entries, human(st.bytes).c_str());
  }
  return std::fflush(stdout) == 0 ? kExitOk : kExitUnusable;
}

}  // namespace torchseal::cli
