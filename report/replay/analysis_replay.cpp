#include "report/replay/analysis_replay.h"

#include <algorithm>
#include <map>
#include <utility>

#include "report/model/vmm_maps.h"
#include "report/replay/replay.h"

namespace torchseal {
namespace {

// Builds the analysis input from the replay, with the same semantics as
// shim/core/recorder.cpp (live set, teardown leaks, OOM snapshots, step samples).
class AnalysisObserver : public ReplayObserver {
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
    in_.process = p;
    clock_base_ = clock_base;
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

  void on_event(const Event &e) override {
    switch (e.op) {
      case Op::Alloc:
      case Op::Free:
        ++in_.events;
        break;
      case Op::InvalidFree: {
        if (in_.invalid_frees.size() < 1000)
          in_.invalid_frees.push_back({e.api, e.addr, e.stack, e.pystack});
        ++in_.events;
        break;
      }
      case Op::OomFail:
        oom(e);
        ++in_.events;
        break;
      case Op::Step:
        step(e);
        break;
      case Op::Mark:
        if (in_.marks.size() < kMaxMarks)
          in_.marks.push_back(
              {clock_base_ + static_cast<double>(e.time_ns) / 1e9, replay_->label(e.size), e.tid});
        break;
      case Op::Map:
      case Op::Unmap:
        vmm_maps_.apply(e.op, e.addr, e.size, e.stream);  // the handle, for Map
        break;
      default:
        break;  // reservations: timeline only
    }
  }

  uint64_t on_alloc(const Event &e) override {
    peak_ = std::max(peak_, replay_->live_bytes() + e.size);
    return 0;
  }

  void on_teardown(const Event &, const std::vector<const ReplayRecord *> &dying) override {
    for (const ReplayRecord *r : dying) {
      LiveAlloc a = live_alloc_of(r->alloc);
      a.detected_at = DetectedAt::ContextTeardown;
      teardown_.push_back(a);
    }
  }

  void finish(const Replay &replay) {
    replay.for_each_live(
        [&](const ReplayRecord &r) { in_.live.push_back(live_alloc_of(r.alloc)); });
    in_.live.insert(in_.live.end(), teardown_.begin(), teardown_.end());
    in_.peak_bytes = peak_;
    in_.vmm_maps = vmm_maps_.list();
    in_.steps = steps_.empty() ? std::move(windows_) : std::move(steps_);
    if (has_verdict_) {
      apply_verdict();
    } else {
      if (ooms_.size() > kOldReportOoms) ooms_.resize(kOldReportOoms);
      in_.ooms = std::move(ooms_);
    }
  }

 private:
  // Every OOM until the bound, with the live set at that moment for the
  // first ones (all a report lists without a verdict) and the newest ones
  // (the OOM the program saw often comes after many recovered retries).
  void oom(const Event &e) {
    if (ooms_.size() >= kMaxOoms) ooms_.erase(ooms_.begin() + kSnapshotFirst);
    OomRecord &o = ooms_.emplace_back();
    o.api = e.api;
    o.requested = e.size;
    o.device = e.device;
    o.stack = e.stack;
    o.pystack = e.pystack;
    o.live_bytes = replay_->live_bytes();
    o.time_ns = e.time_ns;
    o.tid = e.tid;
    replay_->for_each_live(
        [&](const ReplayRecord &r) { o.live_at_oom.push_back(live_alloc_of(r.alloc)); });
    if (ooms_.size() > kSnapshotFirst + kSnapshotLast) {
      OomRecord &older = ooms_[ooms_.size() - 1 - kSnapshotLast];
      std::vector<LiveAlloc>().swap(older.live_at_oom);
    }
  }

  // The shim's exit verdict: its holder scan and site holders, and its OOMs
  // in its order, each found by its OomFail event (time and thread) and
  // marked as it was decided. An OOM the shim did not keep is not listed.
  void apply_verdict() {
    in_.holders = std::move(verdict_.scan);
    in_.site_holders = std::move(verdict_.site_holders);
    std::map<std::pair<uint64_t, uint32_t>, size_t> by_event;
    for (size_t i = 0; i < ooms_.size(); ++i)
      by_event.emplace(std::pair(ooms_[i].time_ns, ooms_[i].tid), i);
    for (tseal::VerdictRecord::Oom &v : verdict_.ooms) {
      auto it = by_event.find({v.time_ns, v.tid});
      if (it == by_event.end()) continue;
      OomRecord &o = ooms_[it->second];
      o.recovered = v.recovered;
      o.holders = std::move(v.holders);
      in_.ooms.push_back(std::move(o));
      by_event.erase(it);
    }
  }

  void step(const Event &e) {
    bool window = (e.size & kWindowStepBit) != 0;
    StepSample sample;
    sample.step = e.size & ~kWindowStepBit;
    sample.time_ns = e.time_ns;
    std::unordered_map<uint64_t, size_t> index;
    replay_->for_each_live([&](const ReplayRecord &r) {
      const Event &a = r.alloc;
      uint64_t key =
          (static_cast<uint64_t>(a.stack) << 32 | a.pystack) ^ (static_cast<uint64_t>(a.api) << 48);
      auto it = index.find(key);
      if (it == index.end()) {
        index.emplace(key, sample.sites.size());
        sample.sites.push_back({a.stack, a.pystack, a.api, a.family, a.size, 1});
      } else {
        sample.sites[it->second].bytes += a.size;
        sample.sites[it->second].allocations += 1;
      }
    });
    push_sample(window ? windows_ : steps_, std::move(sample));
  }

  // Same bounded thinning as the shim (shim/core/recorder.cpp), so both agree.
  static void push_sample(std::vector<StepSample> &v, StepSample &&s) {
    if (v.size() >= 4096) {
      size_t j = 0;
      for (size_t i = 0; i < v.size(); i += 2) v[j++] = std::move(v[i]);
      v.resize(j);
    }
    v.push_back(std::move(s));
  }

  static constexpr size_t kMaxMarks = 10000;  // a report lists them all: keep it readable
  // Without a verdict (an older or crashed file) the report lists the first
  // 8 OOMs, as it always did. The shim keeps at most 8 undecided or seen
  // OOMs and 8 recovered ones (shim/core/recorder.cpp): the first 16 cover them
  // unless a run retried often.
  static constexpr size_t kOldReportOoms = 8;
  static constexpr size_t kSnapshotFirst = 16, kSnapshotLast = 8;
  static constexpr size_t kMaxOoms = 4096;

  AnalysisInput &in_;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> &symbols_;
  double clock_base_ = 0;
  std::vector<LiveAlloc> teardown_;
  VmmMapTable vmm_maps_;
  std::vector<StepSample> steps_, windows_;
  uint64_t peak_ = 0;
  std::vector<OomRecord> ooms_;  // every OomFail event, oldest first (bounded)
  tseal::VerdictRecord verdict_;
  bool has_verdict_ = false;
};

}  // namespace

bool replay_history(const std::string &path, AnalysisInput &out,
                    std::unordered_map<uint64_t, std::vector<NativeFrame>> &symbols,
                    std::string &error, std::vector<std::string> &warnings) {
  out = AnalysisInput{};
  out.trigger = "exit";
  AnalysisObserver obs(out, symbols);
  Replay replay(obs);
  if (!read_history(path, replay, error, warnings)) return false;
  obs.finish(replay);
  return true;
}

}  // namespace torchseal
