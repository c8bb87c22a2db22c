"""A DataLoader over a host dataset feeding an MLP (cuBLAS) trained with
Adam (optimizer state). Leak: every batch copied to the GPU is kept in
`seen` (1 MiB a step). Fixed twin: only the batch count.

    python dataloader.py [--fixed]
"""
import torch
from torch.utils.data import DataLoader, TensorDataset

from _zoo import STEPS, finish, fixed, seed, step


def train(model, opt, loader, leaky):
    seen = []
    for i, (x, t) in enumerate(loader):
        if i == STEPS:
            break
        x, t = x.cuda(non_blocking=True), t.cuda(non_blocking=True)
        loss = torch.nn.functional.mse_loss(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if leaky:
            seen.append(x)  # LEAK: every batch stays on the GPU
        else:
            seen.append(i)
        step()
    return seen


if __name__ == "__main__":
    seed()
    data = TensorDataset(torch.randn(64 * 16, 4096), torch.randn(64 * 16, 8))
    loader = DataLoader(data, batch_size=64, shuffle=True, pin_memory=True)
    model = torch.nn.Sequential(torch.nn.Linear(4096, 512), torch.nn.ReLU(),
                                torch.nn.Linear(512, 8)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    train(model, opt, loader, leaky=not fixed())
    finish("fixed" if fixed() else "leaky")
