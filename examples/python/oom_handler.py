#!/usr/bin/env python3
"""Leaks: an out-of-memory handler keeps the exceptions it catches.

Each step first tries a large effective batch; it does not fit, and the
handler falls back to the plain batch. The handler also keeps the exception
"for the summary", and an exception holds its traceback, whose frames hold
their local variables: every failed attempt's tensors (here the prediction
made before the OOM) stay allocated. The fix (oom_handler_fixed.py) keeps
the message and retries after leaving the `except` block.

Run: torchseal run --tensors -- python3 oom_handler.py
"""
# A 256 MiB device: the large batch fails on every step, while the small one
# always fits (simcuda reserves a 2 MiB pool chunk per stream-ordered
# allocation, so even small tensors need room).
# ENV: SIMCUDA_MEMORY_BYTES=256M
# EXPECT: growth 1
# EXPECT: growth-site forward
# EXPECT: ooms

import torchseal
import toytorch as tt
from trainkit import Model, banner, dataset, finish, parse_args

LARGE_BATCH = 32768  # x 16 KiB per sample: 512 MiB, twice the device


def train_step(model, opt, x, y, repeats):
    """One step on `repeats` copies of the batch; returns the loss value."""
    opt.zero_grad()
    pred = model(x)  # SITE: forward
    loss = tt.mse_loss(pred.repeat(repeats), y.repeat(repeats))
    loss.backward()
    opt.step()
    return loss.item()


def train(args):
    data = dataset(args.numel, args.batches)
    model = Model(args.numel)
    opt = tt.SGD(model.parameters(), lr=0.1)
    oom_errors = []
    total = 0.0
    for step in range(args.steps):
        x, y = data[step % len(data)]
        try:
            total += train_step(model, opt, x, y, LARGE_BATCH)
        except tt.OutOfMemoryError as err:
            oom_errors.append(err)  # reported after training
            total += train_step(model, opt, x, y, 1)
        torchseal.step()
    print(f"{len(oom_errors)} step(s) fell back to the small batch; first: {oom_errors[0]}")
    return total


def main():
    args = parse_args(__doc__)
    banner()
    finish("mean loss", train(args) / args.steps)


if __name__ == "__main__":
    main()
