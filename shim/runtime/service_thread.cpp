#include "shim/runtime/service_thread.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <vector>

#include "common/format/tseal_format.h"
#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "shim/core/fast_clock.h"
#include "shim/core/mark_labels.h"
#include "shim/core/recorder.h"
#include "shim/core/thread_buffers.h"
#include "shim/intercept/got_patch.h"
#include "shim/runtime/exit_verdict.h"
#include "shim/runtime/lifecycle.h"
#include "shim/runtime/report_files.h"
#include "shim/runtime/torch_mode.h"
#include "shim/sink/pass_writer.h"
#include "shim/sink/symbol_table.h"

namespace torchseal::history {

namespace {

constexpr uint64_t kFlushIntervalMs = 50;

struct State {
  pthread_t thread{};
  bool thread_running = false;
  std::atomic<bool> stop{false};
  std::atomic<bool> crash_request{false};
  int crash_done_fd = -1;
  uint64_t window_ns = 0;
  uint64_t limit = 0;  // TORCHSEAL_HISTORY_LIMIT (0: no cap)
};

State &S() {
  static constinit Lazy<State> s;
  return s.get();
}

// The dump request codes are DumpTrigger's; its names are NUL-terminated
// literals.
const char *trigger_name(int req) { return dump_trigger_name(static_cast<uint64_t>(req)).data(); }

void *service_main(void *) {
  State &s = S();
  // Not an application thread: nothing it does is a user allocation.
  mark_thread_internal();
  buffers::set_writer_thread();
  uint64_t next_window = s.window_ns ? now_ns() + s.window_ns : 0;
  while (!s.stop.load()) {
    pollfd pfd{buffers::doorbell(), POLLIN, 0};
    int rc = poll(&pfd, 1, static_cast<int>(kFlushIntervalMs));
    if (rc > 0) {
      uint64_t v;
      ssize_t ignored = read(pfd.fd, &v, sizeof v);
      (void)ignored;
    }
    recorder().settle_ooms(false);  // OOMs nothing retried: unrecovered, dumped
    if (next_window && now_ns() >= next_window) {
      if (!recorder().explicit_steps()) recorder().on_step(true);
      next_window += s.window_ns;
    }
    got::patch_new_objects();  // libraries dlopen'ed since (late attachment)
    bool crashing = s.crash_request.load();
    file::pass(recorder().stacks(), /*final=*/crashing);
    if (s.crash_request.exchange(false)) {
      // Asked during that pass, which may have waited for a thread: the
      // last events go out before the End chunk.
      if (!crashing) file::pass(recorder().stacks(), /*final=*/true);
      // The process is dying: mark the file as not cleanly ended, then let
      // the faulting thread re-raise. The crash passes no flags: asking the
      // loader (dl_iterate_phdr) takes its lock, which the dying thread may
      // hold.
      file::write_end(false, 0);
      uint64_t one = 1;
      ssize_t ignored = write(s.crash_done_fd, &one, sizeof one);
      (void)ignored;
      continue;
    }
    int req = buffers::take_dump_request();
    if (req && !s.stop.load()) write_report(trigger_name(req));
  }
  return nullptr;
}

}  // namespace

void set_limit(uint64_t bytes) { S().limit = bytes; }

void set_window_seconds(double seconds) {
  S().window_ns = seconds > 0 ? static_cast<uint64_t>(seconds * 1e9) : 0;
}

bool start(const std::string &path) {
  State &s = S();
  if (s.thread_running) return enabled();
  buffers::init();
  s.crash_done_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (!path.empty()) {
    ProcessInfo process;
    fill_process_info(process);
    file::open(path, process, disable_report_output, s.limit);
  }
  // Block every signal in the thread so the host's handlers never run on it.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  s.thread_running = pthread_create(&s.thread, nullptr, service_main, nullptr) == 0;
  // Named by its creator, so the name is in place before anyone is told the
  // writer runs (`torchseal attach` reports "attached" right after this).
  if (s.thread_running) pthread_setname_np(s.thread, "torchseal-wr");
  buffers::set_accepting(s.thread_running);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (!s.thread_running) log::error("cannot start the history writer thread; history is off");
  return enabled();
}

void crash_flush(int timeout_ms) {
  State &s = S();
  if (!s.thread_running || buffers::doorbell() < 0 || s.crash_done_fd < 0) return;
  if (pthread_equal(pthread_self(), s.thread)) return;  // the service thread itself crashed
  s.crash_request.store(true);
  buffers::ring();
  pollfd pfd{s.crash_done_fd, POLLIN, 0};
  poll(&pfd, 1, timeout_ms);
}

void finish(bool clean) {
  State &s = S();
  if (!s.thread_running) return;
  // A dump asked for just before exit (an OOM right before the program
  // gives up) is still written, after the thread stops.
  int pending = buffers::take_dump_request();
  s.stop.store(true);
  buffers::ring();
  pthread_join(s.thread, nullptr);
  s.thread_running = false;
  pending = pending ? pending : buffers::take_dump_request();
  // Still accepting events: the dump's own event goes into the last pass.
  if (pending && clean) write_report(trigger_name(pending));
  buffers::set_accepting(false);
  file::pass(recorder().stacks(), /*final=*/true);
  if (enabled()) {
    std::vector<uint8_t> out;
    if (clean) {
      try {
        append_symbols(out, recorder().stacks());
      } catch (...) {
        log::warn("could not append the symbol table to %s", file::path().c_str());
      }
      try {
        append_verdict(out);
      } catch (...) {
        log::warn("could not append the exit verdict to %s", file::path().c_str());
      }
    }
    file::write_all(out);
    // Facts only known at exit that change the verdict: PyTorch's caching
    // allocator (live memory is cache) and a PyTorch process (pinned cache).
    file::write_end(clean,
                    (torch_caching_allocator_in_use() ? tseal::kEndTorchCachingAllocator : 0) |
                        (torch_cuda_loaded() ? tseal::kEndTorchProcess : 0));
  }
  file::close();
}

void reset_after_fork() {
  State &s = S();
  // The parent's thread does not exist here.
  file::reset_after_fork();
  buffers::reset_after_fork();
  labels::reset_after_fork();
  if (s.crash_done_fd >= 0) close(s.crash_done_fd);
  s.crash_done_fd = -1;
  s.crash_request.store(false);
  s.thread_running = false;
  s.stop.store(false);
}

}  // namespace torchseal::history
