#include "shim/runtime/signals.h"

#include <cerrno>
#include <csignal>

#include "common/util/log.h"
#include "shim/core/thread_buffers.h"

namespace torchseal {
namespace {

struct sigaction g_previous;
int g_signo = 0;

void on_dump_signal(int signo, siginfo_t *info, void *uctx) {
  int saved = errno;
  history::request_dump("signal");
  if (g_previous.sa_flags & SA_SIGINFO) {
    if (g_previous.sa_sigaction) g_previous.sa_sigaction(signo, info, uctx);
  } else if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
             g_previous.sa_handler) {
    g_previous.sa_handler(signo);
  }
  errno = saved;
}

}  // namespace

void install_dump_signal(int signo) {
  if (!signo) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_dump_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  if (sigaction(signo, &sa, &g_previous) != 0) {
    log::warn("cannot install the dump handler for signal %d; on-demand dumps are off", signo);
    return;
  }
  g_signo = signo;
}

void uninstall_dump_signal() {
  if (!g_signo) return;
  // Only if ours is still the handler: one the program installed since stays.
  struct sigaction current {};
  if (sigaction(g_signo, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) &&
      current.sa_sigaction == on_dump_signal)
    sigaction(g_signo, &g_previous, nullptr);
  g_signo = 0;
}

}  // namespace torchseal
