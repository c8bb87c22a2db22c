#include "cupti_backend/cupti_loader.h"

#include <dlfcn.h>

#include <cstdio>

#include "common/util/log.h"
#include "cupti_backend/cupti_search_path.h"
#include "shim/intercept/dlsym_hook.h"

namespace torchseal::cupti {
namespace {

template <typename Fn>
bool resolve(void *h, const char *name, Fn &out) {
  out = reinterpret_cast<Fn>(real_dlsym(h, name));
  return out != nullptr;
}

// Fills `api` from an opened library; false if a required entry is missing.
bool resolve_all(void *h, CuptiApi &api, std::string &missing) {
  bool ok = true;
  auto need = [&](const char *name, auto &fn) {
    if (!resolve(h, name, fn)) {
      ok = false;
      if (missing.empty()) missing = name;
    }
  };
  need("cuptiSubscribe", api.subscribe);
  need("cuptiUnsubscribe", api.unsubscribe);
  need("cuptiEnableDomain", api.enable_domain);
  need("cuptiEnableCallback", api.enable_callback);
  resolve(h, "cuptiGetResultString", api.get_result_string);
  resolve(h, "cuptiGetCallbackName", api.get_callback_name);
  resolve(h, "cuptiGetVersion", api.get_version);
  resolve(h, "cuptiSubscribe_v2", api.subscribe_v2);
  return ok;
}

}  // namespace

std::string CuptiApi::describe(CUptiResult r) const {
  const char *s = nullptr;
  if (get_result_string && get_result_string(r, &s) == CUPTI_SUCCESS && s && *s) return s;
  char buf[48];
  std::snprintf(buf, sizeof(buf), "CUPTI error %d", static_cast<int>(r));
  return buf;
}

bool load_cupti(const std::string &explicit_path, CuptiApi &out, std::string &why) {
  std::string first_error;
  bool found = for_each_cupti_candidate(explicit_path, [&](const std::string &cand) {
    // RTLD_LOCAL: CUPTI's symbols must not join the host's global scope.
    // RTLD_NOW: a half-resolvable CUPTI fails here, not inside a callback.
    void *h = dlopen(cand.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      log::debug("CUPTI candidate %s: %s", cand.c_str(), e ? e : "not loadable");
      // The user's explicit choice failing is the most useful thing to say.
      if (first_error.empty() && cand == explicit_path)
        first_error = "TORCHSEAL_CUPTI_PATH=" + cand + ": " + (e ? e : "cannot load");
      return false;
    }
    CuptiApi api;
    std::string missing;
    if (!resolve_all(h, api, missing)) {
      log::debug("CUPTI candidate %s lacks %s", cand.c_str(), missing.c_str());
      if (first_error.empty()) first_error = cand + " lacks " + missing;
      dlclose(h);  // nothing of it was called
      return false;
    }
    api.handle = h;
    api.path = cand;
    out = api;
    log::debug("CUPTI loaded from %s", cand.c_str());
    return true;
  });
  if (found) return true;
  why = "libcupti not found";
  if (!first_error.empty()) why += " (" + first_error + ")";
  return false;
}

}  // namespace torchseal::cupti
