#include "common/util/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace torchseal::log {
namespace {

std::atomic<int> g_level{static_cast<int>(Level::Warn)};
std::atomic<int> g_fd{STDERR_FILENO};

void emit(Level lvl, const char *fmt, va_list ap) {
  if (static_cast<int>(lvl) > g_level.load(std::memory_order_relaxed)) return;
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "torchseal: ");
  int m = vsnprintf(buf + n, sizeof buf - n - 1, fmt, ap);
  if (m < 0) return;
  size_t len = static_cast<size_t>(n) + static_cast<size_t>(m);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  // A message must stay one line even if it embeds user input.
  for (size_t i = static_cast<size_t>(n); i < len; ++i)
    if (buf[i] == '\n' || buf[i] == '\r') buf[i] = ' ';
  buf[len++] = '\n';
  ssize_t ignored = ::write(g_fd.load(std::memory_order_relaxed), buf, len);
  (void)ignored;
}

}  // namespace

int set_fd(int fd) { return g_fd.exchange(fd); }

void set_level(Level level) { g_level.store(static_cast<int>(level), std::memory_order_relaxed); }
Level level() { return static_cast<Level>(g_level.load(std::memory_order_relaxed)); }

#define TS_LOG_FN(fn, lvl)        \
  void fn(const char *fmt, ...) { \
    va_list ap;                   \
    va_start(ap, fmt);            \
    emit(Level::lvl, fmt, ap);    \
    va_end(ap);                   \
  }
TS_LOG_FN(error, Error)
TS_LOG_FN(warn, Warn)
TS_LOG_FN(info, Info)
TS_LOG_FN(debug, Debug)
#undef TS_LOG_FN

}  // namespace torchseal::log
