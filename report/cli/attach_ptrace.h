// `torchseal attach` before CPython 3.14: the shim is loaded with ptrace,
// no debugger needed (docs/attach.md, "How it gets in"). The main thread is
// stopped where nothing the calls need can be held (outside libc and the
// dynamic linker, or blocked in a waiting system call), made to call
// dlopen(shim) and torchseal_attach(request), and put back exactly as it
// was: general and vector registers, and the system call it was in, which
// restarts. torchseal_attach only queues a pending call: the late start
// itself runs later on that thread, at a Python safe point, GIL held.
// x86_64 only.
#pragma once

#include <string>

#include "report/cli/attach_target.h"

namespace torchseal::cli::attach {

// False with `error` (one line) when the shim could not be loaded or the
// request not queued; the process runs on either way.
bool inject_with_ptrace(const Target &t, const std::string &shim, const std::string &request,
                        std::string &error);

}  // namespace torchseal::cli::attach
