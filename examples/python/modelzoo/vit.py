"""A small torchvision VisionTransformer (patch embedding through cuDNN, the
encoder's attention and MLPs through cuBLAS), AdamW. Leak: a forward hook
that collects the encoder's output keeps one per step. Fixed twin: the hook
keeps their mean on the host.

    python vit.py [--fixed]
"""
import torch
from torchvision.models.vision_transformer import VisionTransformer

from _zoo import STEPS, finish, fixed, seed, step


def train(model, opt, leaky):
    features = []

    def collect(module, inputs, output):
        if leaky:
            features.append(output)  # LEAK: every step's encoder output
        else:
            features.append(output.detach().mean().item())

    model.encoder.register_forward_hook(collect)
    for _ in range(STEPS):
        x = torch.randn(30, 3, 32, 32, device="cuda")  # encoder output: under 1 MiB
        t = torch.randint(0, 10, (30,), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step()
    return features


if __name__ == "__main__":
    seed()
    model = VisionTransformer(image_size=32, patch_size=4, num_layers=2, num_heads=2,
                              hidden_dim=128, mlp_dim=256, num_classes=10).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    train(model, opt, leaky=not fixed())
    finish("fixed" if fixed() else "leaky")
