r"""Check a backend's kernel for one operator against CPU, in the spirit of
``torch.library.opcheck``.

:func:`opcheck` runs an aten operator overload on CPU and on a torch_acc device for each
sample and checks, with the kernel contract enforced (:func:`torch_acc.library.check_kernels`,
which compares every payload kernel's results with the operator's meta function):

- errors: the device raises where CPU raises, and only there;
- results: the same number, dtype, shape and values (``torch.testing.assert_close``);
- mutation: the arguments CPU's operator writes (in-place, ``out=``) are written on the
  device with CPU's values, and no other argument changes;
- aliasing: a result of an operator whose schema does not alias its inputs shares no data
  with them (a write into it leaves every argument as it was).

Example::

    >>> # xdoctest: +SKIP
    >>> from torch_acc.testing import opcheck
    >>> opcheck(torch.ops.aten.mm.default, (torch.randn(3, 4), torch.randn(4, 2)), device="npy")
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch.utils._pytree import tree_flatten, tree_map

from torch_acc import library

__all__ = ["OpCheckError", "opcheck"]


class OpCheckError(AssertionError):
    """A kernel differs from CPU: the message names the operator, the sample and what."""


def _overload(op) -> torch._ops.OpOverload:
    if isinstance(op, torch._ops.OpOverload):
        return op
    if isinstance(op, str):
        name = op.removeprefix("aten::")
        packet, _, overload = name.partition(".")
        found = getattr(getattr(torch.ops.aten, packet, None), overload or "default", None)
        if isinstance(found, torch._ops.OpOverload):
            return found
    raise TypeError(
        "expected an aten operator overload (torch.ops.aten.add.Tensor or 'aten::add.Tensor'), "
        f"but got {op!r}"
    )


def _split(sample) -> tuple[tuple, dict]:
    """A sample's ``(args, kwargs)``: a tuple of arguments, or a pair (tuple, dict)."""
    if (
        isinstance(sample, tuple)
        and len(sample) == 2
        and isinstance(sample[0], tuple)
        and isinstance(sample[1], dict)
    ):
        return sample[0], sample[1]
    if isinstance(sample, tuple):
        return sample, {}
    raise TypeError(
        "expected each sample to be a tuple of arguments or a pair (args tuple, kwargs dict), "
        f"but got {type(sample).__qualname__}"
    )


def _clone_to(value, device: str):
    if isinstance(value, torch.Tensor):
        return value.detach().clone().to(device)
    return value


def _cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().resolve_conj().resolve_neg()
    return value


def _tensors(tree) -> list[torch.Tensor]:
    return [t for t in tree_flatten(tree)[0] if isinstance(t, torch.Tensor)]


def _close(expected, got, what: str, fail: Callable[[str], None]) -> None:
    if isinstance(expected, torch.Tensor) != isinstance(got, torch.Tensor):
        fail(f"{what}: CPU gives {type(expected).__name__}, the device {type(got).__name__}")
    if not isinstance(expected, torch.Tensor):
        if expected != got:
            fail(f"{what}: CPU gives {expected!r}, the device {got!r}")
        return
    if expected.dtype != got.dtype or expected.shape != got.shape:
        fail(
            f"{what}: CPU gives {expected.dtype} {tuple(expected.shape)}, the device "
            f"{got.dtype} {tuple(got.shape)}"
        )
    try:
        torch.testing.assert_close(_cpu(got), _cpu(expected), equal_nan=True)
    except AssertionError as e:
        fail(f"{what}: values differ from CPU's: {e}")


def opcheck(op, *samples: Sequence[Any], device: str) -> None:
    r"""Check the ``device`` backend's kernel for ``op`` against CPU on each sample.

    Args:
        op: an aten operator overload, ``torch.ops.aten.add.Tensor`` or ``"aten::add.Tensor"``.
        samples: each a tuple of the operator's arguments, or a pair ``(args, kwargs)``, with
            tensors on the CPU (they are copied to ``device`` for the device's run).
        device (str): the device type of a torch_acc backend set up in this process.

    Raises:
        OpCheckError: a difference, naming the operator, the sample and what differs.
    """
    op = _overload(op)
    schema = op._schema
    mutated = [i for i, a in enumerate(schema.arguments) if a.alias_info and a.alias_info.is_write]
    aliasing = any(r.alias_info is not None for r in schema.returns)
    for index, sample in enumerate(samples):
        args, kwargs = _split(sample)

        def fail(what: str, index=index) -> None:
            raise OpCheckError(f"opcheck of {op} on {device}, sample {index}: {what}")

        cpu_args, cpu_kwargs = tree_map(_clone_to_cpu, (args, kwargs))
        dev_args, dev_kwargs = tree_map(lambda v: _clone_to(v, device), (args, kwargs))
        before = [t.clone() for t in _tensors((cpu_args, cpu_kwargs))]
        cpu_error = dev_error = None
        try:
            expected = op(*cpu_args, **cpu_kwargs)
        except Exception as e:  # noqa: BLE001 - any error CPU raises must be raised on device
            cpu_error = e
        try:
            with library.check_kernels():
                got = op(*dev_args, **dev_kwargs)
        except Exception as e:  # noqa: BLE001 - compared with CPU's below
            dev_error = e
        if cpu_error is not None or dev_error is not None:
            if cpu_error is None:
                fail(f"the device raised {type(dev_error).__name__}: {dev_error}, CPU did not")
            if dev_error is None:
                fail(f"CPU raised {type(cpu_error).__name__}: {cpu_error}, the device did not")
            continue
        for i, (c, d) in enumerate(
            zip(_tensors((cpu_args, cpu_kwargs)), _tensors((dev_args, dev_kwargs)), strict=True)
        ):
            _close(c, d, f"tensor argument {i} after the call", fail)
        expected_flat, got_flat = tree_flatten(expected)[0], tree_flatten(got)[0]
        if len(expected_flat) != len(got_flat):
            fail(f"CPU gives {len(expected_flat)} results, the device {len(got_flat)}")
        for j, (e, g) in enumerate(zip(expected_flat, got_flat, strict=True)):
            _close(e, g, f"result {j}", fail)
        if not mutated and not aliasing:
            for j, g in enumerate(got_flat):
                if isinstance(g, torch.Tensor) and g.numel() and g.device.type == device:
                    g.fill_(0)
                    for i, (b, d) in enumerate(
                        zip(before, _tensors((dev_args, dev_kwargs)), strict=True)
                    ):
                        if not torch.equal(_cpu(d), _cpu(b)):
                            fail(
                                f"result {j} shares data with tensor argument {i}: writing "
                                "into it changed the argument"
                            )


def _clone_to_cpu(value):
    return _clone_to(value, "cpu")
