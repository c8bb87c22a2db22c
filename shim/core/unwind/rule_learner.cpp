#include "shim/core/unwind/rule_learner.h"

#include <dlfcn.h>
#include <ucontext.h>

#include <cstring>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

namespace torchseal::unwind {
namespace {

// Types and register numbers come from the header; the functions are found
// at run time so the shim keeps no link dependency on libunwind.
struct Api {
  int (*init_local)(unw_cursor_t *, unw_context_t *) = nullptr;
  int (*step)(unw_cursor_t *) = nullptr;
  int (*get_reg)(unw_cursor_t *, unw_regnum_t, unw_word_t *) = nullptr;
  int (*get_save_loc)(unw_cursor_t *, int, unw_save_loc_t *) = nullptr;
  int (*is_signal_frame)(unw_cursor_t *) = nullptr;
  int (*get_proc_info)(unw_cursor_t *, unw_proc_info_t *) = nullptr;
};
Api g_api;

#define TS_UNW_STR2(x) #x
#define TS_UNW_STR(x) TS_UNW_STR2(x)

template <typename F>
bool resolve(void *h, F &fn, const char *name) {
  fn = reinterpret_cast<F>(dlsym(h, name));
  return fn != nullptr;
}

// GCC realigns an over-aligned frame with `and $-N, %rsp` and then describes
// the CFA with an expression: no fixed offset from rsp exists. Scanning the
// prologue for that instruction may over-match (bytes inside another
// instruction); that only costs speed.
bool realigns_stack(uint64_t start, uint64_t ip) {
  if (!start || start >= ip) return false;
  uint64_t end = ip - start > 64 ? start + 64 : ip;
  const auto *p = reinterpret_cast<const unsigned char *>(start);
  for (uint64_t i = 0; start + i + 3 <= end; ++i)
    if (p[i] == 0x48 && (p[i + 1] == 0x83 || p[i + 1] == 0x81) && p[i + 2] == 0xe4) return true;
  return false;
}

FrameRule fallback() { return {RuleKind::Fallback, false, 0, 0}; }

}  // namespace

bool learner_init(void *h) {
  Api a;
  bool ok = resolve(h, a.init_local, TS_UNW_STR(unw_init_local)) &&
            resolve(h, a.step, TS_UNW_STR(unw_step)) &&
            resolve(h, a.get_reg, TS_UNW_STR(unw_get_reg)) &&
            resolve(h, a.get_save_loc, TS_UNW_STR(unw_get_save_loc)) &&
            resolve(h, a.is_signal_frame, TS_UNW_STR(unw_is_signal_frame)) &&
            resolve(h, a.get_proc_info, TS_UNW_STR(unw_get_proc_info));
  if (ok) g_api = a;
  return ok;
}

FrameRule learn_rule(uint64_t ip, uint64_t rsp, uint64_t rbp, uint64_t stack_hi) {
  if (!g_api.step) return fallback();
  // libunwind's local context is a ucontext_t; only the three registers the
  // walker tracks are known, which is all a CFA rule of rsp or rbp needs.
  unw_context_t uc;
  memset(&uc, 0, sizeof uc);
  uc.uc_mcontext.gregs[REG_RIP] = static_cast<greg_t>(ip);
  uc.uc_mcontext.gregs[REG_RSP] = static_cast<greg_t>(rsp);
  uc.uc_mcontext.gregs[REG_RBP] = static_cast<greg_t>(rbp);
  unw_cursor_t cur;
  if (g_api.init_local(&cur, &uc) < 0) return fallback();
  if (g_api.is_signal_frame(&cur) > 0) return fallback();
  unw_proc_info_t pi;
  memset(&pi, 0, sizeof pi);
  bool have_pi = g_api.get_proc_info(&cur, &pi) == 0;

  int r = g_api.step(&cur);
  // libunwind's own backtrace stops here too (no caller, or no unwind info).
  if (r <= 0) return {RuleKind::End, false, 0, 0};

  unw_word_t cfa = 0, next_ip = 0, next_rbp = 0;
  if (g_api.get_reg(&cur, UNW_REG_SP, &cfa) < 0 || g_api.get_reg(&cur, UNW_REG_IP, &next_ip) < 0 ||
      g_api.get_reg(&cur, UNW_X86_64_RBP, &next_rbp) < 0)
    return fallback();
  if (cfa <= rsp || cfa > stack_hi) return fallback();

  // Where the caller's rbp was saved: a stack slot of this frame, or nowhere
  // (the register still holds it; libunwind then points into our context).
  unw_save_loc_t loc;
  memset(&loc, 0, sizeof loc);
  int32_t rbp_off = 0;
  if (g_api.get_save_loc(&cur, UNW_X86_64_RBP, &loc) == 0 && loc.type == UNW_SLT_MEMORY) {
    auto a = static_cast<uint64_t>(loc.u.addr);
    bool in_context =
        a >= reinterpret_cast<uint64_t>(&uc) && a < reinterpret_cast<uint64_t>(&uc) + sizeof uc;
    if (!in_context) {
      if (a < rsp || a + 8 > cfa) return fallback();
      rbp_off = static_cast<int32_t>(static_cast<int64_t>(a) - static_cast<int64_t>(cfa));
    }
  } else if (loc.type == UNW_SLT_REG) {
    return fallback();
  }

  FrameRule rule;
  if (rbp_off == -16 && cfa == rbp + 16) {
    rule = FrameRule::frame_pointer();
  } else {
    if (have_pi && realigns_stack(pi.start_ip, ip)) return fallback();
    uint64_t off = cfa - rsp;
    if (off > static_cast<uint64_t>(FrameRule::kMaxOffset)) return fallback();
    rule = {RuleKind::Step, false, static_cast<int32_t>(off), rbp_off};
  }

  // The rule must reproduce what libunwind found, from the same registers.
  uint64_t c = (rule.rbp_base ? rbp : rsp) + static_cast<uint64_t>(rule.cfa_off);
  uint64_t got_ip = *reinterpret_cast<const uint64_t *>(c - 8);
  uint64_t got_rbp =
      rule.rbp_off ? *reinterpret_cast<const uint64_t *>(c + static_cast<int64_t>(rule.rbp_off))
                   : rbp;
  if (c != cfa || got_ip != next_ip || got_rbp != next_rbp) return fallback();
  return rule;
}

}  // namespace torchseal::unwind
