// Learns a frame's FrameRule by letting libunwind step it once from the
// registers the fast walker holds (rip, rsp, rbp), then checking that the
// rule reproduces libunwind's answer. Slow (a CFI lookup and
// interpretation), so it runs once per return address.
#pragma once

#include <cstdint>

#include "shim/core/unwind/frame_rules.h"

namespace torchseal::unwind {

// Resolves the libunwind entry points from an already-dlopen'ed handle.
// False if any is missing (the fast walker is then off).
bool learner_init(void *libunwind);

// The rule for the frame executing at return address `ip`, with stack
// pointer `rsp` and frame pointer `rbp`; reads only [rsp, stack_hi).
FrameRule learn_rule(uint64_t ip, uint64_t rsp, uint64_t rbp, uint64_t stack_hi);

}  // namespace torchseal::unwind
