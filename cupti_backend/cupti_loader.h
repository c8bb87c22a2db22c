// Finds and opens libcupti at run time. torchseal never links CUPTI: a
// process without it (or with a CUPTI that does not match the driver) must
// still run, falling back to the hook backend.
#pragma once

#include <cupti_callbacks.h>

#include <string>

namespace torchseal::cupti {

// The CUPTI entry points the backend uses, resolved with the real dlsym
// (the shim interposes dlsym; going through it would be pointless work).
struct CuptiApi {
  void *handle = nullptr;
  std::string path;  // what was dlopen'ed, for diagnostics

  CUptiResult (*subscribe)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *) = nullptr;
  CUptiResult (*unsubscribe)(CUpti_SubscriberHandle) = nullptr;
  CUptiResult (*enable_domain)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain) = nullptr;
  CUptiResult (*enable_callback)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain,
                                 CUpti_CallbackId) = nullptr;
  // Optional: older or partial implementations may lack these.
  CUptiResult (*get_result_string)(CUptiResult, const char **) = nullptr;
  CUptiResult (*get_callback_name)(CUpti_CallbackDomain, uint32_t, const char **) = nullptr;
  CUptiResult (*get_version)(uint32_t *) = nullptr;
  CUptiResult (*subscribe_v2)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *,
                              CUpti_SubscriberParams *) = nullptr;

  // "CUPTI_ERROR_... (text)" for diagnostics; never null.
  std::string describe(CUptiResult r) const;
};

// Tries, in order: `explicit_path` (TORCHSEAL_CUPTI_PATH) when non-empty, the
// dynamic loader's default search ("libcupti.so.13", "libcupti.so"), the CUDA
// toolkit's lib directories ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda, each
// with lib64 and extras/CUPTI/lib64), then Python's nvidia/*/lib wheel
// directories. The first library that has every required entry point wins.
// On failure returns false and fills `why` with one line.
bool load_cupti(const std::string &explicit_path, CuptiApi &out, std::string &why);

}  // namespace torchseal::cupti
