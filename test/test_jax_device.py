# Owner(s): ["module: PrivateUse1"]
"""The ``jax`` backend as a device: payloads, views over immutable arrays, dtypes, devices,
serialization, and the one PrivateUse1 slot it shares with ``npy`` on a stock wheel."""

import io
import subprocess
import sys
import textwrap
import unittest

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

try:
    import jax
except ImportError:
    jax = None

if jax is not None:
    import torch_acc
    from torch_acc.backends import jax as jax_backend

    jax_backend.setup()


@unittest.skipIf(jax is None, "JAX is not installed (pip install torch_acc[jax])")
class TestJaxDevice(TestCase):
    def test_round_trip_and_printing(self):
        x = torch.randn(3, 4)
        a = x.to("jax")
        self.assertEqual(a.device, torch.device("jax", 0))
        self.assertEqual(a.cpu(), x, atol=0, rtol=0)
        self.assertIn("device='jax:0'", repr(a))

    def test_to_copies_the_cpu_memory(self):
        # jax.device_put aliases an aligned NumPy array on JAX's CPU devices: a later write
        # into the CPU tensor must not reach the device tensor (found by the device suite).
        x = torch.zeros(64)
        a = x.to("jax")
        x.add_(1)
        self.assertEqual(a.cpu(), torch.zeros(64), atol=0, rtol=0)

    def test_contiguous_of_a_transposed_view(self):
        # The meta function that gives a result's layout saw memory_format as None.
        x = torch.arange(6.0).view(2, 3)
        c = x.to("jax").t().contiguous()
        self.assertTrue(c.is_contiguous())
        self.assertEqual(c.stride(), (2, 1))
        self.assertEqual(c.cpu(), x.t())
        k = x.to("jax").t().clone(memory_format=torch.preserve_format)
        self.assertEqual(k.stride(), x.t().clone().stride())

    def test_payload_is_a_cell_over_a_jax_array(self):
        a = torch.arange(6.0).to("jax")
        cell = torch_acc.payload(a)
        self.assertIsInstance(cell, jax_backend.JaxPayload)
        self.assertIsInstance(cell.array, jax.Array)
        self.assertIsInstance(jax_backend.array(a), jax.Array)

    def test_in_place_replaces_the_array_and_leaves_the_old_one(self):
        a = torch.arange(6.0).to("jax")
        before = jax_backend.array(a)
        a.add_(1)
        after = jax_backend.array(a)
        self.assertIsNot(before, after)
        self.assertEqual(
            torch.from_numpy(jax.numpy.asarray(before).__array__().copy()), torch.arange(6.0)
        )
        self.assertEqual(a.cpu(), torch.arange(6.0) + 1)

    def test_views_see_writes_to_the_base(self):
        x = torch.randn(4, 5)
        a = x.to("jax")
        v = a[1:3, ::2]
        t = a.t()
        a.mul_(2)
        x.mul_(2)
        self.assertEqual(v.cpu(), x[1:3, ::2])
        self.assertEqual(t.cpu(), x.t())

    def test_writes_through_views_reach_the_base_and_other_views(self):
        x = torch.randn(4, 5)
        a = x.to("jax")
        v, w = a[1:3, ::2], a[:, 2]
        v.fill_(7.0)
        x[1:3, ::2].fill_(7.0)
        self.assertEqual(a.cpu(), x)
        self.assertEqual(w.cpu(), x[:, 2])
        a[0] = 3.0
        x[0] = 3.0
        w.add_(1)
        x[:, 2].add_(1)
        self.assertEqual(a.cpu(), x)
        self.assertEqual(v.cpu(), x[1:3, ::2])

    def test_as_strided_and_storage_offset(self):
        x = torch.arange(24.0)
        a = x.to("jax")
        s = a.as_strided((3, 2), (5, 2), 3)
        self.assertEqual(s.storage_offset(), 3)
        self.assertEqual(s.cpu(), x.as_strided((3, 2), (5, 2), 3))
        s.zero_()
        x.as_strided((3, 2), (5, 2), 3).zero_()
        self.assertEqual(a.cpu(), x)

    def test_detached_alias_shares_the_payload(self):
        a = torch.ones(3, device="jax")
        d = a.detach()
        a.add_(1)
        self.assertEqual(d.cpu(), torch.full((3,), 2.0))

    def test_expanded_view_write_is_refused_as_on_cpu(self):
        a = torch.ones(1, device="jax").expand(3)
        with self.assertRaisesRegex(RuntimeError, "single memory location"):
            a.copy_(torch.arange(3.0, device="jax"))

    def test_channels_last_is_kept(self):
        x = torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)
        a = x.to("jax")
        y = a + 1
        self.assertEqual(y.stride(), (x + 1).stride())
        y[:, 1].fill_(0)
        ref = x + 1
        ref[:, 1].fill_(0)
        self.assertEqual(y.cpu(), ref)

    def test_float64_and_int64_are_real(self):
        a = torch.tensor([1e-300, 2.0], dtype=torch.float64, device="jax")
        self.assertEqual((a * a).cpu()[0].item(), 0.0)
        self.assertEqual((a / 3).dtype, torch.float64)
        big = torch.tensor([2**40], device="jax")
        self.assertEqual(big.dtype, torch.int64)
        self.assertEqual((big * 4).cpu().item(), 2**42)

    def test_type_promotion_is_pytorch_s(self):
        cases = [
            (torch.tensor([1, 2], dtype=torch.int32), 2.5),
            (torch.tensor([1, 2], dtype=torch.uint8), torch.tensor([3], dtype=torch.int8)),
            (torch.tensor([1.0], dtype=torch.float16), torch.tensor(2.0, dtype=torch.float64)),
            (torch.tensor([True]), 3),
        ]
        for a, b in cases:
            expected = a + b
            got = a.to("jax") + (b.to("jax") if isinstance(b, torch.Tensor) else b)
            self.assertEqual(got.dtype, expected.dtype)
            self.assertEqual(got.cpu(), expected)
        self.assertEqual(torch.arange(3, device="jax").sin().dtype, torch.float32)

    def test_unsupported_dtype_names_the_backend(self):
        with self.assertRaisesRegex(NotImplementedError, "jax backend does not support dtype"):
            torch.zeros(2, dtype=torch.complex32).to("jax")

    def test_devices_are_jax_devices(self):
        self.assertEqual(torch.jax.device_count(), len(jax.devices()))
        self.assertEqual(
            torch.accelerator.device_count()
            if torch_acc.current_accelerator()
            else len(jax.devices()),
            len(jax.devices()),
        )
        a = torch.ones(2, device="jax:0")
        self.assertEqual(next(iter(jax_backend.array(a).devices())), jax.devices()[0])
        torch.jax.synchronize()

    def test_serialization(self):
        x = torch.randn(3, 3)
        a = x.to("jax")
        buf = io.BytesIO()
        torch.save({"a": a, "view": a[1]}, buf)
        buf.seek(0)
        loaded = torch.load(buf)
        self.assertEqual(loaded["a"].device.type, "jax")
        self.assertEqual(loaded["a"].cpu(), x)
        self.assertEqual(loaded["view"].cpu(), x[1])

    def test_autograd(self):
        x = torch.randn(4, 3)
        w = torch.randn(3, 2)
        xj = x.to("jax").requires_grad_()
        wj = w.to("jax").requires_grad_()
        (xj @ wj).tanh().sum().backward()
        xc, wc = x.requires_grad_(), w.requires_grad_()
        (xc @ wc).tanh().sum().backward()
        self.assertEqual(xj.grad.cpu(), xc.grad)
        self.assertEqual(wj.grad.cpu(), wc.grad)


@unittest.skipIf(jax is None, "JAX is not installed (pip install torch_acc[jax])")
class TestOneSlot(TestCase):
    def _run(self, code: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True
        )

    def test_npy_after_jax_names_both(self):
        proc = self._run(
            """
            import torch, torch_acc
            from torch_acc.backends import jax as jb, numpy as nb
            torch_acc.register_backend("jax", jb)
            torch_acc.register_backend("npy", nb)
            torch_acc.use("jax")
            x = torch.ones(2, device="jax")
            try:
                torch_acc.use("npy")
            except RuntimeError as e:
                print(e)
            try:
                nb.setup()
            except RuntimeError as e:
                print(e)
            """
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        first, second = proc.stdout.strip().splitlines()
        self.assertIn("cannot use backend 'npy'", first)
        self.assertIn("bound to backend 'jax'", first)
        self.assertIn("TORCH_ACC_BACKEND=npy", first)
        self.assertIn("'npy'", second)
        self.assertIn("'jax'", second)

    def test_entry_point_records_jax(self):
        proc = self._run(
            """
            import torch_acc_autoload, torch_acc
            torch_acc_autoload.jax()
            print(torch_acc.backends()["jax"])
            """
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "False")

    def test_env_var_chooses_jax(self):
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                textwrap.dedent(
                    """
                import torch, torch_acc
                from torch_acc.backends import jax as jb, numpy as nb
                torch_acc.register_backend("jax", jb)
                torch_acc.register_backend("npy", nb)
                print(torch_acc.use(), (torch.ones(2, device=torch_acc.use()) * 2).sum().item())
                """
                ),
            ],
            capture_output=True,
            text=True,
            env={**__import__("os").environ, "TORCH_ACC_BACKEND": "jax"},
        )
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "jax 4.0")


if __name__ == "__main__":
    run_tests()
