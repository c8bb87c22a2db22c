// Fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT): flush the history
// so a crash loses at most what the writer could not reach in a bounded wait,
// then hand the signal on unchanged, so the program still dies the way it
// would have (core dump, "killed by signal" status) or its own handler runs.
#pragma once

namespace torchseal {

void install_crash_flush();
// The program's own handlers back, where ours still stand (detach).
void uninstall_crash_flush();

}  // namespace torchseal
