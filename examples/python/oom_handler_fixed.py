#!/usr/bin/env python3
"""Fixed twin of oom_handler.py: the handler keeps only the message.

`str(err)` holds no frames. The retry runs after the `except` block has
ended, so the failed attempt's tensors are already freed when it allocates
(inside the block, `err` and its traceback are still alive).

Run: torchseal run --tensors -- python3 oom_handler_fixed.py
"""
# A 256 MiB device: the large batch fails on every step, while the small one
# always fits (simcuda reserves a 2 MiB pool chunk per stream-ordered
# allocation, so even small tensors need room).
# ENV: SIMCUDA_MEMORY_BYTES=256M
# EXPECT: growth 0
# EXPECT: ooms

import torchseal
import toytorch as tt
from trainkit import Model, banner, dataset, finish, parse_args

LARGE_BATCH = 32768  # x 16 KiB per sample: 512 MiB, twice the device


def train_step(model, opt, x, y, repeats):
    """One step on `repeats` copies of the batch; returns the loss value."""
    opt.zero_grad()
    pred = model(x)
    loss = tt.mse_loss(pred.repeat(repeats), y.repeat(repeats))
    loss.backward()
    opt.step()
    return loss.item()


def train(args):
    data = dataset(args.numel, args.batches)
    model = Model(args.numel)
    opt = tt.SGD(model.parameters(), lr=0.1)
    oom_messages = []
    total = 0.0
    for step in range(args.steps):
        x, y = data[step % len(data)]
        fell_back = False
        try:
            total += train_step(model, opt, x, y, LARGE_BATCH)
        except tt.OutOfMemoryError as err:
            oom_messages.append(str(err))  # reported after training
            fell_back = True
        if fell_back:
            total += train_step(model, opt, x, y, 1)
        torchseal.step()
    print(f"{len(oom_messages)} step(s) fell back to the small batch; first: {oom_messages[0]}")
    return total


def main():
    args = parse_args(__doc__)
    banner()
    finish("mean loss", train(args) / args.steps)


if __name__ == "__main__":
    main()
