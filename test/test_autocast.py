# Owner(s): ["module: PrivateUse1"]
"""torch.autocast on a Python backend: CPU autocast's operators and cast policies."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _autocast
from torch_acc.backends import numpy as npy_backend

npy_backend.setup()


def _operands(device):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(4, 3, generator=g)
    b = torch.randn(3, 5, generator=g)
    return a.to(device), b.to(device)


class TestOpLists(TestCase):
    def test_same_operators_as_cpu(self):
        def ops(key):
            return set(torch._C._dispatch_get_registrations_for_dispatch_key(key))

        self.assertEqual(ops("AutocastPrivateUse1"), ops("AutocastCPU"))
        # Every operator CPU autocast has in this torch has a policy here.
        self.assertLessEqual(_autocast.cpu_autocast_ops(), set(_autocast.POLICIES))

    def test_bad_policy(self):
        with self.assertRaisesRegex(
            ValueError, "expected an autocast policy of 'lower_precision_fp', 'fp32' or 'promote'"
        ):
            _autocast._C.register_autocast_kernels(["mm"], "fp8")


class TestAutocast(TestCase):
    def test_supported_dtypes(self):
        self.assertEqual(torch.npy.get_amp_supported_dtype(), [torch.float16])
        self.assertTrue(torch.amp.is_autocast_available("npy"))

    def test_lower_precision_op(self):
        a, b = _operands("npy")
        with torch.autocast("npy", dtype=torch.float16):
            self.assertTrue(torch.is_autocast_enabled("npy"))
            self.assertEqual(torch.get_autocast_dtype("npy"), torch.float16)
            out = a @ b
            mm = torch.mm(a, b)
        self.assertFalse(torch.is_autocast_enabled("npy"))
        self.assertEqual(out.dtype, torch.float16)
        self.assertEqual(mm.dtype, torch.float16)
        ca, cb = _operands("cpu")
        self.assertEqual(out.cpu(), ca.half().float() @ cb.half().float(), atol=1e-2, rtol=1e-2,
                         exact_dtype=False)
        self.assertEqual((a @ b).dtype, torch.float32)

    def test_dtypes_match_cpu_autocast(self):
        def run(device):
            a, b = _operands(device)
            h = a.half()
            out = {
                "mm": a @ b,
                "cat": torch.cat([h, a]),
                "stack": torch.stack([h, h]),
                "mse_loss": torch.nn.functional.mse_loss(h, h),
                "add": a + a,
                "add_half": h + h,
                "float64": torch.mm(a.double(), b.double()),
            }
            return {name: t.dtype for name, t in out.items()}

        with torch.autocast("cpu", dtype=torch.float16):
            cpu = run("cpu")
        with torch.autocast("npy", dtype=torch.float16):
            npy = run("npy")
        self.assertEqual(npy, cpu)
        self.assertEqual(
            npy,
            {"mm": torch.float16, "cat": torch.float32, "stack": torch.float16,
             "mse_loss": torch.float32, "add": torch.float32, "add_half": torch.float16,
             "float64": torch.float64},
        )

    def test_cpu_tensors_are_left_alone(self):
        a, b = _operands("cpu")
        with torch.autocast("npy", dtype=torch.float16):
            self.assertEqual((a @ b).dtype, torch.float32)

    def test_disabled_and_nested(self):
        a, b = _operands("npy")
        with torch.autocast("npy", dtype=torch.float16):
            with torch.autocast("npy", enabled=False):
                self.assertEqual((a @ b).dtype, torch.float32)
            self.assertEqual((a @ b).dtype, torch.float16)

    def test_training_step(self):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2).to("npy")
        x, _ = _operands("npy")
        with torch.autocast("npy", dtype=torch.float16):
            out = model(x)
            self.assertEqual(out.dtype, torch.float16)
            loss = torch.nn.functional.mse_loss(out, torch.zeros(4, 2, device="npy"))
        self.assertEqual(loss.dtype, torch.float32)
        loss.backward()
        self.assertEqual(model.weight.grad.dtype, torch.float32)
        self.assertEqual(model.weight.grad.device, torch.device("npy:0"))

        cpu = torch.nn.Linear(3, 2)
        cpu.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
        cx, _ = _operands("cpu")
        with torch.autocast("cpu", dtype=torch.float16):
            cpu_loss = torch.nn.functional.mse_loss(cpu(cx), torch.zeros(4, 2))
        cpu_loss.backward()
        self.assertEqual(loss.cpu(), cpu_loss, atol=1e-2, rtol=1e-2)
        self.assertEqual(model.weight.grad.cpu(), cpu.weight.grad, atol=1e-2, rtol=1e-2)

    def test_unsupported_dtype_warns_and_disables(self):
        a, b = _operands("npy")
        message = "npy Autocast only supports dtypes of torch.float16"
        with self.assertWarnsRegex(UserWarning, message):
            with torch.autocast("npy", dtype=torch.bfloat16):
                self.assertEqual((a @ b).dtype, torch.float32)


if __name__ == "__main__":
    run_tests()
