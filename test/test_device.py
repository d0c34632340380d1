# Owner(s): ["module: PrivateUse1"]
"""Renaming PrivateUse1, the generated methods, the device module, and device names."""

import copy

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _C, _compat
from torch_acc._patches import _apply_source_change
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import reference


def _refuse(op: str):
    def kernel(*args, **kwargs):
        raise AssertionError(f"printing ran {op} on the device")

    return kernel


class TestBadNames(TestCase):
    # Bad names are rejected before anything global changes, so these run in any order.
    def test_invalid_names(self):
        for name in ["", "a:b", "a b", "1npy", "ref-1"]:
            with self.subTest(name=name):
                with self.assertRaisesRegex(ValueError, "invalid backend name"):
                    setup_privateuseone_for_python_backend(name)

    def test_builtin_device_types(self):
        for name in ["cuda", "cpu", "meta", "xla"]:
            with self.subTest(name=name):
                with self.assertRaisesRegex(ValueError, "built into PyTorch"):
                    setup_privateuseone_for_python_backend(name)

    def test_name_must_be_str(self):
        with self.assertRaisesRegex(TypeError, "expected the backend name to be a str"):
            setup_privateuseone_for_python_backend(3)


class TestDevice(TestCase):
    @classmethod
    def setUpClass(cls):
        reference.setup()

    def test_rename(self):
        self.assertEqual(torch._C._get_privateuse1_backend_name(), "ref")
        self.assertEqual(torch.device("ref").type, "ref")
        self.assertEqual(torch.device("ref:1"), torch.device("ref", 1))
        self.assertEqual(torch.device("ref:1").index, 1)

    def test_generated_methods(self):
        t = torch.ones(2).ref()
        self.assertEqual(t.device, torch.device("ref:0"))
        self.assertTrue(t.is_ref)
        self.assertFalse(torch.ones(2).is_ref)
        self.assertTrue(hasattr(torch.nn.Module, "ref"))
        self.assertTrue(hasattr(torch.UntypedStorage, "is_ref"))
        self.assertFalse(torch.ones(2).untyped_storage().is_ref)
        # Device data lives in payloads: a storage with bytes cannot exist on the device.
        with self.assertRaisesRegex(RuntimeError, "cannot allocate 8 bytes of storage on ref"):
            torch.ones(2).untyped_storage().ref()
        m = torch.nn.Linear(2, 2).ref()
        self.assertEqual(m.weight.device.type, "ref")

    def test_device_module(self):
        mod = torch.ref
        self.assertIs(torch.get_device_module("ref"), mod)
        self.assertTrue(mod.is_available())
        self.assertTrue(mod.is_initialized())
        self.assertEqual(mod.device_count(), 1)
        self.assertEqual(mod.current_device(), 0)
        mod.set_device(0)
        mod.set_device("ref:0")
        mod.synchronize()
        with self.assertRaisesRegex(ValueError, r"expected a device index in \[0, 1\)"):
            mod.set_device(1)
        with self.assertRaisesRegex(ValueError, "expected a ref device"):
            mod.set_device("cpu")

    def test_manual_seed_records_seed(self):
        torch.manual_seed(1234)
        self.assertEqual(torch.ref.initial_seed(), 1234)
        torch.ref.manual_seed(7)
        self.assertEqual(torch.ref.initial_seed(), 7)

    def test_setup_again_is_harmless(self):
        mod = setup_privateuseone_for_python_backend("ref")
        self.assertIs(mod, torch.ref)
        self.assertEqual(reference.setup(), "ref")

    def test_setup_other_name_names_the_holder(self):
        with self.assertRaisesRegex(RuntimeError, "PrivateUse1 is already held by backend 'ref'"):
            setup_privateuseone_for_python_backend("other")

    def test_setup_same_name_other_module(self):
        with self.assertRaisesRegex(RuntimeError, "already set up with device module"):
            setup_privateuseone_for_python_backend("ref", backend_module=object())

    def test_accelerator(self):
        self.assertEqual(torch.accelerator.current_accelerator(), torch.device("ref"))
        self.assertEqual(torch.accelerator.device_count(), 1)

    def test_print_through_cpu(self):
        t = torch.tensor([[1.5, -2.0], [3.0, 4.25]]).to("ref")
        self.assertTrue(_C.is_python_backend())
        # Printing formats a CPU copy: the operators it runs on the values never reach the
        # backend, which here fails each of them.
        lib = torch.library.Library("aten", "IMPL")
        for op in ["abs", "isfinite", "masked_select", "ne.Scalar", "reshape", "view"]:
            lib.impl(op, _refuse(op), "PrivateUse1")
        try:
            text = repr(t)
        finally:
            lib._destroy()
        self.assertExpectedInline(
            text,
            """\
tensor([[ 1.5000, -2.0000],
        [ 3.0000,  4.2500]], device='ref:0')""",
        )

    def test_source_change_that_no_longer_matches(self):
        # A torch whose source moved on is a clear error naming the function, not a silent
        # half-applied change.
        change = {
            "module": "torch._tensor_str",
            "function": "_tensor_str",
            "lines": (("a line _tensor_str never had", "a line it will not get"),),
        }
        with self.assertRaisesRegex(
            RuntimeError,
            r"expected 'a line _tensor_str never had' once in torch\._tensor_str\._tensor_str, "
            r"but found it 0 times",
        ):
            _apply_source_change(change)

    def test_source_change_alias_that_no_longer_matches(self):
        # An alias (another module's reference to the changed function) that holds something
        # else is an error too, raised before anything is changed.
        change = {
            "module": "torch._tensor_str",
            "function": "_tensor_str",
            "lines": (),
            "aliases": ("torch._tensor_str._str",),
        }
        before = torch._tensor_str._tensor_str
        with self.assertRaisesRegex(
            RuntimeError,
            r"expected torch\._tensor_str\._str to be torch\._tensor_str\._tensor_str",
        ):
            _apply_source_change(change)
        self.assertIs(torch._tensor_str._tensor_str, before)

    def test_module_to_keeps_parameter_objects(self):
        # As on CUDA: Module.to keeps each Parameter object (tied weights stay one parameter,
        # an optimizer made before keeps training them), and moves gradients with them.
        torch.manual_seed(0)
        emb, lin = torch.nn.Embedding(5, 3), torch.nn.Linear(3, 5)
        lin.weight = emb.weight
        model = torch.nn.Sequential(emb, lin)
        ref = copy.deepcopy(model)
        params = list(model.parameters())
        model(torch.arange(4)).sum().backward()
        ref(torch.arange(4)).sum().backward()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        model.to("ref")
        self.assertEqual(list(model.parameters()), params)
        self.assertIs(model[0].weight, model[1].weight)
        self.assertEqual(model[0].weight.grad.device.type, "ref")
        self.assertEqual(model[0].weight.grad.cpu(), ref[0].weight.grad)
        for m in (model, ref):
            m.zero_grad()
        model(torch.arange(4, device="ref")).sum().backward()
        ref(torch.arange(4)).sum().backward()
        opt.step()
        with torch.no_grad():
            for p in ref.parameters():
                p -= 0.1 * p.grad
        model.cpu()
        self.assertEqual(list(model.parameters()), params)
        for mine, theirs in zip(model.parameters(), ref.parameters(), strict=True):
            self.assertEqual(mine.device.type, "cpu")
            self.assertEqual(mine, theirs)

    def test_index_out_of_range(self):
        with self.assertRaisesRegex(ValueError, r"expected a device index in \[0, 1\)"):
            _C.create_empty_tensor((2,), torch.float32, 1)


class TestDeviceIndices(TestCase):
    # ref has one device: an index that names none is an error, as CUDA's "invalid device
    # ordinal", never a tensor, stream or figure for a device that does not exist.
    NO_DEVICE = r"expected a device index in \[0, 1\) for ref, but got "

    def setUp(self):
        reference.setup()

    def test_tensors_on_a_device_that_does_not_exist(self):
        cases = {
            "factory": lambda: torch.ones(2, device="ref:99"),
            "to": lambda: torch.ones(2).to("ref:1"),
            "empty": lambda: torch.empty(2, device="ref:1"),
            "like": lambda: torch.zeros_like(torch.ones(2), device="ref:1"),
        }
        for name, fn in cases.items():
            with self.subTest(name):
                with self.assertRaisesRegex(ValueError, self.NO_DEVICE):
                    fn()

    def test_device_module(self):
        cases = {
            "synchronize": lambda i: torch.ref.synchronize(i),
            "set_device": lambda i: torch.ref.set_device(i),
            "device": lambda i: torch.ref.device(i).__enter__(),
            "memory_stats": lambda i: torch.ref.memory_stats(i),
            "memory_allocated": lambda i: torch.ref.memory_allocated(i),
            "get_rng_state": lambda i: torch.ref.get_rng_state(i),
        }
        for name, call in cases.items():
            for index in (99, -1, "ref:7"):
                with self.subTest(name=name, index=index):
                    with self.assertRaisesRegex(ValueError, self.NO_DEVICE):
                        call(index)
        with self.assertRaisesRegex(ValueError, "expected a ref device, but got cpu"):
            torch.ref.synchronize("cpu")
        self.assertIn("allocated_bytes.all.current", torch.ref.memory_stats("ref:0"))
        torch.ref.synchronize(0)

    def test_accelerator(self):
        # torch.accelerator.synchronize() does nothing before the device is initialized (as
        # for CUDA); a tensor initializes it.
        torch.ones(1, device="ref")
        cases = {
            "synchronize": lambda: torch.accelerator.synchronize(99),
            "set_device_index": lambda: torch.accelerator.set_device_index(99),
            "current_stream": lambda: torch.accelerator.current_stream(99),
        }
        if hasattr(torch.accelerator, "device_index"):  # torch >= 2.7
            cases["device_index"] = lambda: torch.accelerator.device_index(99).__enter__()
        if _compat.STREAM_QUERIES_NOEXCEPT:
            # torch < 2.7 synchronizes only a device it initialized lazily, which it never
            # does for a Python backend: nothing reaches the guard to refuse.
            del cases["synchronize"]
        for name, call in cases.items():
            with self.subTest(name=name):
                if _compat.STREAM_QUERIES_NOEXCEPT and name == "current_stream":
                    # Asked where c10 lets nothing raise: the error is kept, and the next
                    # operation raises it.
                    call()
                    with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "99"):
                        torch.ones(1, device="ref").add_(1)
                    continue
                with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "99"):
                    call()
        self.assertEqual(torch.accelerator.current_stream(0).device, torch.device("ref:0"))

    def test_streams(self):
        kind = int(torch._C._autograd.DeviceType.PrivateUse1)
        with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "99"):
            torch.Stream(device="ref:99")
        stream = torch.Stream(stream_id=0, device_index=5, device_type=kind)
        with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "5"):
            torch.accelerator.set_stream(stream)
        with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "5"):
            stream.synchronize()
        with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "5"):
            stream.query()
        self.assertEqual(torch.accelerator.current_stream().device_index, 0)

    def test_generator_and_wrap(self):
        with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "99"):
            torch.Generator(device="ref:99")
        with self.assertRaisesRegex(ValueError, self.NO_DEVICE + "3"):
            _C.wrap(torch.ones(2), device=3)


if __name__ == "__main__":
    run_tests()
