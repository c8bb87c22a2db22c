#!/usr/bin/env python3
"""Not a leak: a cache that fills during the first pass over the data.

Each batch gets a normalization tensor computed on first use and reused
afterwards. Device memory grows for the first `--batches` steps (one entry
per distinct batch), then stays flat. A growth check must not flag it; with
`--batches 12` the cache is still filling after the detector's warm-up
window, so only "growth stopped" can clear it.

Run: torchseal run --tensors -- python3 cache_plateau.py [--batches 12]
"""
# EXPECT: growth 0

import torchseal
import toytorch as tt
from trainkit import Model, banner, dataset, finish, parse_args


class NormCache:
    """Per-batch input scale (1 / mean |x|), on the device, computed once."""

    def __init__(self):
        self.scales = {}

    def get(self, key, x):
        scale = self.scales.get(key)
        if scale is None:
            mean_abs = sum(abs(v) for v in x.tolist()) / len(x)
            scale = tt.full(len(x), 1.0 / max(mean_abs, 1e-6))  # SITE: cache
            self.scales[key] = scale
        return scale


def train(args):
    data = dataset(args.numel, args.batches)
    model = Model(args.numel)
    opt = tt.SGD(model.parameters(), lr=0.1)
    norms = NormCache()
    total = 0.0
    for step in range(args.steps):
        index = step % len(data)
        x, y = data[index]
        scale = norms.get(index, x)
        opt.zero_grad()
        loss = tt.mse_loss(model(x * scale), y * scale)
        loss.backward()
        opt.step()
        total += loss.item()
        torchseal.step()
    return total


def main():
    # Five distinct batches by default: the cache warms for five steps.
    args = parse_args(__doc__, batches=5)
    banner()
    finish("mean loss", train(args) / args.steps)


if __name__ == "__main__":
    main()
