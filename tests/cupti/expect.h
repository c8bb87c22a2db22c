// The failure counter of the CUPTI unit tests (each is its own small
// program): expect() prints what failed and keeps going, so one run lists
// every broken rule; main returns non-zero if g_failures is set.
#pragma once

#include <cstdio>
#include <string>

inline int g_failures = 0;

inline void expect(bool cond, const std::string &what) {
  if (!cond) {
    std::printf("FAIL: %s\n", what.c_str());
    ++g_failures;
  }
}
