r"""The main job: train a model on the ``npy`` device and on CPU side by side.

Run it with ``python -m torch_acc.demo``. It sets up the reference NumPy backend, fits a
linear regression with plain gradient descent on both devices from the same start, and prints
both losses at every step and how far apart they are.
"""

import argparse

import torch

from torch_acc.backends import numpy as npy_backend


def _train(device: str, x: torch.Tensor, y: torch.Tensor, w0, b0, steps: int, lr: float):
    """Gradient descent on ``device``; returns the loss after every step (as floats)."""
    x, y = x.to(device), y.to(device)
    w = w0.to(device).requires_grad_()
    b = b0.to(device).requires_grad_()
    n = x.shape[0]
    losses = []
    for _ in range(steps):
        err = x @ w + b - y
        loss = (err * err).sum() / n
        loss.backward()
        with torch.no_grad():
            w -= lr * w.grad
            b -= lr * b.grad
        w.grad = b.grad = None
        losses.append(loss.item())
    return losses


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--lr", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    device = npy_backend.setup()
    gen = torch.Generator().manual_seed(args.seed)
    x = torch.randn(64, 3, generator=gen)
    true_w = torch.tensor([[2.0], [-1.0], [0.5]])
    y = x @ true_w + 0.3 + 0.01 * torch.randn(64, 1, generator=gen)
    w0 = torch.zeros(3, 1)
    b0 = torch.zeros(1)

    on_device = _train(device, x, y, w0, b0, args.steps, args.lr)
    on_cpu = _train("cpu", x, y, w0, b0, args.steps, args.lr)

    print(f"linear regression, {args.steps} steps of gradient descent (lr={args.lr})")
    print(f"{'step':>4}  {device + ' loss':>12}  {'cpu loss':>12}  {'difference':>10}")
    worst = 0.0
    for step, (a, b) in enumerate(zip(on_device, on_cpu, strict=True), 1):
        worst = max(worst, abs(a - b))
        print(f"{step:>4}  {a:>12.6f}  {b:>12.6f}  {abs(a - b):>10.2e}")
    print(f"max difference between {device} and cpu losses: {worst:.2e}")
    return 0 if worst <= 1e-4 * max(1.0, on_cpu[0]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
