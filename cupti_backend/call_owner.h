// Which backend records a call, decided once per call, so that CUPTI can hand
// its slot to the hooks (a profiler asked for it) with no event lost or
// counted twice.
//
// While CUPTI owns the calls, the hooks' outermost call on a thread claims
// it for CUPTI before forwarding (the hooks then only forward), and CUPTI's
// outermost API callback claims calls no hook saw (static runtimes,
// injection without LD_PRELOAD). A claim lasts until CUPTI's matching
// outermost API_EXIT. The handover stops new claims (the hooks record every
// call that begins from then on, and CUPTI ignores those calls' callbacks),
// waits until every claimed call has returned, then unsubscribes. So a
// cudaMalloc seen by CUPTI whose cudaFree comes after the switch pairs in
// the one live table, and nested runtime->driver calls stay one event.
//
// Relies on every hooked API being one whose callbacks CUPTI delivers (the
// subscriber enables the API table, which lists every hooked function).
#pragma once

namespace torchseal::cupti {

// CUPTI records calls from now on (the subscription is complete).
void start_owning();

// The hooks' outermost call, before forwarding: true when CUPTI records it.
bool claim_for_cupti();

// Around each of CUPTI's API callbacks of a tracked function. enter_call()
// at API_ENTER: whether the call is CUPTI's. call_owned() at API_EXIT, then
// exit_call() once that callback is recorded.
bool enter_call();
bool call_owned();
void exit_call();

// The handover: no new claims; then waits (at most `timeout_ms`) for the
// claimed calls in flight to return. False if some were still running.
bool stop_owning(int timeout_ms);

// A forked child: only the forking thread survives, between calls.
void owner_after_fork_child();

}  // namespace torchseal::cupti
