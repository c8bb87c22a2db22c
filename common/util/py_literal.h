// A Python bytes literal of any text: `torchseal attach` hands paths and
// settings to code it runs in another interpreter (sys.remote_exec's script,
// the shim's safe-point code), and no byte of them may end the literal.
#pragma once

#include <cstdio>
#include <string>

namespace torchseal {

// b'\x..' for every byte.
inline std::string python_bytes_literal(const std::string &text) {
  std::string out = "b'";
  char hex[5];
  for (unsigned char c : text) {
    std::snprintf(hex, sizeof hex, "\\x%02x", c);
    out += hex;
  }
  return out + "'";
}

}  // namespace torchseal
