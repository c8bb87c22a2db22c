#include "report/replay/replay.h"

namespace torchseal {

void Replay::on_event(const Event &e) {
  if (closed_ || !obs_.wants(e)) return;
  if (silent_) {
    bool opens = window_.by_time ? e.time_ns >= from_ns_ : window_.from_step <= 1;
    if (!opens) {
      apply(e, false);
      last_ns_ = e.time_ns;
      // A step range opens right after the step before its first.
      if (e.op == Op::Step && (e.size & ~kWindowStepBit) + 1 == window_.from_step)
        open_window(e.time_ns);
      return;
    }
    open_window(e.time_ns);
  }
  if (window_.by_time && e.time_ns > to_ns_) {
    closed_ = true;
    close_ns_ = last_ns_;
    return;
  }
  apply(e, true);
  last_ns_ = e.time_ns;
  if (window_.by_steps && window_.to_step && e.op == Op::Step &&
      (e.size & ~kWindowStepBit) == window_.to_step) {
    closed_ = true;
    close_ns_ = e.time_ns;
  }
}

void Replay::apply(const Event &e, bool notify) {
  if (notify) obs_.on_event(e);
  live_.apply(e, notify ? &obs_ : nullptr);
}

void Replay::on_checkpoint(tseal::CheckpointRecord &&c, bool whole) {
  live_.restore(c.live, c.maps, c.released);
  last_ns_ = c.time_ns;
  if (silent_) {
    // A step range whose first step begins with this segment opens here;
    // otherwise the observer hears of the state when the window opens.
    if (window_.by_steps && c.step + 1 >= window_.from_step) open_window(c.time_ns);
    return;
  }
  live_.retag([&](const Event &a) { return obs_.on_restore(a); });
  obs_.on_checkpoint(whole ? std::move(c.summary) : RunSummary{}, whole);
}

void Replay::set_window(const HistoryWindow &w) {
  window_ = w;
  silent_ = w.any();
}

void Replay::on_process(const ProcessInfo &p, double clock_base) {
  if (window_.by_time) {
    // Seconds since the process started, on the events' CLOCK_MONOTONIC.
    double start_ns = (p.start_time - clock_base) * 1e9;
    double from = start_ns + window_.from_s * 1e9, to = start_ns + window_.to_s * 1e9;
    from_ns_ = from > 0 ? static_cast<uint64_t>(from) : 0;
    to_ns_ = window_.to_s < 0 ? UINT64_MAX : to > 0 ? static_cast<uint64_t>(to) : 0;
  }
  obs_.on_process(p, clock_base);
}

void Replay::open_window(uint64_t at_ns) {
  silent_ = false;
  open_ns_ = at_ns;
  live_.retag([&](const Event &a) { return obs_.on_restore(a); });
  obs_.on_checkpoint(RunSummary{}, false);
}

void Replay::on_read_done() {
  // A window after the last event still shows what was live there.
  if (silent_) open_window(last_ns_);
  if (window_.any() && !close_ns_) close_ns_ = last_ns_;
}

void Replay::on_label(uint32_t id, std::string &&label) {
  obs_.on_label(id, std::string(label));
  labels_[id] = std::move(label);
}

std::string Replay::label(uint64_t id) const {
  auto it = id <= UINT32_MAX ? labels_.find(static_cast<uint32_t>(id)) : labels_.end();
  return it != labels_.end() ? it->second : "#" + std::to_string(id);
}

bool replay_file(const std::string &path, Replay &replay, const HistoryWindow *window,
                 std::string &error, std::vector<std::string> &warnings, HistoryReadStats *stats,
                 void (*progress)(uint64_t, uint64_t)) {
  if (window) replay.set_window(*window);
  return read_history(path, replay, error, warnings, stats, progress, window);
}

HistoryReadInfo read_info(const Replay &replay, const HistoryReadStats &stats,
                          const ProcessInfo &process, double clock_base) {
  HistoryReadInfo h;
  h.present = true;
  h.segments = stats.segments;
  h.segments_on_disk = stats.segments_on_disk;
  h.segments_read = stats.segments_read;
  h.bytes_read = stats.bytes;
  h.segment_bytes = stats.segment_bytes;
  h.limit_bytes = stats.limit_bytes;
  h.checkpoint_bytes = stats.checkpoint_bytes;
  h.over_cap = stats.over_cap;
  h.truncated = stats.truncated;
  if (replay.windowed()) {
    h.windowed = true;
    double start_ns = (process.start_time - clock_base) * 1e9;
    auto secs = [&](uint64_t ns) { return (static_cast<double>(ns) - start_ns) / 1e9; };
    const HistoryWindow &w = replay.window();
    // A time window is the one asked for (its open end: the last event
    // read); a step range, the times its steps began and ended.
    h.from_s = w.by_time ? w.from_s : replay.window_open_ns() ? secs(replay.window_open_ns()) : -1;
    h.to_s = w.by_time && w.to_s >= 0   ? w.to_s
             : replay.window_close_ns() ? secs(replay.window_close_ns())
                                        : -1;
    h.from_step = replay.window().from_step;
    h.to_step = replay.window().to_step;
  }
  return h;
}

}  // namespace torchseal
