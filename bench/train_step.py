r"""Time per training step of the demo's MLP on a Python device against CPU torch, in one run.

The model is ``torch_acc.demo.mlp()`` (``Linear(16, 256)``, ``ReLU``, ``Linear(256, 4)``),
the batch 64 samples already on the device, the step ``zero_grad()``, forward, cross-entropy,
``backward()`` and ``torch.optim.SGD.step()`` (lr 0.05, PyTorch's default implementation
for the device: ``foreach`` on ``npy``, a loop over the parameters on CPU). Both devices run
in this process, in alternating rounds, so that a slow spell of a shared machine falls on
both; a time is the median over all rounds of the time per step of a timed loop (warm-up
first, GC off while timing); the ratio of the fastest loops is printed too, being less
sensitive to the load of a shared machine. Both run on one thread (``torch.set_num_threads(1)``, and
``OPENBLAS_NUM_THREADS=1``/``OMP_NUM_THREADS=1`` for NumPy's BLAS unless set): at this size
threads only add synchronization, and on a shared machine a spinning thread pool measures
the machine's load rather than the step. It prints both times and the ratio against the target
(``npy`` <= 2.0x CPU). A miss does not change the exit status.

``--device ref`` measures the passthrough backend (``torch_acc.backends.reference``), whose
kernels are CPU's own: its ratio is the framework's cost alone (target <= 1.3x CPU).

``--profile`` then runs the ``npy`` steps under ``torch.profiler`` and prints the operators
where the time goes (self CPU time: the operator's kernel, the bridge and any fallback),
and with ``--cprofile`` the Python functions (``cProfile``, by total time).

Run from the repository root::

    python bench/train_step.py             # about 20 seconds
    python bench/train_step.py --profile   # and where the time of a step goes
    python bench/train_step.py --device ref  # the framework's cost alone
"""

import argparse
import copy
import gc
import os
import statistics
import time

# Before NumPy (and its BLAS) is imported.
for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import torch  # noqa: E402
from torch import nn  # noqa: E402

from torch_acc import demo  # noqa: E402
from torch_acc.backends import numpy as npy_backend  # noqa: E402
from torch_acc.backends import reference  # noqa: E402

BATCH, FEATURES, HIDDEN, CLASSES, LR = 64, 16, 256, 4, 0.05
#: The backend module and the target ratio against CPU of each device.
DEVICES = {"npy": (npy_backend, 2.0), "ref": (reference, 1.3)}


def make_step(device: str, model: nn.Module, x: torch.Tensor, y: torch.Tensor):
    """A training step on ``device`` (a copy of ``model`` and of the batch)."""
    model = copy.deepcopy(model).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=LR)
    loss_fn = nn.CrossEntropyLoss()
    x, y = x.to(device), y.to(device)

    def step():
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    def phases():
        """The same step, timed in phases (perf_counter_ns at each boundary)."""
        t0 = time.perf_counter_ns()
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        t1 = time.perf_counter_ns()
        loss.backward()
        t2 = time.perf_counter_ns()
        opt.step()
        t3 = time.perf_counter_ns()
        return t1 - t0, t2 - t1, t3 - t2

    step.phases = phases
    return step


def time_loop(step, number: int) -> float:
    """Microseconds per call of ``step``, over one loop of ``number`` calls."""
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        start = time.perf_counter_ns()
        for _ in range(number):
            step()
        return (time.perf_counter_ns() - start) / number / 1e3
    finally:
        if gc_was_enabled:
            gc.enable()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=sorted(DEVICES), default="npy")
    parser.add_argument("--steps", type=int, default=100, help="steps per timed loop")
    parser.add_argument("--rounds", type=int, default=15, help="timed loops per device")
    parser.add_argument("--profile", action="store_true", help="where the device's time goes")
    parser.add_argument("--cprofile", action="store_true", help="Python functions too")
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    backend, target = DEVICES[args.device]
    device = backend.setup()
    gen = torch.Generator().manual_seed(0)
    x, y = demo.make_blobs(gen, BATCH, FEATURES, CLASSES)
    torch.manual_seed(0)
    model = demo.mlp(FEATURES, HIDDEN, CLASSES)
    steps = {dev: make_step(dev, model, x, y) for dev in (device, "cpu")}

    # Both devices compute the same losses (the demo checks every step of a whole run).
    first = {dev: step().item() for dev, step in steps.items()}
    for step in steps.values():
        for _ in range(max(20, args.steps // 5)):
            step()
    samples: dict[str, list[float]] = {dev: [] for dev in steps}
    for _ in range(args.rounds):
        for dev, step in steps.items():
            samples[dev].append(time_loop(step, args.steps))
    times = {dev: statistics.median(s) for dev, s in samples.items()}
    ratio = times[device] / times["cpu"]
    best_ratio = min(samples[device]) / min(samples["cpu"])

    print(f"training step of the demo's MLP: batch {BATCH}, {FEATURES}-{HIDDEN}-{CLASSES}, "
          f"SGD, cross-entropy; torch {torch.__version__}")
    print(f"median of {args.rounds} loops of {args.steps} steps per device "
          f"(first losses: {device} {first[device]:.6f}, cpu {first['cpu']:.6f})")
    print()
    print(f"{'device':<8} {'us/step':>9} {'min':>9} {'max':>9}")
    for dev, s in samples.items():
        print(f"{dev:<8} {times[dev]:>9.1f} {min(s):>9.1f} {max(s):>9.1f}")
    print()
    print(f"{device}/cpu: {ratio:.2f}x  (target <= {target}x: "
          f"{'pass' if ratio <= target else 'MISS'}); fastest loops: {best_ratio:.2f}x")

    # Where a step's time goes: the median of each phase over as many steps again.
    split: dict[str, list[tuple[int, ...]]] = {dev: [] for dev in steps}
    for _ in range(args.rounds):
        for dev, step in steps.items():
            split[dev].extend(step.phases() for _ in range(args.steps))
    print()
    print(f"{'phase (median us)':<26}" + "".join(f"{dev:>9}" for dev in steps) + "    ratio")
    for k, phase in enumerate(("zero_grad+forward+loss", "backward", "optimizer step")):
        med = {dev: statistics.median(t[k] for t in split[dev]) / 1e3 for dev in steps}
        print(f"{phase:<26}" + "".join(f"{med[dev]:>9.1f}" for dev in steps)
              + f"{med[device] / med['cpu']:>8.2f}x")

    if args.profile:
        from torch.profiler import profile, ProfilerActivity

        step = steps[device]
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(args.steps):
                step()
        print()
        print(f"torch.profiler, {args.steps} {device} steps (times are totals):")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25))
    if args.cprofile:
        import cProfile
        import pstats

        step = steps[device]
        profiler = cProfile.Profile()
        profiler.runcall(lambda: [step() for _ in range(args.steps)])
        print(f"cProfile, {args.steps} {device} steps:")
        pstats.Stats(profiler).sort_stats("tottime").print_stats(20)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
