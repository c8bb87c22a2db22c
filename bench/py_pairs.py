"""(b): cudaMalloc+cudaFree pairs from CPython through ctypes, made with
DEPTH Python frames on the stack. Prints {"ns_per_pair": median over repeats}.

usage: py_pairs.py DEPTH PAIRS REPEATS   (libcudart.so.13 via LD_LIBRARY_PATH)
"""
import ctypes
import json
import statistics
import sys
import time

depth, pairs, repeats = (int(a) for a in sys.argv[1:4])
rt = ctypes.CDLL("libcudart.so.13")
malloc, free = rt.cudaMalloc, rt.cudaFree
malloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
malloc.restype = ctypes.c_int
free.argtypes = [ctypes.c_void_p]
free.restype = ctypes.c_int


def loop(n):
    p = ctypes.c_void_p()
    ref = ctypes.byref(p)
    t0 = time.perf_counter_ns()
    for _ in range(n):
        if malloc(ref, 256):
            raise SystemExit("cudaMalloc failed")
        free(p)
    return (time.perf_counter_ns() - t0) / n


def at_depth(d, n):
    # d Python frames including this one's callers' chain
    if d <= 1:
        return loop(n)
    return at_depth(d - 1, n)


at_depth(depth, max(1, pairs // 10))  # warm-up: context, shim init
samples = [at_depth(depth, pairs) for _ in range(repeats)]
print(json.dumps({"depth": depth, "pairs": pairs, "ns_per_pair": statistics.median(samples),
                  "samples": samples}))
