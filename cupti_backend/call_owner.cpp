#include "cupti_backend/call_owner.h"

#include <sched.h>
#include <time.h>

#include <atomic>

#include "shim/core/activation.h"

namespace torchseal::cupti {
namespace {

#define TS_TLS thread_local __attribute__((tls_model("initial-exec")))

std::atomic<bool> g_owns{false};
// Claims held: calls CUPTI records that have not reached their outermost
// API_EXIT yet (plus hook claims whose call has not reached CUPTI yet).
std::atomic<long> g_claimed{0};

// This thread's claims. A hook claim is taken before the call reaches CUPTI;
// a CUPTI claim at the outermost API_ENTER of a call no hook claimed. Both
// are released at the outermost API_EXIT.
TS_TLS bool t_hook_claim = false;
TS_TLS bool t_cupti_claim = false;
// Nesting of tracked API callbacks (runtime -> driver) and whether the
// outermost one is CUPTI's.
TS_TLS int t_nesting = 0;
TS_TLS bool t_owned = false;

// Dekker-style with stop_owning(): either the claim sees that CUPTI stopped
// owning, or the handover sees the claim and waits for it.
bool claim(bool &token) {
  if (token) return true;
  g_claimed.fetch_add(1, std::memory_order_seq_cst);
  if (!g_owns.load(std::memory_order_seq_cst)) {
    g_claimed.fetch_sub(1, std::memory_order_release);
    return false;
  }
  token = true;
  return true;
}

void release(bool &token) {
  if (!token) return;
  token = false;
  g_claimed.fetch_sub(1, std::memory_order_release);
}

}  // namespace

void start_owning() { g_owns.store(true, std::memory_order_seq_cst); }

bool claim_for_cupti() {
  if (!g_owns.load(std::memory_order_relaxed)) return false;
  return claim(t_hook_claim);
}

bool enter_call() {
  if (t_nesting++ > 0) return t_owned;
  // A hook on this thread's stack that did not claim the call records it
  // itself (or is torchseal's own thread).
  t_owned = t_hook_claim || (hook_detail::t_depth == 0 && claim(t_cupti_claim));
  return t_owned;
}

bool call_owned() { return t_nesting > 0 && t_owned; }

void exit_call() {
  if (t_nesting > 0 && --t_nesting == 0) {
    release(t_hook_claim);
    release(t_cupti_claim);
    t_owned = false;
  }
}

bool stop_owning(int timeout_ms) {
  g_owns.store(false, std::memory_order_seq_cst);
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (int spins = 0; g_claimed.load(std::memory_order_acquire) > 0; ++spins) {
    if (spins < 64) {
      sched_yield();
      continue;
    }
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    long ms = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
    if (ms >= timeout_ms) return false;
    timespec nap{0, 100 * 1000};
    nanosleep(&nap, nullptr);
  }
  return true;
}

void owner_after_fork_child() {
  g_claimed.store(0, std::memory_order_relaxed);
  t_hook_claim = false;
  t_cupti_claim = false;
  t_nesting = 0;
  t_owned = false;
}

}  // namespace torchseal::cupti
