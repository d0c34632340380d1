r"""Per-call overhead of small ops: native CPU torch against three Python-defined backends.

Every case works on 4x4 float32 tensors, so the time measured is dispatch overhead, not
arithmetic. The cases are ``a + b``, ``a.sum()``, ``a @ b``, making a tensor around existing
data, and ``a + b`` on inputs with ``requires_grad=True`` (forward only, under grad mode, so
the call also records the autograd graph). The implementations are:

``native``
    plain CPU torch; creation is ``torch.empty(4, 4)``.
``wrapper``
    a ``__torch_dispatch__`` wrapper subclass (``torch.Tensor._make_wrapper_subclass``)
    holding a CPU tensor: it unwraps the arguments, calls the op and wraps tensor results;
    creation wraps an existing CPU tensor.
``seed``
    the seed PR's style (as in ``test/test_subclass_backend.py``): a ``NumpyTensor``
    subclass made with ``torch_acc._C.create_empty_tensor`` plus a payload, with kernels
    registered through ``torch.library`` for PrivateUse1; creation is ``NumpyTensor(arr)``.
``bridge``
    torch_acc's kernel bridge with its reference backend ``torch_acc.backends.numpy``;
    creation is ``torch_acc.wrap(arr)``.

The seed backend and the bridge both claim the PrivateUse1 dispatch key, so they run in
subprocesses of their own (``--host seed``, ``--host bridge``), which print their timings as
JSON; native CPU torch and the wrapper subclass need no device and are timed in the same
processes: native beside the seed path, native and the wrapper beside the bridge. Within a
process the implementations' timed loops of N calls alternate (in order, then in reverse
order), so a slow spell of a shared machine falls on all of them alike, and a loop's time is
the CPU time the process spent in it (``time.process_time_ns``), so time spent waiting for a
core that other processes hold is not counted. Each subprocess times several rounds (one in
the quick mode); the parent runs the two in turn and prints one table of per-call times in
microseconds (the median over all timed loops, each implementation warmed up first) with the
ratios, and the targets met or missed. A ratio is the median over the
rounds of each round's ratio of median loop times of two implementations timed in the same
process; the targets give its range too. The seed path and the bridge never share a process:
their ratio is that of their ratios to native in their own processes. A miss does not change
the exit status.

Run from the repository root::

    python bench/op_overhead.py          # full run, about 2 minutes
    python bench/op_overhead.py --quick  # one round, fewer loops
"""

import argparse
import gc
import json
import platform
import statistics
import subprocess
import sys
import time

import numpy as np
import torch
from torch.utils._pytree import tree_map

IMPLS = ("native", "wrapper", "seed", "bridge")
CASES = ("a + b", "a.sum()", "a @ b", "create", "a + b (grad)")

#: The implementations each subprocess times, interleaved, in this order; it is named after
#: the one that needs the process to itself.
HOSTS = {"seed": ("native", "seed"), "bridge": ("native", "bridge", "wrapper")}

#: (calls per timed loop, timed loops of each implementation per subprocess, warm-up calls,
#: rounds) for each mode. Each subprocess times all rounds; round i of one subprocess is paired
#: with round i of the other where a ratio needs both.
LOOPS = {"quick": (500, 4, 200, 1), "full": (1000, 8, 500, 7)}


def time_interleaved(fns: dict, number: int, repeats: int) -> dict[str, list[float]]:
    """CPU times of one call of each of ``fns`` in microseconds, one per loop of ``number``
    calls. The loops alternate between the functions, in order and then in reverse order, so that
    each function's loops are spread over the same stretch of time as the others'.
    """
    samples = {name: [] for name in fns}
    order = list(fns)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for i in range(repeats):
            for name in order if i % 2 == 0 else reversed(order):
                fn = fns[name]
                start = time.process_time_ns()
                for _ in range(number):
                    fn()
                samples[name].append((time.process_time_ns() - start) / number / 1e3)
    finally:
        if gc_was_enabled:
            gc.enable()
    return samples


def binary_cases(a, b, ag, bg, create):
    """The timed callables, given two operands, two operands requiring grad and a creator."""
    return {
        "a + b": lambda: a + b,
        "a.sum()": lambda: a.sum(),
        "a @ b": lambda: a @ b,
        "create": create,
        "a + b (grad)": lambda: ag + bg,
    }


# --- native -----------------------------------------------------------------------------------


def native_cases():
    a, b = torch.randn(4, 4), torch.randn(4, 4)
    ag, bg = torch.randn(4, 4, requires_grad=True), torch.randn(4, 4, requires_grad=True)
    return binary_cases(a, b, ag, bg, lambda: torch.empty(4, 4))


# --- wrapper subclass -------------------------------------------------------------------------


class WrapperTensor(torch.Tensor):
    """A ``__torch_dispatch__`` wrapper subclass whose data is the CPU tensor ``elem``."""

    elem: torch.Tensor

    @staticmethod
    def __new__(cls, elem: torch.Tensor, requires_grad: bool = False):
        return torch.Tensor._make_wrapper_subclass(
            cls,
            elem.shape,
            strides=elem.stride(),
            storage_offset=elem.storage_offset(),
            dtype=elem.dtype,
            device=elem.device,
            requires_grad=requires_grad,
        )

    def __init__(self, elem: torch.Tensor, requires_grad: bool = False):
        self.elem = elem

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        def unwrap(x):
            return x.elem if isinstance(x, cls) else x

        def wrap(x):
            return cls(x) if isinstance(x, torch.Tensor) else x

        return tree_map(wrap, func(*tree_map(unwrap, args), **tree_map(unwrap, kwargs or {})))


def wrapper_cases():
    a, b = WrapperTensor(torch.randn(4, 4)), WrapperTensor(torch.randn(4, 4))
    ag = WrapperTensor(torch.randn(4, 4), requires_grad=True)
    bg = WrapperTensor(torch.randn(4, 4), requires_grad=True)
    base = torch.randn(4, 4)
    return binary_cases(a, b, ag, bg, lambda: WrapperTensor(base))


# --- seed-style subclass backend --------------------------------------------------------------

SEED_DEVICE = "npy"

_TORCH_TO_NUMPY = {
    torch.bool: np.bool_,
    torch.int64: np.int64,
    torch.float32: np.float32,
    torch.float64: np.float64,
}
_NUMPY_TO_TORCH = {np.dtype(v): k for k, v in _TORCH_TO_NUMPY.items()}

#: The seed kernels' registrations, which last as long as this library object.
_seed_library: torch.library.Library | None = None


def seed_cases():
    """Set up the seed-style backend (as in ``test/test_subclass_backend.py``) and its cases."""
    from torch_acc import _C
    from torch_acc.backend_registration import setup_privateuseone_for_python_backend

    class NumpyTensor(torch.Tensor):
        """A tensor on the seed backend's device; its payload is the NumPy array ``raw_data``."""

        @staticmethod
        def __new__(cls, raw_data: np.ndarray, device_index: int = 0):
            res = _C.create_empty_tensor(
                raw_data.shape, _NUMPY_TO_TORCH[raw_data.dtype], device_index
            )
            res.__class__ = cls
            return res

        def __init__(self, raw_data: np.ndarray, device_index: int = 0):
            _C.set_payload(self, raw_data)

        __torch_function__ = torch._C._disabled_torch_function_impl

    def wrap(value, like, dtype=None):
        arr = np.asarray(value)
        if dtype is not None:
            arr = arr.astype(_TORCH_TO_NUMPY[dtype], copy=False)
        device = like if isinstance(like, torch.device) else like.device
        return NumpyTensor(arr, device.index or 0)

    def on_device(*args):
        return next(a for a in args if isinstance(a, torch.Tensor) and a.device.type == SEED_DEVICE)

    def unwrap(t):
        if isinstance(t, torch.Tensor) and t.device.type == SEED_DEVICE:
            return _C.payload(t)
        if isinstance(t, torch.Tensor):
            return t.detach().numpy()
        return np.asarray(t)

    def add(a, b, *, alpha=1):
        result = unwrap(a) + alpha * unwrap(b) if alpha != 1 else unwrap(a) + unwrap(b)
        return wrap(result, on_device(a, b), torch.result_type(a, b))

    def empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        device = torch.device(SEED_DEVICE, 0) if device is None else torch.device(device)
        return wrap(np.empty(tuple(size), _TORCH_TO_NUMPY[dtype or torch.float32]), device)

    def empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
        return empty(size, dtype=dtype, device=device)

    def copy_from(src, dst, non_blocking=False):
        if dst.device.type == SEED_DEVICE:
            data = unwrap(src) if src.device.type == SEED_DEVICE else src.detach().cpu().numpy()
            np.copyto(unwrap(dst), data.astype(unwrap(dst).dtype, copy=False))
        else:
            dst.copy_(torch.from_numpy(np.array(unwrap(src), order="C")))
        return dst

    def sum_(self, dim=None, keepdim=False, *, dtype=None):
        axis = None if dim is None or len(dim) == 0 else tuple(dim)
        dtype = dtype or self.dtype
        return wrap(
            np.sum(unwrap(self), axis=axis, keepdims=keepdim, dtype=_TORCH_TO_NUMPY[dtype]), self
        )

    def as_strided(self, size, stride, storage_offset=None):
        flat = np.ascontiguousarray(unwrap(self)).reshape(-1)[storage_offset or 0 :]
        item = flat.itemsize
        view = np.lib.stride_tricks.as_strided(flat, tuple(size), tuple(s * item for s in stride))
        return wrap(view.copy(), self)

    kernels = {
        "empty.memory_format": empty,
        "empty_strided": empty_strided,
        "_copy_from": copy_from,
        "add.Tensor": add,
        "sum": lambda self, *, dtype=None: sum_(self, dtype=dtype),
        "sum.dim_IntList": sum_,
        "mm": lambda self, other: wrap(unwrap(self) @ unwrap(other), on_device(self, other)),
        "detach": lambda self: wrap(unwrap(self), self),
        "expand": lambda self, size, *, implicit=False: wrap(
            np.broadcast_to(unwrap(self), tuple(size)).copy(), self
        ),
        "view": lambda self, size: wrap(unwrap(self).reshape(tuple(size)), self),
        "as_strided": as_strided,
        "_local_scalar_dense": lambda self: unwrap(self).item(),
    }
    global _seed_library
    setup_privateuseone_for_python_backend(SEED_DEVICE)
    _seed_library = torch.library.Library("aten", "IMPL")
    for name, kernel in kernels.items():
        _seed_library.impl(name, kernel, "PrivateUse1")

    a, b = torch.randn(4, 4).to(SEED_DEVICE), torch.randn(4, 4).to(SEED_DEVICE)
    ag = torch.randn(4, 4).to(SEED_DEVICE).requires_grad_()
    bg = torch.randn(4, 4).to(SEED_DEVICE).requires_grad_()
    arr = np.random.rand(4, 4).astype(np.float32)
    return binary_cases(a, b, ag, bg, lambda: NumpyTensor(arr))


# --- torch_acc's bridge -----------------------------------------------------------------------


def bridge_cases():
    import torch_acc
    from torch_acc.backends import numpy as npy_backend

    device = npy_backend.setup()
    a, b = torch.randn(4, 4).to(device), torch.randn(4, 4).to(device)
    ag = torch.randn(4, 4).to(device).requires_grad_()
    bg = torch.randn(4, 4).to(device).requires_grad_()
    arr = np.random.rand(4, 4).astype(np.float32)
    return binary_cases(a, b, ag, bg, lambda: torch_acc.wrap(arr))


SETUPS = {
    "native": native_cases,
    "wrapper": wrapper_cases,
    "seed": seed_cases,
    "bridge": bridge_cases,
}


def error_text(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"error: {type(exc).__name__}: {lines[0] if lines else ''}"


def measure(host: str, mode: str) -> list[dict]:
    """Per-loop timings (microseconds) of every case for each implementation of ``host``,
    timed interleaved, one ``{impl: {case: timings}}`` per round; an error message in place
    of an implementation's timings where it failed."""
    number, repeats, warmup, rounds = LOOPS[mode]
    errors = {impl: {} for impl in HOSTS[host]}
    setups = {}
    for impl in HOSTS[host]:
        try:
            setups[impl] = SETUPS[impl]()
        except Exception as exc:
            errors[impl] = dict.fromkeys(CASES, error_text(exc))
    fns = {case: {} for case in CASES}
    for case in CASES:
        for impl, cases in setups.items():
            try:
                for _ in range(warmup):
                    cases[case]()
            except Exception as exc:
                errors[impl][case] = error_text(exc)
            else:
                fns[case][impl] = cases[case]
    results = []
    for _ in range(rounds):
        results.append({impl: dict(errors[impl]) for impl in HOSTS[host]})
        for case in CASES:
            for impl, samples in time_interleaved(fns[case], number, repeats).items():
                results[-1][impl][case] = samples
    return results


def run_child(host: str, mode: str) -> list[dict]:
    """``measure(host, mode)`` in a fresh interpreter, so backends do not share PrivateUse1."""
    args = [sys.executable, __file__, "--host", host] + (["--quick"] if mode == "quick" else [])
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = proc.stderr.strip().splitlines()
        error = f"error: subprocess exited with {proc.returncode}: {lines[-1] if lines else ''}"
        return [{impl: dict.fromkeys(CASES, error) for impl in HOSTS[host]}] * LOOPS[mode][3]
    return json.loads(proc.stdout)


# --- report -----------------------------------------------------------------------------------

#: (label, numerator impl, denominator impl, case, bound, whether the ratio must stay below).
TARGETS = (
    ("bridge a+b <= 1.5x native", "bridge", "native", "a + b", 1.5, True),
    ("wrapper/bridge a+b >= 2.5", "wrapper", "bridge", "a + b", 2.5, False),
    ("seed/bridge a+b >= 3", "seed", "bridge", "a + b", 3.0, False),
    ("wrap <= 0.8x torch.empty(4,4)", "bridge", "native", "create", 0.8, True),
    ("bridge grad a+b <= 1.5x native", "bridge", "native", "a + b (grad)", 1.5, True),
)
#: (column name, numerator impl, denominator impl) of the ratio columns.
RATIOS = (
    ("bridge/native", "bridge", "native"),
    ("wrapper/bridge", "wrapper", "bridge"),
    ("seed/bridge", "seed", "bridge"),
)


def round_ratio(rnd: dict, num: str, den: str, case: str) -> float | None:
    """The ratio of ``num`` to ``den`` in one round (``{host: measure(host)}``): that of their
    median loop times in a process that timed both, else that of their ratios to native in
    their own processes; None where either has no timings."""
    for host, impls in HOSTS.items():
        if num in impls and den in impls:
            x, y = rnd[host][num][case], rnd[host][den][case]
            if isinstance(x, str) or isinstance(y, str):
                return None
            return statistics.median(x) / statistics.median(y)
    x, y = round_ratio(rnd, num, "native", case), round_ratio(rnd, den, "native", case)
    return None if x is None or y is None else x / y


def summarize(rounds: list[dict]) -> tuple[dict, dict]:
    """The per-call time of every implementation and case (the median of all its timed loops,
    or its error), and the per-round ratios of every ratio column and target."""
    times = {}
    for impl in IMPLS:
        times[impl] = {}
        for case in CASES:
            runs = [
                rnd[host][impl][case] for rnd in rounds for host in HOSTS if impl in HOSTS[host]
            ]
            errors = [r for r in runs if isinstance(r, str)]
            times[impl][case] = errors[0] if errors else statistics.median(sum(runs, []))
    pairs = {(num, den, case) for _, num, den in RATIOS for case in CASES}
    pairs |= {(num, den, case) for _, num, den, case, _, _ in TARGETS}
    ratios = {}
    for pair in pairs:
        values = [round_ratio(rnd, *pair) for rnd in rounds]
        ratios[pair] = [] if None in values else values
    return times, ratios


def format_table(times: dict, ratios: dict) -> str:
    """The per-call times and median ratios, one row per case; errors follow the table."""
    header = ["case", *(f"{impl} us" for impl in IMPLS), *(name for name, _, _ in RATIOS)]
    rows, notes = [], []
    for case in CASES:
        row = ["create (wrap/empty)" if case == "create" else case]
        for impl in IMPLS:
            value = times[impl][case]
            if isinstance(value, str):
                notes.append(f"{impl}, {case}: {value}")
                row.append("error")
            else:
                row.append(f"{value:.2f}")
        for _, num, den in RATIOS:
            values = ratios[num, den, case]
            row.append(f"{statistics.median(values):.2f}" if values else "-")
        rows.append(row)
    widths = [max(len(r[i]) for r in (header, *rows)) for i in range(len(header))]

    def line(cells):
        first, *rest = cells
        return "  ".join([first.ljust(widths[0]), *map(str.rjust, rest, widths[1:])])

    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows), *notes])


def format_targets(ratios: dict) -> str:
    """Each target's median ratio, its range over the rounds, and whether the median meets it."""
    lines = ["targets (median ratio over the rounds; range; rounds that met the bound):"]
    for label, num, den, case, bound, below in TARGETS:
        values = ratios[num, den, case]
        if not values:
            lines.append(f"  {label:<32} {'-':>6}  miss (error)")
            continue
        r = statistics.median(values)
        met = sum(v <= bound if below else v >= bound for v in values)
        mark = "pass" if (r <= bound if below else r >= bound) else "MISS"
        spread = f"{min(values):.2f}-{max(values):.2f}"
        lines.append(f"  {label:<32} {r:>6.2f}  {spread:>11}  {met}/{len(values)} rounds  {mark}")
    return "\n".join(lines)


def collect(mode: str) -> list[dict]:
    """One ``{host: that round of measure(host, mode)}`` per round; the hosts' subprocesses
    run in turn."""
    hosts = {host: run_child(host, mode) for host in HOSTS}
    return [{host: hosts[host][i] for host in HOSTS} for i in range(LOOPS[mode][3])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one round, fewer loops")
    parser.add_argument("--host", choices=HOSTS, help="time one subprocess' share, print JSON")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    if args.host:
        print(json.dumps(measure(args.host, mode)))
        return
    times, ratios = summarize(collect(mode))
    number, repeats, warmup, rounds = LOOPS[mode]
    print(
        f"op_overhead ({mode}): torch {torch.__version__}, numpy {np.__version__}, "
        f"python {platform.python_version()}; 4x4 float32; microseconds per call, median of "
        f"{rounds} rounds x {repeats} interleaved loops of {number} calls ({warmup} warm-up "
        f"calls each), CPU time; ratios: median over the rounds"
    )
    print(format_table(times, ratios))
    print(format_targets(ratios))


if __name__ == "__main__":
    main()
