#!/usr/bin/env python3
"""Fixed twin of append_tensors.py: the list holds Python floats.

`loss.item()` copies the value to the host, so nothing on the device
outlives its step.

Run: torchseal run --tensors -- python3 append_tensors_fixed.py
"""
# EXPECT: growth 0

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
        pred = model(x)
        loss = tt.mse_loss(pred, y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        torchseal.step()
    return losses


def main():
    args = parse_args(__doc__)
    banner()
    losses = train(args)
    finish("final loss", losses[-1])


if __name__ == "__main__":
    main()
