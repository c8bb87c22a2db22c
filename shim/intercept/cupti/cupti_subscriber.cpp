#include "shim/intercept/cupti/cupti_subscriber.h"

#include <cupti_driver_cbid.h>
#include <cupti_runtime_cbid.h>

#include <pthread.h>

#include <new>

#include "shim/intercept/cupti/cupti_backend.h"
#include "shim/intercept/cupti/event_callbacks.h"
#include "shim/runtime/log.h"

namespace torchseal::cupti {
namespace {

// Who usually holds the single CUPTI subscriber slot.
constexpr const char *kSlotHolders =
    "another CUPTI subscriber holds the slot (torch.profiler, Nsight or compute-sanitizer?)";

}  // namespace

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
  CUptiResult r = api_.subscribe(&handle_, on_cupti_callback, nullptr);
  if (r != CUPTI_SUCCESS) {
    handle_ = nullptr;
    if (r == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED)
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
  log::debug("CUPTI subscribed (%s)", api_.path.c_str());
  return true;
}

void Subscriber::stop() {
  State expected = State::Running;
  if (!state_.compare_exchange_strong(expected, State::Stopped, std::memory_order_acq_rel)) return;
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
  alignas(Subscriber) static unsigned char storage[sizeof(Subscriber)];
  static Subscriber *s = new (storage) Subscriber();
  return *s;
}

// ---- the contract in cupti_backend.h ----

bool start(const Config &cfg, std::string &why) { return subscriber().start(cfg.cupti_path, why); }

bool running() { return subscriber().running(); }

void stop() { subscriber().stop(); }

}  // namespace torchseal::cupti
