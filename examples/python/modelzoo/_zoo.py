"""Shared pieces of the model-zoo programs (not a program itself).

Each program trains a real model (torchvision, Hugging Face transformers) with
random weights and a small configuration for a few steps, calls step() once a
step, and has a leaky twin (the default) and a fixed one (--fixed).
"""
import ctypes
import os
import sys

import torch

STEPS = int(os.environ.get("ZOO_STEPS", "14"))  # growth is judged from 10 steps on

try:
    import torchseal as _torchseal  # type: ignore[import-not-found]

    step = _torchseal.step
except ImportError:  # the C API of the preloaded shim (absent: a no-op)
    _step = getattr(ctypes.CDLL(None), "torchseal_step", None)

    def step():
        if _step is not None:
            _step()


def fixed():
    return "--fixed" in sys.argv[1:]


def seed():
    torch.manual_seed(0)


def finish(tag):
    torch.cuda.synchronize()
    print(f"{tag}: allocated={torch.cuda.memory_allocated()} "
          f"reserved={torch.cuda.memory_reserved()}", flush=True)
