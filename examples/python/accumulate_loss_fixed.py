#!/usr/bin/env python3
"""Fixed twin of accumulate_loss.py: the running total is a Python float.

`loss.item()` copies the value to the host; the tensor and its graph die
at the end of the step, so live device memory is the same at every step.

Run: torchseal run --tensors -- python3 accumulate_loss_fixed.py
"""
# EXPECT: growth 0
# ARGS[caching]: --numel 270000 --batches 1

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
        pred = model(x)
        loss = tt.mse_loss(pred, y)
        loss.backward()
        opt.step()
        total_loss += loss.item()
        torchseal.step()
    return total_loss


def main():
    args = parse_args(__doc__)
    banner()
    total_loss = train(args)
    finish("mean loss", total_loss / args.steps)


if __name__ == "__main__":
    main()
