r"""The main job: train small classifiers on the ``npy`` device and on CPU side by side.

Run it with ``python -m torch_acc.demo``. It sets up the reference NumPy backend and trains,
from the same initial weights and on the same batches:

- an MLP (``Linear``, ``ReLU``, ``Linear``) on Gaussian blobs, with ``torch.optim.SGD``;
- a CNN (``Conv2d``, ``BatchNorm2d``, ``ReLU``, ``MaxPool2d``, twice, then ``Linear``) on
  12x12 images of bars, crosses and boxes, with ``torch.optim.Adam``;
- a GRU (``nn.GRU``, then ``Linear`` on its last hidden state) on noisy sequences of four
  shapes (rising, falling, a peak, a valley), with ``torch.optim.Adam``;

all with the cross-entropy loss. Every step runs once on ``npy`` and once on CPU; the
losses of both devices are compared at every step (float32 tolerance). It prints the mean
loss of every epoch for both devices, the largest difference per model and the accuracy after
training, and with ``--plot PATH`` saves the loss curves (matplotlib). The exit status is 1
when a loss differs from CPU's by more than the tolerance. ``--device jax`` trains on the JAX
backend (``torch_acc.backends.jax``, the ``[jax]`` extra) instead of ``npy``.

``torchrun --nproc-per-node 2 -m torch_acc.demo --distributed`` trains the MLP with
``DistributedDataParallel`` instead, on ``npy`` (the ``acc`` c10d backend of
:mod:`torch_acc.distributed`) and on CPU (gloo) side by side: each rank takes its share of
every batch, and the printed losses are the means over the ranks.
"""

import argparse
import copy
import dataclasses
import importlib
import sys

import torch
from torch import nn
from tqdm import tqdm

from torch_acc.backends import numpy as npy_backend

__all__ = ["RTOL", "ATOL", "Result", "make_blobs", "make_images", "make_sequences", "mlp",
           "cnn", "gru", "steps_per_epoch", "train", "train_distributed", "main"]

#: How far a loss on ``npy`` may be from CPU's, at every step: float32 rounding, grown over
#: a few dozen steps of training.
RTOL, ATOL = 1e-4, 1e-5

MODELS = ("mlp", "cnn", "gru")


def make_blobs(gen: torch.Generator, n: int = 512, features: int = 16, classes: int = 4):
    """Gaussian blobs: ``n`` points around ``classes`` random centers, and their labels."""
    centers = 0.7 * torch.randn(classes, features, generator=gen)
    y = torch.randint(0, classes, (n,), generator=gen)
    x = centers[y] + torch.randn(n, features, generator=gen)
    return x, y


def make_images(gen: torch.Generator, n: int = 256, size: int = 12):
    """1x``size``x``size`` images of four patterns at random places, with noise, and labels:
    0 a horizontal bar, 1 a vertical bar, 2 a cross, 3 a hollow box."""
    x = 0.3 * torch.randn(n, 1, size, size, generator=gen)
    y = torch.randint(0, 4, (n,), generator=gen)
    pos = torch.randint(2, size - 2, (n, 2), generator=gen).tolist()
    for i, (label, (r, c)) in enumerate(zip(y.tolist(), pos, strict=True)):
        img = x[i, 0]
        if label in (0, 2):
            img[r, max(0, c - 2):c + 3] += 1.0
        if label in (1, 2):
            img[max(0, r - 2):r + 3, c] += 1.0
        if label == 3:
            img[r - 2:r + 3, c - 2] += 1.0
            img[r - 2:r + 3, c + 2] += 1.0
            img[r - 2, c - 2:c + 3] += 1.0
            img[r + 2, c - 2:c + 3] += 1.0
    return x, y


def make_sequences(gen: torch.Generator, n: int = 256, length: int = 16, classes: int = 4):
    """``n`` sequences of ``length`` steps with one feature, and their labels: 0 rising,
    1 falling, 2 a peak, 3 a valley, each at a random amplitude, with noise."""
    y = torch.randint(0, classes, (n,), generator=gen)
    t = torch.linspace(-1, 1, length)
    shapes = torch.stack([t, -t, 1 - 2 * t.abs(), 2 * t.abs() - 1])
    amplitude = 0.5 + torch.rand(n, 1, generator=gen)
    x = amplitude * shapes[y] + 0.3 * torch.randn(n, length, generator=gen)
    return x.unsqueeze(-1), y


def mlp(features: int = 16, hidden: int = 256, classes: int = 4) -> nn.Module:
    """The demo's MLP classifier (also what ``bench/train_step.py`` times)."""
    return nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, classes))


def cnn(classes: int = 4) -> nn.Module:
    """The demo's CNN for 1x12x12 images.

    The convolutions have no bias: the batch norm after each cancels it, so its gradient
    is rounding noise, which Adam would scale up to full-size steps (different on every
    device) of a parameter that changes no loss but does change the running means."""
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1, bias=False), nn.BatchNorm2d(8), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(16 * 3 * 3, classes),
    )


class GRUClassifier(nn.Module):
    """The demo's sequence classifier: a GRU over (batch, time, features), and a linear layer
    on its last hidden state. (A GRU rather than an LSTM: on a busy machine the CPU's oneDNN
    LSTM takes many times longer per step than the rest of the demo.)"""

    def __init__(self, features: int = 1, hidden: int = 24, classes: int = 4):
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.head = nn.Linear(hidden, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x)
        return self.head(h[-1])


def gru(classes: int = 4) -> nn.Module:
    """The demo's GRU classifier for sequences of one feature."""
    return GRUClassifier(classes=classes)


@dataclasses.dataclass
class Result:
    """The losses of one model's training: per step and per epoch (means), per device."""

    name: str
    steps_per_epoch: int
    step_losses: dict[str, list[float]]
    accuracy: dict[str, float]

    def epoch_losses(self, device: str) -> list[float]:
        losses, n = self.step_losses[device], self.steps_per_epoch
        return [sum(losses[i:i + n]) / n for i in range(0, len(losses), n)]

    def max_difference(self) -> float:
        a, b = self.step_losses.values()
        return max(abs(x - y) for x, y in zip(a, b, strict=True))

    def mismatches(self) -> list[int]:
        """The steps (from 0) whose losses differ by more than the tolerance."""
        a, b = self.step_losses.values()
        return [i for i, (x, y) in enumerate(zip(a, b, strict=True))
                if not abs(x - y) <= ATOL + RTOL * abs(y)]


_SETUPS = {
    # name: (data, samples, model, optimizer, learning rate, batch size)
    "mlp": (make_blobs, 512, mlp, torch.optim.SGD, 0.05, 64),
    "cnn": (make_images, 256, cnn, torch.optim.Adam, 0.01, 32),
    "gru": (make_sequences, 256, gru, torch.optim.Adam, 0.01, 32),
}


def steps_per_epoch(name: str) -> int:
    _, samples, _, _, _, batch = _SETUPS[name]
    return (samples + batch - 1) // batch


def train(name: str, device: str, epochs: int, seed: int = 0, progress=None) -> Result:
    """Train model ``name`` on ``device`` and on CPU, step by step from the same start."""
    make_data, samples, make_model, optimizer, lr, batch = _SETUPS[name]
    gen = torch.Generator().manual_seed(seed)
    x, y = make_data(gen, samples)
    torch.manual_seed(seed)
    model = make_model()
    devices = (device, "cpu")
    runs = {}
    for dev in devices:
        m = copy.deepcopy(model).to(dev)
        runs[dev] = (m, optimizer(m.parameters(), lr=lr))
    loss_fn = nn.CrossEntropyLoss()
    losses: dict[str, list[float]] = {dev: [] for dev in devices}
    steps = steps_per_epoch(name)
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        for step in range(steps):
            # Batches are made on CPU and copied, as a DataLoader's would be.
            index = order[step * batch:(step + 1) * batch]
            xb, yb = x[index], y[index]
            for dev in devices:
                m, opt = runs[dev]
                opt.zero_grad()
                loss = loss_fn(m(xb.to(dev)), yb.to(dev))
                loss.backward()
                opt.step()
                losses[dev].append(loss.item())
            if progress is not None:
                progress.update(1)
    accuracy = {}
    for dev in devices:
        m = runs[dev][0]
        m.eval()
        with torch.no_grad():
            predicted = m(x.to(dev)).cpu().argmax(1)
        accuracy[dev] = (predicted == y).float().mean().item()
    return Result(name, steps, losses, accuracy)


def train_distributed(device: str, epochs: int, seed: int = 0, progress=None) -> Result:
    """Train the MLP with ``DistributedDataParallel`` on ``device`` and on CPU, step by step
    from the same start, in an initialized default process group (its backend serves
    ``device``; CPU's model uses a gloo group). Each rank trains on its share of every batch;
    the losses are the means over the ranks."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP

    rank, world = dist.get_rank(), dist.get_world_size()
    groups = {device: dist.group.WORLD, "cpu": dist.new_group(backend="gloo")}
    make_data, samples, make_model, optimizer, lr, batch = _SETUPS["mlp"]
    gen = torch.Generator().manual_seed(seed)
    x, y = make_data(gen, samples)
    torch.manual_seed(seed)
    model = make_model()
    runs = {}
    for dev, group in groups.items():
        m = DDP(copy.deepcopy(model).to(dev), process_group=group)
        runs[dev] = (m, optimizer(m.parameters(), lr=lr))
    loss_fn = nn.CrossEntropyLoss()
    losses: dict[str, list[float]] = {dev: [] for dev in groups}
    steps = steps_per_epoch("mlp")
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        for step in range(steps):
            index = order[step * batch:(step + 1) * batch][rank::world]
            xb, yb = x[index], y[index]
            for dev, group in groups.items():
                m, opt = runs[dev]
                opt.zero_grad()
                loss = loss_fn(m(xb.to(dev)), yb.to(dev))
                loss.backward()
                opt.step()
                mean = loss.detach().clone()
                dist.all_reduce(mean, group=group)
                losses[dev].append(mean.item() / world)
            if progress is not None:
                progress.update(1)
    accuracy = {}
    for dev in groups:
        m = runs[dev][0].module
        m.eval()
        with torch.no_grad():
            predicted = m(x.to(dev)).cpu().argmax(1)
        accuracy[dev] = (predicted == y).float().mean().item()
    return Result("mlp", steps, losses, accuracy)


def plot(results: list[Result], path: str) -> None:
    """Save the loss curves (per step, both devices) of every model to ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(5 * len(results), 3.5), squeeze=False)
    for ax, result in zip(axes[0], results, strict=True):
        for (dev, losses), style in zip(result.step_losses.items(), ("-", "--"), strict=True):
            ax.plot(range(1, len(losses) + 1), losses, style, label=dev)
        ax.set_title(f"{result.name}: cross-entropy loss")
        ax.set_xlabel("step")
        ax.set_ylabel("loss")
        ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


#: The devices --device offers, with their backend modules.
_BACKENDS = {"npy": "torch_acc.backends.numpy", "jax": "torch_acc.backends.jax"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=4, help="epochs per model (default 4)")
    parser.add_argument("--seed", type=int, default=0, help="seed of data and weights")
    parser.add_argument("--model", choices=(*MODELS, "all", "both"), default="all",
                        help="the model to train, or all of them (default; \"both\" is kept as "
                        "a name for all)")
    parser.add_argument("--plot", metavar="PATH", help="save the loss curves to PATH (png)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--device", choices=tuple(_BACKENDS), default="npy",
                        help="the device to train on next to CPU (default npy)")
    parser.add_argument("--distributed", action="store_true",
                        help="train the MLP with DistributedDataParallel, one rank per "
                        "process (run under torchrun)")
    args = parser.parse_args(argv)

    backend = npy_backend if args.device == "npy" else importlib.import_module(
        _BACKENDS[args.device])
    device = backend.setup()
    if args.distributed:
        return _main_distributed(args, device)
    names = MODELS if args.model in ("all", "both") else (args.model,)
    results = []
    for name in names:
        with tqdm(total=args.epochs * steps_per_epoch(name), unit="step",
                  desc=f"{name} on {device} and cpu", file=sys.stderr,
                  disable=args.no_progress, leave=False) as bar:
            results.append(train(name, device, args.epochs, args.seed, bar))
    return _report(results, device, args)


def _main_distributed(args, device: str) -> int:
    import torch.distributed as dist

    from torch_acc.distributed import BACKEND

    dist.init_process_group()  # the current accelerator is npy: its backend is acc
    try:
        rank, world = dist.get_rank(), dist.get_world_size()
        with tqdm(total=args.epochs * steps_per_epoch("mlp"), unit="step",
                  desc=f"mlp with DDP on {device} and cpu", file=sys.stderr,
                  disable=args.no_progress or rank != 0, leave=False) as bar:
            result = train_distributed(device, args.epochs, args.seed, bar)
        if rank != 0:
            return 0 if not result.mismatches() else 1
        print(f"DistributedDataParallel on {world} ranks: {BACKEND} backend ({device}), "
              "gloo (cpu)")
        return _report([result], device, args)
    finally:
        dist.destroy_process_group()


def _report(results: list[Result], device: str, args) -> int:
    """Print the tables of ``results``; the exit status."""
    ok = True
    for result in results:
        optimizer = _SETUPS[result.name][3].__name__
        epochs = f"{args.epochs} epoch" + ("s" if args.epochs != 1 else "")
        print(f"{result.name}: {epochs} of {result.steps_per_epoch} steps, "
              f"{optimizer}, cross-entropy")
        print(f"{'epoch':>5}  {device + ' loss':>12}  {'cpu loss':>12}  {'difference':>10}")
        for epoch, (a, b) in enumerate(zip(result.epoch_losses(device),
                                           result.epoch_losses("cpu"), strict=True), 1):
            print(f"{epoch:>5}  {a:>12.6f}  {b:>12.6f}  {abs(a - b):>10.2e}")
        bad = result.mismatches()
        print(f"max difference between {device} and cpu losses (all steps): "
              f"{result.max_difference():.2e}" + (f", {len(bad)} steps out of tolerance"
                                                  if bad else ""))
        print(f"accuracy after training: {device} {result.accuracy[device]:.1%}, "
              f"cpu {result.accuracy['cpu']:.1%}")
        print()
        ok = ok and not bad
    if args.plot:
        plot(results, args.plot)
        print(f"loss curves saved to {args.plot}")
    print("losses match cpu at every step" if ok else
          f"FAILED: {device} losses differ from cpu's (rtol={RTOL}, atol={ATOL})")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
