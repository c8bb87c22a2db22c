"""Hugging Face BERT for sequence classification with a small configuration
and random weights, AdamW. Leak: `total_loss += loss` keeps every step's
graph. Fixed twin: `loss.item()`.

    python bert.py [--fixed]
"""
import torch
from transformers import BertConfig, BertForSequenceClassification

from _zoo import STEPS, finish, fixed, seed, step


def train(model, opt, leaky):
    total_loss = 0
    for _ in range(STEPS):
        ids = torch.randint(0, 512, (16, 64), device="cuda")
        labels = torch.randint(0, 2, (16,), device="cuda")
        loss = model(input_ids=ids, labels=labels).loss
        opt.zero_grad()
        loss.backward(retain_graph=leaky)
        opt.step()
        if leaky:
            total_loss += loss  # LEAK: keeps the graph of every step
        else:
            total_loss += loss.item()
        step()
    return total_loss


if __name__ == "__main__":
    seed()
    config = BertConfig(vocab_size=512, hidden_size=128, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=256,
                        max_position_embeddings=64, num_labels=2)
    model = BertForSequenceClassification(config).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    train(model, opt, leaky=not fixed())
    finish("fixed" if fixed() else "leaky")
