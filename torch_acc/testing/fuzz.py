r"""A differential fuzzer: seeded random tensor programs, run on CPU and on a device, compared.

A *program* is a list of :class:`Stmt`, each one line of Python over a pool of named tensors
(``t0``, ``t1``...), with ``torch``, ``dev`` (the device name) and :func:`mk` (deterministic
values) in scope. :func:`generate` makes one from a seed, running it on CPU to choose shapes
and dtypes that mostly make sense (statements that raise stay in: both sides must raise).
:func:`check` runs a program on CPU and on the device in lock step and, after every
statement, compares every tensor of the pool: dtype, shape, strides and offset of views,
values (so a write through an alias that the device misses, or a hidden alias it makes, shows
on the tensor that was not written), gradients of the leaves, and whether each side raised.
The first difference is a :class:`Finding`; :func:`minimise` shrinks the program by delta
debugging to the fewest statements that still differ the same way, and :func:`reproducer`
writes a standalone script for it. :func:`campaign` runs many seeds in worker processes, so
that a crash of the device is recorded as a finding of kind ``"crash"`` instead of ending
the campaign.

Only public names are used: any torch_acc backend can be fuzzed by its device name.

Example::

    >>> # xdoctest: +SKIP
    >>> import torch_acc
    >>> from torch_acc.testing import fuzz
    >>> torch_acc.use("npy")  # a registered backend; fuzz.make_device takes a setup function too
    >>> program = fuzz.generate(0)
    >>> finding = fuzz.check(program, "npy", seed=0)
    >>> if finding is not None:
    ...     small = fuzz.minimise(program, "npy", finding)
    ...     print(fuzz.reproducer(small, "npy", finding, setup=""))

From a shell: ``python -m torch_acc.testing.fuzz --device npy --seed 0 --programs 500 --out
DIR`` (``--setup module:function`` for a device that is not registered). The last line printed
is the campaign's figures as JSON; the exit status is 1 when anything was found.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import json
import math
import os
import random
import re
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

import torch_acc
from torch_acc import versions

__all__ = [
    "KINDS",
    "Finding",
    "Stmt",
    "campaign",
    "check",
    "generate",
    "make_device",
    "minimise",
    "mk",
    "reproducer",
]

#: The kinds of finding, in the order they are looked for after a statement.
KINDS = ("error-one-side", "dtype", "shape", "stride", "value", "alias", "grad", "crash")

DTYPES = (
    torch.bool,
    torch.uint8,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.complex64,
)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
GRAD_DTYPES = (torch.float32, torch.float64, torch.complex64)
_TOL = {
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (2e-2, 2e-2),
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-7, 1e-7),
    torch.complex64: (1e-4, 1e-4),
    torch.complex128: (1e-7, 1e-7),
}


def mk(shape: Sequence[int], dtype: torch.dtype, seed: int, special: bool = False):
    r"""A CPU tensor of ``shape`` and ``dtype`` with small values fixed by ``seed``.

    Values are multiples of 1/2 in [-4, 4] (0/1 for bool, 0..9 for uint8), which every dtype
    holds exactly; ``special`` puts nan, inf, -inf and -0.0 in a floating tensor.
    """
    gen = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    if dtype == torch.uint8:
        return torch.randint(0, 10, shape, generator=gen).to(dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        return torch.randint(-4, 5, shape, generator=gen).to(dtype)
    real = torch.randint(-8, 9, shape, generator=gen).double() / 2
    if dtype.is_complex:
        real = torch.complex(real, torch.randint(-8, 9, shape, generator=gen).double() / 2)
    if special and real.numel():
        flat = real.view(-1)
        values = (math.nan, math.inf, -math.inf, -0.0)
        picks = torch.randint(0, flat.numel(), (min(2, flat.numel()),), generator=gen)
        for k, i in enumerate(picks.tolist()):
            flat[i] = values[(seed + k) % len(values)]
    return real.to(dtype)


@dataclasses.dataclass(frozen=True)
class Stmt:
    r"""One statement of a program.

    ``code`` is a line of Python; ``op`` names the operation for reports; ``writes`` are the
    pool names the statement assigns or modifies in place (a difference on another name is an
    aliasing finding); ``views`` are the names whose strides and offset must match CPU's.
    """

    code: str
    op: str
    writes: tuple[str, ...] = ()
    views: tuple[str, ...] = ()


@dataclasses.dataclass
class Finding:
    r"""The first difference between CPU and the device in a program.

    ``index`` is the statement after which it showed, ``name`` the pool tensor that differed
    (empty for errors), ``detail`` what was expected and what was got.
    """

    kind: str
    op: str
    index: int
    name: str
    detail: str
    seed: int | None = None

    def same(self, other: Finding | None) -> bool:
        r"""Whether ``other`` is the same class of finding (kind and operation)."""
        return other is not None and (self.kind, self.op) == (other.kind, other.op)

    def to_json(self) -> dict:
        r"""A JSON-ready dict of the finding."""
        return dataclasses.asdict(self)


class _Gen:
    r"""Chooses statements, running each on CPU to know the pool's shapes and dtypes."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.env: dict = {"torch": torch, "dev": "cpu", "mk": mk}
        self.count = 0
        self.vseed = seed * 1000

    # -- helpers ------------------------------------------------------------------------
    def pool(self, pred: Callable[[torch.Tensor], bool] = lambda t: True) -> list[str]:
        return [
            k
            for k, v in self.env.items()
            if isinstance(v, torch.Tensor) and k.startswith("t") and pred(v)
        ]

    def pick(self, pred: Callable[[torch.Tensor], bool] = lambda t: True) -> str | None:
        names = self.pool(pred)
        return self.rng.choice(names) if names else None

    def fresh(self) -> str:
        name = f"t{self.count}"
        self.count += 1
        return name

    def shape(self, rank: int | None = None) -> tuple[int, ...]:
        r = self.rng.choice((0, 1, 1, 2, 2, 2, 3)) if rank is None else rank
        return tuple(
            0 if self.rng.random() < 0.06 else self.rng.randint(1, 4) for _ in range(r)
        )

    def lit(self, shape: Sequence[int], dtype: torch.dtype, special: bool = False) -> str:
        self.vseed += 1
        extra = ", special=True" if special else ""
        return f"mk({tuple(shape)!r}, {dtype}, {self.vseed}{extra}).to(dev)"

    def scalar(self, dtype: torch.dtype | None = None) -> str:
        r"""A Python scalar literal; one that ``dtype`` can hold in value kind, if given."""
        if dtype is None:
            kinds = ["int", "float", "bool", "complex"]
        elif dtype == torch.bool:
            kinds = ["bool", "int"]
        elif dtype.is_complex:
            kinds = ["int", "float", "complex"]
        else:
            kinds = ["int", "float"]
        kind = self.rng.choice(kinds)
        if kind == "int":
            return str(self.rng.randint(-3, 3))
        if kind == "float":
            return self.rng.choice(("0.5", "-1.5", "2.0", "0.1", "3.25"))
        if kind == "bool":
            return self.rng.choice(("True", "False"))
        return self.rng.choice(("1j", "(0.5-2j)"))

    def operand(self, like: torch.Tensor) -> str:
        r"""A second operand for a binary op with ``like``: pool tensor, literal or scalar."""
        r = self.rng.random()
        if r < 0.25:
            return self.scalar()
        if r < 0.35:
            return f"torch.tensor({self.scalar()}).to(dev)"
        if r < 0.65:
            name = self.pick(lambda t: _broadcasts(t.shape, like.shape))
            if name is not None:
                return name
        shape = list(like.shape)
        if shape and self.rng.random() < 0.4:
            shape[self.rng.randrange(len(shape))] = 1
        if shape and self.rng.random() < 0.2:
            shape = shape[1:]
        return self.lit(shape, self.rng.choice(DTYPES))

    def dim(self, t: torch.Tensor) -> int:
        return self.rng.randrange(-max(t.dim(), 1), max(t.dim(), 1))

    # -- families -----------------------------------------------------------------------
    def create(self) -> Stmt:
        name = self.fresh()
        dtype = self.rng.choice(DTYPES)
        special = dtype in FLOATS and self.rng.random() < 0.05
        code = f"{name} = {self.lit(self.shape(), dtype, special)}"
        if dtype in GRAD_DTYPES and self.rng.random() < 0.3:
            code += ".requires_grad_()"
        return Stmt(code, "create", (name,))

    def unary(self) -> Stmt | None:
        x = self.pick()
        if x is None:
            return None
        op = self.rng.choice(
            (
                "neg", "abs", "exp", "sin", "sqrt", "relu", "sigmoid", "tanh", "floor",
                "sign", "logical_not", "bitwise_not", "reciprocal", "square", "round",
                "isnan", "clamp", "pow", "conj_physical", "angle", "sum_to_size",
            )
        )
        name = self.fresh()
        if op == "clamp":
            call = f"torch.clamp({x}, min={self.scalar()}, max={self.scalar()})"
        elif op == "pow":
            call = f"torch.pow({x}, {self.rng.choice(('2', '0.5', '3', '-1', '0'))})"
        elif op == "sum_to_size":
            call = f"{x}.sum_to_size({tuple(1 for _ in self.env[x].shape)!r})"
        elif op == "relu":
            call = f"torch.relu({x})"
        else:
            call = f"torch.{op}({x})"
        return Stmt(f"{name} = {call}", op, (name,))

    def binary(self) -> Stmt | None:
        x = self.pick()
        if x is None:
            return None
        t = self.env[x]
        op = self.rng.choice(
            (
                "add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum",
                "minimum", "eq", "ne", "lt", "ge", "logical_and", "bitwise_and", "atan2",
                "where", "add_alpha", "div_floor", "rsub_scalar", "rmul_scalar",
            )
        )
        other = self.operand(t)
        name = self.fresh()
        if op == "add_alpha":
            call = f"torch.add({x}, {other}, alpha={self.rng.choice(('2', '0.5', 'True'))})"
        elif op == "div_floor":
            call = f"torch.div({x}, {other}, rounding_mode='floor')"
        elif op == "rsub_scalar":
            call = f"{self.scalar()} - {x}"
        elif op == "rmul_scalar":
            call = f"{self.scalar()} * {x}"
        elif op == "where":
            cond = self.pick(lambda c: c.dtype == torch.bool and _broadcasts(c.shape, t.shape))
            if cond is None:
                cond = f"({x}.real > 0)" if t.is_complex() else f"({x} > 0)"
            call = f"torch.where({cond}, {x}, {other})"
        else:
            call = f"torch.{op}({x}, {other})"
            if self.rng.random() < 0.3:
                call = f"torch.{op}({other}, {x})"
        return Stmt(f"{name} = {call}", op, (name,))

    def reduce(self) -> Stmt | None:
        x = self.pick()
        if x is None:
            return None
        t = self.env[x]
        op = self.rng.choice(("sum", "mean", "amax", "amin", "argmax", "prod", "any", "all"))
        name = self.fresh()
        args = ""
        if self.rng.random() < 0.7 and t.dim() > 0:
            keep = self.rng.random() < 0.4
            args = f"{self.dim(t)}" + (", keepdim=True" if keep else "")
        elif op in ("amax", "amin") and self.rng.random() < 0.5:
            args = "()"
        if op == "sum" and self.rng.random() < 0.3:
            args += (", " if args else "") + f"dtype={self.rng.choice(DTYPES)}"
        return Stmt(f"{name} = torch.{op}({x}{', ' + args if args else ''})", op, (name,))

    def view(self) -> Stmt | None:
        x = self.pick()
        if x is None:
            return None
        t = self.env[x]
        r = self.rng
        ops = [
            "view", "reshape", "transpose", "permute", "t", "select", "narrow", "slice",
            "expand", "unsqueeze", "squeeze", "diagonal", "as_strided", "conj", "neg_view",
            "real", "imag", "view_dtype", "flatten", "movedim", "chunk", "unfold",
        ]
        op = r.choice(ops)
        name = self.fresh()
        n = t.dim()
        d = self.dim(t)
        if op == "view":
            shape = [t.numel()] if r.random() < 0.5 else [-1]
            if t.numel() and t.numel() % 2 == 0 and r.random() < 0.5:
                shape = [2, -1]
            call = f"{x}.view({', '.join(map(str, shape))})"
        elif op == "reshape":
            call = f"{x}.reshape(-1, 1)" if r.random() < 0.5 else f"{x}.reshape({t.numel()})"
        elif op == "transpose":
            call = f"{x}.transpose({d}, {self.dim(t)})"
        elif op == "permute":
            perm = list(range(n))
            r.shuffle(perm)
            call = f"{x}.permute({', '.join(map(str, perm))})" if n else f"{x}.permute()"
        elif op == "t":
            call = f"{x}.t()"
        elif op == "select":
            size = t.shape[d] if n else 0
            call = f"{x}.select({d}, {r.randrange(-size, size) if size else 0})"
        elif op == "narrow":
            size = t.shape[d] if n else 0
            start = r.randint(0, size)
            call = f"{x}.narrow({d}, {start}, {r.randint(0, size - start)})"
        elif op == "slice":
            parts = []
            for k in range(r.randint(1, max(n, 1))):
                size = t.shape[k] if k < n else 1
                parts.append(f"{r.randint(-size, size)}:{r.randint(0, size)}:{r.randint(1, 2)}")
            call = f"{x}[{', '.join(parts)}]"
        elif op == "expand":
            shape = [1 if s == 1 and r.random() < 0.2 else s for s in t.shape]
            shape = [r.randint(1, 3) if s == 1 else s for s in shape]
            if r.random() < 0.5:
                shape = [r.randint(1, 3)] + shape
            elif r.random() < 0.2 and shape:
                shape = shape[1:]
            call = f"{x}.expand({tuple(shape)!r})"
        elif op == "unsqueeze":
            call = f"{x}.unsqueeze({r.randint(-n - 1, n)})"
        elif op == "squeeze":
            call = f"{x}.squeeze({d})" if r.random() < 0.7 else f"{x}.squeeze()"
        elif op == "diagonal":
            call = f"{x}.diagonal({r.randint(-1, 1)}, {d}, {self.dim(t)})"
        elif op == "as_strided":
            call = f"{x}.as_strided{self._strided(t)}"
        elif op == "conj":
            call = f"{x}.conj()"
        elif op == "neg_view":
            call = f"torch._neg_view({x})"
        elif op in ("real", "imag"):
            call = f"{x}.{op}"
        elif op == "view_dtype":
            call = f"{x}.view({r.choice(DTYPES)})"
        elif op == "flatten":
            call = f"{x}.flatten()"
        elif op == "movedim":
            call = f"{x}.movedim({d}, {self.dim(t)})"
        elif op == "chunk":
            call = f"{x}.chunk({r.randint(1, 3)}, {d})[{r.choice((0, -1))}]"
        else:
            size = t.shape[d] if n else 1
            call = f"{x}.unfold({d}, {r.randint(1, max(size, 1))}, {r.randint(1, 2)})"
        return Stmt(f"{name} = {call}", op, (name,), (name,))

    def _strided(self, t: torch.Tensor) -> str:
        r"""Arguments ``(size, stride, offset)`` of a non-overlapping ``as_strided`` in ``t``'s
        storage (writes through an overlapping one are order-dependent, on CPU too)."""
        capacity = _capacity(t)
        if capacity == 0:
            return "((0,), (1,), 0)"
        sizes = [self.rng.randint(1, 3) for _ in range(self.rng.randint(1, 2))]
        strides = [0] * len(sizes)
        step = 1
        for k in self.rng.sample(range(len(sizes)), len(sizes)):
            strides[k] = step * self.rng.choice((1, 2))
            step = strides[k] * sizes[k]
        while sum((s - 1) * st for s, st in zip(sizes, strides, strict=True)) >= capacity:
            sizes[self.rng.randrange(len(sizes))] = 1
        span = sum((s - 1) * st for s, st in zip(sizes, strides, strict=True))
        offset = self.rng.randint(0, capacity - 1 - span)
        return f"({tuple(sizes)!r}, {tuple(strides)!r}, {offset})"

    def inplace(self) -> Stmt | None:
        x = self.pick(lambda t: not t.requires_grad and not _overlaps_undetectably(t))
        if x is None:
            return None
        t = self.env[x]
        r = self.rng
        op = r.choice(
            (
                "add_", "mul_", "sub_", "div_", "copy_", "fill_", "fill_tensor", "zero_",
                "clamp_", "remainder_", "bitwise_and_", "neg_", "abs_", "masked_fill_",
                "t_", "transpose_", "unsqueeze_", "squeeze_", "resize_", "as_strided_",
                "index_add_", "lerp_",
            )
        )
        n = t.dim()
        views: tuple[str, ...] = ()
        if op in ("add_", "mul_", "sub_", "div_"):
            code = f"{x}.{op}({self.operand(t)})"
        elif op == "copy_":
            code = f"{x}.copy_({self.operand(t)})"
        elif op == "fill_":
            code = f"{x}.fill_({self.scalar(t.dtype)})"
        elif op == "fill_tensor":
            code = f"{x}.fill_(torch.tensor({self.scalar(t.dtype)}).to(dev))"
        elif op == "zero_":
            code = f"{x}.zero_()"
        elif op == "clamp_":
            code = f"{x}.clamp_(min={self.scalar()})"
        elif op == "remainder_":
            code = f"{x}.remainder_({r.choice(('2.0', '3', '-2'))})"
        elif op == "bitwise_and_":
            code = f"{x}.bitwise_and_({r.choice(('3', 'True'))})"
        elif op in ("neg_", "abs_"):
            code = f"{x}.{op}()"
        elif op == "masked_fill_":
            mask = self.pick(lambda c: c.dtype == torch.bool and _broadcasts(c.shape, t.shape))
            mask = mask or self.lit(t.shape, torch.bool)
            code = f"{x}.masked_fill_({mask}, {self.scalar(t.dtype)})"
        elif op == "lerp_":
            code = f"{x}.lerp_({self.operand(t)}, 0.5)"
        elif op == "index_add_":
            d = self.dim(t)
            size = t.shape[d] if n else 1
            idx = [r.randrange(size) for _ in range(r.randint(1, 2))] if size else []
            src = list(t.shape)
            if src:
                src[d] = len(idx)
            code = (
                f"{x}.index_add_({d}, torch.tensor({idx!r}, dtype=torch.int64).to(dev), "
                f"{self.lit(src, t.dtype)})"
            )
        else:
            views = (x,)
            if op == "t_":
                code = f"{x}.t_()"
            elif op == "transpose_":
                code = f"{x}.transpose_({self.dim(t)}, {self.dim(t)})"
            elif op == "unsqueeze_":
                code = f"{x}.unsqueeze_({r.randint(-n - 1, n)})"
            elif op == "squeeze_":
                code = f"{x}.squeeze_({self.dim(t)})" if n else f"{x}.squeeze_()"
            elif op == "as_strided_":
                code = f"{x}.as_strided_{self._strided(t)}"
            else:
                capacity = _capacity(t)
                room = max(capacity - t.storage_offset(), 0)
                numel = r.randint(0, room)
                shape = (numel,)
                if numel and numel % 2 == 0 and r.random() < 0.5:
                    shape = (2, numel // 2)
                code = f"{x}.resize_({shape!r})"
        return Stmt(code, op, (x,), views)

    def out(self) -> Stmt | None:
        x = self.pick(lambda t: not t.requires_grad)
        if x is None:
            return None
        t = self.env[x]
        r = self.rng
        op = r.choice(("add", "mul", "neg", "sum", "mm", "abs"))
        o = None
        if r.random() < 0.5:
            o = self.pick(lambda u: not (u.requires_grad or u is t or _overlaps_undetectably(u)))
        writes: tuple[str, ...]
        if o is None:
            o = self.fresh()
            shape = t.shape if r.random() < 0.5 else self.shape()
            dtype = t.dtype if r.random() < 0.5 else r.choice(DTYPES)
            prefix = f"{o} = {self.lit(shape, dtype)}; "
        else:
            prefix = ""
        writes = (o,)
        if op in ("add", "mul"):
            code = f"torch.{op}({x}, {self.operand(t)}, out={o})"
        elif op in ("neg", "abs"):
            code = f"torch.{op}({x}, out={o})"
        elif op == "sum":
            dim = f"{self.dim(t)}, " if t.dim() else ""
            code = f"torch.sum({x}, {dim}out={o})"
        else:
            k = t.shape[-1] if t.dim() == 2 else 2
            code = f"torch.mm({x}, {self.lit((k, r.randint(1, 3)), t.dtype)}, out={o})"
        return Stmt(prefix + code, f"{op}.out", writes)

    def index(self) -> Stmt | None:
        x = self.pick()
        if x is None:
            return None
        t = self.env[x]
        r = self.rng
        n = t.dim()
        op = r.choice(
            (
                "getitem_int", "getitem_mask", "getitem_index", "getitem_index_cpu",
                "getitem_none", "setitem", "setitem_mask", "index_select", "gather",
                "scatter_", "index_put_", "masked_select", "take",
            )
        )
        size0 = t.shape[0] if n else 1
        idx = [r.randrange(-size0, size0) for _ in range(r.randint(0, 3))] if size0 else []
        if op in ("scatter_", "index_put_"):
            idx = list({i % size0: i for i in idx}.values())
        idx_t = f"torch.tensor({idx!r}, dtype=torch.int64)"
        name = self.fresh()
        writes: tuple[str, ...] = (name,)
        views: tuple[str, ...] = ()
        if op == "getitem_int":
            code = f"{name} = {x}[{r.randrange(-size0, size0) if size0 else 0}]"
            views = (name,)
        elif op == "getitem_none":
            code = f"{name} = {x}[None, ..., {r.randrange(-size0, size0) if size0 else 0}]"
            views = (name,)
        elif op == "getitem_mask":
            mask = self.pick(lambda c: c.dtype == torch.bool and c.shape == t.shape)
            code = f"{name} = {x}[{mask or self.lit(t.shape, torch.bool)}]"
        elif op == "getitem_index":
            code = f"{name} = {x}[{idx_t}.to(dev)]"
        elif op == "getitem_index_cpu":
            code = f"{name} = {x}[{idx_t}]"
        elif op == "setitem":
            code = f"{x}[{idx_t}.to(dev)] = {self.scalar(t.dtype)}"
            writes = (x,)
        elif op == "setitem_mask":
            code = f"{x}[{x} != 0] = {self.scalar(t.dtype)}"
            writes = (x,)
        elif op == "index_select":
            code = f"{name} = torch.index_select({x}, 0, {idx_t}.to(dev))"
        elif op == "gather":
            shape = list(t.shape)
            if shape:
                shape[0] = len(idx)
            code = f"{name} = torch.gather({x}, 0, {idx_t}.to(dev).view(-1, *[1] * {max(n - 1, 0)})"
            code += f".expand({tuple(shape)!r}).clone())" if n else ")"
        elif op == "scatter_":
            src = self.lit((len(idx),) + tuple(1 for _ in range(max(n - 1, 0))), t.dtype)
            shape = (len(idx),) + (1,) * max(n - 1, 0)
            code = f"{x}.scatter_(0, {idx_t}.to(dev).view{shape!r}, {src})"
            writes = (x,)
        elif op == "index_put_":
            acc = r.choice(("True", "False"))
            code = (
                f"{x}.index_put_(({idx_t}.to(dev),), {self.lit((), t.dtype)}, "
                f"accumulate={acc})"
            )
            writes = (x,)
        elif op == "masked_select":
            code = f"{name} = torch.masked_select({x}, {x} != 0)"
        else:
            code = f"{name} = torch.take({x}, {idx_t}.to(dev))"
        return Stmt(code, op, writes, views)

    def matmul(self) -> Stmt | None:
        r = self.rng
        op = r.choice(("mm", "bmm", "matmul", "addmm", "dot", "vdot", "mv", "outer"))
        rank = {"mm": 2, "bmm": 3, "matmul": r.randint(1, 3), "addmm": 2, "mv": 2}.get(op, 1)
        x = self.pick(lambda t: t.dim() == rank and t.dtype in FLOATS + (torch.complex64,))
        if x is None:
            x = self.fresh()
            shape = tuple(r.randint(1, 3) for _ in range(rank))
            dtype = r.choice((torch.float32, torch.float64, torch.complex64))
            return Stmt(f"{x} = {self.lit(shape, dtype)}", "create", (x,))
        t = self.env[x]
        a = f"{x}.conj()" if t.is_complex() and r.random() < 0.5 else x
        k = t.shape[-1]
        if op in ("mm", "addmm"):
            other = (k, r.randint(1, 3))
        elif op == "bmm":
            other = (t.shape[0], k, r.randint(1, 3))
        elif op == "matmul":
            other = (k,) if r.random() < 0.3 else (k, r.randint(1, 3))
        elif op in ("mv", "dot", "vdot"):
            other = (k,)
        else:
            other = (r.randint(1, 3),)
        dtype = t.dtype if r.random() < 0.8 else r.choice(DTYPES)
        b = self.lit(other, dtype)
        if dtype.is_complex and r.random() < 0.5:
            b = f"{b}.conj()"
        name = self.fresh()
        if op == "addmm":
            bias = self.lit((1, other[1]), t.dtype)
            beta = r.choice(("1", "0", "0.5"))
            call = f"torch.addmm({bias}, {a}, {b}, beta={beta})"
        else:
            call = f"torch.{op}({a}, {b})"
        return Stmt(f"{name} = {call}", op, (name,))

    def backward(self) -> Stmt | None:
        x = self.pick(lambda t: t.requires_grad and t.dtype in GRAD_DTYPES + FLOATS)
        if x is None:
            return None
        form = self.rng.choice(("sum", "abs", "sq"))
        loss = {
            "sum": f"{x}.real.sum()" if self.env[x].is_complex() else f"{x}.sum()",
            "abs": f"{x}.abs().sum()",
            "sq": f"({x} * {x}).abs().sum()",
        }[form]
        return Stmt(f"{loss}.backward(retain_graph=True)", "backward", ())

    def probe(self) -> Stmt | None:
        r"""An in-place write to one tensor: any alias the two sides disagree on shows."""
        x = self.pick(lambda t: not t.requires_grad)
        if x is None:
            return None
        value = self.rng.choice(("7", "-3", "True")) if self.env[x].dtype != torch.bool else "True"
        return Stmt(f"{x}.fill_({value})", "fill_", (x,))

    # -- driver -------------------------------------------------------------------------
    FAMILIES = (
        ("create", 10), ("unary", 8), ("binary", 14), ("reduce", 7), ("view", 18),
        ("inplace", 16), ("out", 6), ("index", 9), ("matmul", 6), ("backward", 4), ("probe", 4),
    )

    def _run(self, stmt: Stmt) -> None:
        _exec(stmt, self.env)

    def program(self, length: int, exclude: frozenset[str] = frozenset()) -> list[Stmt]:
        r"""``length`` random statements, then a write into each tensor of the pool in turn
        (with a value of its own): every alias one side has and the other has not shows."""
        stmts: list[Stmt] = []
        for _ in range(self.rng.randint(2, 3)):
            stmts.append(self.create())
            self._run(stmts[-1])
        names = [f for f, _ in self.FAMILIES]
        weights = [w for _, w in self.FAMILIES]
        while len(stmts) < length:
            stmt = getattr(self, self.rng.choices(names, weights)[0])()
            if stmt is None or stmt.op in exclude:
                continue
            stmts.append(stmt)
            self._run(stmt)
        for k, name in enumerate(self.pool(lambda t: not t.requires_grad)):
            if not _overlaps_undetectably(self.env[name]):
                stmts.append(Stmt(f"{name}.fill_({k % 9 + 1})", "probe", (name,)))
                self._run(stmts[-1])
        return stmts


def _capacity(t: torch.Tensor) -> int:
    r"""How many elements of ``t``'s dtype its (CPU) storage holds."""
    return t.untyped_storage().nbytes() // max(t.element_size(), 1)


def _overlaps_undetectably(t: torch.Tensor) -> bool:
    r"""Whether elements of ``t`` share memory in a way ATen's overlap check cannot see.

    In-place writes into such a tensor are order-dependent even on CPU, so the fuzzer does not
    write into one; a stride 0 over a dimension of size > 1 is detected (CPU raises), and kept.
    """
    if t.numel() <= 1 or any(st == 0 and n > 1 for n, st in zip(t.shape, t.stride(), strict=True)):
        return False
    where = torch.arange(_capacity(t)).as_strided(t.shape, t.stride(), t.storage_offset())
    return where.unique().numel() != where.numel()


def _broadcasts(a: Sequence[int], b: Sequence[int]) -> bool:
    try:
        torch.broadcast_shapes(tuple(a), tuple(b))
    except RuntimeError:
        return False
    return True


_CODE_CACHE: dict[str, object] = {}


def _exec(stmt: Stmt, env: dict) -> BaseException | None:
    r"""Run one statement in ``env``; return the exception it raised, if any."""
    code = _CODE_CACHE.get(stmt.code)
    if code is None:
        code = _CODE_CACHE[stmt.code] = compile(stmt.code, "<fuzz>", "exec")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            exec(code, env)
    except Exception as e:  # noqa: BLE001 - any error is an outcome to compare
        return e
    return None


def generate(
    seed: int, length: int | None = None, exclude: Sequence[str] = ()
) -> list[Stmt]:
    r"""The program of ``seed``: deterministic, independent of the device fuzzed.

    ``exclude`` names operations (:attr:`Stmt.op`) never to generate: a campaign that leaves
    out the classes it already knows finds the ones they hide (each program stops at its first
    finding).
    """
    gen = _Gen(seed)
    n = length if length is not None else gen.rng.randint(8, 24)
    return gen.program(n, frozenset(exclude))


def _env(device: str) -> dict:
    return {"torch": torch, "dev": device, "mk": mk}


def _tensors(env: dict) -> dict[str, torch.Tensor]:
    return {k: v for k, v in env.items() if isinstance(v, torch.Tensor) and k.startswith("t")}


def _host(t: torch.Tensor) -> torch.Tensor:
    return t.detach().cpu().resolve_conj().resolve_neg()


def _read(t: torch.Tensor) -> torch.Tensor | Exception:
    r"""``t``'s values on CPU, conjugate and negative bits resolved, or the error reading."""
    try:
        return _host(t)
    except Exception as e:  # noqa: BLE001
        return e


def _close(expected: torch.Tensor, actual: torch.Tensor) -> str | None:
    r"""``None`` when the values agree (nan equal to nan), else what differs."""
    rtol, atol = _TOL.get(expected.dtype, (0, 0))
    try:
        torch.testing.assert_close(
            actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_stride=False,
            check_device=False, check_dtype=False,
        )
    except AssertionError as e:
        return str(e).replace("\n", " ")[:400]
    return None


def _compare(
    stmt: Stmt, index: int, cpu: dict, acc: dict, views: set[str], device: str
) -> Finding | None:
    r"""The first difference between the two pools after ``stmt``, written names first."""
    cpu_t = _tensors(cpu)
    acc_t = _tensors(acc)
    order = [n for n in stmt.writes if n in cpu_t] + [n for n in cpu_t if n not in stmt.writes]
    for name in order:
        c = cpu_t[name]
        a = acc_t.get(name)
        if a is None:
            return Finding("error-one-side", stmt.op, index, name, f"{name} missing on {device}")
        if a.dtype != c.dtype:
            return Finding("dtype", stmt.op, index, name, f"expected {c.dtype}, got {a.dtype}")
        if a.shape != c.shape:
            return Finding(
                "shape", stmt.op, index, name, f"expected {tuple(c.shape)}, got {tuple(a.shape)}"
            )
        if (
            name in views
            and c.numel()
            and (a.stride(), a.storage_offset()) != (c.stride(), c.storage_offset())
        ):
            return Finding(
                "stride", stmt.op, index, name,
                f"expected strides {c.stride()} offset {c.storage_offset()}, "
                f"got {a.stride()} offset {a.storage_offset()}",
            )
        want, got = _read(c), _read(a)
        if isinstance(want, Exception) or isinstance(got, Exception):
            if isinstance(want, Exception) and isinstance(got, Exception):
                continue
            side, err = ("CPU", want) if isinstance(want, Exception) else (device, got)
            return Finding(
                "error-one-side", stmt.op, index, name, f"reading {name} on {side}: {err!r}"
            )
        diff = _close(want, got)
        if diff is not None:
            kind = "value" if name in stmt.writes or stmt.op == "backward" else "alias"
            return Finding(kind, stmt.op, index, name, diff)
    if stmt.op == "backward":
        for name, c in cpu_t.items():
            if not (c.requires_grad and c.is_leaf):
                continue
            cg, ag = c.grad, acc_t[name].grad
            if (cg is None) != (ag is None):
                return Finding("grad", stmt.op, index, name, f"grad: expected {cg}, got {ag}")
            if cg is None:
                continue
            diff = _close(_host(cg), _host(ag))
            if diff is None and (cg.dtype, cg.shape) != (ag.dtype, ag.shape):
                diff = f"grad {ag.dtype} {tuple(ag.shape)}, expected {cg.dtype} {tuple(cg.shape)}"
            if diff is not None:
                return Finding("grad", stmt.op, index, name, diff)
    return None


#: What a payload device refuses by design, with a clear error, where CPU computes: these
#: end a program instead of being findings. ``view(dtype)`` of another dtype reinterprets
#: bytes, which a payload (values, not memory) does not have (``csrc/acc/Bridge.cpp``); a
#: dtype a backend declares it lacks is its own documented limit.
DOCUMENTED_REFUSALS = (
    re.compile(r"aten::view\.dtype: cannot view a tensor on \S+ of dtype"),
    # A backend's declared dtype support (NumPy has no complex32, nor torch 2.14's
    # bcomplex32, which bfloat16 and a complex scalar promote to there).
    re.compile(r"backend does not support dtype torch\.b?complex32"),
    # An out= or in-place write into elements the operator also reads, where CPU's answer
    # depends on the order its loops write them (csrc/acc/Bridge.cpp, checkOverlap).
    re.compile(r"CPU computes this, but its result (depends|can depend) on the order in which"),
    # A resize that would grow a payload shared with an element-size view or its base
    # (csrc/acc/PayloadTensor.cpp, resizePayloadTensor): a grown payload is a new one.
    re.compile(r"cannot resize a tensor on \S+ from .*: its payload shares memory"),
)


def _documented_refusal(error: BaseException) -> bool:
    return any(pattern.search(str(error)) for pattern in DOCUMENTED_REFUSALS)


def _settle_failure(
    written: Sequence[str], before: dict[str, int], kept: dict, cpu: dict, acc: dict
) -> None:
    r"""After a statement that raised on both sides, zero on both sides the tensors it wrote
    whose values CPU leaves unspecified: one it grew (or made), where an ``out=`` tensor
    resized before the operator failed holds uninitialised memory on CPU (as
    ``torch.empty``); and one the device left as it was, where CPU wrote part of it before
    raising (``scatter_`` with a bad index at its end). A device that leaves a part written
    where CPU does not stays a finding."""
    for name in written:
        c, a = cpu.get(name), acc.get(name)
        if not (isinstance(c, torch.Tensor) and isinstance(a, torch.Tensor)):
            continue
        old = kept.get(name)
        now = _read(a)
        untouched = (
            isinstance(old, torch.Tensor) and isinstance(now, torch.Tensor)
            and old.shape == now.shape and _close(old, now) is None
        )
        if c.numel() > before.get(name, -1) or untouched:
            for t in (c, a):
                with contextlib.suppress(Exception), torch.no_grad():
                    t.zero_()


#: Statements that divide complex numbers, whose non-finite answers CPU gives by position on
#: some releases (``versions.CPU_COMPLEX_DIVISION_BY_POSITION``).
_COMPLEX_DIVISIONS = frozenset({"div", "div_"})


def _settle_complex_division(stmt: Stmt, cpu: dict, acc: dict) -> None:
    r"""Where CPU's complex division depends on an element's position in the loop, zero on
    both sides the elements of the written tensors that are not finite on either side: which
    of nan and inf they hold is CPU's accident there, and a later statement would carry it."""
    if not (versions.CPU_COMPLEX_DIVISION_BY_POSITION and stmt.op in _COMPLEX_DIVISIONS):
        return
    for name in stmt.writes:
        c, a = cpu.get(name), acc.get(name)
        if not (isinstance(c, torch.Tensor) and isinstance(a, torch.Tensor)
                and c.is_complex() and c.shape == a.shape):
            continue
        got = _read(a)
        if isinstance(got, Exception):
            continue
        mask = ~torch.isfinite(c.detach()) | ~torch.isfinite(got)
        if mask.any():
            with torch.no_grad():
                c.masked_fill_(mask, 0)
                a.masked_fill_(mask.to(a.device), 0)


def check(
    program: Sequence[Stmt],
    device: str,
    seed: int | None = None,
    trace: Callable[[int], None] | None = None,
) -> Finding | None:
    r"""Run ``program`` on CPU and on ``device`` in lock step; the first difference, or None.

    ``trace`` is called with each statement's index before it runs (a worker reports it, so
    that a crash is pinned to its statement).
    """
    cpu, acc = _env("cpu"), _env(device)
    views: set[str] = set()
    for index, stmt in enumerate(program):
        if trace is not None:
            trace(index)
        before = {n: t.numel() for n, t in _tensors(cpu).items() if n in stmt.writes}
        ce = _exec(stmt, cpu)
        kept = None if ce is None else {
            n: _read(t) for n, t in _tensors(acc).items() if n in stmt.writes
        }
        ae = _exec(stmt, acc)
        if ce is not None and ae is not None:
            _settle_failure(stmt.writes, before, kept, cpu, acc)
        if ce is None and ae is not None and _documented_refusal(ae):
            return None  # The rest of the program depends on what CPU made here.
        if (ce is None) != (ae is None):
            detail = (
                f"CPU raised {type(ce).__name__}: {ce}" if ce is not None
                else f"{device} raised {type(ae).__name__}: {ae}"
            )
            return Finding("error-one-side", stmt.op, index, "", detail[:600], seed)
        views.update(stmt.views)
        if ce is None:
            _settle_complex_division(stmt, cpu, acc)
        finding = _compare(stmt, index, cpu, acc, views, device)
        if finding is not None:
            finding.seed = seed
            return finding
    return None


def minimise(
    program: Sequence[Stmt],
    device: str,
    finding: Finding,
    still: Callable[[list[Stmt]], bool] | None = None,
) -> list[Stmt]:
    r"""The smallest sub-program (delta debugging) that still gives a finding like ``finding``.

    ``still`` decides whether a candidate still fails; by default :func:`check` gives a
    finding of the same kind and operation.
    """
    if still is None:

        def still(candidate: list[Stmt]) -> bool:
            return finding.same(check(candidate, device))

    current = list(program[: finding.index + 1]) if finding.index >= 0 else list(program)
    n = 2
    while len(current) >= 2:
        chunk = math.ceil(len(current) / n)
        reduced = False
        for start in range(0, len(current), chunk):
            candidate = current[:start] + current[start + chunk :]
            if candidate and still(candidate):
                current = candidate
                n = max(n - 1, 2)
                reduced = True
                break
        if not reduced:
            if chunk == 1:
                break
            n = min(n * 2, len(current))
    return current


def reproducer(program: Sequence[Stmt], device: str, finding: Finding, setup: str) -> str:
    r"""A standalone script that fails (an ``AssertionError``) while ``finding`` is open.

    ``setup`` is ``"module:function"``, called to make ``device`` exist; empty, the script
    uses the backend registered under ``device`` (:func:`torch_acc.use`).
    """
    if setup:
        module, _, func = setup.partition(":")
        make = f"import importlib\n\ngetattr(importlib.import_module({module!r}), {func!r})()\n"
    else:
        make = f"import torch_acc\n\ntorch_acc.use({device!r})\n"
    lines = "\n".join(f"    {s!r}," for s in program)
    return (
        f"# Fuzzer finding: kind={finding.kind} op={finding.op} seed={finding.seed}\n"
        f"# {finding.detail[:300]!r}\n"
        "# Program (pool t0, t1...; dev is the device, mk makes fixed values):\n"
        + "".join(f"#   {s.code}\n" for s in program)
        + "from torch_acc.testing.fuzz import check, Stmt\n"
        + make
        + f"PROGRAM = [\n{lines}\n]\n"
        f"finding = check(PROGRAM, {device!r})\n"
        "assert finding is None, finding\n"
    )


def _report(out: Path | None, program: list[Stmt], finding: Finding, device: str, setup: str):
    if out is None:
        return
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"seed{finding.seed}_{finding.kind}.py"
    path.write_text(reproducer(program, device, finding, setup))
    with open(out / "findings.jsonl", "a") as f:
        f.write(json.dumps({**finding.to_json(), "reproducer": path.name,
                            "statements": len(program)}) + "\n")


def run_seed(seed: int, device: str, out: Path | None = None, setup: str = "",
             exclude: Sequence[str] = (), trace: Callable[[int], None] | None = None
             ) -> tuple[Finding | None, list[Stmt]]:
    r"""Generate, check and (on a finding) minimise one program, writing its reproducer."""
    program = generate(seed, exclude=exclude)
    finding = check(program, device, seed, trace)
    if finding is None:
        return None, program
    small = minimise(program, device, finding)
    again = check(small, device, seed)
    if finding.same(again):
        finding = again
    _report(out, small, finding, device, setup)
    return finding, small


def make_device(device: str, setup: str = "") -> None:
    r"""Make ``device`` exist: call ``setup`` (``"module:function"``), or without one bind the
    backend registered under ``device`` (:func:`torch_acc.use`)."""
    if setup:
        module, _, func = setup.partition(":")
        getattr(importlib.import_module(module), func)()
    else:
        torch_acc.use(device)


def _worker(args: argparse.Namespace) -> None:
    r"""Run seeds in this process, one JSON line each, ``start`` lines before each seed."""
    make_device(args.device, args.setup)
    out = Path(args.out) if args.out else None
    for seed in range(args.seed, args.seed + args.programs):
        print(json.dumps({"start": seed}), flush=True)
        finding, small = run_seed(
            seed, args.device, out, args.setup, _split(args.exclude),
            lambda i: print(json.dumps({"at": i}), flush=True),
        )
        rec = {"seed": seed, "finding": finding.to_json() if finding else None,
               "statements": len(small)}
        print(json.dumps(rec), flush=True)


_REPLAY = """
import json, sys
from torch_acc.testing.fuzz import make_device, Stmt, check
make_device(sys.argv[2], sys.argv[1])
check([Stmt(**{k: tuple(v) if isinstance(v, list) else v for k, v in s.items()})
       for s in json.load(sys.stdin)], sys.argv[2])
"""


def _crashes(program: Sequence[Stmt], device: str, setup: str) -> bool:
    r"""Whether ``program`` kills a fresh process (a signal, not an exception)."""
    data = json.dumps([dataclasses.asdict(s) for s in program])
    proc = subprocess.run([sys.executable, "-c", _REPLAY, setup, device], input=data,
                          text=True, capture_output=True)
    return proc.returncode < 0


def _crash(seed: int, at: int | None, rc: int, device: str, setup: str,
           exclude: Sequence[str], out: Path | None, budget: int) -> Finding:
    r"""The finding of a worker that died in ``seed``'s program at statement ``at``."""
    program = generate(seed, exclude=exclude)
    index = at if at is not None else len(program) - 1
    finding = Finding("crash", program[index].op, index, "", f"process exited with {rc}", seed)
    tries = [0]

    def still(candidate: list[Stmt]) -> bool:
        tries[0] += 1
        return tries[0] <= budget and _crashes(candidate, device, setup)

    small = minimise(program, device, finding, still) if budget else program[: index + 1]
    finding.index = len(small) - 1
    _report(out, small, finding, device, setup)
    return finding


def _split(names: str) -> list[str]:
    return [n for n in names.split(",") if n]


def campaign(device: str, seed: int, programs: int, out: Path | None, setup: str = "",
             log: Callable[[str], None] = lambda s: None, exclude: Sequence[str] = (),
             crash_budget: int = 20) -> dict:
    r"""Run ``programs`` seeds from ``seed`` in worker processes; a dead worker is a crash.

    ``setup`` makes the device exist in each worker (:func:`make_device`). ``exclude`` is
    passed to :func:`generate`. A crash is minimised with at most
    ``crash_budget`` runs of a candidate program, each in a process of its own.

    Returns the figures: programs run, findings by kind, seconds, and the findings.
    """
    start_time = time.time()
    findings: list[dict] = []
    done = 0
    next_seed, end = seed, seed + programs
    env = dict(os.environ)
    while next_seed < end:
        cmd = [sys.executable, "-m", "torch_acc.testing.fuzz", "--worker", "--device", device,
               "--seed", str(next_seed), "--programs", str(end - next_seed), "--setup", setup,
               "--exclude", ",".join(exclude)]
        if out is not None:
            cmd += ["--out", str(out)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
        current = at = None
        assert proc.stdout is not None
        for line in proc.stdout:
            if not line.startswith("{"):
                # Not the protocol: a line an imported module printed (torch 2.6's
                # common_utils does without hypothesis), passed on.
                sys.stderr.write(line)
                continue
            rec = json.loads(line)
            if "at" in rec:
                at = rec["at"]
                continue
            if "start" in rec:
                current, at = rec["start"], None
                continue
            current = None
            done += 1
            next_seed = rec["seed"] + 1
            if rec["finding"]:
                findings.append(rec["finding"])
                log(f"seed {rec['seed']}: {rec['finding']['kind']} {rec['finding']['op']}")
        rc = proc.wait()
        if current is not None:
            done += 1
            crash = _crash(current, at, rc, device, setup, exclude, out, crash_budget)
            findings.append(crash.to_json())
            log(f"seed {current}: crash {crash.op} (exit {rc})")
            next_seed = current + 1
        elif rc != 0:
            raise RuntimeError(f"fuzz worker failed before any program (exit {rc})")
    by_kind: dict[str, int] = {}
    for f in findings:
        by_kind[f["kind"]] = by_kind.get(f["kind"], 0) + 1
    return {"programs": done, "findings": len(findings), "by_kind": by_kind,
            "seconds": round(time.time() - start_time, 1), "list": findings}


def main(argv: Sequence[str] | None = None) -> int:
    r"""Command line: ``python -m torch_acc.testing.fuzz --device npy --seed 0 ...``."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="npy")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--programs", type=int, default=100)
    p.add_argument("--out", default=None, help="folder for reproducers and findings.jsonl")
    p.add_argument("--setup", default="",
                   help="module:function that makes the device exist (default: the backend "
                        "registered under --device)")
    p.add_argument("--exclude", default="",
                   help="comma-separated operations (Stmt.op) never to generate")
    p.add_argument("--crash-budget", type=int, default=20,
                   help="most processes to spend minimising one crash")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _worker(args)
        return 0
    out = Path(args.out) if args.out else None
    figures = campaign(args.device, args.seed, args.programs, out, args.setup,
                       log=lambda s: print(s, flush=True), exclude=_split(args.exclude),
                       crash_budget=args.crash_budget)
    summary = {k: v for k, v in figures.items() if k != "list"}
    print(json.dumps(summary))
    return 1 if figures["findings"] else 0


if __name__ == "__main__":
    sys.exit(main())
