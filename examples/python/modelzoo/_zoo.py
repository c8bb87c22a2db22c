"""Shared pieces of the model-zoo programs (not a program itself).

Each program trains a real model (torchvision, Hugging Face transformers) with
random weights and a small configuration for a few steps, calls step() once a
step, and has a leaky twin (the default) and a fixed one (--fixed).

What a leaky twin keeps per step is at most 1 MiB (or its steps' sum far
above 10 MiB): PyTorch's caching allocator serves requests up to 1 MiB from
2 MiB segments, so in segments mode such a leak adds a segment every step or
two, a steady growth; 1-10 MiB requests share 20 MiB segments, which grow
too seldom in a short run to be judged.
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
