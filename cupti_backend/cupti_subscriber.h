// The CUPTI subscription as one lifecycle object (after Kineto's
// CuptiCallbackApi): load, subscribe, enable, unsubscribe. Every CUPTI call
// is checked; a failure is a state the object reports (with CUPTI's own
// result string), never an abort.
#pragma once

#include <atomic>
#include <string>

#include "cupti_backend/cupti_loader.h"

namespace torchseal::cupti {

class Subscriber {
 public:
  enum class State { Idle, Running, HandingOver, Failed, Stopped };

  // Loads libcupti (search order in cupti_loader.h), subscribes and enables
  // the callbacks derived from the API table. On failure leaves no
  // subscription behind and fills `why` with one line.
  bool start(const std::string &cupti_path, std::string &why);
  // Unsubscribes; idempotent; safe from an ELF destructor. Never flushes.
  void stop();
  // Gives the slot up while running, for another subscriber: the hooks take
  // over with no event lost or counted twice (call_owner.h). False if not
  // running or if cuptiUnsubscribe failed.
  bool hand_over();
  bool running() const { return state_.load(std::memory_order_acquire) == State::Running; }
  State state() const { return state_.load(std::memory_order_acquire); }

 private:
  // Enables what the API table names in `domain`: each mapped cbid when
  // CUPTI can name cbids, else the whole domain (mapped lazily per call).
  bool enable_table(CUpti_CallbackDomain domain, uint32_t cbid_limit, std::string &why);
  bool check(CUptiResult r, const char *what, std::string &why) const;
  // cuptiSubscribe_v2 asking for multi-subscriber mode where CUPTI has it
  // (13.3+), else cuptiSubscribe. Fills `holder` with the slot holder's name
  // when CUPTI gives it.
  CUptiResult subscribe(std::string &holder);

  CuptiApi api_;
  CUpti_SubscriberHandle handle_ = nullptr;
  bool multi_ = false;  // subscribed in multi-subscriber mode
  std::atomic<State> state_{State::Idle};
};

Subscriber &subscriber();

}  // namespace torchseal::cupti
