r"""A generic test suite for a torch_acc device, in the spirit of PyTorch's
``instantiate_device_type_tests``: what every device must do as CPU does it.

:func:`instantiate_device_tests` adds ``TestCase`` classes for one device to a test module:
the device itself (copies, factories, printing, errors across devices), views (shared memory,
strides and offsets, writes through views), autograd, serialization, random numbers and
``torch.compile``. Every expected value is CPU's, computed in the test; a backend only has to
be set up and to have the kernels of the operators the tests call (``add``, ``mul``,
``matmul``, ``relu``, ``sum``, ``rand``...: the core of any training step).

Registration is process-global: instantiate the tests for one device per test file, and run
each file in its own process.

Example::

    >>> # xdoctest: +SKIP
    >>> # test/test_my_device.py
    >>> from torch.testing._internal.common_utils import run_tests
    >>> import torch_acc
    >>> from torch_acc.testing import instantiate_device_tests
    >>> torch_acc.use("mydev")  # or the backend's own setup()
    >>> instantiate_device_tests("mydev", globals())
    >>> if __name__ == "__main__":
    ...     run_tests()
"""

import copy
import io

import torch
from torch.testing._internal.common_utils import TestCase

__all__ = ["GROUPS", "instantiate_device_tests"]


class DeviceTestBase(TestCase):
    r"""The base of each group: ``device`` is set on the instantiated class."""

    device: str = ""

    def on(self, t: torch.Tensor) -> torch.Tensor:
        return t.to(self.device)

    def assertSameAsCpu(self, actual: torch.Tensor, expected: torch.Tensor, **kw) -> None:
        self.assertEqual(actual.device.type, self.device)
        self.assertEqual(actual.dtype, expected.dtype)
        self.assertEqual(actual.shape, expected.shape)
        self.assertEqual(actual.cpu(), expected, **kw)


class DeviceTests(DeviceTestBase):
    r"""Copies, factories, printing, arithmetic and errors across devices."""

    def test_copy_round_trip_keeps_values_and_dtype(self):
        for dtype in (torch.float32, torch.float64, torch.int64, torch.int32, torch.bool):
            x = (torch.arange(12).reshape(3, 4) - 5).to(dtype)
            y = self.on(x)
            self.assertEqual(y.device, torch.device(self.device, 0))
            self.assertSameAsCpu(y, x)
            self.assertEqual(y.to("cpu", copy=True), x)

    def test_factories_match_cpu(self):
        dev = self.device
        self.assertSameAsCpu(torch.zeros(2, 3, device=dev), torch.zeros(2, 3))
        self.assertSameAsCpu(torch.ones(4, dtype=torch.int64, device=dev),
                             torch.ones(4, dtype=torch.int64))
        self.assertSameAsCpu(torch.full((2, 2), 1.5, device=dev), torch.full((2, 2), 1.5))
        self.assertSameAsCpu(torch.arange(0, 5, 2, device=dev), torch.arange(0, 5, 2))
        self.assertEqual(torch.empty(3, 1, device=dev).shape, (3, 1))
        self.assertSameAsCpu(torch.zeros_like(self.on(torch.ones(2, 2))), torch.zeros(2, 2))

    def test_printing_shows_cpus_values_and_the_device(self):
        x = torch.tensor([[1.5, -2.0], [0.25, 3.0]])
        text = repr(self.on(x))
        self.assertIn(f"device='{self.device}:0'", text)
        self.assertTrue(text.startswith(repr(x).rstrip(")")), text)

    def test_copy_between_devices(self):
        x = torch.randn(3, 4)
        y = torch.zeros(3, 4, device=self.device)
        y.copy_(x)
        self.assertSameAsCpu(y, x)
        z = torch.empty(3, 4)
        z.copy_(y)
        self.assertEqual(z, x)
        self.assertSameAsCpu(self.on(x).to(torch.float64), x.double())

    def test_arithmetic_matches_cpu(self):
        torch.manual_seed(0)
        a, b = torch.randn(4, 3), torch.randn(3)
        da, db = self.on(a), self.on(b)
        self.assertSameAsCpu(da + db, a + b)
        self.assertSameAsCpu(da * 2 - db, a * 2 - b)
        self.assertSameAsCpu(torch.relu(da), torch.relu(a))
        self.assertSameAsCpu(da.exp(), a.exp())
        self.assertSameAsCpu(torch.where(da > 0, da, db), torch.where(a > 0, a, b))
        self.assertSameAsCpu(da.sum(0), a.sum(0))
        self.assertSameAsCpu(da.mean(), a.mean())
        self.assertSameAsCpu(da @ db, a @ b)
        self.assertSameAsCpu(da.max(dim=1).values, a.max(dim=1).values)
        self.assertEqual((da > 0).sum().item(), (a > 0).sum().item())

    def test_in_place_and_out_match_cpu(self):
        a, b = torch.randn(3, 3), torch.randn(3, 3)
        da, db = self.on(a), self.on(b)
        da.add_(db).mul_(0.5)
        a.add_(b).mul_(0.5)
        self.assertSameAsCpu(da, a)
        out = torch.empty(3, 3, device=self.device)
        torch.mul(da, db, out=out)
        self.assertSameAsCpu(out, a * b)

    def test_mixed_devices_are_refused(self):
        with self.assertRaisesRegex(RuntimeError, "same device|device"):
            torch.ones(2, device=self.device) + torch.ones(2)
        # A CPU 0-dim tensor is a scalar on any device, as for CUDA.
        self.assertSameAsCpu(torch.ones(2, device=self.device) + torch.tensor(2.0),
                             torch.full((2,), 3.0))

    def test_item_and_tolist(self):
        x = self.on(torch.tensor([1.5, 2.5]))
        self.assertEqual(x[1].item(), 2.5)
        self.assertEqual(x.tolist(), [1.5, 2.5])
        self.assertTrue(bool(self.on(torch.tensor(True))))


class ViewTests(DeviceTestBase):
    r"""Views share their base's memory, with CPU's sizes, strides and offsets."""

    def test_view_metadata_matches_cpu(self):
        x = torch.arange(24.0).reshape(2, 3, 4)
        d = self.on(x)
        for f in (lambda t: t[1:, ::2], lambda t: t.transpose(0, 2), lambda t: t.view(6, 4),
                  lambda t: t.unsqueeze(1).expand(2, 5, 3, 4), lambda t: t.narrow(2, 1, 2),
                  lambda t: t.select(1, 2), lambda t: t.diagonal(0, 1, 2), lambda t: t.mT):
            v, e = f(d), f(x)
            self.assertEqual(v.stride(), e.stride())
            self.assertEqual(v.storage_offset(), e.storage_offset())
            self.assertTrue(v._is_view())
            self.assertSameAsCpu(v, e)

    def test_writes_through_views_reach_the_base(self):
        x = torch.zeros(3, 4)
        d = self.on(x)
        for t in (x, d):
            t[1].fill_(2.0)
            t[:, 2].add_(1.0)
            t.t()[0, 1:].mul_(3.0)
            t.view(12)[11] = 7.0
        self.assertSameAsCpu(d, x)

    def test_writes_into_the_base_show_in_views(self):
        x = torch.arange(6.0)
        d = self.on(x)
        views = [d[::2], d.view(2, 3).t()]
        d.mul_(10)
        x.mul_(10)
        self.assertSameAsCpu(views[0], x[::2])
        self.assertSameAsCpu(views[1], x.view(2, 3).t())

    def test_contiguous_and_clone_do_not_alias(self):
        x = torch.arange(6.0).view(2, 3)
        d = self.on(x)
        c = d.t().contiguous()
        k = d.clone()
        d.zero_()
        self.assertSameAsCpu(c, x.t().contiguous())
        self.assertSameAsCpu(k, x)
        self.assertEqual(c.stride(), x.t().contiguous().stride())

    def test_in_place_metadata_ops(self):
        x = torch.arange(6.0).view(2, 3)
        d = self.on(x)
        d.t_()
        x.t_()
        self.assertEqual(d.stride(), x.stride())
        d.unsqueeze_(0)
        x.unsqueeze_(0)
        self.assertSameAsCpu(d, x)


class AutogradTests(DeviceTestBase):
    r"""Gradients on the device equal CPU's."""

    def test_gradients_of_a_small_network(self):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
        on_device = copy.deepcopy(model).to(self.device)
        x, target = torch.randn(5, 4), torch.tensor([0, 2, 1, 1, 0])
        loss = torch.nn.functional.cross_entropy(model(x), target)
        loss.backward()
        dloss = torch.nn.functional.cross_entropy(on_device(self.on(x)), self.on(target))
        dloss.backward()
        self.assertSameAsCpu(dloss.detach(), loss.detach(), atol=1e-5, rtol=1e-5)
        for p, q in zip(model.parameters(), on_device.parameters(), strict=True):
            self.assertSameAsCpu(q.grad, p.grad, atol=1e-5, rtol=1e-5)

    def test_gradients_through_views_and_in_place(self):
        def f(t):
            y = t * 2
            y[1:].mul_(t[:-1])
            return y.t().sum(0).pow(2).sum()

        x = torch.randn(3, 2, requires_grad=True)
        d = self.on(x.detach()).requires_grad_()
        f(x).backward()
        f(d).backward()
        self.assertSameAsCpu(d.grad, x.grad)

    def test_autograd_grad_and_no_grad(self):
        x = torch.randn(4, requires_grad=True)
        d = self.on(x.detach()).requires_grad_()
        (gx,) = torch.autograd.grad((x.sin() * x).sum(), x)
        (gd,) = torch.autograd.grad((d.sin() * d).sum(), d)
        self.assertSameAsCpu(gd, gx)
        with torch.no_grad():
            self.assertFalse((d * 2).requires_grad)

    def test_an_optimizer_step_matches_cpu(self):
        torch.manual_seed(1)
        w = torch.randn(3, 3, requires_grad=True)
        dw = self.on(w.detach()).requires_grad_()
        for p in (w, dw):
            opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
            for _ in range(3):
                opt.zero_grad()
                (p @ p).square().mean().backward()
                opt.step()
        self.assertSameAsCpu(dw.detach(), w.detach(), atol=1e-5, rtol=1e-5)


class SerializationTests(DeviceTestBase):
    r"""``torch.save``/``torch.load`` of device tensors and modules."""

    def _round_trip(self, obj, **kw):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        buffer.seek(0)
        return torch.load(buffer, **kw)

    def test_tensor_round_trip(self):
        x = torch.randn(3, 4)
        loaded = self._round_trip(self.on(x))
        self.assertSameAsCpu(loaded, x)
        self.assertEqual(self._round_trip(self.on(x), map_location="cpu").device.type, "cpu")

    def test_views_stay_views(self):
        d = self.on(torch.arange(6.0))
        base, view = self._round_trip([d, d[2:]])
        base.fill_(1.0)
        self.assertSameAsCpu(view, torch.ones(4))

    def test_state_dict_round_trip(self):
        model = torch.nn.Linear(3, 2).to(self.device)
        state = self._round_trip(model.state_dict(), weights_only=True)
        other = torch.nn.Linear(3, 2).to(self.device)
        other.load_state_dict(state)
        for p, q in zip(model.parameters(), other.parameters(), strict=True):
            self.assertEqual(q.device.type, self.device)
            self.assertEqual(q.cpu(), p.cpu())


class RandomTests(DeviceTestBase):
    r"""Seeding, generators and the ranges of random operators."""

    def test_seeding_repeats_the_numbers(self):
        torch.manual_seed(3)
        first = torch.rand(5, device=self.device).cpu()
        torch.manual_seed(3)
        self.assertEqual(torch.rand(5, device=self.device).cpu(), first)
        self.assertNotEqual(torch.rand(5, device=self.device).cpu(), first)

    def test_generator_and_its_state(self):
        g = torch.Generator(device=self.device).manual_seed(11)
        self.assertEqual(g.device.type, self.device)
        state = g.get_state()
        first = torch.randn(4, device=self.device, generator=g).cpu()
        g.set_state(state)
        self.assertEqual(torch.randn(4, device=self.device, generator=g).cpu(), first)

    def test_ranges_and_moments(self):
        torch.manual_seed(0)
        u = torch.rand(20000, device=self.device).cpu()
        self.assertTrue(((u >= 0) & (u < 1)).all())
        self.assertLess(abs(u.mean().item() - 0.5), 0.02)
        n = torch.randn(20000, device=self.device).cpu()
        self.assertLess(abs(n.mean().item()), 0.05)
        self.assertLess(abs(n.std().item() - 1), 0.05)
        k = torch.randint(2, 5, (1000,), device=self.device).cpu()
        self.assertEqual(k.unique(), torch.tensor([2, 3, 4]))

    def test_dropout_keeps_or_scales(self):
        torch.manual_seed(0)
        x = torch.ones(1000, device=self.device)
        y = torch.nn.functional.dropout(x, p=0.25, training=True).cpu()
        kept = y != 0
        self.assertEqual(y[kept], torch.full((int(kept.sum()),), 1 / 0.75))
        self.assertLess(abs(kept.float().mean().item() - 0.75), 0.06)


class CompileTests(DeviceTestBase):
    r"""``torch.compile`` with the backends every device has."""

    def test_compiled_function_matches_cpu(self):
        def f(x, w):
            return torch.relu(x @ w).sum(1) * 2 + 1

        x, w = torch.randn(4, 3), torch.randn(3, 5)
        expected = f(x, w)
        for backend in ("eager", "aot_eager"):
            torch._dynamo.reset()
            compiled = torch.compile(f, backend=backend)
            self.assertSameAsCpu(compiled(self.on(x), self.on(w)), expected, atol=1e-5,
                                 rtol=1e-5)

    def test_compiled_training_step_matches_cpu(self):
        torch.manual_seed(0)
        model = torch.nn.Linear(3, 2)
        on_device = copy.deepcopy(model).to(self.device)
        x = torch.randn(4, 3)
        torch._dynamo.reset()
        step = torch.compile(lambda m, t: m(t).square().mean(), backend="aot_eager")
        step(model, x).backward()
        step(on_device, self.on(x)).backward()
        for p, q in zip(model.parameters(), on_device.parameters(), strict=True):
            self.assertSameAsCpu(q.grad, p.grad, atol=1e-5, rtol=1e-5)


#: The groups :func:`instantiate_device_tests` instantiates, by name.
GROUPS = {
    "Device": DeviceTests,
    "Views": ViewTests,
    "Autograd": AutogradTests,
    "Serialization": SerializationTests,
    "Random": RandomTests,
    "Compile": CompileTests,
}


def instantiate_device_tests(device: str, scope: dict, *, groups=None) -> list[type]:
    r"""Add this module's test classes for ``device`` to ``scope`` (a test module's
    ``globals()``): ``Test<Group><Device>`` for each group of :data:`GROUPS` (``groups``, a
    list of names, chooses some). The device must be set up. Returns the classes.

    Example::

        >>> # xdoctest: +SKIP
        >>> instantiate_device_tests("npy", globals(), groups=["Views", "Autograd"])
    """
    if not isinstance(device, str) or not device:
        raise TypeError(f"expected a device name (a non-empty str), but got {device!r}")
    if torch.device(device).type != device:
        raise ValueError(f"expected a device type without an index, but got {device!r}")
    chosen = list(GROUPS) if groups is None else list(groups)
    unknown = [g for g in chosen if g not in GROUPS]
    if unknown:
        raise ValueError(f"unknown test groups {unknown}: expected some of {list(GROUPS)}")
    made = []
    for group in chosen:
        name = f"Test{group}{device.capitalize()}"
        cls = type(name, (GROUPS[group],), {"device": device, "__module__": scope["__name__"]})
        scope[name] = cls
        made.append(cls)
    return made
