#include "cupti_backend/cupti_subscriber.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <pthread.h>

#include <cstddef>
#include <new>

#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "cupti_backend/call_owner.h"
#include "cupti_backend/cupti_backend.h"
#include "cupti_backend/event_callbacks.h"
#include "shim/core/activation.h"

namespace torchseal::cupti {
namespace {

// Who usually holds the single CUPTI subscriber slot.
constexpr const char *kSlotHolders =
    "another CUPTI subscriber holds the slot (torch.profiler, Nsight or compute-sanitizer?)";

// CUpti_SubscriberParams as CUPTI documents it from 13.2 on: the 13.0 header
// lacks the last member, which asks for multi-subscriber mode (CUDA 13.3+;
// every subscriber must then use cuptiSubscribe_v2 with the same setting).
struct SubscriberParamsMulti {
  CUpti_SubscriberParams base;
  uint8_t allowMultipleSubscribers;
};
constexpr size_t kParamsMultiSize = offsetof(SubscriberParamsMulti, allowMultipleSubscribers) + 1;
constexpr uint32_t kMultiSubscriberVersion = 130300;

// How long a handover waits for calls CUPTI already owns to return.
constexpr int kHandoverWaitMs = 2000;

}  // namespace

CUptiResult Subscriber::subscribe(std::string &holder) {
  uint32_t version = 0;
  multi_ = false;
  if (!api_.subscribe_v2 || !api_.get_version || api_.get_version(&version) != CUPTI_SUCCESS ||
      version < kMultiSubscriberVersion)
    return api_.subscribe(&handle_, on_cupti_callback, nullptr);
  char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN] = {};
  SubscriberParamsMulti p{};
  p.base.structSize = kParamsMultiSize;
  p.base.subscriberName = "torchseal";
  p.base.oldSubscriberName = old_name;
  p.base.oldSubscriberSize = sizeof(old_name);
  p.allowMultipleSubscribers = 1;
  CUptiResult r = api_.subscribe_v2(&handle_, on_cupti_callback, nullptr, &p.base);
  if (r == CUPTI_SUCCESS) multi_ = true;
  if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && old_name[0]) holder = old_name;
  return r;
}

bool Subscriber::check(CUptiResult r, const char *what, std::string &why) const {
  if (r == CUPTI_SUCCESS) return true;
  why = std::string(what) + ": " + api_.describe(r);
  log::debug("CUPTI %s", why.c_str());
  return false;
}

bool Subscriber::enable_table(CUpti_CallbackDomain domain, uint32_t cbid_limit, std::string &why) {
  uint32_t named = 0;
  bool enable_ok = true;
  CUptiResult first_bad = CUPTI_SUCCESS;
  if (api_.get_callback_name) {
    named = cbid_map().build(
        domain, cbid_limit,
        [&](CUpti_CallbackDomain d, uint32_t cbid, const char **name) {
          return api_.get_callback_name(d, cbid, name) == CUPTI_SUCCESS;
        },
        [&](uint32_t cbid) {
          CUptiResult r = api_.enable_callback(1, handle_, domain, cbid);
          if (r != CUPTI_SUCCESS && enable_ok) {
            enable_ok = false;
            first_bad = r;
          }
        });
  }
  if (named > 0) {
    return enable_ok || check(first_bad,
                              domain == CUPTI_CB_DOMAIN_DRIVER_API ? "cuptiEnableCallback(driver)"
                                                                   : "cuptiEnableCallback(runtime)",
                              why);
  }
  // This CUPTI cannot name cbids: take the whole domain and map each cbid
  // from CUpti_CallbackData::functionName the first time it is seen.
  log::debug("CUPTI cannot name callback ids of domain %d; enabling the whole domain",
             static_cast<int>(domain));
  return check(api_.enable_domain(1, handle_, domain), "cuptiEnableDomain", why);
}

bool Subscriber::start(const std::string &cupti_path, std::string &why) {
  State s = state_.load(std::memory_order_acquire);
  if (s == State::Running) return true;
  if (!api_.handle && !load_cupti(cupti_path, api_, why)) {
    state_.store(State::Failed, std::memory_order_release);
    return false;
  }
  std::string holder;
  CUptiResult r = subscribe(holder);
  if (r != CUPTI_SUCCESS) {
    handle_ = nullptr;
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && !holder.empty())
      why = "CUPTI subscriber \"" + holder + "\" holds the slot: " + api_.describe(r);
    else if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
      why = std::string(kSlotHolders) + ": " + api_.describe(r);
    else
      check(r, "cuptiSubscribe", why);
    state_.store(State::Failed, std::memory_order_release);
    return false;
  }
  cbid_map().reset();
  bool ok = enable_table(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, why) &&
            enable_table(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, why) &&
            check(api_.enable_callback(1, handle_, CUPTI_CB_DOMAIN_RESOURCE,
                                       CUPTI_CBID_RESOURCE_CONTEXT_CREATED),
                  "cuptiEnableCallback(CONTEXT_CREATED)", why) &&
            check(api_.enable_callback(1, handle_, CUPTI_CB_DOMAIN_RESOURCE,
                                       CUPTI_CBID_RESOURCE_CONTEXT_DESTROY_STARTING),
                  "cuptiEnableCallback(CONTEXT_DESTROY_STARTING)", why);
  if (!ok) {
    // Half a subscription would count some calls and miss others: none.
    api_.unsubscribe(handle_);
    handle_ = nullptr;
    state_.store(State::Failed, std::memory_order_release);
    return false;
  }
  state_.store(State::Running, std::memory_order_release);
  static bool atfork_installed = false;
  if (!atfork_installed) {
    atfork_installed = true;
    pthread_atfork(nullptr, nullptr, after_fork_child);
  }
  set_delivery(true);
  start_owning();
  log::debug("CUPTI subscribed (%s%s)", api_.path.c_str(), multi_ ? ", multi-subscriber mode" : "");
  return true;
}

bool Subscriber::hand_over() {
  State expected = State::Running;
  if (!state_.compare_exchange_strong(expected, State::HandingOver, std::memory_order_acq_rel))
    return false;
  // From here the hooks record every call that begins; CUPTI finishes the
  // calls it owns before the slot is given up (call_owner.h).
  hooks_take_over();
  if (!stop_owning(kHandoverWaitMs))
    log::debug("CUPTI handover: calls still inside CUDA after %d ms", kHandoverWaitMs);
  set_delivery(false);
  CUptiResult r = api_.unsubscribe(handle_);
  if (r != CUPTI_SUCCESS) log::debug("cuptiUnsubscribe: %s", api_.describe(r).c_str());
  handle_ = nullptr;
  state_.store(State::Stopped, std::memory_order_release);
  return r == CUPTI_SUCCESS;
}

void Subscriber::stop() {
  State expected = State::Running;
  if (!state_.compare_exchange_strong(expected, State::Stopped, std::memory_order_acq_rel)) return;
  stop_owning(0);
  // Close delivery first: a callback already running on another thread
  // finishes, later ones return at once. libcupti stays loaded (callbacks
  // may still be in flight), and nothing here flushes or waits on CUPTI.
  set_delivery(false);
  CUptiResult r = api_.unsubscribe(handle_);
  if (r != CUPTI_SUCCESS) log::debug("cuptiUnsubscribe: %s", api_.describe(r).c_str());
  handle_ = nullptr;
}

Subscriber &subscriber() {
  // Never destroyed: stop() runs from the shim's ELF destructor, after
  // static destructors may already have run.
  static constinit Lazy<Subscriber> s;
  return s.get();
}

// ---- the contract in cupti_backend.h ----

bool start(const Config &cfg, std::string &why) { return subscriber().start(cfg.cupti_path, why); }

bool running() { return subscriber().running(); }

void stop() { subscriber().stop(); }

bool hand_over_slot() {
  if (!subscriber().hand_over()) return false;
  log::warn(
      "another CUPTI subscriber asked for the slot: torchseal handed it over and records "
      "with the hooks from now on");
  return true;
}

}  // namespace torchseal::cupti
