"""Leak: `total_loss += loss` in the training loop keeps every step's autograd
graph (and the activations it saved) alive. Fixed twin: `loss.item()`.

    python accumulate_loss.py [--fixed]
"""
from _common import batch, finish, fixed, setup, step, STEPS


def train_leaky(model, opt):
    total_loss = 0
    for _ in range(STEPS):
        x, t = batch()
        loss = ((model(x) - t) ** 2).mean()
        opt.zero_grad()
        loss.backward(retain_graph=True)
        opt.step()
        total_loss += loss  # LEAK: keeps the graph of every step
        step()
    return total_loss


def train_fixed(model, opt):
    total_loss = 0.0
    for _ in range(STEPS):
        x, t = batch()
        loss = ((model(x) - t) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        total_loss += loss.item()  # FIXED: a Python float
        step()
    return total_loss


if __name__ == "__main__":
    model, opt = setup()
    (train_fixed if fixed() else train_leaky)(model, opt)
    finish("fixed" if fixed() else "leaky")
