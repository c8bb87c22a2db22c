"""Leak: a validation loop without torch.no_grad() that accumulates the loss
tensor builds (and keeps) an autograd graph per batch. Fixed twin: no_grad.

    python validation_no_grad.py [--fixed]
"""
import torch

from _common import batch, finish, fixed, setup, step, STEPS


def validate_leaky(model):
    val_loss = 0
    for _ in range(STEPS):
        x, t = batch()
        val_loss = val_loss + ((model(x) - t) ** 2).mean()  # LEAK: graph kept
        step()
    return val_loss


def validate_fixed(model):
    val_loss = 0.0
    with torch.no_grad():  # FIXED
        for _ in range(STEPS):
            x, t = batch()
            val_loss += ((model(x) - t) ** 2).mean().item()
            step()
    return val_loss


if __name__ == "__main__":
    model, _ = setup()
    (validate_fixed if fixed() else validate_leaky)(model)
    finish("fixed" if fixed() else "leaky")
