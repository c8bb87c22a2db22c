// Training steps from NVTX ranges (TORCHSEAL_STEP_RANGE=regex).
//
// NVTX v3 is header-only: each library that uses it loads the tool named by
// NVTX_INJECTION64_PATH and calls its InitializeInjectionNvtx2 — preloading
// nvtxRangePushA sees nothing. So when a step range is configured and the
// user has not named another NVTX tool (Nsight sets the variable too; never
// overwrite it), the shim names itself at load time.
#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <cwchar>
#include <mutex>
#include <regex>
#include <string>
#include <unordered_map>

#include <nvtx3/nvToolsExt.h>

#include "common/settings/config.h"
#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "shim/core/recorder.h"
#include "shim/runtime/lifecycle.h"

namespace torchseal {
namespace {

std::regex *g_step_re = nullptr;
std::once_flag g_re_once;

// The pattern comes from the parsed settings, which were validated there; a
// range pushed before the first CUDA call is judged too (its pop may come
// after it: the first step of a loop).
bool matches(const std::string &name) {
  std::call_once(g_re_once, [] {
    const Config *cfg = parsed_config();
    if (!cfg || cfg->step_range.empty()) return;
    try {
      g_step_re = new std::regex(cfg->step_range, std::regex::ECMAScript | std::regex::optimize);
    } catch (const std::regex_error &e) {
      log::error("TORCHSEAL_STEP_RANGE: %s; NVTX steps are off", e.what());
    }
  });
  return g_step_re && std::regex_search(name, *g_step_re);
}

std::string narrow(const wchar_t *w) {
  std::string s;
  if (!w) return s;
  for (; *w && s.size() < 1024; ++w) s += (*w < 0x80) ? static_cast<char>(*w) : '?';
  return s;
}

std::string message_of(const nvtxEventAttributes_t *a) {
  if (!a) return {};
  switch (a->messageType) {
    case NVTX_MESSAGE_TYPE_ASCII:
      return a->message.ascii ? a->message.ascii : "";
    case NVTX_MESSAGE_TYPE_UNICODE:
      return narrow(a->message.unicode);
    // Registered strings are handles we returned: pointers to our own copies.
    case NVTX_MESSAGE_TYPE_REGISTERED:
      return a->message.registered ? reinterpret_cast<const char *>(a->message.registered) : "";
    default:
      return {};
  }
}

// Per-thread stack of "is this pushed range a step?" bits (push/pop ranges
// nest per thread), and a table for start/end ranges (which may cross threads).
thread_local uint64_t t_push_bits = 0;
thread_local int t_push_depth = 0;
std::mutex g_ranges_mutex;
std::unordered_map<uint64_t, bool> g_started;
// A DataLoader worker forked while another thread starts or ends a range.
__attribute__((constructor(102))) void hold_ranges_across_fork() {
  hold_across_fork<g_ranges_mutex>();
}
std::atomic<uint64_t> g_next_range{1};

void step_ended() {
  if (is_active()) recorder().on_step();
}

int push(const std::string &name) {
  bool step = matches(name);
  if (t_push_depth < 64) {
    if (step)
      t_push_bits |= (1ull << t_push_depth);
    else
      t_push_bits &= ~(1ull << t_push_depth);
  }
  return t_push_depth++;
}

int pop() {
  if (t_push_depth <= 0) return -1;
  --t_push_depth;
  if (t_push_depth < 64 && (t_push_bits >> t_push_depth & 1)) step_ended();
  return t_push_depth;
}

nvtxRangeId_t start(const std::string &name) {
  uint64_t id = g_next_range.fetch_add(1);
  if (matches(name)) {
    std::lock_guard<std::mutex> lock(g_ranges_mutex);
    g_started[id] = true;
  }
  return id;
}

void end(nvtxRangeId_t id) {
  bool step = false;
  {
    std::lock_guard<std::mutex> lock(g_ranges_mutex);
    auto it = g_started.find(id);
    if (it != g_started.end()) {
      step = true;
      g_started.erase(it);
    }
  }
  if (step) step_ended();
}

// ---- the callbacks we install ----
int NVTX_API cb_push_a(const char *m) { return push(m ? m : ""); }
int NVTX_API cb_push_w(const wchar_t *m) { return push(narrow(m)); }
int NVTX_API cb_push_ex(const nvtxEventAttributes_t *a) { return push(message_of(a)); }
int NVTX_API cb_pop() { return pop(); }
nvtxRangeId_t NVTX_API cb_start_a(const char *m) { return start(m ? m : ""); }
nvtxRangeId_t NVTX_API cb_start_w(const wchar_t *m) { return start(narrow(m)); }
nvtxRangeId_t NVTX_API cb_start_ex(const nvtxEventAttributes_t *a) { return start(message_of(a)); }
void NVTX_API cb_end(nvtxRangeId_t id) { end(id); }
int NVTX_API cb_dom_push(nvtxDomainHandle_t, const nvtxEventAttributes_t *a) {
  return push(message_of(a));
}
int NVTX_API cb_dom_pop(nvtxDomainHandle_t) { return pop(); }
nvtxRangeId_t NVTX_API cb_dom_start(nvtxDomainHandle_t, const nvtxEventAttributes_t *a) {
  return start(message_of(a));
}
void NVTX_API cb_dom_end(nvtxDomainHandle_t, nvtxRangeId_t id) { end(id); }
nvtxStringHandle_t NVTX_API cb_dom_register_a(nvtxDomainHandle_t, const char *s) {
  return reinterpret_cast<nvtxStringHandle_t>(strdup(s ? s : ""));
}
nvtxStringHandle_t NVTX_API cb_dom_register_w(nvtxDomainHandle_t, const wchar_t *s) {
  return reinterpret_cast<nvtxStringHandle_t>(strdup(narrow(s).c_str()));
}
nvtxDomainHandle_t NVTX_API cb_domain_create_a(const char *name) {
  return reinterpret_cast<nvtxDomainHandle_t>(strdup(name ? name : ""));
}
nvtxDomainHandle_t NVTX_API cb_domain_create_w(const wchar_t *name) {
  return reinterpret_cast<nvtxDomainHandle_t>(strdup(narrow(name).c_str()));
}

using GetModuleFunctionTable = int(NVTX_API *)(NvtxCallbackModule, NvtxFunctionTable *,
                                               unsigned int *);

bool install(GetModuleFunctionTable get, NvtxCallbackModule module,
             std::initializer_list<std::pair<unsigned, NvtxFunctionPointer>> slots) {
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!get(module, &table, &size) || !table) return false;
  for (const auto &s : slots)
    if (s.first < size && table[s.first]) *table[s.first] = s.second;
  return true;
}

template <typename F>
NvtxFunctionPointer fp(F f) {
  return reinterpret_cast<NvtxFunctionPointer>(f);
}

// At load: name ourselves as the NVTX tool if steps come from NVTX ranges.
// This cannot wait for the parsed settings (the first CUDA call): the NVTX
// library reads NVTX_INJECTION64_PATH at its first call, which may come first.
__attribute__((constructor)) void offer_nvtx_injection() {
  if (!settings::from_environment(settings::spec(settings::Id::step_range)) ||
      getenv("NVTX_INJECTION64_PATH"))
    return;
  Dl_info info;
  if (dladdr(reinterpret_cast<void *>(&offer_nvtx_injection), &info) && info.dli_fname)
    setenv("NVTX_INJECTION64_PATH", info.dli_fname, 0);
}

}  // namespace
}  // namespace torchseal

using namespace torchseal;

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t getExportTable) {
  if (!getExportTable) return 0;
  auto *callbacks =
      static_cast<const NvtxExportTableCallbacks *>(getExportTable(NVTX_ETID_CALLBACKS));
  if (!callbacks || callbacks->struct_size < sizeof(NvtxExportTableCallbacks)) return 0;
  auto get = callbacks->GetModuleFunctionTable;
  bool ok = install(get, NVTX_CB_MODULE_CORE,
                    {{NVTX_CBID_CORE_RangePushA, fp(cb_push_a)},
                     {NVTX_CBID_CORE_RangePushW, fp(cb_push_w)},
                     {NVTX_CBID_CORE_RangePushEx, fp(cb_push_ex)},
                     {NVTX_CBID_CORE_RangePop, fp(cb_pop)},
                     {NVTX_CBID_CORE_RangeStartA, fp(cb_start_a)},
                     {NVTX_CBID_CORE_RangeStartW, fp(cb_start_w)},
                     {NVTX_CBID_CORE_RangeStartEx, fp(cb_start_ex)},
                     {NVTX_CBID_CORE_RangeEnd, fp(cb_end)}});
  install(get, NVTX_CB_MODULE_CORE2,
          {{NVTX_CBID_CORE2_DomainRangePushEx, fp(cb_dom_push)},
           {NVTX_CBID_CORE2_DomainRangePop, fp(cb_dom_pop)},
           {NVTX_CBID_CORE2_DomainRangeStartEx, fp(cb_dom_start)},
           {NVTX_CBID_CORE2_DomainRangeEnd, fp(cb_dom_end)},
           {NVTX_CBID_CORE2_DomainRegisterStringA, fp(cb_dom_register_a)},
           {NVTX_CBID_CORE2_DomainRegisterStringW, fp(cb_dom_register_w)},
           {NVTX_CBID_CORE2_DomainCreateA, fp(cb_domain_create_a)},
           {NVTX_CBID_CORE2_DomainCreateW, fp(cb_domain_create_w)}});
  return ok ? 1 : 0;
}
