#include "cupti_backend/cbid_map.h"

namespace torchseal::cupti {

static_assert(static_cast<uint16_t>(ApiId::Count) < 0xfffe, "ApiId must fit beside kUnmapped");

std::string_view strip_runtime_version(std::string_view name) {
  size_t at = name.rfind("_v");
  if (at == std::string_view::npos || at + 2 >= name.size()) return name;
  for (size_t i = at + 2; i < name.size(); ++i)
    if (name[i] < '0' || name[i] > '9') return name;
  return name.substr(0, at);
}

ApiId api_for_cupti_name(CUpti_CallbackDomain domain, std::string_view name) {
  Layer want;
  if (domain == CUPTI_CB_DOMAIN_RUNTIME_API) {
    // Only runtime names carry the ABI-version suffix; driver names such as
    // cuMemAlloc_v2 are table names as they stand.
    name = strip_runtime_version(name);
    want = Layer::Runtime;
  } else if (domain == CUPTI_CB_DOMAIN_DRIVER_API) {
    want = Layer::Driver;
  } else {
    return ApiId::Unknown;
  }
  ApiId id = api_from_name(name);
  if (id == ApiId::Unknown || api_info(id).layer != want) return ApiId::Unknown;
  return id;
}

}  // namespace torchseal::cupti
