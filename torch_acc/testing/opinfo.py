r"""Measure a backend with PyTorch's OpInfo database: run every entry on CPU and on the backend.

For each entry of ``torch.testing._internal.common_methods_invocations.op_db`` (an entry is a
name and a variant; ``max.binary`` is the ``binary`` variant of ``max``) that supports the
dtype on CPU, every sample input of that dtype runs on CPU and, with each tensor copied with
``.to(device)``, on the backend. The backend's results are compared with CPU's: structure,
dtype, shape, strides (of dimensions longer than one) and values, with
``torch.testing.assert_close``'s tolerances for the dtype, raised to the largest
``toleranceOverride`` the entry's decorators set for that dtype. Entries whose values
PyTorch's ``test_compare_cpu`` skips (non-deterministic output, undefined values) are compared
without values. Each entry gets a status:

- ``pass``: every sample matches CPU;
- ``fail``: wrong values, structure, dtype, shape or strides (the first mismatch kept);
- ``error``: the backend raised where CPU did not (the message's first line kept; the
  finding column says when the message does not name the operator);
- ``crash``: the process died or the entry ran past ``--timeout``;
- ``skip``: every sample raised on CPU too (nothing to compare), or the backend's
  ``OPINFO_NOTES`` gives the reason it is not run (an entry id to ``("skip", reason)``; with
  ``("values", reason)`` the entry runs and is compared without values).

Samples that raise on CPU are left out. With ``--grad``, only entries that support autograd
in the dtype run; their samples' inputs require grad on both devices, the outputs get the
same seeded random gradients on both, and the input gradients are compared too.

Entries run in chunks in worker processes (``--jobs`` at a time), so a crash loses only its
chunk: the entry that was running reruns alone (a crash there is recorded), the entries that
had not started go on in a new process. The backend is one that is registered under a device
name (``--device``: a ``torch.backends`` entry point or :func:`torch_acc.register_backend`) or
any module whose ``setup()`` sets up the device and returns its name (``--backend``). The
report is a measurement, not a test: exit code 0.

Usage::

    python -m torch_acc.testing.opinfo                          # npy, float32, forward
    python -m torch_acc.testing.opinfo --device ref --grad --json /tmp/r.json
    python -m torch_acc.testing.opinfo --out docs/opinfo_numpy.md --json /tmp/r.json
    python -m torch_acc.testing.opinfo --ops 'add,nn.functional.*' --limit-samples 3
    python -m torch_acc.testing.opinfo --backend my_package.my_backend
    python -m torch_acc.testing.opinfo --ops 'add,sum' --update test/opinfo/numpy_passing_2.13.txt
    python -m torch_acc.testing.opinfo --from-json fwd.json grad.json --out docs/opinfo_numpy.md

``--update PATH`` rewrites a pass list (one entry a line): the entries this run covered are
added when they pass and removed otherwise; entries outside the run stay as they are.
"""

import argparse
import collections
import datetime
import fnmatch
import importlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
import zlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

import torch_acc
from torch_acc import registry

STATUSES = ("pass", "fail", "error", "crash", "skip")
COUNTED = ("pass", "fail", "error", "crash")  # the statuses of entries that run on CPU
DEFAULT_DEVICE = "npy"
#: The module the workers run (``__name__`` is ``__main__`` under ``python -m``).
MODULE = "torch_acc.testing.opinfo"
COMMAND = f"python -m {MODULE}"
_ATEN_OP = re.compile(r"aten(?:\.|::)([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)")


@dataclass
class Result:
    """The outcome of one OpInfo entry."""

    entry: str
    status: str
    message: str = ""
    samples: int = 0  # samples compared (those that ran on CPU)
    values_compared: bool = True
    names_op: bool = True  # for errors: the message names the operator
    seconds: float = 0.0
    extra: dict = field(default_factory=dict)


def entry_id(op) -> str:
    """``name`` or ``name.variant``: the key of an OpInfo entry in reports and pass lists."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def op_db() -> list:
    from torch.testing._internal.common_methods_invocations import op_db as db

    return db


def select(patterns: list[str] | None) -> list:
    """The entries whose id or name matches one of the fnmatch patterns (all without any)."""
    entries = op_db()
    if not patterns:
        return list(entries)
    return [
        op for op in entries
        if any(fnmatch.fnmatchcase(entry_id(op), p) or fnmatch.fnmatchcase(op.name, p)
               for p in patterns)
    ]


def runs_on_cpu(op, dtype: torch.dtype, grad: bool) -> bool:
    """Whether the entry runs in this mode at all (else it is left out of the report)."""
    if grad:
        return op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
    return dtype in op.supported_dtypes("cpu")


# ---------------------------------------------------------------------------------------------
# One entry, in a worker process


def _active(info, dtype: torch.dtype) -> bool:
    """Whether a DecorateInfo applies to test_compare_cpu-like runs of this dtype."""
    if info.dtypes is not None and dtype not in info.dtypes:
        return False
    return not callable(info.active_if) and bool(info.active_if)


def _values_skip_reason(op, dtype: torch.dtype) -> str | None:
    """The reason test_compare_cpu skips this entry (undefined values), or None."""
    for info in op.decorators:
        if not hasattr(info, "test_name") or info.test_name != "test_compare_cpu":
            continue
        if info.device_type is not None or not _active(info, dtype):
            continue
        for decorator in info.decorators:
            if getattr(decorator, "__name__", "") == "decorator" and decorator.__qualname__ \
                    .startswith("skip."):
                return _closure_reason(decorator)
    return None


def _closure_reason(decorator) -> str:
    for cell in decorator.__closure__ or ():
        if isinstance(cell.cell_contents, str):
            return cell.cell_contents
    return "skipped"


def tolerances(op, dtype: torch.dtype) -> tuple[float, float]:
    """(rtol, atol): assert_close's defaults for the dtype, raised by toleranceOverrides."""
    from torch.testing._comparison import default_tolerances
    from torch.testing._internal.common_device_type import toleranceOverride

    rtol, atol = default_tolerances(dtype)
    for info in op.decorators:
        for decorator in getattr(info, "decorators", ()):
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                if info.dtypes is None or dtype in info.dtypes:
                    rtol = max(rtol, decorator.d[dtype].rtol)
                    atol = max(atol, decorator.d[dtype].atol)
    return rtol, atol


def _significant_strides_differ(a: torch.Tensor, e: torch.Tensor) -> bool:
    if a.numel() == 0 or a.layout != torch.strided or e.layout != torch.strided:
        return False
    dims = zip(e.shape, a.stride(), e.stride(), strict=True)
    return any(n > 1 and sa != se for n, sa, se in dims)


def _scalars_close(a, e, rtol: float, atol: float) -> bool:
    if type(a) is not type(e):
        return False
    if isinstance(e, (float, complex)):
        return (a != a and e != e) or abs(a - e) <= atol + rtol * abs(e)  # NaN matches NaN
    return a == e


def compare(actual, expected, rtol: float, atol: float, values: bool,
            what: str = "result") -> str | None:
    """The first difference between the backend's and CPU's results, or None."""
    from torch.utils._pytree import tree_flatten

    a_leaves, a_spec = tree_flatten(actual)
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        return f"{what} structure differs: {a_spec} vs CPU {e_spec}".replace("\n", " ")
    for i, (a, e) in enumerate(zip(a_leaves, e_leaves, strict=True)):
        where = what if len(a_leaves) == 1 else f"{what} {i}"
        if isinstance(e, torch.Tensor) != isinstance(a, torch.Tensor):
            return f"{where}: {type(a).__name__} vs CPU {type(e).__name__}"
        if not isinstance(e, torch.Tensor):
            if values and not _scalars_close(a, e, rtol, atol):
                return f"{where}: {a!r} vs CPU {e!r}"
            continue
        if a.dtype != e.dtype:
            return f"{where} dtype {a.dtype} vs CPU {e.dtype}"
        if a.shape != e.shape:
            return f"{where} shape {tuple(a.shape)} vs CPU {tuple(e.shape)}"
        if _significant_strides_differ(a, e):
            return f"{where} strides {a.stride()} vs CPU {e.stride()} (shape {tuple(e.shape)})"
        if values and e.layout == torch.strided:
            try:
                torch.testing.assert_close(a.detach().cpu(), e.detach(), rtol=rtol, atol=atol,
                                           equal_nan=True, check_device=False,
                                           check_stride=False)
            except AssertionError as err:
                return f"{where} values: " + " ".join(str(err).split())
    return None


def _first_line(err: BaseException) -> str:
    text = str(err).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(err).__name__}: {first}"


def names_op(message: str, op) -> bool:
    """Whether an error message names an operator: the entry's own (or its backward, as
    ``linalg_eig_backward``) or an ATen one."""
    names = {op.name, op.name.rsplit(".", 1)[-1], op.aten_name or ""}
    return bool(_ATEN_OP.search(message)) or any(
        re.search(rf"(?<![\w.]){re.escape(n)}(?:_backward)?(?![\w])", message)
        for n in names
        if len(n) > 2
    )


def _to_device(tree, device: str, grad: bool):
    from torch.utils._pytree import tree_map

    def move(x):
        if isinstance(x, torch.Tensor):
            if grad:
                return x.detach().to(device).requires_grad_(x.requires_grad)
            return x.to(device)
        return x

    return tree_map(move, tree)


def _device_kwargs(kwargs: dict, device: str) -> dict:
    """Factory samples may ask for device='cpu': the backend run asks for its device."""
    if "device" in kwargs and torch.device(kwargs["device"]).type == "cpu":
        return {**kwargs, "device": device}
    return kwargs


def _grads(sample_args, outputs, seed: int):
    """Input gradients for the outputs, with seeded random output gradients."""
    from torch.utils._pytree import tree_flatten

    outs = [t for t in tree_flatten(outputs)[0]
            if isinstance(t, torch.Tensor) and t.requires_grad]
    inputs = [t for t in tree_flatten(sample_args)[0]
              if isinstance(t, torch.Tensor) and t.requires_grad]
    if not outs or not inputs:
        return None
    gen = torch.Generator().manual_seed(seed)
    grad_outputs = [torch.randn(t.shape, dtype=t.dtype, generator=gen).to(t.device)
                    for t in outs]
    return list(torch.autograd.grad(outs, inputs, grad_outputs, allow_unused=True))


def _call(op, grad: bool, sample_input, args, kwargs):
    """The op on a sample; for gradients through its gradcheck wrapper, as test_ops does."""
    if grad:
        return op.gradcheck_wrapper(op.get_op(), sample_input, *args, **kwargs)
    return op(sample_input, *args, **kwargs)


#: Entries whose sample keeps a tensor argument on the CPU on every device (the operator
#: requires it there): only the sample's input moves to the device.
_CPU_ARGUMENTS = {"tensor_split"}


def run_entry(op, device: str, dtype: torch.dtype, grad: bool,
              limit_samples: int | None, notes: dict | None = None) -> Result:
    """Run one entry's samples on CPU and on the device and compare; never raises.

    ``notes``: the backend's ``OPINFO_NOTES``, entry id to ``("skip", reason)`` (not run) or
    ``("values", reason)`` (compared without values)."""
    start = time.monotonic()
    name = entry_id(op)
    seed = zlib.crc32(name.encode())
    torch.manual_seed(seed)
    note, note_reason = (notes or {}).get(name, (None, None))
    skip_reason = note_reason if note == "values" else _values_skip_reason(op, dtype)
    values = skip_reason is None
    rtol, atol = tolerances(op, dtype)
    compared = 0

    def done(status: str, message: str = "", **kw) -> Result:
        extra = {} if values else {"values_not_compared": skip_reason}
        return Result(name, status, message, compared, values,
                      seconds=round(time.monotonic() - start, 3), extra=extra, **kw)

    if note == "skip":
        return done("skip", f"not run on this backend: {note_reason}")
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=grad))
    except Exception as err:
        return done("skip", "sample_inputs raised on CPU: " + _first_line(err))
    if limit_samples is not None:
        samples = samples[:limit_samples]
    for index, sample in enumerate(samples):
        label = f"sample {index}"
        args = (sample.input, sample.args, sample.kwargs)
        try:  # copies first: the op may write into its inputs
            dev_input, dev_args, dev_kwargs = _to_device(args, device, grad)
            if name in _CPU_ARGUMENTS:
                dev_args, dev_kwargs = args[1], args[2]
            copy_error = None
        except Exception as err:
            copy_error = err
        try:
            expected = sample.output_process_fn_grad(_call(op, grad, *args))
            expected_grads = _grads(args, expected, seed + index) if grad else None
        except Exception:
            continue
        compared += 1
        try:
            if copy_error is not None:
                raise copy_error
            dev_kwargs = _device_kwargs(dev_kwargs, device)
            actual = _call(op, grad, dev_input, dev_args, dev_kwargs)
            actual = sample.output_process_fn_grad(actual)
            actual_grads = (_grads((dev_input, dev_args, dev_kwargs), actual, seed + index)
                            if grad else None)
        except Exception as err:
            message = f"{label}: {_first_line(err)}"
            return done("error", message, names_op=names_op(str(err), op))
        problem = compare(actual, expected, rtol, atol, values)
        if problem is None and grad:
            problem = compare(actual_grads, expected_grads, rtol, atol, values,
                              what="input grad")
        if problem is not None:
            return done("fail", f"{label}: {problem}")
    if compared == 0:
        return done("skip", "no sample runs on CPU")
    return done("pass")


def worker(config: dict) -> None:
    """Run entries in this process, appending a line per start and per result to a file."""
    warnings.simplefilter("ignore")
    if config["backend"] is not None:
        backend = importlib.import_module(config["backend"])
        device = backend.setup()
    else:
        device = torch_acc.use(config["device"]).type
        backend = registry.backend_module(device)
    notes = getattr(backend, "OPINFO_NOTES", {})
    dtype = getattr(torch, config["dtype"])
    by_id = {entry_id(op): op for op in op_db()}
    with open(config["results"], "a") as out:
        out.write(json.dumps({"device": device}) + "\n")
        for name in config["entries"]:
            out.write(json.dumps({"start": name}) + "\n")
            out.flush()
            try:
                result = run_entry(by_id[name], device, dtype, config["grad"],
                                   config["limit_samples"], notes)
            except BaseException as err:
                result = Result(name, "error", "harness: " + _first_line(err), names_op=False)
                traceback.print_exc()
            out.write(json.dumps({"result": asdict(result)}) + "\n")
            out.flush()


# ---------------------------------------------------------------------------------------------
# Scheduling worker processes


class _Worker:
    def __init__(self, entries: list[str], config: dict, tmp: Path, number: int):
        self.entries = entries
        self.results_path = tmp / f"w{number}.jsonl"
        self.log_path = tmp / f"w{number}.log"
        cfg = {**config, "entries": entries, "results": str(self.results_path)}
        self.log = open(self.log_path, "w")
        # The worker imports what this process imports: the same backend modules.
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", MODULE, "--worker", json.dumps(cfg)],
            stdout=self.log, stderr=subprocess.STDOUT, start_new_session=True, env=env,
        )
        self.current: str | None = None
        self.current_since = time.monotonic()
        self.results: dict[str, dict] = {}
        self.device: str | None = None

    def poll(self) -> None:
        if not self.results_path.exists():
            return
        for line in self.results_path.read_text().splitlines():
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line being written
                continue
            if "device" in record:
                self.device = record["device"]
            elif "start" in record and record["start"] not in self.results \
                    and record["start"] != self.current:
                self.current, self.current_since = record["start"], time.monotonic()
            elif "result" in record:
                self.results[record["result"]["entry"]] = record["result"]
                if self.current == record["result"]["entry"]:
                    self.current = None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def finish(self) -> str:
        """Close the log; return its last lines (the crash's description)."""
        self.log.close()
        lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln]
        return ("(last output: " + " / ".join(lines[-2:])[-300:] + ")") if lines else ""


def _death(rc: int) -> str:
    if rc < 0:
        try:
            return f"process killed by {signal.Signals(-rc).name}"
        except ValueError:
            return f"process killed by signal {-rc}"
    return f"process exited with code {rc}"


def run_entries(entries: list[str], *, device: str = DEFAULT_DEVICE, backend: str | None = None,
                dtype: str = "float32",
                grad: bool = False, limit_samples: int | None = None, jobs: int = 2,
                chunk_size: int = 100, timeout: float = 300.0,
                progress=None) -> tuple[dict[str, dict], str | None]:
    """Run entries (ids) in worker processes.

    ``device`` names a registered backend; ``backend``, when given, is instead a module whose
    ``setup()`` sets up the device and returns its name. Returns each entry's result as a
    dict, and the device's name (None when no worker got that far).
    """
    config = {"device": device, "backend": backend, "dtype": dtype, "grad": grad,
              "limit_samples": limit_samples}
    queue: collections.deque[tuple[list[str], bool]] = collections.deque(
        (entries[i:i + chunk_size], False) for i in range(0, len(entries), chunk_size)
    )
    results: dict[str, dict] = {}
    running: list[tuple[_Worker, bool]] = []
    number = 0
    device = None
    suspects: dict[str, str] = {}  # entry -> how its chunk died while it ran

    def record(name: str, status: str, message: str) -> None:
        results[name] = asdict(Result(name, status, message, names_op=status != "error"))

    with tempfile.TemporaryDirectory(prefix="opinfo-") as tmp:
        while queue or running:
            while queue and len(running) < jobs:
                chunk, alone = queue.popleft()
                running.append((_Worker(chunk, config, Path(tmp), number), alone))
                number += 1
            time.sleep(0.2)
            for item in list(running):
                w, alone = item
                w.poll()
                timed_out = (w.current is not None
                             and time.monotonic() - w.current_since > timeout)
                if timed_out:
                    w.kill()
                elif w.proc.poll() is None:
                    continue
                running.remove(item)
                w.poll()
                tail = w.finish()
                for name, result in w.results.items():
                    if name in suspects:
                        result["extra"]["chunk_died"] = suspects[name]
                results.update(w.results)
                device = device or w.device
                left = [e for e in w.entries if e not in w.results]
                if timed_out:
                    record(w.current, "crash", f"timeout: no result after {timeout:.0f}s")
                elif left and w.current is None and not w.results:  # died before any entry
                    for e in left:
                        record(e, "crash", f"worker failed: {_death(w.proc.returncode)} {tail}")
                elif left and w.current is not None and alone:
                    record(w.current, "crash", f"{_death(w.proc.returncode)} {tail}".strip())
                elif left and w.current is not None:  # rerun the suspect alone
                    suspects[w.current] = f"{_death(w.proc.returncode)} {tail}".strip()
                    queue.append(([w.current], True))
                rest = [e for e in left if e not in results and e != w.current]
                if rest:  # entries that had not started go on in a new worker
                    queue.append((rest, False))
                if progress is not None:
                    progress(len(results))
    return results, device


# ---------------------------------------------------------------------------------------------
# Reports


def summarize(results: list[dict]) -> dict[str, int]:
    counts = collections.Counter(r["status"] for r in results)
    return {s: counts.get(s, 0) for s in STATUSES}


def missing_ops(results: list[dict]) -> list[tuple[str, int]]:
    """The ATen operators error and fail messages name, most frequent first."""
    counts = collections.Counter()
    for r in results:
        if r["status"] in ("error", "fail"):
            found = _ATEN_OP.search(r["message"])
            if found:
                counts[found.group(1)] += 1
    return counts.most_common()


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")[:300]


def common_messages(results: list[dict]) -> list[tuple[str, int]]:
    """Error and fail messages (less their sample number), most frequent first."""
    counts = collections.Counter(
        re.sub(r"^sample \d+: ", "", r["message"])[:160]
        for r in results if r["status"] in ("error", "fail", "crash")
    )
    return counts.most_common()


def markdown(results: list[dict], meta: dict, level: int = 1) -> str:
    """A report of one run: a summary, the most frequent causes, a row per entry."""
    h = "#" * level
    counts = summarize(results)
    total = sum(counts[s] for s in COUNTED)
    mode = "forward and backward (--grad)" if meta["grad"] else "forward"
    lines = [
        f"{h} OpInfo report: `{meta['backend']}` ({meta['device']}), {meta['dtype']}, {mode}",
        "",
        f"Produced by `{meta['command']}` on torch {meta['torch']}, {meta['date']}.",
        "",
        f"{len(results)} OpInfo entries run on CPU in this dtype and mode "
        f"({meta['not_run']} others do not and are left out).",
        "",
        "| status | entries | % of entries |",
        "|---|---:|---:|",
    ]
    for s in COUNTED:
        pct = 100.0 * counts[s] / total if total else 0.0
        lines.append(f"| {s} | {counts[s]} | {pct:.1f}% |")
    lines.append(f"| skip (not counted: every sample raises on CPU, or the backend says why "
                 f"it is not run) | {counts['skip']} | |")
    unnamed = sum(1 for r in results if r["status"] == "error" and not r["names_op"])
    no_values = sum(1 for r in results if not r["values_compared"])
    lines += [
        "",
        f"Errors whose message does not name the operator: {unnamed}. "
        f"Entries compared without values (PyTorch's test_compare_cpu skips them or expects "
        f"them to differ, or the backend says why: random or undefined output): {no_values}.",
        "",
    ]
    ops = missing_ops(results)
    if ops:
        lines += [f"{h}# ATen operators named in error and fail messages", "",
                  "| operator | entries |", "|---|---:|"]
        lines += [f"| `{name}` | {n} |" for name, n in ops[:40]]
        lines.append("")
    messages = common_messages(results)
    if messages:
        lines += [f"{h}# Most frequent messages", "", "| message | entries |", "|---|---:|"]
        lines += [f"| {_cell(m)} | {n} |" for m, n in messages[:25]]
        lines.append("")
    lines += [f"{h}# Entries", "", "| entry | status | samples | message | finding |",
              "|---|---|---:|---|---|"]
    for r in sorted(results, key=lambda r: r["entry"]):
        finding = []
        if r["status"] == "error" and not r["names_op"]:
            finding.append("message does not name the op")
        if not r["values_compared"]:
            reason = r["extra"].get("values_not_compared")
            finding.append("values not compared" + (f" ({reason})" if reason else ""))
        if "chunk_died" in r["extra"]:
            finding.append(f"chunk died ({r['extra']['chunk_died']}), alone it did not")
        lines.append(f"| `{r['entry']}` | {r['status']} | {r['samples']} | "
                     f"{_cell(r['message'])} | {', '.join(finding)} |")
    return "\n".join(lines) + "\n"


def combined(runs: list[dict], command: str) -> str:
    """One markdown document of several runs' reports (``--json`` contents)."""
    backends = ", ".join(sorted({f"`{r['meta']['backend']}`" for r in runs}))
    head = [f"# OpInfo reports: {backends}", "",
            f"Put together by `{command}` from the runs below; each section names the command "
            "that made it.", ""]
    return "\n".join(head) + "\n" + "\n".join(markdown(r["results"], r["meta"], level=2)
                                             for r in runs)


def read_pass_list(path: Path) -> set[str]:
    if not path.exists():
        return set()
    return {ln.strip() for ln in path.read_text().splitlines()
            if ln.strip() and not ln.startswith("#")}


def update_pass_list(path: Path, results: list[dict]) -> None:
    passing = read_pass_list(path)
    passing -= {r["entry"] for r in results}
    passing |= {r["entry"] for r in results if r["status"] == "pass"}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{e}\n" for e in sorted(passing)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default=DEFAULT_DEVICE,
                        help="a registered backend's device name (default: npy)")
    parser.add_argument("--backend", metavar="MODULE",
                        help="instead of --device: a module whose setup() returns the device name")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--ops", help="comma-separated entry names or fnmatch patterns")
    parser.add_argument("--grad", action="store_true", help="compare input gradients too")
    parser.add_argument("--out", type=Path, help="write a markdown report")
    parser.add_argument("--json", type=Path, help="write the results as JSON")
    parser.add_argument("--update", type=Path, metavar="PASS_LIST",
                        help="update a pass list with this run's entries")
    parser.add_argument("--limit-samples", type=int, help="compare at most N samples an entry")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes at a time")
    parser.add_argument("--chunk-size", type=int, default=100, help="entries per worker")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds an entry may run before it counts as a crash")
    parser.add_argument("--from-json", type=Path, nargs="+", metavar="JSON",
                        help="run nothing: write --out from earlier --json files, a section each")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(json.loads(args.worker))
        return 0
    if args.from_json:
        if not args.out:
            parser.error("--from-json needs --out")
        args.out.write_text(combined([json.loads(p.read_text()) for p in args.from_json],
                                     " ".join([COMMAND, *(argv or sys.argv[1:])])))
        return 0

    # A device that is not registered fails here, before any worker starts.
    backend_name = args.backend or registry.backend_module(args.device).__name__
    dtype = getattr(torch, args.dtype)
    chosen = select(args.ops.split(",") if args.ops else None)
    ids = [entry_id(op) for op in chosen if runs_on_cpu(op, dtype, args.grad)]
    not_run = len(chosen) - len(ids)
    print(f"{len(ids)} entries to run ({not_run} left out: not run on CPU in this mode)",
          flush=True)

    def progress(n: int) -> None:
        print(f"  {n}/{len(ids)} entries done", flush=True)

    by_id, device = run_entries(
        ids, device=args.device, backend=args.backend, dtype=args.dtype, grad=args.grad,
        limit_samples=args.limit_samples, jobs=args.jobs, chunk_size=args.chunk_size,
        timeout=args.timeout, progress=progress,
    )
    results = [by_id[e] for e in ids]
    counts = summarize(results)
    total = sum(counts[s] for s in COUNTED)
    print(", ".join(f"{s} {counts[s]}" + (f" ({100.0 * counts[s] / total:.1f}%)"
                                          if s in COUNTED and total else "")
                    for s in STATUSES))
    for name, n in missing_ops(results)[:10]:
        print(f"  aten.{name}: {n} entries")
    meta = {
        "backend": backend_name,
        "device": device,
        "dtype": args.dtype,
        "grad": args.grad,
        "torch": torch.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": " ".join([COMMAND, *(argv or sys.argv[1:])]),
        "not_run": not_run,
        "counts": counts,
    }
    if args.out:
        args.out.write_text(markdown(results, meta))
    if args.json:
        args.json.write_text(json.dumps({"meta": meta, "results": results}, indent=1) + "\n")
    if args.update:
        update_pass_list(args.update, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
