# Owner(s): ["module: PrivateUse1"]
"""The NumPy backend's ``_foreach_*`` kernels against CPU, on the samples of PyTorch's foreach
OpInfos (``torch.testing._internal.common_methods_invocations``)."""

import numpy as np
import torch
from torch.testing._internal.common_methods_invocations import (
    foreach_binary_op_db,
    foreach_other_op_db,
    foreach_pointwise_op_db,
    foreach_reduce_op_db,
    foreach_unary_op_db,
)
from torch.testing._internal.common_utils import run_tests, TestCase
from torch.utils._pytree import tree_map

from torch_acc.backends import numpy as npy_backend
from torch_acc.backends.numpy import _kernels
from torch_acc.payload import wrap

npy_backend.setup()

FOREACH_DB = (
    foreach_unary_op_db
    + foreach_binary_op_db
    + foreach_pointwise_op_db
    + foreach_reduce_op_db
    + foreach_other_op_db
)
KERNELS = {name for name in _kernels() if name.startswith("_foreach_")}


def _packet(name: str) -> str:
    return name.split(".")[0]


def _to(device):
    return lambda x: x.to(device) if isinstance(x, torch.Tensor) else x


def _run(fn, sample, device):
    """``fn`` on the sample moved to ``device``: (result, the input list after the call)."""
    inputs = tree_map(_to(device), [t.clone() for t in sample.input])
    args = tree_map(_to(device), sample.args)
    kwargs = tree_map(_to(device), sample.kwargs)
    return fn(inputs, *args, **kwargs), inputs


class TestForeachKernels(TestCase):
    def test_the_optimizers_operators_have_kernels(self):
        # SGD, SGD with momentum, Adam and clip_grad_norm_ with foreach=True.
        for name in (
            "_foreach_add_.List",
            "_foreach_add_.Scalar",
            "_foreach_mul_.Scalar",
            "_foreach_lerp_.Scalar",
            "_foreach_addcmul_.Scalar",
            "_foreach_addcdiv_.ScalarList",
            "_foreach_div_.ScalarList",
            "_foreach_sqrt",
            "_foreach_norm.Scalar",
        ):
            self.assertIn(name, KERNELS)
            self.assertTrue(
                torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", "PrivateUse1"),
                name,
            )

    def test_against_cpu(self):
        packets = {_packet(name) for name in KERNELS}
        checked = 0
        for op in FOREACH_DB:
            variants = [(op.name, op.op, False), (op.name + "_", op.inplace_variant, True)]
            for packet, fn, inplace in variants:
                if packet not in packets or fn is None:
                    continue
                for i, sample in enumerate(
                    op.sample_inputs("cpu", torch.float32, num_input_tensors=[3])
                ):
                    with self.subTest(op=packet, sample=i):
                        try:
                            expected, cpu_inputs = _run(fn, sample, "cpu")
                        except (RuntimeError, TypeError, ValueError) as e:
                            with self.assertRaises(type(e)):
                                _run(fn, sample, "npy")
                            continue
                        actual, npy_inputs = _run(fn, sample, "npy")
                        if inplace:
                            self.assertEqual([t.cpu() for t in npy_inputs], cpu_inputs)
                        else:
                            self.assertEqual({t.device.type for t in actual}, {"npy"})
                            self.assertEqual([t.cpu() for t in actual], expected)
                        checked += 1
        self.assertGreater(checked, 100)

    def test_lists_of_different_lengths_are_an_error(self):
        a = [torch.ones(2, device="npy")] * 2
        b = [torch.ones(2, device="npy")] * 3
        # Autograd's kernel checks the lengths first; below it, the backend's kernel does.
        with self.assertRaisesRegex(RuntimeError, "same number of tensors, got 2 and 3"):
            torch._foreach_add(a, b)
        with torch._C._AutoDispatchBelowAutograd():
            with self.assertRaisesRegex(
                RuntimeError,
                r"_foreach_add.List: expected every tensor list to have 2 elements, but got "
                r"lists of \[2, 3\]",
            ):
                torch.ops.aten._foreach_add.List(a, b)

    def test_inplace_errors(self):
        # An in-place foreach overload whose per-tensor kernel is out-of-place (sqrt) writes
        # the result into each tensor, with the CPU's rules.
        with self.assertRaisesRegex(
            RuntimeError,
            r"_foreach_sqrt_: result type torch.float32 can't be cast to the desired output "
            r"type torch.int64 \(tensor 0 of the list\)",
        ):
            torch._foreach_sqrt_([torch.arange(3, device="npy")])
        with self.assertRaisesRegex(
            RuntimeError,
            r"_foreach_sqrt_ \(tensor 1 of the list\): unsupported operation: more than one "
            "element of the written-to tensor",
        ):
            ones = torch.ones(3, device="npy")
            torch._foreach_sqrt_([ones, ones.expand(2, 3)])
        read_only = np.ones(3, dtype=np.float32)
        read_only.flags.writeable = False
        with self.assertRaisesRegex(
            RuntimeError,
            "_foreach_sqrt_: cannot write tensor 0 of the list in place: assignment destination "
            "is read-only",
        ):
            torch._foreach_sqrt_([wrap(read_only, device="npy")])

    def test_sgd_step_matches_cpu(self):
        torch.manual_seed(0)
        model = torch.nn.Linear(5, 3)
        devices = {}
        for device in ("cpu", "npy"):
            m = torch.nn.Linear(5, 3).to(device)
            m.load_state_dict(model.state_dict())
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, foreach=True)
            x = torch.arange(10.0).reshape(2, 5).to(device)
            for _ in range(3):
                opt.zero_grad()
                m(x).square().sum().backward()
                opt.step()
            devices[device] = [p.detach().cpu() for p in m.parameters()]
        self.assertEqual(devices["npy"], devices["cpu"])


if __name__ == "__main__":
    run_tests()
