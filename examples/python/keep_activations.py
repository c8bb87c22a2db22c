#!/usr/bin/env python3
"""Leaks: the model keeps every step's activation for inspection after training.

RecordingModel.forward appends its output to `self.activations` so the run
can be examined once the loop ends. The list outlives the loop and grows by
one activation (and its graph) per step. The fix (keep_activations_fixed.py)
records the statistic it needs, as a float.

Run: torchseal run --tensors -- python3 keep_activations.py
"""
# EXPECT: growth 1
# EXPECT: growth-site forward
# EXPECT: hint self.activations.append(hidden)

import torchseal
import toytorch as tt
from trainkit import Model, banner, dataset, finish, parse_args


class RecordingModel(Model):
    def __init__(self, numel):
        super().__init__(numel)
        self.activations = []  # examined after training

    def forward(self, x):
        hidden = x * self.w  # SITE: forward
        self.activations.append(hidden)
        return hidden


def train(args):
    data = dataset(args.numel, args.batches)
    model = RecordingModel(args.numel)
    opt = tt.SGD(model.parameters(), lr=0.1)
    for step in range(args.steps):
        x, y = data[step % len(data)]
        opt.zero_grad()
        loss = tt.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        torchseal.step()
    return model


def main():
    args = parse_args(__doc__)
    banner()
    model = train(args)
    finish("mean of the last activation", model.activations[-1].mean().item())


if __name__ == "__main__":
    main()
