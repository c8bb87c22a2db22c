#!/usr/bin/env python3
"""Leaks: `total_loss += loss` sums tensors, so every step's graph stays alive.

`loss` is a tensor with autograd history; adding it to a running total makes
a new tensor whose graph holds the old total and this step's loss, which
holds this step's prediction. One prediction per step is never freed. The
fix (accumulate_loss_fixed.py) adds `loss.item()`, a Python float.

Run: torchseal run --tensors -- python3 accumulate_loss.py
"""
# Expectations, read by tests/python_patterns/run_pattern.py:
# EXPECT: growth 1
# EXPECT: growth-site forward
# EXPECT: hint total_loss += loss
# Caching allocator: the leak shows only as new segments, so the activation
# must outgrow the cache every step (>1 MiB: one 2 MiB segment per step). The
# segment is then allocated by whatever request overflows the cache first,
# here a gradient inside loss.backward(), not by the retained activation.
# ARGS[caching]: --numel 270000 --batches 1
# EXPECT[caching]: growth-site backward

import torchseal
import toytorch as tt
from trainkit import Model, banner, dataset, finish, parse_args


def train(args):
    data = dataset(args.numel, args.batches)
    model = Model(args.numel)
    opt = tt.SGD(model.parameters(), lr=0.1)
    total_loss = 0.0
    for step in range(args.steps):
        x, y = data[step % len(data)]
        opt.zero_grad()
        pred = model(x)  # SITE: forward
        loss = tt.mse_loss(pred, y)
        loss.backward()  # SITE: backward
        opt.step()
        total_loss += loss
        torchseal.step()
    return total_loss


def main():
    args = parse_args(__doc__)
    banner()
    total_loss = train(args)
    finish("mean loss", total_loss.item() / args.steps)


if __name__ == "__main__":
    main()
