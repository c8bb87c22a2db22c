"""Run by tests/wheel/run.py under the pip-installed `torchseal run`, on
simcuda: one 1 MiB cudaMalloc never freed (the line marked LEAK), one freed.
It also prints what the installed `torchseal` module sees."""
import ctypes

import torchseal

rt = ctypes.CDLL("libcudart.so.13")
kept, freed = ctypes.c_void_p(), ctypes.c_void_p()
assert rt.cudaMalloc(ctypes.byref(freed), 4096) == 0
assert rt.cudaFree(freed) == 0
assert rt.cudaMalloc(ctypes.byref(kept), 1 << 20) == 0  # LEAK
print("module=" + torchseal.__file__)
print("available=%d" % torchseal.available())
