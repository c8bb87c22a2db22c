"""Hugging Face GPT-2 with a small configuration and random weights (no
download), AdamW. Leak: `logits_log.append(out.logits)`. Fixed twin: the
loss as a Python float.

    python gpt2.py [--fixed]
"""
import torch
from transformers import GPT2Config, GPT2LMHeadModel

from _zoo import STEPS, finish, fixed, seed, step


def train(model, opt, leaky):
    logits_log = []
    for _ in range(STEPS):
        ids = torch.randint(0, 1024, (4, 64), device="cuda")  # logits: 1 MiB a step
        out = model(input_ids=ids, labels=ids)
        opt.zero_grad()
        out.loss.backward()
        opt.step()
        if leaky:
            logits_log.append(out.logits)  # LEAK: every step's logits
        else:
            logits_log.append(out.loss.item())
        step()
    return logits_log


if __name__ == "__main__":
    seed()
    config = GPT2Config(vocab_size=1024, n_positions=64, n_embd=64, n_layer=2, n_head=2,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2LMHeadModel(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train(model, opt, leaky=not fixed())
    finish("fixed" if fixed() else "leaky")
