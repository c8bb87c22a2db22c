// The on-demand dump signal (TORCHSEAL_SIGNAL, SIGUSR1 by default). The
// handler is async-signal-safe: it only pokes the writer thread, which writes
// P.<n>.json / P.<n>.txt while the program keeps running. A handler the
// program installed before us is still called.
#pragma once

namespace torchseal {

void install_dump_signal(int signo);  // 0: none
// Puts the program's own handler back, unless it replaced ours since
// (`torchseal attach` detaching).
void uninstall_dump_signal();

}  // namespace torchseal
