// Unit check of the CBID <-> API-table derivation, against the CUPTI headers
// themselves (the cbid enums in cupti_driver_cbid.h / cupti_runtime_cbid.h
// are read as text: their enumerator names are what cuptiGetCallbackName
// returns). Usage: test_cbid_map DRIVER_CBID_H RUNTIME_CBID_H
#include <cstdio>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "cupti_backend/cbid_map.h"
#include "expect.h"
#include "cupti_backend/param_decode.h"

using namespace torchseal;
using namespace torchseal::cupti;

namespace {

// cbid -> name, as cuptiGetCallbackName would answer.
std::map<uint32_t, std::string> read_cbids(const char *path, const char *prefix) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  std::regex re(std::string(prefix) + R"((\w+)\s*=\s*(\d+))");
  std::map<uint32_t, std::string> out;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), re); it != std::sregex_iterator(); ++it) {
    std::string name = (*it)[1];
    if (name == "INVALID" || name == "SIZE" || name == "FORCE_INT") continue;
    out[static_cast<uint32_t>(std::stoul((*it)[2]))] = name;
  }
  return out;
}

void check_domain(CUpti_CallbackDomain domain, const std::map<uint32_t, std::string> &names,
                  Layer layer) {
  CbidMap map;
  std::set<ApiId> enabled;
  uint32_t named = map.build(
      domain, CbidMap::kMaxCbid,
      [&](CUpti_CallbackDomain, uint32_t cbid, const char **name) {
        auto it = names.find(cbid);
        if (it == names.end()) return false;
        *name = it->second.c_str();
        return true;
      },
      [&](uint32_t cbid) {
        ApiId id = map.lookup(domain, cbid, nullptr);
        expect(id != ApiId::Unknown, "enabled cbid " + std::to_string(cbid) + " maps to an API");
        expect(enabled.insert(id).second,
               "one cbid per API: " + std::string(api_name(id)) + " enabled twice");
      });
  expect(named == names.size(), "every header cbid named");
  for (uint16_t i = 0; i < static_cast<uint16_t>(ApiId::Count); ++i) {
    ApiId id = static_cast<ApiId>(i);
    if (api_info(id).layer != layer) continue;
    expect(enabled.count(id) == 1,
           "table row " + std::string(api_name(id)) + " has a CUPTI callback id");
  }
  for (ApiId id : enabled) expect(api_info(id).layer == layer, "no other layer's rows enabled");
  // Lazy mode: the same answers from functionName alone.
  CbidMap lazy;
  for (const auto &[cbid, name] : names)
    expect(lazy.lookup(domain, cbid, name.c_str()) == map.lookup(domain, cbid, nullptr),
           "lazy map agrees for " + name);
}

}  // namespace

int main(int argc, char **argv) {
  if (argc != 3) {
    std::printf("usage: %s cupti_driver_cbid.h cupti_runtime_cbid.h\n", argv[0]);
    return 2;
  }
  expect(strip_runtime_version("cudaMalloc_v3020") == "cudaMalloc", "strip _v3020");
  expect(strip_runtime_version("cudaMallocAsync_ptsz_v11020") == "cudaMallocAsync_ptsz",
         "strip keeps _ptsz");
  expect(strip_runtime_version("cudaMalloc") == "cudaMalloc", "no suffix");
  expect(strip_runtime_version("cuda_vx") == "cuda_vx", "non-numeric suffix kept");
  expect(api_for_cupti_name(CUPTI_CB_DOMAIN_DRIVER_API, "cuMemAlloc_v2") == ApiId::cuMemAlloc_v2,
         "driver names are exact");
  expect(api_for_cupti_name(CUPTI_CB_DOMAIN_DRIVER_API, "cuMemAlloc") == ApiId::Unknown,
         "cuMemAlloc (v1) is not cuMemAlloc_v2");
  expect(api_for_cupti_name(CUPTI_CB_DOMAIN_RUNTIME_API, "cuMemAlloc_v2") == ApiId::Unknown,
         "a driver name in the runtime domain is not mapped");
  expect(api_for_cupti_name(CUPTI_CB_DOMAIN_DRIVER_API, "cudaMalloc") == ApiId::Unknown,
         "a runtime name in the driver domain is not mapped");

  check_domain(CUPTI_CB_DOMAIN_DRIVER_API, read_cbids(argv[1], "CUPTI_DRIVER_TRACE_CBID_"),
               Layer::Driver);
  check_domain(CUPTI_CB_DOMAIN_RUNTIME_API, read_cbids(argv[2], "CUPTI_RUNTIME_TRACE_CBID_"),
               Layer::Runtime);

  // Every driver row has a params decoder (a zeroed struct, failed call).
  alignas(16) unsigned char zeros[512] = {};
  for (uint16_t i = 0; i < static_cast<uint16_t>(ApiId::Count); ++i) {
    ApiId id = static_cast<ApiId>(i);
    if (api_info(id).layer != Layer::Driver) continue;
    CallArgs a;
    expect(decode_driver_params(id, zeros, false, a),
           "decoder for " + std::string(api_name(id)));
  }
  // Pitch: the driver's pitch times the rows, only once the call succeeded.
  {
    CUdeviceptr ptr = 0x1000;
    size_t pitch = 1024;
    struct {
      CUdeviceptr *dptr;
      size_t *pPitch;
      size_t WidthInBytes, Height;
      unsigned int ElementSizeBytes;
    } p{&ptr, &pitch, 1000, 16, 4};
    CallArgs ok, failed;
    decode_driver_params(ApiId::cuMemAllocPitch_v2, &p, true, ok);
    decode_driver_params(ApiId::cuMemAllocPitch_v2, &p, false, failed);
    expect(ok.addr == 0x1000 && ok.size == 1024 * 16, "pitch allocation size");
    expect(failed.addr == 0 && failed.size == 1000 * 16, "failed pitch: requested bytes, no addr");
  }
  // A _ptsz entry point's stream 0 is the calling thread's per-thread
  // default stream (which can be captured), in both backends' terms.
  {
    struct {
      CUdeviceptr *dptr;
      size_t bytesize;
      CUstream hStream;
    } p{nullptr, 256, nullptr};
    CallArgs pt, legacy, named;
    decode_driver_params(ApiId::cuMemAllocAsync_ptsz, &p, false, pt);
    decode_driver_params(ApiId::cuMemAllocAsync, &p, false, legacy);
    p.hStream = reinterpret_cast<CUstream>(0x1234);
    decode_driver_params(ApiId::cuMemAllocAsync_ptsz, &p, false, named);
    expect(pt.stream == reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD),
           "_ptsz stream 0: the per-thread stream");
    expect(legacy.stream == 0, "stream 0: the legacy stream");
    expect(named.stream == 0x1234, "_ptsz named stream kept");
    expect(call_args(ApiId::cudaFreeAsync_ptsz, 1, 0, 0).stream ==
               reinterpret_cast<uint64_t>(cudaStreamPerThread),
           "hooks: cudaFreeAsync_ptsz stream 0");
    expect(call_args(ApiId::cudaFreeAsync, 1, 0, 0).stream == 0, "hooks: cudaFreeAsync stream 0");
  }
  if (g_failures) {
    std::printf("%d failure(s)\n", g_failures);
    return 1;
  }
  std::printf("PASS: cbid map, %d table rows\n", static_cast<int>(ApiId::Count));
  return 0;
}
