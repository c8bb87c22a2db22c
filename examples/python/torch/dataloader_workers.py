"""DataLoader with forked workers (num_workers=2) feeding a CUDA training
loop. The workers never touch CUDA; the parent trains.

    python dataloader_workers.py
"""
import torch
from torch.utils.data import DataLoader, Dataset

from _common import BATCH, FEATURES, finish, setup, step


class Random(Dataset):
    def __len__(self):
        return 8 * BATCH

    def __getitem__(self, i):
        g = torch.Generator().manual_seed(i)
        return torch.randn(FEATURES, generator=g), torch.randn((), generator=g)


if __name__ == "__main__":
    import multiprocessing as mp

    mp.set_start_method("fork", force=True)
    model, opt = setup()
    loader = DataLoader(Random(), batch_size=BATCH, num_workers=2)
    for x, t in loader:
        x, t = x.cuda(), t.cuda()
        loss = ((model(x) - t) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        step()
    finish("dataloader")
