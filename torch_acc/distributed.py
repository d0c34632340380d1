r"""``torch.distributed`` on a Python device: a c10d backend that stages payloads through gloo.

Gloo, the collective library of CPU tensors, does not accept PrivateUse1 tensors. The
backend here is a ``torch.distributed.ProcessGroup`` that copies the tensors of a Python
device to host memory (or uses their memory in place, through a backend's ``host_view``), runs
the collective with gloo and writes the results back into the device tensors in place (their
dtype, shape and strides unchanged); CPU tensors go to gloo as they are. Every collective of
the c10d API works, synchronous or with ``async_op=True`` (``Work.wait()``,
``Work.get_future()``), and so do ``batch_isend_irecv``, the coalescing manager, the
functional collectives (run synchronously: a result is complete when returned), DTensor and
``torch.distributed.checkpoint``, and ``DistributedDataParallel`` with its own reducer
(buckets, ``gradient_as_bucket_view``, ``find_unused_parameters``, ``static_graph``, the
broadcast of buffers): it tells a bucket's views from other tensors by their storage, which a
payload tensor has (without data; ``csrc/acc/PayloadTensor.h``).

:func:`register` makes the backend known to ``torch.distributed`` under the name
:data:`BACKEND` (``"acc"``) for a device; ``setup_privateuseone_for_python_backend`` calls it,
so that after a backend's setup::

    dist.init_process_group()                     # the current accelerator is the device
    dist.init_process_group("cpu:gloo,npy:acc")   # the same, named
    dist.init_process_group("acc")

all give a process group whose collectives take tensors on the device (and on CPU).

Before each collective the ranks compare what they pass (one small gloo ``all_gather``), so
that tensors of other dtypes or shapes on another rank are an error naming the collective on
every rank; a collective whose peer died or that outlives the process group's timeout raises
gloo's error, wrapped with the collective's name: never a hang past that timeout.
"""

import functools
import threading
import zlib
from collections.abc import Callable, Sequence
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C._distributed_c10d import AllgatherOptions  # dist has it from 2.7 on only

from torch_acc import _C, _compat
from torch_acc.payload import payload

__all__ = ["BACKEND", "ProcessGroupAcc", "register"]

#: The name of the c10d backend (``init_process_group("acc")``, ``"cpu:gloo,npy:acc"``).
BACKEND = "acc"

#: The devices served, and each one's ``host_view`` (or None).
_devices: dict[str, Callable[[object], torch.Tensor | None] | None] = {}
#: The devices whose backend gave a ``transport``, and that transport.
_transports: dict[str, Callable] = {}
_functional_lib: torch.library.Library | None = None


def register(
    device: str,
    *,
    host_view: Callable[[object], torch.Tensor | None] | None = None,
    transport: Callable | None = None,
) -> str:
    """Register the c10d backend :data:`BACKEND` for ``device`` (a Python device's name) and
    make it the device's default backend, as NCCL is CUDA's; register the device's kernels of
    the functional collectives (``torch.distributed._functional_collectives``, what
    ``torch.compile`` and DTensor emit). Idempotent; returns :data:`BACKEND`.

    ``host_view(payload)``, where a backend gives one, spares the copies: it returns a CPU
    tensor over the payload's own memory (the payload's shape and dtype; reading and writing
    it reads and writes the device tensor), or None where the payload has no such memory (then
    the values go through a host copy, as without ``host_view``). Gloo then reads and writes
    the device data in place.

    ``transport(store, rank, world_size, timeout)``, where a backend gives one, makes what
    moves the host tensors instead of gloo: a c10d backend of CPU tensors (the methods of
    ``torch._C._distributed_c10d.Backend`` that :class:`ProcessGroupAcc` calls: ``allreduce``,
    ``allreduce_coalesced``, ``broadcast``, ``reduce``, ``allgather``, ``allgather_coalesced``,
    ``_allgather_base``, ``gather``, ``scatter``, ``_reduce_scatter_base`` (which the
    list ``reduce_scatter`` goes through too), ``alltoall_base``, ``barrier``, ``send``, ``recv``,
    ``recv_anysource``, ``monitored_barrier``, each returning a ``Work``), such as
    ``ProcessGroupGloo`` itself, MPI's or UCC's, or a Python object with those methods.
    """
    global _functional_lib
    if host_view is not None or device not in _devices:
        _devices[device] = host_view
    if transport is not None:
        _transports[device] = transport
    if BACKEND.upper() in dist.Backend._plugins:
        # torch 2.6 asserts on a second register_backend; a later device only joins the tables
        # the first registration made.
        dist.Backend.backend_capability[BACKEND] = ["cpu", *_devices]
        dist.Backend.default_device_backend_map.setdefault(device, BACKEND)
    else:
        dist.Backend.register_backend(BACKEND, _create, devices=["cpu", *_devices])
    if _functional_lib is None:
        _functional_lib = _register_functional_kernels()
        if _compat.PROCESS_GROUP_FREED_WITH_GIL:
            c10d = dist.distributed_c10d
            c10d.destroy_process_group = _groups_freed_without_gil(c10d.destroy_process_group)
            dist.destroy_process_group = c10d.destroy_process_group
    return BACKEND


def _groups_freed_without_gil(destroy: Callable) -> Callable:
    """``destroy_process_group`` that destroys the groups with the GIL released, where dropping
    a group's Python object does not (``_compat.PROCESS_GROUP_FREED_WITH_GIL``): it holds a
    C++ reference to each group while ``destroy`` drops them, then lets go of those
    references without the GIL."""

    @functools.wraps(destroy)
    def destroy_process_group(group=None):
        # Only C++ references here: a Python one that outlived ``destroy`` as the last would
        # destroy its group with the GIL held. (A group passed in is still the caller's.)
        pg_map = dist.distributed_c10d._world.pg_map
        if group is None or group == dist.GroupMember.WORLD:
            references = [_C.process_group_reference(pg) for pg in pg_map]
        else:
            references = [_C.process_group_reference(group)] if group in pg_map else []
        try:
            destroy(group)
        finally:
            references.clear()

    return destroy_process_group


def _register_functional_kernels() -> torch.library.Library:
    """PrivateUse1 kernels of every ``_c10d_functional`` operator.

    Upstream's kernels keep a collective's work in a table keyed by the result's storage,
    which a payload tensor does not have. Here the collective runs on host copies through
    upstream's CPU kernel and is waited for before the kernel returns: results are complete
    when they are returned, in-place arguments are written back, and ``wait_tensor`` has
    nothing left to wait for.
    """
    lib = torch.library.Library("_c10d_functional", "IMPL")
    for name in torch._C._dispatch_get_all_op_names():
        namespace, _, op_name = name.partition("::")
        if namespace != "_c10d_functional":
            continue
        packet = getattr(torch.ops._c10d_functional, op_name.split(".")[0])
        for overload in packet.overloads():
            op = getattr(packet, overload)
            kernel = _wait_tensor if op_name == "wait_tensor" else _functional_kernel(op)
            lib.impl(
                op_name if overload == "default" else f"{op_name}.{overload}", kernel, "PrivateUse1"
            )
    return lib


def _wait_tensor(tensor: torch.Tensor) -> torch.Tensor:
    return tensor


def _functional_kernel(op):
    schema = op._schema
    mutated = [
        i
        for i, a in enumerate(schema.arguments)
        if a.alias_info is not None and a.alias_info.is_write
    ]
    returns_mutated = any(
        r.alias_info is not None and r.alias_info.is_write for r in schema.returns
    )

    def to_host(value):
        if isinstance(value, torch.Tensor) and value.device.type != "cpu":
            return value.cpu()
        if isinstance(value, (list, tuple)):
            return type(value)(to_host(v) for v in value)
        return value

    def wait(value):
        if isinstance(value, torch.Tensor):
            return torch.ops._c10d_functional.wait_tensor(value)
        return [wait(v) for v in value]

    def kernel(*args, **kwargs):
        host_args = [to_host(v) for v in args]
        host_kwargs = {k: to_host(v) for k, v in kwargs.items()}
        device = _tensors([*args, *kwargs.values()])[0].device
        result = wait(op(*host_args, **host_kwargs))

        def argument(i, args, kwargs):
            return args[i] if i < len(args) else kwargs[schema.arguments[i].name]

        with torch.no_grad():
            for i in mutated:
                pairs = zip(
                    _tensors([argument(i, args, kwargs)]),
                    _tensors([argument(i, host_args, host_kwargs)]),
                    strict=True,
                )
                for t, h in pairs:
                    t.copy_(h)
        if returns_mutated:
            return argument(mutated[0], args, kwargs)
        if isinstance(result, torch.Tensor):
            return result.to(device)
        return [t.to(device) for t in result]

    return kernel


def _tensors(values) -> list[torch.Tensor]:
    found = []
    for v in values:
        if isinstance(v, torch.Tensor):
            found.append(v)
        elif isinstance(v, (list, tuple)):
            found.extend(_tensors(v))
    return found


def _transport() -> Callable:
    """The one transport the devices' backends gave, or gloo's."""
    transports = set(_transports.values())
    if len(transports) > 1:
        raise RuntimeError(
            f"{BACKEND} backend: the backends of {', '.join(sorted(_transports))} each give a "
            "transport of their own; one process group can use one"
        )
    return next(iter(transports), dist.ProcessGroupGloo)


def _create(store, rank: int, world_size: int, timeout: timedelta) -> "ProcessGroupAcc":
    return ProcessGroupAcc(store, rank, world_size, timeout)


#: Works that C++ holds and will wait for, kept alive from Python until then: torch releases
#: whose c10d does not hold a Python work's object itself (``_compat.C10D_HOLDS_PYTHON_WORKS``)
#: would otherwise wait on the bare C++ base, which nothing completes (the functional
#: collectives' ``wait_tensor`` hung). A work never waited for stays here.
_held_works: set = set()


class _Work(dist.Work):
    """A staged collective: gloo's works on host copies, and what writes their results back
    into the device tensors (once: by ``wait()`` or by the future's callback)."""

    def __init__(self, name: str, inner: list, finish: Callable[[], None] | None, result):
        super().__init__()
        self._name = name
        self._inner = inner
        self._finish = finish
        self._result = result
        self._lock = threading.Lock()
        if not _compat.C10D_HOLDS_PYTHON_WORKS:
            _held_works.add(self)

    def _complete(self) -> None:
        with self._lock:
            finish, self._finish = self._finish, None
            if finish is not None:
                finish()

    def _wait_inner(self, timeout: timedelta) -> None:
        try:
            for work in self._inner:
                work.wait(timeout)
        except RuntimeError as e:
            raise _failed(self._name, e) from e

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        _held_works.discard(self)
        self._wait_inner(timeout)
        self._complete()
        return True

    def is_completed(self) -> bool:
        return self._finish is None and all(work.is_completed() for work in self._inner)

    def get_future(self) -> torch.futures.Future:
        def done(inner_future) -> list:
            try:
                for future in inner_future.wait():
                    future.wait()
            except RuntimeError as e:
                raise _failed(self._name, e) from e
            self._complete()
            return self._result

        return torch.futures.collect_all([w.get_future() for w in self._inner]).then(done)


class _RecvWork(_Work):
    """A receive, on a thread of its own: the sender's header (dtype and shape), checked
    against the receiving tensors, then the values. Other operations go on meanwhile, as
    they do while gloo's own ``irecv`` is pending."""

    def __init__(self, name: str, receive: Callable[[], None], finish, result):
        super().__init__(name, [], finish, result)
        self._error: RuntimeError | None = None
        self._future = torch.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(receive,), daemon=True)
        self._thread.start()

    def _run(self, receive: Callable[[], None]) -> None:
        try:
            receive()
            self._complete()
        except RuntimeError as e:
            self._error = e
            self._future.set_exception(e)
        else:
            self._future.set_result(self._result)

    def wait(self, timeout: timedelta = timedelta(0)) -> bool:
        _held_works.discard(self)
        self._thread.join()
        if self._error is not None:
            raise self._error
        return True

    def is_completed(self) -> bool:
        return not self._thread.is_alive()

    def get_future(self) -> torch.futures.Future:
        return self._future


def _failed(name: str, error: Exception) -> RuntimeError:
    return RuntimeError(f"{name} ({BACKEND} backend) failed: {error}")


#: dtypes by their code in the agreement checks.
_DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.uint8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.bool,
    torch.complex64,
    torch.complex128,
]
_HEADER = 2 + 8  # dtype code, number of dims, up to 8 sizes
_TEXT = 240  # bytes of a collective's description in its agreement check


def _describe(tensors: Sequence[torch.Tensor]) -> str:
    return " ".join(f"{str(t.dtype).removeprefix('torch.')}{list(t.shape)}" for t in tensors)


def _text(codes: torch.Tensor) -> str:
    return bytes(codes.tolist()).rstrip(bytes(1)).decode(errors="replace")


def _header(t: torch.Tensor) -> torch.Tensor:
    code = _DTYPES.index(t.dtype) if t.dtype in _DTYPES else -1
    shape = list(t.shape)[:8] + [-1] * (8 - min(t.dim(), 8))
    return torch.tensor([code, t.dim(), *shape], dtype=torch.int64)


def _from_header(header: torch.Tensor) -> tuple[torch.dtype | None, list[int]]:
    code, ndim, *shape = header.tolist()
    return (_DTYPES[code] if 0 <= code < len(_DTYPES) else None), shape[:ndim]


class ProcessGroupAcc(dist.ProcessGroup):
    """The c10d backend of Python devices: gloo on host copies of the device tensors.

    Created by ``init_process_group`` (through :func:`register`), not by hand. Before each
    collective the ranks compare what they pass (one small gloo ``all_gather``: the
    collective, its root, the dtypes and shapes of its tensors), so that a mismatch is an
    error on every rank that names the collective and what each rank passed, never a crash
    in gloo or a wrong result; point-to-point operations send a header (dtype, shape) first.
    """

    def __init__(self, store, rank: int, world_size: int, timeout: timedelta):
        super().__init__(rank, world_size)
        self._gloo = _transport()(store, rank, world_size, timeout)
        self._timeout = timeout
        self._group_name = ""
        self._group_desc = ""

    # The names c10d's C++ ProcessGroup asks its Python subclasses for.

    def getBackendName(self) -> str:  # noqa: N802
        return BACKEND

    def _get_backend(self, device: torch.device) -> "ProcessGroupAcc":
        """This group is its own backend for every device (``batch_isend_irecv`` asks since
        torch 2.14); it does not coalesce, so batched operations run one by one."""
        return self

    def getGroupName(self) -> str:  # noqa: N802
        return self._group_name

    def setGroupName(self, name: str) -> None:  # noqa: N802
        self._group_name = name

    def getGroupDesc(self) -> str:  # noqa: N802
        return self._group_desc

    def setGroupDesc(self, desc: str) -> None:  # noqa: N802
        self._group_desc = desc

    @property
    def supports_splitting(self) -> bool:
        return False

    # Checks.

    def _check_devices(self, name: str, tensors: Sequence[torch.Tensor]) -> None:
        """An error naming the collective when its tensors are on several devices or on a
        device this backend does not serve."""
        devices = {t.device for t in tensors}
        if len(devices) > 1:
            found = ", ".join(sorted(str(d) for d in devices))
            raise RuntimeError(
                f"{name} ({BACKEND} backend): expected all tensors on one device, got {found}"
            )
        device = next(iter(devices), None)
        if device is not None and device.type != "cpu" and device.type not in _devices:
            served = ", ".join(["cpu", *_devices])
            raise RuntimeError(
                f"{name} ({BACKEND} backend): expected tensors on {served}, got a tensor on "
                f"{device}"
            )

    def _agree(
        self, name: str, description: str, sends: Sequence[int] = (), receives: Sequence[int] = ()
    ) -> None:
        """Check that every rank calls collective ``name`` with the same ``description``
        and, for all-to-all, that what each rank sends to another is what that one expects
        to receive (``sends[j]``, ``receives[j]``: elements to and from rank ``j``)."""
        size = self.size()
        text = description.encode()[:_TEXT]
        mine = torch.zeros(1 + _TEXT + 2 * size, dtype=torch.int64)
        mine[0] = zlib.crc32(description.encode())
        mine[1 : 1 + len(text)] = torch.tensor(list(text), dtype=torch.int64)
        if sends:
            mine[1 + _TEXT :] = torch.tensor([*sends, *receives], dtype=torch.int64)
        everyone = [torch.empty_like(mine) for _ in range(size)]
        try:
            self._gloo.allgather([everyone], [mine]).wait()
        except RuntimeError as e:
            raise _failed(name, e) from e
        if any(other[0] != mine[0] for other in everyone):
            said = "; ".join(f"rank {r}: {_text(v[1 : 1 + _TEXT])}" for r, v in enumerate(everyone))
            raise RuntimeError(
                f"{name} ({BACKEND} backend): the ranks disagree on the collective, its root "
                f"or their tensors' dtypes and shapes ({said})"
            )
        if sends:
            for src, v in enumerate(everyone):
                for dst, w in enumerate(everyone):
                    sent, expected = int(v[1 + _TEXT + dst]), int(w[1 + _TEXT + size + src])
                    if sent != expected:
                        raise RuntimeError(
                            f"{name} ({BACKEND} backend): rank {src} sends {sent} elements to "
                            f"rank {dst}, which expects {expected}"
                        )

    def _enter(self, name: str, tensors: Sequence[torch.Tensor], extra: str = "", **sizes) -> None:
        self._check_devices(name, tensors)
        self._agree(name, f"{name}{extra} {_describe(tensors)}".rstrip(), **sizes)

    # Staging.

    @staticmethod
    def _host_view(t: torch.Tensor) -> torch.Tensor | None:
        """The backend's CPU tensor over ``t``'s own memory (see :func:`register`), marked
        as one; None where there is none."""
        host_view = _devices.get(t.device.type)
        if host_view is None or not t.is_contiguous():
            return None
        view = host_view(payload(t))
        if view is None or view.shape != t.shape or view.dtype != t.dtype:
            return None
        view._acc_host_view = True
        return view

    def _host(self, t: torch.Tensor) -> torch.Tensor:
        """What gloo reads (and, in place, writes): a CPU tensor itself; a device tensor's
        host view, or a contiguous host copy of its values."""
        if t.device.type == "cpu":
            return t
        view = self._host_view(t)
        return view if view is not None else t.cpu().contiguous()

    def _host_empty(self, t: torch.Tensor) -> torch.Tensor:
        """Where gloo writes an output: a CPU tensor itself; a device tensor's host view, or
        a host buffer of its shape and dtype."""
        if t.device.type == "cpu":
            return t
        view = self._host_view(t)
        return view if view is not None else torch.empty(t.shape, dtype=t.dtype)

    def _run(
        self,
        name: str,
        launch: Callable[[], object],
        outputs,
        host_outputs,
        result,
        average: bool = False,
    ) -> _Work:
        """Launch gloo's collective; the work writes ``host_outputs`` back into
        ``outputs`` (divided by the group's size first where ``average``) when it
        completes."""
        pairs = [
            (t, h)
            for t, h in zip(outputs, host_outputs, strict=True)
            if average or not getattr(h, "_acc_host_view", False)
        ]
        size = self.size()

        def finish() -> None:
            with torch.no_grad():
                for t, h in pairs:
                    if average:
                        if h.is_floating_point() or h.is_complex():
                            h.div_(size)
                        else:
                            h.copy_(torch.div(h, size, rounding_mode="trunc"))
                    if t is not h and not getattr(h, "_acc_host_view", False):
                        t.copy_(h)

        try:
            inner = launch()
        except RuntimeError as e:
            raise RuntimeError(f"{name} ({BACKEND} backend): {e}") from e
        inner = inner if isinstance(inner, list) else [inner]
        return _Work(name, inner, finish if pairs else None, result)

    @staticmethod
    def _reduce_op(opts):
        """Options for gloo, and whether to average: gloo has no ``ReduceOp.AVG``, which is
        a sum divided by the group's size."""
        if opts.reduceOp == dist.ReduceOp.AVG:
            summed = type(opts)()
            for field in ("reduceOp", "timeout", "rootRank", "rootTensor"):
                if hasattr(opts, field):
                    setattr(summed, field, getattr(opts, field))
            summed.reduceOp = dist.ReduceOp.SUM
            return summed, True
        return opts, False

    @staticmethod
    def _op_name(opts) -> str:
        return f" {opts.reduceOp.op.name}"

    # Collectives.

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        self._enter("all_reduce", tensors, self._op_name(opts))
        gloo_opts, average = self._reduce_op(opts)
        host = [self._host(t) for t in tensors]
        return self._run(
            "all_reduce",
            lambda: self._gloo.allreduce(host, gloo_opts),
            tensors,
            host,
            tensors,
            average,
        )

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        self._enter("all_reduce_coalesced", tensors, self._op_name(opts))
        gloo_opts, average = self._reduce_op(opts)
        host = [self._host(t) for t in tensors]
        return self._run(
            "all_reduce_coalesced",
            lambda: self._gloo.allreduce_coalesced(host, gloo_opts),
            tensors,
            host,
            tensors,
            average,
        )

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        self._enter("broadcast", tensors, f" from {opts.rootRank}")
        host = [self._host(t) for t in tensors]
        return self._run(
            "broadcast", lambda: self._gloo.broadcast(host, opts), tensors, host, tensors
        )

    def reduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceOptions()
        self._enter("reduce", tensors, f"{self._op_name(opts)} to {opts.rootRank}")
        gloo_opts, average = self._reduce_op(opts)
        host = [self._host(t) for t in tensors]
        return self._run(
            "reduce",
            lambda: self._gloo.reduce(host, gloo_opts),
            tensors,
            host,
            tensors,
            average and self.rank() == opts.rootRank,
        )

    def allgather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else AllgatherOptions()
        outputs = [t for ts in output_lists for t in ts]
        self._enter("all_gather", [*inputs, *outputs])
        host_in = [self._host(t) for t in inputs]
        host_out = [[self._host_empty(t) for t in ts] for ts in output_lists]
        return self._run(
            "all_gather",
            lambda: self._gloo.allgather(host_out, host_in, opts),
            outputs,
            [h for hs in host_out for h in hs],
            output_lists,
        )

    def allgather_coalesced(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else AllgatherOptions()
        outputs = [t for ts in output_lists for t in ts]
        self._enter("all_gather_coalesced", [*inputs, *outputs])
        host_in = [self._host(t) for t in inputs]
        host_out = [[self._host_empty(t) for t in ts] for ts in output_lists]
        return self._run(
            "all_gather_coalesced",
            lambda: self._gloo.allgather_coalesced(host_out, host_in, opts),
            outputs,
            [h for hs in host_out for h in hs],
            output_lists,
        )

    def _allgather_base(self, output, input, opts=None):
        return self.all_gather_single_coalesced(
            [output], [input], opts, name="all_gather_into_tensor"
        )

    all_gather_single = _allgather_base

    def all_gather_single_coalesced(
        self, outputs, inputs, opts=None, name="all_gather_into_tensor_coalesced"
    ):
        opts = opts if opts is not None else AllgatherOptions()
        self._enter(name, [*inputs, *outputs])
        host_in = [self._host(t) for t in inputs]
        host_out = [self._host_empty(t) for t in outputs]
        return self._run(
            name,
            lambda: [
                self._gloo._allgather_base(o, i, opts)
                for o, i in zip(host_out, host_in, strict=True)
            ],
            outputs,
            host_out,
            outputs,
        )

    allgather_into_tensor_coalesced = all_gather_single_coalesced

    def gather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.GatherOptions()
        outputs = [t for ts in output_lists for t in ts]
        self._check_devices("gather", [*inputs, *outputs])
        self._agree("gather", f"gather to {opts.rootRank} {_describe(inputs)}")
        host_in = [self._host(t) for t in inputs]
        host_out = [[self._host_empty(t) for t in ts] for ts in output_lists]
        return self._run(
            "gather",
            lambda: self._gloo.gather(host_out, host_in, opts),
            outputs,
            [h for hs in host_out for h in hs],
            output_lists,
        )

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ScatterOptions()
        self._check_devices("scatter", [*outputs, *(t for ts in input_lists for t in ts)])
        self._agree("scatter", f"scatter from {opts.rootRank} {_describe(outputs)}")
        host_in = [[self._host(t) for t in ts] for ts in input_lists]
        host_out = [self._host_empty(t) for t in outputs]
        return self._run(
            "scatter",
            lambda: self._gloo.scatter(host_out, host_in, opts),
            outputs,
            host_out,
            outputs,
        )

    def reduce_scatter(self, outputs, input_lists, opts=None):
        """``reduce_scatter`` of lists, through gloo's ``_reduce_scatter_base`` of each list's
        concatenation (gloo has no list ``reduce_scatter`` before torch 2.7)."""
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        inputs = [t for ts in input_lists for t in ts]
        self._enter("reduce_scatter", [*outputs, *inputs], self._op_name(opts))
        for out, ts in zip(outputs, input_lists, strict=True):
            if len(ts) != self.size() or any(t.numel() != out.numel() for t in ts):
                raise ValueError(
                    f"reduce_scatter ({BACKEND} backend): expected {self.size()} input tensors "
                    f"of {out.numel()} elements each (the output's), but got "
                    f"{[t.numel() for t in ts]} elements"
                )
        gloo_opts, average = self._reduce_op(opts)
        host_in = [torch.cat([self._host(t).reshape(-1) for t in ts]) for ts in input_lists]
        host_out = [self._host_empty(t) for t in outputs]
        return self._run(
            "reduce_scatter",
            lambda: [
                self._gloo._reduce_scatter_base(o, i, gloo_opts)
                for o, i in zip(host_out, host_in, strict=True)
            ],
            outputs,
            host_out,
            outputs,
            average,
        )

    def _reduce_scatter_base(self, output, input, opts=None):
        return self.reduce_scatter_single_coalesced(
            [output], [input], opts, name="reduce_scatter_tensor"
        )

    reduce_scatter_single = _reduce_scatter_base

    def reduce_scatter_single_coalesced(
        self, outputs, inputs, opts=None, name="reduce_scatter_tensor_coalesced"
    ):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        self._enter(name, [*outputs, *inputs], self._op_name(opts))
        gloo_opts, average = self._reduce_op(opts)
        host_in = [self._host(t) for t in inputs]
        host_out = [self._host_empty(t) for t in outputs]
        return self._run(
            name,
            lambda: [
                self._gloo._reduce_scatter_base(o, i, gloo_opts)
                for o, i in zip(host_out, host_in, strict=True)
            ],
            outputs,
            host_out,
            outputs,
            average,
        )

    reduce_scatter_tensor_coalesced = reduce_scatter_single_coalesced

    def alltoall(self, outputs, inputs, opts=None):
        """``all_to_all`` of lists, through one ``all_to_all_single`` of their flattened
        elements: tensors of any sizes (gloo's own wants equal ones)."""
        opts = opts if opts is not None else dist.AllToAllOptions()
        self._check_devices("all_to_all", [*outputs, *inputs])
        dtypes = {t.dtype for t in [*outputs, *inputs]}
        sends, receives = [t.numel() for t in inputs], [t.numel() for t in outputs]
        self._agree(
            "all_to_all",
            f"all_to_all {' '.join(sorted(str(d) for d in dtypes))}",
            sends=sends,
            receives=receives,
        )
        if len(dtypes) > 1:
            raise RuntimeError(
                f"all_to_all ({BACKEND} backend): expected tensors of one dtype, got "
                f"{_describe([*inputs, *outputs])}"
            )
        dtype = next(iter(dtypes))
        flat_in = torch.cat([self._host(t).reshape(-1) for t in inputs])
        flat_out = torch.empty(sum(receives), dtype=dtype)
        host_out = [h.view(t.shape) for h, t in zip(flat_out.split(receives), outputs, strict=True)]
        return self._run(
            "all_to_all",
            lambda: self._gloo.alltoall_base(flat_out, flat_in, receives, sends, opts),
            outputs,
            host_out,
            outputs,
        )

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        name = "all_to_all_single"
        self._check_devices(name, [output, input])
        size = self.size()
        row = input[0].numel() if input.dim() and input.shape[0] else 0
        sends = (
            [n * row for n in input_split_sizes]
            if input_split_sizes
            else [input.numel() // size] * size
        )
        out_row = output[0].numel() if output.dim() and output.shape[0] else 0
        receives = (
            [n * out_row for n in output_split_sizes]
            if output_split_sizes
            else [output.numel() // size] * size
        )
        self._agree(
            name,
            f"{name} {input.dtype} {output.dtype} {list(input.shape[1:])}",
            sends=sends,
            receives=receives,
        )
        host_in, host_out = self._host(input), self._host_empty(output)
        return self._run(
            name,
            lambda: self._gloo.alltoall_base(
                host_out, host_in, output_split_sizes, input_split_sizes, opts
            ),
            [output],
            [host_out],
            [output],
        )

    alltoall_base = all_to_all_single

    def barrier(self, opts=None):
        opts = opts if opts is not None else dist.BarrierOptions()
        return self._run("barrier", lambda: self._gloo.barrier(opts), [], [], [])

    def monitored_barrier(self, timeout=None, wait_all_ranks: bool = False):
        return self._gloo.monitored_barrier(
            timeout if timeout is not None else self._timeout, wait_all_ranks
        )

    # Point to point: a header (dtype and shape) first, then the values.

    def send(self, tensors, dst: int, tag: int = 0):
        self._check_devices("send", tensors)
        headers = [_header(t) for t in tensors]
        host = [self._host(t) for t in tensors]
        return self._run(
            "send",
            lambda: [self._gloo.send(headers, dst, tag), self._gloo.send(host, dst, tag)],
            [],
            [],
            tensors,
        )

    def recv(self, tensors, src: int, tag: int = 0):
        return self._recv(tensors, src, tag)

    def recv_anysource(self, tensors, tag: int = 0):
        return self._recv(tensors, None, tag)

    def _recv(self, tensors, src: int | None, tag: int) -> _RecvWork:
        self._check_devices("recv", tensors)
        headers = [torch.empty(_HEADER, dtype=torch.int64) for _ in tensors]
        host = [self._host_empty(t) for t in tensors]
        try:
            header_work = (
                self._gloo.recv_anysource(headers, tag)
                if src is None
                else self._gloo.recv(headers, src, tag)
            )
        except RuntimeError as e:
            raise RuntimeError(f"recv ({BACKEND} backend): {e}") from e

        def receive() -> None:
            try:
                header_work.wait()
                source = header_work._source_rank() if src is None else src
                sent = [_from_header(h) for h in headers]
                if any(
                    d != t.dtype or s != list(t.shape)
                    for (d, s), t in zip(sent, tensors, strict=True)
                ):
                    # Take the values, so that the sender is not left waiting; refuse them.
                    drain = [torch.empty(s, dtype=d or torch.uint8) for d, s in sent]
                    self._gloo.recv(drain, source, tag).wait()
                    said = " ".join(f"{str(d).removeprefix('torch.')}{s}" for d, s in sent)
                    raise RuntimeError(
                        f"recv ({BACKEND} backend): rank {source} sent {said}, the receiving "
                        f"tensors are {_describe(tensors)}"
                    )
                self._gloo.recv(host, source, tag).wait()
            except RuntimeError as e:
                if str(e).startswith(f"recv ({BACKEND} backend)"):
                    raise
                raise _failed("recv", e) from e

        pairs = list(zip(tensors, host, strict=True))

        def finish() -> None:
            with torch.no_grad():
                for t, h in pairs:
                    if t is not h and not getattr(h, "_acc_host_view", False):
                        t.copy_(h)

        return _RecvWork("recv", receive, finish, tensors)
