#include "shim/runtime/crash_flush.h"

#include <atomic>
#include <cerrno>
#include <csignal>

#include "shim/runtime/service_thread.h"

namespace torchseal {
namespace {

constexpr int kSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
constexpr int kFlushTimeoutMs = 500;
struct sigaction g_previous[65];
bool g_installed[65];
std::atomic<int> g_in_handler{0};

void on_fatal(int signo, siginfo_t *info, void *uctx) {
  int saved = errno;
  // Only the first fatal signal flushes: a second thread faulting, or a fault
  // inside the flush, goes straight to the original behaviour.
  if (g_in_handler.fetch_add(1) == 0) history::crash_flush(kFlushTimeoutMs);
  struct sigaction &prev = g_previous[signo];
  sigaction(signo, &prev, nullptr);
  if ((prev.sa_flags & SA_SIGINFO) && prev.sa_sigaction) {
    prev.sa_sigaction(signo, info, uctx);
  } else if (!(prev.sa_flags & SA_SIGINFO) && prev.sa_handler != SIG_DFL &&
             prev.sa_handler != SIG_IGN && prev.sa_handler) {
    prev.sa_handler(signo);
  } else {
    // Default action: for a fault, returning re-executes the instruction
    // under SIG_DFL; for abort() and raise(), re-raise now.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signo);
    pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
    if (info && info->si_code <= 0) raise(signo);
  }
  errno = saved;
}

}  // namespace

void install_crash_flush() {
  for (int sig : kSignals) {
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) != 0) continue;
    // A program that ignores the signal keeps ignoring it.
    if (!(current.sa_flags & SA_SIGINFO) && current.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    g_installed[sig] = sigaction(sig, &sa, &g_previous[sig]) == 0;
  }
}

void uninstall_crash_flush() {
  for (int sig : kSignals) {
    if (!g_installed[sig]) continue;
    g_installed[sig] = false;
    struct sigaction current {};
    if (sigaction(sig, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
        current.sa_sigaction == on_fatal)
      sigaction(sig, &g_previous[sig], nullptr);
  }
}

}  // namespace torchseal
