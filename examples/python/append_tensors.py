#!/usr/bin/env python3
"""Leaks: per-step losses are appended to a list as tensors, not floats.

Each `loss` in the list holds its graph, and so its step's prediction:
the list keeps one prediction per step alive. The fix
(append_tensors_fixed.py) appends `loss.item()`.

Run: torchseal run --tensors -- python3 append_tensors.py
"""
# EXPECT: growth 1
# EXPECT: growth-site forward
# EXPECT: hint losses.append(loss)

import torchseal
import toytorch as tt
from trainkit import Model, banner, dataset, finish, parse_args


def train(args):
    data = dataset(args.numel, args.batches)
    model = Model(args.numel)
    opt = tt.SGD(model.parameters(), lr=0.1)
    losses = []  # for the learning curve printed at the end
    for step in range(args.steps):
        x, y = data[step % len(data)]
        opt.zero_grad()
        pred = model(x)  # SITE: forward
        loss = tt.mse_loss(pred, y)
        loss.backward()
        opt.step()
        losses.append(loss)
        torchseal.step()
    return losses


def main():
    args = parse_args(__doc__)
    banner()
    losses = train(args)
    finish("final loss", losses[-1].item())


if __name__ == "__main__":
    main()
