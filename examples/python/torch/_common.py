"""Shared pieces of the leak-pattern examples (not an example itself).

Each example trains the elementwise model y = (x * w + b).sum(dim=1) with SGD
(no matmul: simcuda runs no cuBLAS) and calls step() once per training step.
"""
import ctypes
import os
import sys

import torch

FEATURES = int(os.environ.get("EXAMPLE_FEATURES", "1024"))
BATCH = int(os.environ.get("EXAMPLE_BATCH", "256"))  # 256 x 1024 floats = 1 MiB per batch
STEPS = int(os.environ.get("EXAMPLE_STEPS", "24"))

try:  # the pure-Python helper, once it exists
    import torchseal as _torchseal  # type: ignore[import-not-found]

    step = _torchseal.step
    dump = getattr(_torchseal, "dump", None)
except ImportError:  # the C API of the preloaded shim (absent: no-ops)
    _lib = ctypes.CDLL(None)
    _step = getattr(_lib, "torchseal_step", None)
    _dump = getattr(_lib, "torchseal_dump", None)
    if _dump is not None:
        _dump.argtypes = [ctypes.c_char_p]

    def step():
        if _step is not None:
            _step()

    def dump(reason="api"):
        if _dump is not None:
            _dump(reason.encode())


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(FEATURES, device="cuda"))
        self.b = torch.nn.Parameter(torch.zeros(1, device="cuda"))

    def forward(self, x):
        return (x * self.w + self.b).sum(dim=1)


def batch():
    x = torch.randn(BATCH, FEATURES, device="cuda")
    t = torch.randn(BATCH, device="cuda")
    return x, t


def setup():
    torch.manual_seed(0)
    model = Model()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    return model, opt


def fixed():
    return "--fixed" in sys.argv[1:]


def finish(tag):
    torch.cuda.synchronize()
    print(f"{tag}: allocated={torch.cuda.memory_allocated()} "
          f"reserved={torch.cuda.memory_reserved()}", flush=True)
