"""Leak: evaluation without `torch.no_grad()` that keeps every batch's
output on the GPU: each kept output holds its autograd graph and the
activations it saved. Fixed twin: evaluate under `no_grad` and keep a copy on
the host.

    python eval_outputs.py [--fixed]
"""
import collections

import torch

from _common import batch, finish, fixed, setup, step, STEPS


class Evaluator:
    def __init__(self, model):
        self.model = model
        self.history = collections.deque()

    def run_leaky(self):
        for _ in range(STEPS):
            x, _ = batch()
            out = self.model(x * 2)
            self.history.append(out)  # LEAK: the output and its graph
            step()

    def run_fixed(self):
        with torch.no_grad():  # FIXED: no graph
            for _ in range(STEPS):
                x, _ = batch()
                out = self.model(x * 2)
                self.history.append(out.cpu())  # FIXED: a host copy
                step()


if __name__ == "__main__":
    model, _ = setup()
    ev = Evaluator(model)
    ev.run_fixed() if fixed() else ev.run_leaky()
    finish("fixed" if fixed() else "leaky")
