#include "report/replay/analysis_replay.h"

#include <algorithm>
#include <map>
#include <utility>

#include "report/replay/replay.h"
#include "report/replay/summary_observer.h"

namespace torchseal {
namespace {

// Builds the analysis input from the replay, with the same semantics as
// shim/core/recorder.cpp (live set, teardown leaks, OOM snapshots, step samples).
class AnalysisObserver : public SummaryObserver {
  // The shim numbers stacks densely within each of its 64 shards, so the
  // n-th stack defined has an id below 64 * (n + 1): a larger one comes from
  // a damaged file and would make the id-indexed tables absurdly large.
  static bool plausible_id(uint64_t id, uint64_t defined) {
    return id < (1u << 28) && id <= 64 * (defined + 1);
  }
  uint64_t native_seen_ = 0, python_seen_ = 0;

 public:
  AnalysisObserver(AnalysisInput &in,
                   std::unordered_map<uint64_t, std::vector<NativeFrame>> &symbols)
      : in_(in), symbols_(symbols) {}

  void on_process(const ProcessInfo &p, double clock_base) override {
    SummaryObserver::on_process(p, clock_base);
    in_.process = p;
  }
  void on_modules(const std::vector<Module> &mods) override { in_.modules = mods; }
  void on_stack(StackId id, std::vector<uint64_t> &&ips) override {
    if (!plausible_id(id, ++native_seen_)) return;
    if (in_.stacks.native.size() <= id) in_.stacks.native.resize(id + 1);
    in_.stacks.native[id] = std::move(ips);
  }
  void on_symbol(uint64_t ip, std::vector<NativeFrame> &&frames) override {
    symbols_[ip] = std::move(frames);
  }
  void on_pystack(PyStackId id, std::vector<PyFrame> &&frames) override {
    if (!plausible_id(id, ++python_seen_)) return;
    if (in_.stacks.python.size() <= id) in_.stacks.python.resize(id + 1);
    in_.stacks.python[id] = std::move(frames);
  }
  void on_end(double end_time, uint64_t, bool) override { in_.process.end_time = end_time; }
  void on_exit_flags(uint8_t flags) override {
    in_.torch_caching_allocator = flags & 1;
    in_.torch_process = flags & 2;
  }
  void on_verdict(tseal::VerdictRecord &&v) override {
    verdict_ = std::move(v);
    has_verdict_ = true;
  }

  // In a window, what was live at its start is set aside as pre-existing,
  // as torchseal_start() does (its frees are counted, never reported).
  uint64_t on_restore(const Event &e) override {
    SummaryObserver::on_restore(e);
    return replay_->windowed() ? kPreexisting : 0;
  }
  void on_release(const Event &e, const ReplayRecord &r) override {
    // A released VMM handle goes at its last unmap.
    if (r.tag == kPreexisting && (e.op == Op::Free || e.op == Op::Unmap)) {
      ++in_.preexisting_frees;
      in_.preexisting_freed_bytes += r.alloc.size;
    }
  }

  void finish(const Replay &replay) {
    replay.for_each_live([&](const ReplayRecord &r) {
      if (r.tag != kPreexisting) in_.live.push_back(live_alloc_of(r.alloc));
    });
    note_map_sites(replay.vmm_maps(), in_.live);
    in_.live.insert(in_.live.end(), sum_.teardown.begin(), sum_.teardown.end());
    in_.peak_bytes = sum_.peak;
    in_.events = sum_.events;
    in_.invalid_frees = std::move(sum_.invalid_frees);
    in_.marks = std::move(sum_.marks);
    in_.vmm_maps = replay.vmm_maps().list();
    in_.steps = sum_.steps.empty() ? std::move(sum_.windows) : std::move(sum_.steps);
    if (has_verdict_) {
      apply_verdict(replay.windowed());
    } else {
      if (sum_.ooms.size() > kOldReportOoms) sum_.ooms.resize(kOldReportOoms);
      in_.ooms = std::move(sum_.ooms);
    }
  }

 private:
  static constexpr uint64_t kPreexisting = 1;

  // The shim's exit verdict: its holder scan and site holders, and its OOMs
  // in its order, each found by its OomFail event (time and thread) and
  // marked as it was decided. An OOM the shim did not keep is not listed.
  // A window keeps the verdict of its own OOMs only: the exit scan speaks of
  // the memory live at exit, not at the window's end.
  void apply_verdict(bool windowed) {
    if (!windowed) {
      in_.holders = std::move(verdict_.scan);
      in_.site_holders = std::move(verdict_.site_holders);
      in_.roles_now = std::move(verdict_.roles_now);
      in_.roles_peak = std::move(verdict_.roles_peak);
      in_.role_steps = std::move(verdict_.role_steps);
    }
    std::vector<OomRecord> &ooms = sum_.ooms;
    std::map<std::pair<uint64_t, uint32_t>, size_t> by_event;
    for (size_t i = 0; i < ooms.size(); ++i)
      by_event.emplace(std::pair(ooms[i].time_ns, ooms[i].tid), i);
    for (tseal::VerdictRecord::Oom &v : verdict_.ooms) {
      auto it = by_event.find({v.time_ns, v.tid});
      if (it == by_event.end()) continue;
      OomRecord &o = ooms[it->second];
      o.recovered = v.recovered;
      o.holders = std::move(v.holders);
      o.roles = std::move(v.roles);
      in_.ooms.push_back(std::move(o));
      by_event.erase(it);
    }
  }

  // Without a verdict (an older or crashed file) the report lists the first
  // 8 OOMs, as it always did.
  static constexpr size_t kOldReportOoms = 8;

  AnalysisInput &in_;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> &symbols_;
  tseal::VerdictRecord verdict_;
  bool has_verdict_ = false;
};

}  // namespace

bool replay_history(const std::string &path, AnalysisInput &out,
                    std::unordered_map<uint64_t, std::vector<NativeFrame>> &symbols,
                    std::string &error, std::vector<std::string> &warnings,
                    const HistoryWindow *window, HistoryReadInfo *info) {
  out = AnalysisInput{};
  out.trigger = "exit";
  AnalysisObserver obs(out, symbols);
  Replay replay(obs);
  HistoryReadStats stats;
  if (!replay_file(path, replay, window, error, warnings, &stats)) return false;
  obs.finish(replay);
  if (info) *info = read_info(replay, stats, out.process, obs.clock_base());
  return true;
}

}  // namespace torchseal
