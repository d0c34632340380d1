# Owner(s): ["module: PrivateUse1"]
"""torch.autocast on a Python backend: CPU autocast's operators and cast policies."""

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _autocast
from torch_acc.backends import reference

reference.setup()


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
        self.assertEqual(torch.ref.get_amp_supported_dtype(), [torch.float16, torch.bfloat16])
        self.assertTrue(torch.amp.is_autocast_available("ref"))

    def test_lower_precision_op(self):
        a, b = _operands("ref")
        ca, cb = _operands("cpu")
        for dtype in (torch.float16, torch.bfloat16):
            with torch.autocast("ref", dtype=dtype):
                self.assertTrue(torch.is_autocast_enabled("ref"))
                self.assertEqual(torch.get_autocast_dtype("ref"), dtype)
                out = a @ b
                mm = torch.mm(a, b)
            self.assertFalse(torch.is_autocast_enabled("ref"))
            self.assertEqual(out.dtype, dtype)
            self.assertEqual(mm.dtype, dtype)
            with torch.autocast("cpu", dtype=dtype):
                expected = ca @ cb
            self.assertEqual(out.cpu(), expected, atol=2e-2, rtol=2e-2)
        self.assertEqual((a @ b).dtype, torch.float32)

    def test_dtypes_match_cpu_autocast(self):
        def run(device, dtype):
            a, b = _operands(device)
            h = a.to(dtype)
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

        for dtype in (torch.float16, torch.bfloat16):
            with torch.autocast("cpu", dtype=dtype):
                cpu = run("cpu", dtype)
            with torch.autocast("ref", dtype=dtype):
                ref = run("ref", dtype)
            self.assertEqual(ref, cpu)
            self.assertEqual(
                ref,
                {"mm": dtype, "cat": torch.float32, "stack": dtype, "mse_loss": torch.float32,
                 "add": torch.float32, "add_half": dtype, "float64": torch.float64},
            )

    def test_cpu_tensors_are_left_alone(self):
        a, b = _operands("cpu")
        with torch.autocast("ref", dtype=torch.float16):
            self.assertEqual((a @ b).dtype, torch.float32)

    def test_disabled_and_nested(self):
        a, b = _operands("ref")
        with torch.autocast("ref", dtype=torch.float16):
            with torch.autocast("ref", enabled=False):
                self.assertEqual((a @ b).dtype, torch.float32)
            self.assertEqual((a @ b).dtype, torch.float16)

    def test_training_step(self):
        for dtype in (torch.float16, torch.bfloat16):
            with self.subTest(dtype=dtype):
                self._training_step(dtype)

    def _training_step(self, dtype):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2).to("ref")
        x, _ = _operands("ref")
        with torch.autocast("ref", dtype=dtype):
            out = model(x)
            self.assertEqual(out.dtype, dtype)
            loss = torch.nn.functional.mse_loss(out, torch.zeros(4, 2, device="ref"))
        self.assertEqual(loss.dtype, torch.float32)
        loss.backward()
        self.assertEqual(model.weight.grad.dtype, torch.float32)
        self.assertEqual(model.weight.grad.device, torch.device("ref:0"))

        cpu = torch.nn.Linear(3, 2)
        cpu.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
        cx, _ = _operands("cpu")
        with torch.autocast("cpu", dtype=dtype):
            cpu_loss = torch.nn.functional.mse_loss(cpu(cx), torch.zeros(4, 2))
        cpu_loss.backward()
        self.assertEqual(loss.cpu(), cpu_loss, atol=2e-2, rtol=2e-2)
        self.assertEqual(model.weight.grad.cpu(), cpu.weight.grad, atol=2e-2, rtol=2e-2)

    def test_unsupported_dtype_warns_and_disables(self):
        a, b = _operands("ref")
        message = "ref Autocast only supports dtypes of torch.float16, torch.bfloat16"
        with self.assertWarnsRegex(UserWarning, message):
            with torch.autocast("ref", dtype=torch.float64):
                self.assertEqual((a @ b).dtype, torch.float32)


if __name__ == "__main__":
    run_tests()
