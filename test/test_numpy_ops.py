# Owner(s): ["module: PrivateUse1"]
"""The NumPy backend's OpInfo pass set does not shrink.

The OpInfo harness of the backend-author kit, :mod:`torch_acc.testing.opinfo`, runs a fixed
subset of PyTorch's OpInfo entries (float32, forward, and a smaller subset with ``--grad``) on
``npy`` and CPU, in worker processes (a crash in a sample does not reach this process). The
entries that pass every sample are checked in, per torch version, in
``test/opinfo/numpy_passing_<major.minor>.txt`` (``numpy_passing_grad_...`` for ``--grad``).
A listed entry that no longer passes fails the test; an entry of the subset that passes but is
not listed fails it too, to get the list updated with::

    python -m torch_acc.testing.opinfo [--grad] --ops <entries> --update test/opinfo/<list>.txt

Without a list for the running torch version the tests skip. The lists for 2.6 and 2.13 hold
every OpInfo entry that passes; those for 2.14 hold the entries of the subsets below only.
"""

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.testing import opinfo as harness

ROOT = Path(__file__).resolve().parents[1]
TORCH = ".".join(torch.__version__.split(".")[:2])

# Pointwise unary and binary, reductions, shape and indexing, nn, linalg: the families of the
# core ATen opset, and every operator the demo's MLP, CNN and optimizers use.
FORWARD = """
    abs neg exp log sin cos tanh sigmoid sqrt floor sign reciprocal erf log1p clamp
    add sub mul div.no_rounding_mode div.floor_rounding pow maximum minimum eq lt ge
    remainder fmod lerp addcmul addcdiv where
    sum mean prod amax argmax argmin max.reduction_with_dim max.reduction_no_dim var
    logsumexp cumsum any all linalg.vector_norm
    view reshape permute transpose expand squeeze unsqueeze cat stack flatten narrow
    index_select gather scatter masked_fill repeat flip roll split tril triu __getitem__
    take_along_dim zeros_like ones_like clone
    nn.functional.linear nn.functional.relu nn.functional.gelu nn.functional.silu softmax
    log_softmax nn.functional.cross_entropy nn.functional.mse_loss nn.functional.nll_loss
    nn.functional.conv2d nn.functional.max_pool2d nn.functional.avg_pool2d
    nn.functional.batch_norm nn.functional.layer_norm nn.functional.dropout
    nn.functional.embedding
    mm bmm matmul addmm einsum linalg.inv linalg.solve
""".split()

GRAD = """
    add sub mul div.no_rounding_mode pow exp tanh sigmoid where sum mean amax
    reshape permute cat index_select
    nn.functional.relu nn.functional.linear softmax log_softmax nn.functional.cross_entropy
    nn.functional.mse_loss nn.functional.conv2d nn.functional.max_pool2d
    nn.functional.batch_norm nn.functional.layer_norm mm matmul
""".split()


class TestNumpyOpInfo(TestCase):
    def _check(self, subset: list[str], grad: bool) -> None:
        name = f"numpy_passing{'_grad' if grad else ''}_{TORCH}.txt"
        pass_list = ROOT / "test" / "opinfo" / name
        if not pass_list.exists():
            self.skipTest(f"no OpInfo pass list for torch {TORCH} (test/opinfo/{name})")
        expected = harness.read_pass_list(pass_list)
        ops = {harness.entry_id(op): op for op in harness.select(subset)}
        entries = [e for e in subset
                   if e in ops and harness.runs_on_cpu(ops[e], torch.float32, grad)]
        results, _ = harness.run_entries(entries, grad=grad, jobs=1, chunk_size=len(entries),
                                         timeout=120)
        passing = {e for e, r in results.items() if r["status"] == "pass"}
        lost = sorted(e for e in entries if e in expected and e not in passing)
        gained = sorted(e for e in entries if e in passing and e not in expected)
        flag = " --grad" if grad else ""
        problems = [f"{e}: {results[e]['status']}: {results[e]['message']}" for e in lost]
        if gained:
            problems.append(
                f"newly passing, not in test/opinfo/{name}: {', '.join(gained)}; update the "
                f"list with: python -m torch_acc.testing.opinfo{flag} --ops {','.join(gained)} "
                f"--update test/opinfo/{name}"
            )
        if problems:
            self.fail("\n".join(problems))

    def test_forward_float32(self):
        self._check(FORWARD, grad=False)

    def test_grad_float32(self):
        self._check(GRAD, grad=True)


class TestCommandLine(TestCase):
    def test_python_m_runs_its_workers(self):
        # Under `python -m`, the module's __name__ is "__main__": workers must be started by
        # the module's own name.
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp, "r.json")
            proc = subprocess.run(
                [sys.executable, "-m", "torch_acc.testing.opinfo", "--device", "npy",
                 "--ops", "add,mul", "--jobs", "1", "--json", str(out)],
                capture_output=True, text=True, timeout=600,
            )
            self.assertEqual(proc.returncode, 0, proc.stderr)
            report = json.loads(out.read_text())
        self.assertEqual(report["meta"]["device"], "npy")
        self.assertEqual(
            {r["entry"]: r["status"] for r in report["results"]}, {"add": "pass", "mul": "pass"}
        )


if __name__ == "__main__":
    run_tests()
