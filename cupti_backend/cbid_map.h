// CUPTI callback ids <-> torchseal's API table (common/model/api_table.def).
//
// Nothing here is a hand-kept copy of CBID numbers: the map is derived from
// the one table by name, either eagerly (cuptiGetCallbackName for every cbid
// of the domain) or lazily from CUpti_CallbackData::functionName the first
// time a cbid is seen, when the CUPTI in hand cannot name cbids.
#pragma once

#include <cupti_callbacks.h>

#include <atomic>
#include <cstdint>
#include <string_view>

#include "common/model/event.h"

namespace torchseal::cupti {

// The table name for a CUPTI function name of `domain`. Runtime names carry
// an ABI suffix ("cudaMalloc_v3020", "cudaMallocAsync_ptsz_v11020") that the
// table does not; driver names are exact ("cuMemAlloc_v2"). Returns
// ApiId::Unknown for names outside the table or of the other layer.
ApiId api_for_cupti_name(CUpti_CallbackDomain domain, std::string_view name);

// Runtime names without their "_vNNNN" suffix; anything else unchanged.
std::string_view strip_runtime_version(std::string_view name);

class CbidMap {
 public:
  // CBIDs past this are ignored (the current headers stop near 810).
  static constexpr uint32_t kMaxCbid = 4096;

  // Eager: asks CUPTI for the name of each cbid below `limit` and calls
  // `enable(cbid)` for each one in the table. Returns how many cbids CUPTI
  // could name at all (0: naming unsupported, use lazy mode).
  template <typename GetName, typename Enable>
  uint32_t build(CUpti_CallbackDomain domain, uint32_t limit, GetName get_name, Enable enable) {
    uint32_t named = 0;
    for (uint32_t cbid = 1; cbid < limit && cbid < kMaxCbid; ++cbid) {
      const char *name = nullptr;
      if (!get_name(domain, cbid, &name) || !name) continue;
      ++named;
      ApiId id = api_for_cupti_name(domain, name);
      slot(domain, cbid).store(static_cast<uint16_t>(id), std::memory_order_relaxed);
      if (id != ApiId::Unknown) enable(cbid);
    }
    return named;
  }

  // The ApiId for a delivered callback; maps lazily from `function_name` the
  // first time an unmapped cbid is seen.
  ApiId lookup(CUpti_CallbackDomain domain, uint32_t cbid, const char *function_name) {
    if (cbid >= kMaxCbid ||
        (domain != CUPTI_CB_DOMAIN_DRIVER_API && domain != CUPTI_CB_DOMAIN_RUNTIME_API))
      return ApiId::Unknown;
    std::atomic<uint16_t> &s = slot(domain, cbid);
    uint16_t v = s.load(std::memory_order_relaxed);
    if (v != kUnmapped) return static_cast<ApiId>(v);
    ApiId id = function_name ? api_for_cupti_name(domain, function_name) : ApiId::Unknown;
    s.store(static_cast<uint16_t>(id), std::memory_order_relaxed);
    return id;
  }

  void reset() {
    for (auto *t : {driver_, runtime_})
      for (uint32_t i = 0; i < kMaxCbid; ++i) t[i].store(kUnmapped, std::memory_order_relaxed);
  }

  CbidMap() { reset(); }

 private:
  static constexpr uint16_t kUnmapped = 0xfffe;  // distinct from ApiId::Unknown
  std::atomic<uint16_t> &slot(CUpti_CallbackDomain d, uint32_t cbid) {
    return d == CUPTI_CB_DOMAIN_RUNTIME_API ? runtime_[cbid] : driver_[cbid];
  }
  std::atomic<uint16_t> driver_[kMaxCbid];
  std::atomic<uint16_t> runtime_[kMaxCbid];
};

}  // namespace torchseal::cupti
