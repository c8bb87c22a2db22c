"""torchvision ResNet-18 (convolutions and batch norm through cuDNN, the
classifier through cuBLAS), SGD with momentum. Leak: the loss tensors are
kept, and with them every step's autograd graph. Fixed twin: `loss.item()`.

    python resnet18.py [--fixed]
"""
import torch
import torchvision

from _zoo import STEPS, finish, fixed, seed, step


def train(model, opt, keep_tensor):
    losses = []
    for _ in range(STEPS):
        x = torch.randn(4, 3, 64, 64, device="cuda")
        t = torch.randint(0, 10, (4,), device="cuda")
        loss = torch.nn.functional.cross_entropy(model(x), t)
        opt.zero_grad()
        loss.backward(retain_graph=keep_tensor)
        opt.step()
        if keep_tensor:
            losses.append(loss)  # LEAK: keeps every step's graph and activations
        else:
            losses.append(loss.item())
        step()
    return losses


if __name__ == "__main__":
    seed()
    model = torchvision.models.resnet18(num_classes=10).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    train(model, opt, keep_tensor=not fixed())
    finish("fixed" if fixed() else "leaky")
