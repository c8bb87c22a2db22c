"""Leak: an out-of-memory handler that retries inside `except` keeps the
exception (and through its traceback the frame holding the big tensors)
alive while it retries, and the retry state holds on to the tensors of the
failed attempt. Fixed twin: leave the except block before retrying, drop the
references, empty the cache.

Run with a small device, e.g. SIMCUDA_MEMORY_BYTES=256MiB.

    python oom_retry.py [--fixed]
"""
import torch

from _common import BATCH, FEATURES, finish, fixed, setup, step, STEPS

failed_attempts = []  # what the leaky handler keeps


def forward_backward(model, opt, scale):
    x = torch.randn(BATCH * scale, FEATURES, device="cuda")
    t = torch.randn(BATCH * scale, device="cuda")
    loss = ((model(x) - t) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


def train_leaky(model, opt, huge):
    for i in range(STEPS):
        try:
            forward_backward(model, opt, huge if i % 2 == 0 else 1)
        except torch.OutOfMemoryError as e:  # LEAK: retrying inside except
            # The exception's traceback (kept in a list "for later") pins
            # the frames and the tensors in them.
            failed_attempts.append(e)  # LEAK: kept for ever
            x = torch.randn(BATCH, FEATURES, device="cuda")
            failed_attempts.append(x)
            forward_backward(model, opt, 1)
        step()


def train_fixed(model, opt, huge):
    for i in range(STEPS):
        oom = False
        try:
            forward_backward(model, opt, huge if i % 2 == 0 else 1)
        except torch.OutOfMemoryError:
            oom = True  # FIXED: leave the except block first
        if oom:
            torch.cuda.empty_cache()
            forward_backward(model, opt, 1)
        step()


if __name__ == "__main__":
    model, opt = setup()
    # Every other step uses a batch of 60% of the device: the input fits, the
    # first intermediate (x * w) does not, so a real allocation fails (with
    # expandable segments too: a request larger than the segment's address
    # range would fail inside PyTorch without asking the driver).
    cap = torch.cuda.get_device_properties(0).total_memory
    huge = max(2, int(0.6 * cap // (BATCH * FEATURES * 4)))
    (train_fixed if fixed() else train_leaky)(model, opt, huge)
    finish("fixed" if fixed() else "leaky")
