// Where log lines go: stderr, unless `torchseal attach` points them at a
// file the CLI forwards, so an attached process's own output stays its own.
#pragma once

namespace torchseal::log {

// The descriptor every later line is written to (STDERR_FILENO to go back);
// returns the one it replaces.
int set_fd(int fd);

}  // namespace torchseal::log
