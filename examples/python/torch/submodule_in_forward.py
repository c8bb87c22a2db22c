"""Leak: a sub-module built inside `forward` and kept in a plain list: every
step adds its parameter (and, after backward, its gradient). The optimizer
never sees it, so nothing trains it either. Fixed twin: build the sub-module
once, in `__init__`.

    python submodule_in_forward.py [--fixed]
"""
import torch

from _common import BATCH, FEATURES, batch, finish, fixed, setup, step, STEPS


class Scale(torch.nn.Module):
    """A learned per-element scale: 1 MiB of parameters."""

    def __init__(self):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.ones(BATCH, FEATURES, device="cuda"))

    def forward(self, x):
        return x * self.scale


class LeakyHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.extra = []  # a plain list: its modules are not registered

    def forward(self, x):
        scale = Scale()  # LEAK: a new sub-module every step ...
        self.extra.append(scale)  # LEAK: ... kept for ever
        return scale(x)


class FixedHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale()  # FIXED: built once

    def forward(self, x):
        return self.scale(x)


def train(model, head, opt):
    for _ in range(STEPS):
        x, t = batch()
        loss = ((model(head(x)) - t) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step()


if __name__ == "__main__":
    model, _ = setup()
    head = FixedHead() if fixed() else LeakyHead()
    opt = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.01)
    train(model, head, opt)
    finish("fixed" if fixed() else "leaky")
