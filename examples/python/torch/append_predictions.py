"""Leak: predictions appended to a list without .detach() keep their graphs
(and the inputs saved for backward) alive. Fixed twin: .detach() (and keep
only what is needed).

    python append_predictions.py [--fixed]
"""
from _common import batch, finish, fixed, setup, step, STEPS


def train(model, opt, keep):
    predictions = []
    for _ in range(STEPS):
        x, t = batch()
        y = model(x)
        loss = ((y - t) ** 2).mean()
        opt.zero_grad()
        loss.backward(retain_graph=not fixed())
        opt.step()
        keep(predictions, y)
        step()
    return predictions


def keep_leaky(predictions, y):
    predictions.append(y)  # LEAK: y still references its graph


def keep_fixed(predictions, y):
    predictions.append(y.detach().cpu())  # FIXED


if __name__ == "__main__":
    model, opt = setup()
    train(model, opt, keep_fixed if fixed() else keep_leaky)
    finish("fixed" if fixed() else "leaky")
