#include "report/cli/attach_ptrace.h"

#include <dlfcn.h>
#include <elf.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace torchseal::cli::attach {

#if defined(__x86_64__)

namespace {

// How long the thread may take to reach a stop where calling dlopen is
// safe, and how long the calls may take (dlopen runs the shim's and its
// libraries' constructors).
constexpr int kSafeStopTries = 500;
constexpr int kCallTimeoutMs = 60000;
// The strings the calls take sit between the thread's red zone and the
// calls' own stack.
constexpr uint64_t kRedZone = 128;
constexpr uint64_t kScratch = 8192;

void sleep_ms(int ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, nullptr);
}

// Waits for the next stop of `pid` (timeout_ms < 0: forever). 0 stopped,
// -1 exited or error, -2 timed out.
int wait_stop(pid_t pid, int &status, int timeout_ms) {
  for (int waited = 0;; ++waited) {
    pid_t r = waitpid(pid, &status, __WALL | WNOHANG);
    if (r == pid) return WIFSTOPPED(status) ? 0 : -1;
    if (r < 0 && errno != EINTR) return -1;
    if (timeout_ms >= 0 && waited >= timeout_ms) return -2;
    sleep_ms(1);
  }
}

// System calls a thread waits in without holding a lock that dlopen or the
// shim's constructors could need (the malloc arenas, the loader's lock).
bool waiting_syscall(long nr) {
  switch (nr) {
    case SYS_futex:
    case SYS_clock_nanosleep:
    case SYS_nanosleep:
    case SYS_select:
    case SYS_pselect6:
    case SYS_poll:
    case SYS_ppoll:
    case SYS_epoll_wait:
    case SYS_epoll_pwait:
    case SYS_read:
    case SYS_readv:
    case SYS_recvfrom:
    case SYS_recvmsg:
    case SYS_accept:
    case SYS_accept4:
    case SYS_wait4:
    case SYS_waitid:
    case SYS_pause:
    case SYS_rt_sigsuspend:
    case SYS_rt_sigtimedwait:
      return true;
    default:
      return false;
  }
}

bool in_runtime_libraries(const Target &t, uint64_t pc) {
  for (const Mapping &m : t.maps) {
    if (pc < m.start || pc >= m.end) continue;
    size_t slash = m.path.rfind('/');
    std::string b = slash == std::string::npos ? m.path : m.path.substr(slash + 1);
    return b.compare(0, 7, "libc.so") == 0 || b.compare(0, 5, "libc-") == 0 ||
           b.compare(0, 8, "ld-linux") == 0 || b.compare(0, 10, "libpthread") == 0 ||
           b.compare(0, 7, "libdl.s") == 0;
  }
  return false;
}

// Registers as the thread had them: general, and the whole extended state
// (x87, SSE, AVX...), which the called code is free to clobber.
struct Saved {
  user_regs_struct regs{};
  std::vector<unsigned char> xstate;
  size_t xstate_len = 0;
};

bool save(pid_t pid, Saved &s) {
  if (ptrace(PTRACE_GETREGS, pid, nullptr, &s.regs) != 0) return false;
  s.xstate.assign(64 * 1024, 0);
  iovec io{s.xstate.data(), s.xstate.size()};
  if (ptrace(PTRACE_GETREGSET, pid, reinterpret_cast<void *>(NT_X86_XSTATE), &io) == 0) {
    s.xstate_len = io.iov_len;
    return true;
  }
  // Without XSAVE: the FXSAVE area (x87 and SSE) is all there is.
  io.iov_len = sizeof(user_fpregs_struct);
  if (ptrace(PTRACE_GETREGSET, pid, reinterpret_cast<void *>(NT_PRFPREG), &io) != 0) return false;
  s.xstate_len = io.iov_len;
  s.xstate.resize(s.xstate_len);
  return true;
}

bool restore(pid_t pid, const Saved &s) {
  iovec io{const_cast<unsigned char *>(s.xstate.data()), s.xstate_len};
  long set = s.xstate_len == sizeof(user_fpregs_struct) ? NT_PRFPREG : NT_X86_XSTATE;
  bool ok = ptrace(PTRACE_SETREGSET, pid, reinterpret_cast<void *>(set), &io) == 0;
  return ptrace(PTRACE_SETREGS, pid, nullptr, &s.regs) == 0 && ok;
}

class Injector {
 public:
  Injector(const Target &t) : t_(t), pid_(t.pid) {}

  // Seizes the main thread and stops it at a safe point.
  bool stop(std::string &error) {
    if (ptrace(PTRACE_SEIZE, pid_, nullptr, nullptr) != 0) {
      error = refusal(errno);
      return false;
    }
    seized_ = true;
    for (int tries = 0; tries < kSafeStopTries; ++tries) {
      if (ptrace(PTRACE_INTERRUPT, pid_, nullptr, nullptr) != 0) break;
      int st = 0;
      if (wait_stop(pid_, st, 5000) != 0) {
        error = "pid " + std::to_string(pid_) + " did not stop (or exited)";
        return false;
      }
      if (!(st >> 16 == PTRACE_EVENT_STOP)) {
        // A signal arrived first: it is the program's, deliver it.
        ptrace(PTRACE_CONT, pid_, nullptr, reinterpret_cast<void *>(long(WSTOPSIG(st))));
        continue;
      }
      if (!save(pid_, saved_)) {
        error = std::string("cannot read the registers: ") + std::strerror(errno);
        return false;
      }
      const user_regs_struct &r = saved_.regs;
      bool in_syscall = static_cast<long>(r.orig_rax) >= 0;
      if (in_syscall ? waiting_syscall(static_cast<long>(r.orig_rax))
                     : !in_runtime_libraries(t_, r.rip))
        return true;
      // Busy inside libc or the loader (perhaps holding their locks), or in
      // a system call that may hold one: let it run on a little.
      ptrace(PTRACE_CONT, pid_, nullptr, nullptr);
      sleep_ms(2);
    }
    error = "pid " + std::to_string(pid_) +
            " never stopped outside libc and the dynamic linker; try again";
    return false;
  }

  // Calls fn(a0, a1) in the stopped thread; its return value in `ret`.
  bool call(uint64_t fn, uint64_t a0, uint64_t a1, uint64_t &ret, std::string &error) {
    user_regs_struct r = saved_.regs;
    // Below the red zone, 16-aligned, with a return address of 0: the
    // return faults at pc 0, which ends the call.
    uint64_t sp = ((r.rsp - kRedZone - kScratch - 64) & ~0xfULL) - 8;
    uint64_t zero = 0;
    if (!write_memory(pid_, sp, &zero, sizeof zero)) {
      error = std::string("cannot write the thread's stack: ") + std::strerror(errno);
      return false;
    }
    r.rsp = sp;
    r.rip = fn;
    r.rdi = a0;
    r.rsi = a1;
    r.rax = 0;
    r.orig_rax = static_cast<uint64_t>(-1);  // no system call restart on the way in
    if (ptrace(PTRACE_SETREGS, pid_, nullptr, &r) != 0 ||
        ptrace(PTRACE_CONT, pid_, nullptr, nullptr) != 0) {
      error = std::string("cannot start the call: ") + std::strerror(errno);
      return false;
    }
    for (;;) {
      int st = 0;
      int w = wait_stop(pid_, st, kCallTimeoutMs);
      if (w == -2) {
        error = "the call into pid " + std::to_string(pid_) + " did not return in time";
        hung_ = true;
        return false;
      }
      if (w != 0) {
        error = "pid " + std::to_string(pid_) + " exited during the attach";
        seized_ = false;
        return false;
      }
      int sig = WSTOPSIG(st);
      user_regs_struct now{};
      ptrace(PTRACE_GETREGS, pid_, nullptr, &now);
      if (sig == SIGSEGV && now.rip == 0) {
        ret = now.rax;
        return true;
      }
      // A signal for the program meanwhile: kept for after the restore.
      if (st >> 16 == 0 && sig != SIGSTOP && sig != SIGTRAP) pending_signal_ = sig;
      if (sig == SIGSEGV) {
        error = "the call faulted in pid " + std::to_string(pid_);
        hung_ = true;
        return false;
      }
      ptrace(PTRACE_CONT, pid_, nullptr, nullptr);
    }
  }

  // Puts the registers back and lets the thread go (restarting the system
  // call it was in). After a call that never returned, the thread is left
  // as it is: its registers can no longer be put back safely.
  void release() {
    if (!seized_) return;
    if (!hung_) restore(pid_, saved_);
    ptrace(PTRACE_DETACH, pid_, nullptr, reinterpret_cast<void *>(long(pending_signal_)));
    seized_ = false;
  }

  ~Injector() { release(); }

  // kScratch bytes the calls do not use, below the red zone.
  uint64_t scratch() const { return (saved_.regs.rsp - kRedZone - kScratch) & ~0xfULL; }

 private:
  std::string refusal(int err) const {
    std::string who = "pid " + std::to_string(pid_);
    if (err == EPERM || err == EACCES) {
      int scope = ptrace_scope();
      if (scope == 3) return "ptrace is disabled on this machine (kernel.yama.ptrace_scope = 3)";
      if (scope == 2)
        return "kernel.yama.ptrace_scope = 2: only a process with CAP_SYS_PTRACE may attach "
               "(run as root, or lower the setting)";
      if (scope == 1)
        return "kernel.yama.ptrace_scope = 1 forbids attaching to " + who +
               ", which is not a child of torchseal (run with CAP_SYS_PTRACE, as root, or set "
               "kernel.yama.ptrace_scope = 0)";
      return "permission denied to ptrace " + who + " (attach as its user, or with CAP_SYS_PTRACE)";
    }
    if (err == ESRCH) return "no process with pid " + std::to_string(pid_);
    return "cannot ptrace " + who + ": " + std::strerror(err);
  }

  const Target &t_;
  pid_t pid_;
  Saved saved_;
  bool seized_ = false, hung_ = false;
  int pending_signal_ = 0;
};

std::string read_c_string(pid_t pid, uint64_t addr) {
  std::string out;
  char buf[256];
  for (int i = 0; i < 16 && addr; ++i, addr += sizeof buf) {
    if (!read_memory(pid, addr, buf, sizeof buf)) break;
    size_t n = strnlen(buf, sizeof buf);
    out.append(buf, n);
    if (n < sizeof buf) break;
  }
  return out;
}

}  // namespace

bool inject_with_ptrace(const Target &t, const std::string &shim, const std::string &request,
                        std::string &error) {
  // dlopen is in libc since glibc 2.34, in libdl before.
  std::string libc = mapped_file(t, {"libc.so", "libc-"});
  std::string libdl = mapped_file(t, {"libdl.so", "libdl-"});
  uint64_t dlopen_at = libc.empty() ? 0 : symbol_address(t, libc, "dlopen");
  uint64_t dlerror_at = libc.empty() ? 0 : symbol_address(t, libc, "dlerror");
  if (!dlopen_at && !libdl.empty()) {
    dlopen_at = symbol_address(t, libdl, "dlopen");
    dlerror_at = symbol_address(t, libdl, "dlerror");
  }
  if (!dlopen_at) {
    error =
        "cannot find dlopen in pid " + std::to_string(t.pid) + " (no glibc libc or libdl mapped)";
    return false;
  }
  if (shim.size() + request.size() + 32 > kScratch) {
    error = "the shim's path and the request are too long";
    return false;
  }
  Injector in(t);
  if (!in.stop(error)) return false;
  uint64_t path_at = in.scratch(), request_at = (path_at + shim.size() + 1 + 15) & ~0xfULL;
  if (!write_memory(t.pid, path_at, shim.c_str(), shim.size() + 1) ||
      !write_memory(t.pid, request_at, request.c_str(), request.size() + 1)) {
    error =
        std::string("cannot write into pid ") + std::to_string(t.pid) + ": " + std::strerror(errno);
    return false;
  }
  uint64_t handle = 0;
  if (!in.call(dlopen_at, path_at, RTLD_NOW | RTLD_LOCAL, handle, error)) return false;
  if (!handle) {
    uint64_t msg = 0;
    std::string why;
    if (dlerror_at && in.call(dlerror_at, 0, 0, msg, error)) why = read_c_string(t.pid, msg);
    error = "dlopen(" + shim + ") failed in pid " + std::to_string(t.pid) +
            (why.empty() ? std::string() : ": " + why);
    return false;
  }
  // The entry point, from the shim as the process mapped it.
  Target now;
  std::string ignored;
  if (!inspect(t.pid, now, ignored) || now.shim_mapped.empty()) {
    error = "the shim is not mapped in pid " + std::to_string(t.pid) + " after dlopen";
    return false;
  }
  uint64_t entry = symbol_address(now, now.shim_mapped, "torchseal_attach");
  if (!entry) {
    error = now.shim_mapped + " has no torchseal_attach (an older shim?)";
    return false;
  }
  uint64_t rc = 0;
  if (!in.call(entry, request_at, 0, rc, error)) return false;
  if (static_cast<int>(rc) != 0) {
    error = "the shim in pid " + std::to_string(t.pid) + " refused the request";
    return false;
  }
  in.release();
  return true;
}

#else

bool inject_with_ptrace(const Target &, const std::string &, const std::string &,
                        std::string &error) {
  error =
      "before Python 3.14, attaching is implemented for x86_64 only; on this machine "
      "it needs Python 3.14+ (sys.remote_exec)";
  return false;
}

#endif

}  // namespace torchseal::cli::attach
