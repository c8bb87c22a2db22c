"""Scaffolding shared by the toytorch training examples: command line, data
and a one-layer model, so each example script shows only its training loop.

The model is one elementwise layer (pred = x * w) trained with a fused MSE
loss: the smallest network whose autograd graph holds an activation
(`pred`) as big as its input. What a leak keeps alive is then exactly one
activation per step, allocated at the script's forward line.
"""

import argparse
import sys

import toytorch as tt


def parse_args(doc, steps=30, numel=4096, batches=4):
    ap = argparse.ArgumentParser(description=(doc or "").strip().splitlines()[0])
    ap.add_argument("--steps", type=int, default=steps, help="training steps (default %(default)s)")
    ap.add_argument("--numel", type=int, default=numel,
                    help="float32 elements per sample (default %(default)s: 16 KiB)")
    ap.add_argument("--batches", type=int, default=batches, help="distinct batches, cycled (default %(default)s)")
    args = ap.parse_args()
    if args.steps < 1 or args.numel < 1 or args.batches < 1:
        ap.error("--steps, --numel and --batches must be positive")
    return args


def banner():
    # Which allocator and runtime the run really used: tests check it.
    print(f"toytorch: allocator={tt.allocator_mode()} runtime={tt.runtime_path()}", flush=True)


def dataset(numel, batches, seed=1):
    """(input, target) pairs, copied to the device once before training, as a
    small dataset that fits in GPU memory would be. target = 3 * input."""
    data = []
    with tt.no_grad():
        for i in range(batches):
            x = tt.randn(numel, seed=seed + i)
            data.append((x, x * 3.0))
    return data


class Model:
    def __init__(self, numel):
        self.w = tt.zeros(numel, requires_grad=True)

    def parameters(self):
        return [self.w]

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):
        return x * self.w


def finish(what, value):
    print(f"{what}: {value:.6f}", flush=True)
    sys.stdout.flush()
