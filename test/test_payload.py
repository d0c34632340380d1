# Owner(s): ["module: PrivateUse1"]
"""Payload tensors: wrap/payload round trips, dtypes, storage errors, lifetime."""

import gc
import subprocess
import sys
import textwrap
import weakref

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _C
from torch_acc.backends import reference
from torch_acc.payload import payload, wrap

reference.setup()


class Payload:
    """A payload that is not an array: any Python object with shape and dtype."""

    def __init__(self, shape, dtype):
        self.shape = shape
        self.dtype = dtype


class Strided(Payload):
    """A payload that is not an array and gives its strides, in bytes as NumPy does."""

    def __init__(self, shape, dtype, strides):
        super().__init__(shape, dtype)
        self.strides = strides


class TestWrap(TestCase):
    def test_round_trip_plain_tensor(self):
        arr = torch.arange(6.0).reshape(2, 3)
        t = wrap(arr)
        self.assertIs(type(t), torch.Tensor)
        self.assertEqual(t.device, torch.device("ref:0"))
        self.assertEqual(t.shape, (2, 3))
        self.assertEqual(t.stride(), (3, 1))
        self.assertEqual(t.storage_offset(), 0)
        self.assertIs(payload(t), arr)
        self.assertEqual(t.cpu(), arr)

    def test_dtypes(self):
        for dtype in (
            torch.bool, torch.uint8, torch.int64, torch.float16, torch.float64, torch.complex64
        ):
            with self.subTest(dtype=dtype):
                arr = (torch.arange(4) % 2).to(dtype)
                t = wrap(arr)
                self.assertEqual(t.dtype, dtype)
                self.assertEqual(t.cpu(), arr)

    def test_strides_from_payload(self):
        arr = torch.arange(6.0).reshape(2, 3).T
        t = wrap(arr)
        self.assertEqual(t.shape, (3, 2))
        self.assertEqual(t.stride(), (1, 3))
        self.assertEqual(t.cpu(), arr)
        # A payload that is not a tensor gives its strides in bytes, as NumPy does.
        t = wrap(Strided((3, 2), "float32", (4, 12)))
        self.assertEqual((t.shape, t.stride()), ((3, 2), (1, 3)))

    def test_a_payload_without_elements_is_contiguous(self):
        # NumPy's strides of an empty array are zeros; torch's empty tensors are contiguous,
        # which view_as_complex in the backward of .real relies on (fuzz seed 221).
        for shape in ((1, 0, 2), (3, 0, 2), (0,), (2, 0)):
            with self.subTest(shape):
                empty = Strided(shape, "float32", (0,) * len(shape))
                self.assertEqual(wrap(empty).stride(), torch.zeros(shape).stride())
                self.assertEqual(torch.zeros(shape, device="ref").stride(),
                                 torch.zeros(shape).stride())
        x = torch.zeros(1, 0, dtype=torch.complex64, device="ref", requires_grad=True)
        torch.sigmoid(x).real.sum().backward()
        self.assertEqual((x.grad.shape, x.grad.stride()), ((1, 0), (1, 1)))

    def test_explicit_metadata_and_any_object(self):
        p = Payload((2, 2), "float32")
        t = wrap(p, device="ref:0")
        self.assertIs(payload(t), p)
        self.assertEqual(t.dtype, torch.float32)
        t2 = wrap(object(), shape=(3,), dtype=torch.int64, strides=(1,))
        self.assertEqual((t2.shape, t2.dtype), ((3,), torch.int64))

    def test_bad_input(self):
        with self.assertRaisesRegex(TypeError, "expected a payload dtype such as float32"):
            wrap(Payload((2,), "strange"))
        with self.assertRaisesRegex(ValueError, "expected non-negative sizes"):
            wrap(object(), shape=(-1,), dtype=torch.float32)
        with self.assertRaisesRegex(ValueError, "expected one stride per dimension"):
            wrap(object(), shape=(2, 2), dtype=torch.float32, strides=(1,))
        with self.assertRaisesRegex(ValueError, r"expected a device index in \[0, 1\)"):
            wrap(torch.ones(2), device="ref:3")
        with self.assertRaisesRegex(ValueError, "expected a ref device"):
            wrap(torch.ones(2), device="cpu")
        with self.assertRaisesRegex(TypeError, "expected a tensor made by|expected a payload"):
            payload(torch.ones(2))

    def test_data_access_raises(self):
        t = wrap(torch.ones(2, 2))
        msg = "tensors on ref have no data in memory.*Use .cpu()"
        with self.assertRaisesRegex(RuntimeError, msg):
            t.data_ptr()
        # Its storage stands for the payload, without data: Python's storage methods that
        # read data refuse it.
        storage = t.untyped_storage()
        self.assertEqual(storage.device, t.device)
        with self.assertRaisesRegex(RuntimeError, "invalid python storage"):
            storage.data_ptr()
        with self.assertRaisesRegex(RuntimeError, "invalid python storage"):
            storage.cpu()
        # torch's own check, as for CUDA tensors: it names the device and suggests .cpu().
        with self.assertRaisesRegex(TypeError, "ref:0 device type tensor to numpy.*cpu()"):
            t.numpy()

    def test_storage_stands_for_the_payload(self):
        """One storage per payload, as large as it: views and detached copies share it, as
        CPU tensors share theirs (Tensor::is_alias_of, DDP's reducer, reads it); a tensor of
        another payload has its own. ATen and torch's Python see no storage."""
        t = wrap(torch.ones(3, 4))
        same = {u.untyped_storage()._cdata for u in (t, t[1:], t.detach(), t.t(), t.view(-1))}
        self.assertEqual(same, {t.untyped_storage()._cdata})
        self.assertNotEqual(wrap(torch.ones(3, 4)).untyped_storage()._cdata, same.pop())
        self.assertEqual(t.untyped_storage().nbytes(), 48)
        self.assertFalse(torch._C._has_storage(t))
        t.resize_(5, 4)  # the payload grows; so does its storage
        self.assertEqual(t.untyped_storage().nbytes(), 80)
        self.assertEqual(t[2:].untyped_storage().nbytes(), 80)

class TestLifetime(TestCase):
    def test_payload_released_with_last_tensor(self):
        arr = torch.ones(2, 2)
        ref = weakref.ref(arr)
        t = wrap(arr)
        view = t[0]
        detached = t.detach()
        del arr
        gc.collect()
        self.assertIsNotNone(ref())
        del t, detached
        gc.collect()
        self.assertIsNotNone(ref())  # the view still holds it
        del view
        gc.collect()
        self.assertIsNone(ref())

    def test_shutdown_with_live_tensors(self):
        code = textwrap.dedent(
            """
            import torch
            from torch_acc.backends import reference
            from torch_acc.payload import wrap
            reference.setup()
            keep = [wrap(torch.ones(3)) for _ in range(100)]
            keep.append(torch.ones(2, device="ref").requires_grad_() * 2)
            print("ok")
            """
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "ok")

    def test_set_payload_is_shared_with_detached_copies(self):
        t = _C.create_empty_tensor((2,), torch.float32)
        self.assertIsNone(payload(t))
        d = t.detach()
        _C.set_payload(t, torch.tensor([1.0, 2.0]))
        self.assertEqual(d.cpu(), torch.tensor([1.0, 2.0]))


class TestResizePayloadStorage(TestCase):
    """``_C.resize_payload_storage``, FSDP's ``untyped_storage().resize_()`` of a payload
    tensor: 0 releases the payload of every tensor on the storage, from 0 a new one is bound."""

    def test_release_and_bind_again(self):
        t = wrap(torch.arange(6.0))
        view = t[2:]
        before = torch.ref.memory_allocated()
        _C.resize_payload_storage(t, 0)
        self.assertEqual(t.untyped_storage().nbytes(), 0)
        self.assertEqual(torch.ref.memory_allocated(), before - 24)
        for freed in (t, view):
            with self.assertRaisesRegex(RuntimeError, "resized to 0 bytes"):
                freed.cpu()
        _C.resize_payload_storage(t, 24)
        self.assertEqual(view.untyped_storage().nbytes(), 24)
        self.assertEqual(torch.ref.memory_allocated(), before)
        t.copy_(torch.arange(6.0) * 2)
        self.assertEqual(view.cpu(), torch.tensor([4.0, 6.0, 8.0, 10.0]))
        _C.resize_payload_storage(t, 24)  # the size it has: nothing to do
        self.assertEqual(payload(t).tolist(), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0])

    def test_refused_resizes(self):
        t = wrap(torch.arange(6.0))
        with self.assertRaisesRegex(RuntimeError, "from 24 to 48 bytes: its payload would"):
            _C.resize_payload_storage(t, 48)
        with self.assertRaisesRegex(ValueError, "multiple of the element size 4 .* but got 6"):
            _C.resize_payload_storage(t, 6)
        with self.assertRaisesRegex(ValueError, "non-negative .* but got -4"):
            _C.resize_payload_storage(t, -4)
        with self.assertRaisesRegex(RuntimeError, "tensor of create_empty_tensor"):
            _C.resize_payload_storage(_C.create_empty_tensor((2,), torch.float32), 0)
        self.assertEqual(t.cpu(), torch.arange(6.0))


class TestWrapChecksMetadata(TestCase):
    """wrap() refuses explicit metadata that the payload contradicts (issue 13)."""

    def test_dtype_shape_strides_of_the_payload(self):
        with self.assertRaisesRegex(
            ValueError, "expected dtype to be the payload's own dtype Double, but got Float"
        ):
            wrap(torch.zeros(4, dtype=torch.float64), dtype=torch.float32)
        with self.assertRaisesRegex(ValueError, r"own shape \[4\], but got \[50000000\]"):
            wrap(torch.zeros(4), shape=(50_000_000,))
        for strides in ((1, 2), (100, 1)):
            with self.assertRaisesRegex(ValueError, r"own strides \[3, 1\] \(in elements\)"):
                wrap(torch.zeros(2, 3), strides=strides)
        t = wrap(torch.zeros(2, 3, dtype=torch.float64), shape=(2, 3), dtype=torch.float64,
                 strides=(3, 1))
        self.assertEqual(t.stride(), (3, 1))

    def test_strides_within_a_payload_without_strides(self):
        class Sized:
            shape = (6,)
            dtype = "float32"

        t = wrap(Sized(), shape=(6,), strides=(1,))
        self.assertEqual(t.shape, (6,))
        with self.assertRaisesRegex(ValueError, "stay within the payload's 6 elements"):
            wrap(Sized(), strides=(7,))

    def test_each_attribute_is_read_once(self):
        class Counted:
            def __init__(self, **fields):
                self.fields = fields
                self.reads = []

            def __getattr__(self, name):
                self.reads.append(name)
                if name in self.fields:
                    return self.fields[name]
                raise AttributeError(name)

        p = Counted(shape=(2, 3), dtype="float32", strides=(12, 4))
        t = wrap(p, shape=(2, 3), dtype=torch.float32, strides=(3, 1))
        self.assertEqual((t.shape, t.stride()), ((2, 3), (3, 1)))
        self.assertEqual(sorted(p.reads), ["dtype", "shape", "strides"])
        p = Counted(shape=(6,))
        wrap(p, dtype=torch.int64, strides=(1,))
        self.assertEqual(sorted(p.reads), ["dtype", "shape", "strides"])


if __name__ == "__main__":
    run_tests()
