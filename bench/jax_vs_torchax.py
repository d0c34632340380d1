r"""torch_acc's JAX device against torchax, each against CPU torch in its own process.

Cases: per-op overhead on 4x4 float32 tensors (``a + b``, ``a.sum()``, ``a @ b``, a view
``a[1:3].t()`` read by ``+ 1``), an MLP training step (SGD, cross-entropy, batch 32) eager,
and the same step compiled (torch_acc: ``loss.backward()`` and ``opt.step()``, compiled with
``torch.compile(backend="per_device")``, which lowers every graph to one ``jax.jit``;
torchax: the functional step it trains with, ``torch.func.grad_and_value`` and an update,
called as it is and under its own ``torchax.interop.jax_jit``, which makes the whole step one
``jax.jit``: its tensors carry no autograd state for ``loss.backward()``). Each time is the
median CPU time (``time.process_time``) of several loops,
so time waiting for a core other processes hold is not counted (CPU torch runs on one thread,
``torch.set_num_threads(1)``, as its spinning threads would count too); the table gives each
implementation's ratio to CPU torch timed in the same process, and the ratio of the two.

torchax cannot share this process: it takes over PyTorch's dispatch with a tensor subclass,
torch_acc binds PrivateUse1, and torchax 0.0.13 fails to import on torch 2.13 (which removed
the ``dimname`` overloads it names) and on 2.6 (it names ``torch.float4_e2m1fn_x2``, which
came later); it imports on torch 2.9.1, ``pip install torch==2.9.1 "jax[cpu]"
torchax==0.0.13`` in a virtual environment of its own. It runs in a subprocess of another
Python environment, with a torch it supports, given by ``--torchax-python PATH`` (or
``TORCHAX_PYTHON``); its ratios are to the CPU torch of that environment. Without such an
environment the torchax columns say so, and no torchax number is printed.

Targets (issue 19): torch_acc's eager per-op overhead at least 5x lower than torchax's; the
compiled step no slower than torchax's. A miss does not change the exit status.

Run from the repository root::

    python bench/jax_vs_torchax.py [--quick] [--torchax-python PATH]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import torch

OPS = ("a + b", "a.sum()", "a @ b", "view a[1:3].t() + 1")
STEPS = ("MLP step, eager", "MLP step, compiled")


def _time(fn, loops: int, rounds: int) -> float:
    """Median CPU seconds of one call of ``fn`` over ``rounds`` loops of ``loops`` calls."""
    for _ in range(max(3, loops // 10)):
        fn()
    times = []
    for _ in range(rounds):
        start = time.process_time()
        for _ in range(loops):
            fn()
        times.append((time.process_time() - start) / loops)
    return statistics.median(times)


def _ops(device: str, sync):
    a = torch.randn(4, 4).to(device)
    b = torch.randn(4, 4).to(device)

    def wrap(f):
        return lambda: sync(f())

    return {
        "a + b": wrap(lambda: a + b),
        "a.sum()": wrap(lambda: a.sum()),
        "a @ b": wrap(lambda: a @ b),
        "view a[1:3].t() + 1": wrap(lambda: a[1:3].t() + 1),
    }


def _mlp_step(device: str, compile_fn=None):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64).to(device)
    y = torch.randint(0, 10, (32,)).to(device)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return compile_fn(step) if compile_fn else step


def host_torch_acc(quick: bool) -> dict:
    """This process: CPU torch and torch_acc's ``jax`` device."""
    from torch_acc.backends import jax as jax_backend

    jax_backend.setup()
    loops, rounds = (50, 3) if quick else (300, 7)

    def block(t):
        jax_backend.array(t).block_until_ready()

    result = {"torch": torch.__version__, "cpu": {}, "impl": {}}
    cpu_ops, jax_ops = _ops("cpu", lambda t: t), _ops("jax", block)
    for case in OPS:
        result["cpu"][case] = _time(cpu_ops[case], loops, rounds)
        result["impl"][case] = _time(jax_ops[case], loops, rounds)
    step_loops = max(5, loops // 20)
    cpu_step = _mlp_step("cpu")
    eager = _mlp_step("jax")
    compiled = _mlp_step("jax", lambda f: torch.compile(f, backend="per_device"))
    cpu_time = _time(cpu_step, step_loops, rounds)
    result["cpu"]["MLP step, eager"] = result["cpu"]["MLP step, compiled"] = cpu_time
    result["impl"]["MLP step, eager"] = _time(lambda: block(eager()), step_loops, rounds)
    result["impl"]["MLP step, compiled"] = _time(lambda: block(compiled()), step_loops, rounds)
    return result


def host_torchax(quick: bool) -> dict:
    """A process of an environment with torchax: CPU torch and torchax."""
    import jax
    import torchax
    from torchax.interop import jax_jit

    loops, rounds = (50, 3) if quick else (300, 7)
    result = {"torch": torch.__version__, "torchax": torchax.__version__, "cpu": {}, "impl": {}}
    cpu_ops = _ops("cpu", lambda t: t)
    cpu_step = _mlp_step("cpu")
    for case in OPS:
        result["cpu"][case] = _time(cpu_ops[case], loops, rounds)
    step_loops = max(5, loops // 20)
    cpu_time = _time(cpu_step, step_loops, rounds)
    result["cpu"]["MLP step, eager"] = result["cpu"]["MLP step, compiled"] = cpu_time

    torchax.enable_globally()

    def block(t):
        jax.block_until_ready(t.jax() if hasattr(t, "jax") else t)

    jax_ops = _ops("jax", block)
    for case in OPS:
        result["impl"][case] = _time(jax_ops[case], loops, rounds)

    # torchax trains functionally: its tensors carry no autograd state for loss.backward()
    # ("element 0 of tensors does not require grad"), so both of its steps are the
    # torch.func step below, eager and under jax_jit.
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 10)
    ).to("jax")
    params = dict(model.named_parameters())
    x = torch.randn(32, 64).to("jax")
    y = torch.randint(0, 10, (32,)).to("jax")

    def loss_fn(p, x, y):
        return torch.nn.functional.cross_entropy(torch.func.functional_call(model, p, (x,)), y)

    def step(p, x, y):
        grads, loss = torch.func.grad_and_value(loss_fn)(p, x, y)
        return {k: p[k] - 0.01 * grads[k] for k in p}, loss

    jitted = jax_jit(step)
    state = {"p": params}

    def eager():
        state["p"], loss = step(state["p"], x, y)
        return loss

    def compiled():
        state["p"], loss = jitted(state["p"], x, y)
        return loss

    result["impl"]["MLP step, eager"] = _time(lambda: block(eager()), step_loops, rounds)
    result["impl"]["MLP step, compiled"] = _time(lambda: block(compiled()), step_loops, rounds)
    return result


def _torchax_here() -> str:
    """Why torchax cannot run in this process's environment."""
    try:
        import torchax  # noqa: F401
    except Exception as e:  # noqa: BLE001 - any failure to import is the reason
        return f"import torchax fails here (torch {torch.__version__}): {type(e).__name__}: {e}"
    return f"torchax imports here, but shares no process with torch_acc (torch {torch.__version__})"


def _run_host(python: str, host: str, quick: bool) -> dict:
    cmd = [python, os.path.abspath(__file__), "--host", host] + (["--quick"] if quick else [])
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{host} subprocess failed:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer loops and rounds")
    parser.add_argument(
        "--torchax-python",
        default=os.environ.get("TORCHAX_PYTHON"),
        help="python of an environment with torchax and a torch it supports",
    )
    parser.add_argument("--host", choices=("torch_acc", "torchax"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.host == "torch_acc":
        print(json.dumps(host_torch_acc(args.quick)))
        return 0
    if args.host == "torchax":
        print(json.dumps(host_torchax(args.quick)))
        return 0

    ours = _run_host(sys.executable, "torch_acc", args.quick)
    theirs, why_not = None, None
    if args.torchax_python:
        try:
            theirs = _run_host(args.torchax_python, "torchax", args.quick)
        except RuntimeError as e:
            why_not = str(e)
    else:
        why_not = (
            _torchax_here() + "; no environment with torchax was given "
            "(--torchax-python PATH or TORCHAX_PYTHON)"
        )

    print(f"torch_acc jax: torch {ours['torch']}; CPU times per call, microseconds")
    if theirs:
        print(f"torchax {theirs['torchax']}: torch {theirs['torch']}")
    header = f"{'case':<22} {'cpu':>9} {'torch_acc':>10} {'ratio':>7}"
    if theirs:
        header += f" {'cpu':>9} {'torchax':>10} {'ratio':>7} {'torchax/torch_acc':>18}"
    print(header)
    for case in OPS + STEPS:
        c, t = ours["cpu"][case] * 1e6, ours["impl"][case] * 1e6
        line = f"{case:<22} {c:>9.1f} {t:>10.1f} {t / c:>7.1f}"
        if theirs:
            tc, tt = theirs["cpu"][case] * 1e6, theirs["impl"][case] * 1e6
            line += f" {tc:>9.1f} {tt:>10.1f} {tt / tc:>7.1f} {(tt / tc) / (t / c):>18.2f}"
        print(line)
    if theirs is None:
        print(f"\ntorchax: not measured. {why_not}")
        print("targets (eager per-op overhead >= 5x lower, compiled step no slower): not checked")
        return 0
    overhead = [
        (theirs["impl"][c] - theirs["cpu"][c]) / max(ours["impl"][c] - ours["cpu"][c], 1e-9)
        for c in OPS
    ]
    compiled = (theirs["impl"][STEPS[1]] / theirs["cpu"][STEPS[1]]) / (
        ours["impl"][STEPS[1]] / ours["cpu"][STEPS[1]]
    )
    print(
        f"\neager per-op overhead, torchax/torch_acc: {', '.join(f'{r:.1f}x' for r in overhead)}"
        f" (target >= 5x): {'met' if min(overhead) >= 5 else 'missed'}"
    )
    print(
        f"compiled step, torchax/torch_acc (each to its CPU torch): {compiled:.2f}x "
        f"(target >= 1x): {'met' if compiled >= 1 else 'missed'}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
