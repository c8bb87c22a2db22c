"""Leak (a peak, not growth): a loop's local is still alive after the loop,
so the large allocation that follows needs room for both, and runs out of
memory although either alone fits. Fixed twin: `del` the local when the loop
ends.

Run with a small device, e.g. SIMCUDA_MEMORY_BYTES=256MiB. The leaky twin
dies of the OOM, as such a program does.

    python loop_local.py [--fixed]
"""
import torch

from _common import finish, fixed, step

FLOAT = 4


def smooth(model_state, chunk):
    for _ in range(4):
        activations = torch.randn(chunk, device="cuda")  # LEAK: outlives the loop
        model_state += activations.mean()
        step()
    if fixed():
        del activations  # FIXED: nothing of the loop outlives it
    # The large allocation: with `activations` still alive it does not fit.
    summary = torch.zeros(2 * chunk, device="cuda")
    return float(model_state) + float(summary.sum())


if __name__ == "__main__":
    cap = torch.cuda.get_device_properties(0).total_memory
    chunk = int(0.35 * cap) // FLOAT  # 35% of the device; the summary takes 70%
    state = torch.zeros(1, device="cuda")
    smooth(state, chunk)
    finish("fixed" if fixed() else "leaky")
