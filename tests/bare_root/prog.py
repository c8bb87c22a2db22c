"""Run by tests/bare_root and tests/wheel in a bare root: one 2 MiB device
allocation made by a native library built with -g (native_alloc.c), never
freed, from the marked line below."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])
lib.ts_native_alloc.argtypes = [ctypes.c_size_t]
assert lib.ts_native_alloc(2 << 20) == 0  # PY-LEAK
