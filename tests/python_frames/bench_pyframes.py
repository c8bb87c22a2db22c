"""bench_pyframes.py LIB [ITERS]: ns per Python-stack capture at 30 Python
frames with warm caches (the steady state of a training loop), plus the first
(cold: decode + intern) capture. Prints one line per figure; not a test."""
import ctypes
import sys

lib = ctypes.CDLL(sys.argv[1])  # GIL released, as inside a CUDA call
lib.probe_bench.restype = ctypes.c_double
lib.probe_bench.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_double)]
ITERS = int(sys.argv[2]) if len(sys.argv) > 2 else 200_000
FRAMES = 30


def depth():
    n, f = 0, sys._getframe()
    while f:
        n, f = n + 1, f.f_back
    return n


def at_depth(target):
    if depth() < target:
        return at_depth(target)
    cold = ctypes.c_double()
    warm = lib.probe_bench(ITERS, ctypes.byref(cold))
    return warm, cold.value


warm, cold = at_depth(FRAMES)
v = "%d.%d.%d" % sys.version_info[:3]
print(f"pyframes python={v} frames={FRAMES} warm_ns_per_capture={warm:.1f} cold_first_capture_ns={cold:.0f}")
