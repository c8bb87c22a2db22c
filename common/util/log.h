// One-line diagnostics on stderr, prefixed "torchseal:". Uses write(2) and a
// stack buffer only, so it is safe from interposers, atfork handlers and the
// watcher thread, and never allocates.
#pragma once

namespace torchseal::log {

enum class Level : int { Off = 0, Error = 1, Warn = 2, Info = 3, Debug = 4 };

// Where every later line goes: stderr, unless `torchseal attach` points the
// lines at a file the CLI forwards, so an attached process's own output
// stays its own. STDERR_FILENO goes back; returns the descriptor replaced.
int set_fd(int fd);
void set_level(Level level);
Level level();

[[gnu::format(printf, 1, 2)]] void error(const char *fmt, ...);
[[gnu::format(printf, 1, 2)]] void warn(const char *fmt, ...);
[[gnu::format(printf, 1, 2)]] void info(const char *fmt, ...);
[[gnu::format(printf, 1, 2)]] void debug(const char *fmt, ...);

}  // namespace torchseal::log
