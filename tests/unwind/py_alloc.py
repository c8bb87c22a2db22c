"""py_alloc.py LIBCUDART: cudaMalloc/cudaFree through ctypes from Python
frames of several shapes (recursion, a generator, a class method, a lambda,
a thread), so the native stack runs through the interpreter's own frames."""
import ctypes
import sys
import threading

rt = ctypes.CDLL(sys.argv[1])
rt.cudaMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t]
rt.cudaFree.argtypes = [ctypes.c_void_p]


def pair():
    p = ctypes.c_void_p()
    assert rt.cudaMalloc(ctypes.byref(p), 4096) == 0
    assert rt.cudaFree(p) == 0


def recurse(n):
    if n == 0:
        pair()
        return 0
    return recurse(n - 1) + 1


def gen(n):
    for _ in range(n):
        pair()
        yield


class Model:
    def step(self):
        (lambda: recurse(7))()


for depth in range(0, 40, 3):
    for _ in range(3):
        recurse(depth)
list(gen(20))
for _ in range(10):
    Model().step()
t = threading.Thread(target=lambda: [recurse(5) for _ in range(20)])
t.start()
t.join()
