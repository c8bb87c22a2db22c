#!/usr/bin/env python3
"""Fixed twin of keep_activations.py: the model records a float per step.

What the inspection after training needs is a statistic of each activation;
`hidden.mean().item()` computes it on the spot and keeps no tensor.

Run: torchseal run --tensors -- python3 keep_activations_fixed.py
"""
# EXPECT: growth 0

import torchseal
import toytorch as tt
from trainkit import Model, banner, dataset, finish, parse_args


class RecordingModel(Model):
    def __init__(self, numel):
        super().__init__(numel)
        self.activation_means = []  # examined after training

    def forward(self, x):
        hidden = x * self.w
        with tt.no_grad():
            self.activation_means.append(hidden.mean().item())
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
    finish("mean of the last activation", model.activation_means[-1])


if __name__ == "__main__":
    main()
