// What the hooks, the CUPTI backend and the core ask of the lifecycle: is the
// shim recording, and the per-thread guard around every hooked call. Declared
// here, below the layers that call it, and defined by shim/runtime/lifecycle.cpp
// (the parent-tool section of LLVM's lsan_common.h is the model): the hooks
// depend on this contract, never on the runtime that implements it.
#pragma once

#include <atomic>

namespace torchseal {

// True when events should be recorded. Initialises on first use.
bool ensure_active();
// True when active, without initialising.
bool is_active();

// The first recorded event of this process (a forked child's own first
// CUDA call): starts its history file. Backends call it before recording.
void note_first_record();

// The CUPTI backend gave its slot up: the hooks record from now on.
void hooks_take_over();

// CUDA has been initialised (a successful cuInit): from here on the process
// writes its report at exit, even an empty one, so "active, no leaks" can be
// told from "never active". Does nothing inside another hooked call (the
// hook that made it activates the shim itself).
void note_cuda_initialised();

// Per-thread nesting depth of hooked calls. A runtime call that reaches the
// driver through hooked pointers is one event, recorded by the outermost hook.
namespace hook_detail {
// Nesting depth of hooked calls on this thread (initial-exec: no TLS
// allocation on first touch, safe inside interposers).
extern __thread int t_depth __attribute__((tls_model("initial-exec")));
// The frame of this thread's recording hook while it runs, else null: a
// stack walk starts there rather than stepping through the shim's own
// frames below it (bench/RESULTS.md).
extern __thread void *t_hook_frame __attribute__((tls_model("initial-exec")));
// Set while the shim is active, the hooks are the recording backend and this
// process has begun recording: the outermost hooked call then records with
// one load. Cleared before any of that stops being true.
extern std::atomic<bool> g_record_fast;
bool record_slow();
}  // namespace hook_detail

// Inside another hooked call on this thread: the call is no event of its
// own (HookScope would not record it), so a wrapper may forward it at once,
// as a tail call (a runtime allocation's nested driver call comes here).
inline bool hook_nested() { return hook_detail::t_depth != 0; }

class HookScope {
 public:
  // Always inline: the frame it notes is the hook's own, live until the
  // scope ends (a constructor of its own would note a frame that is gone).
  __attribute__((always_inline)) HookScope()
      : record_(hook_detail::t_depth++ == 0 &&
                (hook_detail::g_record_fast.load(std::memory_order_relaxed) ||
                 hook_detail::record_slow())) {
    if (record_) hook_detail::t_hook_frame = __builtin_frame_address(0);
  }
  __attribute__((always_inline)) ~HookScope() {
    --hook_detail::t_depth;
    if (record_) hook_detail::t_hook_frame = nullptr;
  }
  HookScope(const HookScope &) = delete;
  HookScope &operator=(const HookScope &) = delete;
  // True in the outermost hooked call of an active shim.
  bool record() const { return record_; }

 private:
  bool record_;
};

}  // namespace torchseal
