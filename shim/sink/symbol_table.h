// The symbol table written at a clean exit: every instruction pointer of
// every interned stack, symbolized while the modules are still mapped, so
// the report can name frames of libraries the program has since unloaded.
#pragma once

#include <cstdint>
#include <vector>

#include "shim/core/stack_table.h"

namespace torchseal::history {

// Appends the Symbols chunk for every ip in `stacks`. May throw (allocation,
// symbolizer); the caller decides what a missing table costs.
void append_symbols(std::vector<uint8_t> &out, StackTable &stacks);

}  // namespace torchseal::history
