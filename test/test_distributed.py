# Owner(s): ["module: PrivateUse1"]
"""torch.distributed on ``npy``: every collective against gloo on CPU, DDP and FSDP2 against
CPU's, and failures that end in clear errors, in processes spawned on loopback.

Each test spawns its ranks as subprocesses of this file (``--worker SCENARIO RANK WORLD
INIT_FILE``) with a bounded timeout: a hang fails the test instead of blocking it. A worker
checks its own results (an ``AssertionError`` makes its exit status non-zero) and prints
``ok SCENARIO`` when done.
"""

import os
import subprocess
import sys
import tempfile
import time
import unittest
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _compat

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

#: What bounds a spawn of ranks: long enough for 4 ranks on a busy two-core machine.
SPAWN_TIMEOUT = 300


def _spawn(scenario: str, world_size: int = 2, timeout: float = SPAWN_TIMEOUT):
    """Run ``scenario`` on ``world_size`` ranks; [(exit status, output)] per rank."""
    env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    with tempfile.TemporaryDirectory() as tmp:
        init = os.path.join(tmp, "init")
        procs = [
            subprocess.Popen(
                [sys.executable, __file__, "--worker", scenario, str(rank), str(world_size), init],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                env=env,
            )
            for rank in range(world_size)
        ]
        deadline = time.monotonic() + timeout
        results = []
        try:
            for p in procs:
                out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
                results.append((p.returncode, out))
        except subprocess.TimeoutExpired:
            for p in procs:
                p.kill()
            outs = [p.communicate()[0] for p in procs]
            raise AssertionError(
                f"{scenario}: ranks still running after {timeout}s:\n" + "\n".join(outs)
            ) from None
    return results


# ---------------------------------------------------------------------------------------------
# Workers (run in the spawned processes).


def _data(rank: int, shape, dtype=torch.float32, seed: int = 0) -> torch.Tensor:
    gen = torch.Generator().manual_seed(1000 * seed + rank)
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    return torch.randint(1, 7, shape, generator=gen).to(dtype)


def _same(actual, expected, what: str) -> None:
    actual = [t.cpu() for t in actual] if isinstance(actual, list) else actual.cpu()
    torch.testing.assert_close(actual, expected, rtol=0, atol=0, msg=lambda m: f"{what}: {m}")


def _collective_cases(rank: int, ws: int):
    """{name: fn(device, group) -> tensors}: each runs once on npy with the acc backend and
    once on CPU with a gloo group; results must be equal."""
    ops = {
        torch.float32: [
            dist.ReduceOp.SUM,
            dist.ReduceOp.PRODUCT,
            dist.ReduceOp.MIN,
            dist.ReduceOp.MAX,
        ],
        torch.int64: [
            dist.ReduceOp.SUM,
            dist.ReduceOp.PRODUCT,
            dist.ReduceOp.MIN,
            dist.ReduceOp.MAX,
            dist.ReduceOp.BAND,
            dist.ReduceOp.BOR,
            dist.ReduceOp.BXOR,
        ],
        torch.float64: [dist.ReduceOp.SUM],
        torch.bfloat16: [dist.ReduceOp.SUM],
        torch.int32: [dist.ReduceOp.MAX],
    }
    cases = {}
    for dtype, dtype_ops in ops.items():
        for op in dtype_ops:

            def all_reduce(dev, group, dtype=dtype, op=op):
                t = _data(rank, (3, 5), dtype).to(dev)
                dist.all_reduce(t, op=op, group=group)
                return t

            cases[f"all_reduce {dtype} {op}"] = all_reduce

    def all_reduce_async(dev, group):
        t = _data(rank, (8,)).to(dev)
        work = dist.all_reduce(t, group=group, async_op=True)
        work.wait()
        u = _data(rank, (8,), seed=1).to(dev)
        value = dist.all_reduce(u, group=group, async_op=True).get_future().wait()
        assert value[0] is u or value[0].device == u.device
        return [t, u, value[0]]

    def broadcast(dev, group):
        t = _data(rank, (2, 3)).to(dev)
        dist.broadcast(t, src=ws - 1, group=group)
        return t

    def reduce(dev, group):
        t = _data(rank, (5,)).to(dev)
        u = _data(rank, (5,), seed=1).to(dev)
        dist.reduce(t, dst=0, group=group)
        dist.reduce(u, dst=ws - 1, op=dist.ReduceOp.MAX, group=group)
        return [t, u] if rank in (0, ws - 1) else []

    def all_gather(dev, group):
        outs = [torch.empty(2, 3, device=dev) for _ in range(ws)]
        dist.all_gather(outs, _data(rank, (2, 3)).to(dev), group=group)
        return outs

    def all_gather_into_tensor(dev, group):
        out = torch.empty(ws * 2, 3, device=dev)
        dist.all_gather_into_tensor(out, _data(rank, (2, 3)).to(dev), group=group)
        return out

    def gather(dev, group):
        outs = [torch.empty(4, device=dev) for _ in range(ws)] if rank == 0 else None
        dist.gather(_data(rank, (4,)).to(dev), outs, dst=0, group=group)
        return outs or []

    def scatter(dev, group):
        out = torch.empty(4, device=dev)
        ins = [_data(i, (4,), seed=2).to(dev) for i in range(ws)] if rank == ws - 1 else None
        dist.scatter(out, ins, src=ws - 1, group=group)
        return out

    def reduce_scatter(dev, group):
        if dev == "cpu":
            # Gloo has no list reduce_scatter before torch 2.7: the reference is computed.
            return sum(_data(r, (3,), seed=rank) for r in range(ws))
        out = torch.empty(3, device=dev)
        ins = [_data(rank, (3,), seed=i).to(dev) for i in range(ws)]
        dist.reduce_scatter(out, ins, group=group)
        return out

    def reduce_scatter_tensor(dev, group):
        out = torch.empty(2, 2, device=dev)
        dist.reduce_scatter_tensor(out, _data(rank, (2 * ws, 2)).to(dev), group=group)
        return out

    def all_to_all(dev, group):
        if dev == "cpu":
            # Gloo has no list all_to_all before torch 2.7: the reference is computed.
            return [_data(j, (2, 3), seed=rank) for j in range(ws)]
        ins = [_data(rank, (2, 3), seed=j).to(dev) for j in range(ws)]
        outs = [torch.empty(2, 3, device=dev) for j in range(ws)]
        dist.all_to_all(outs, ins, group=group)
        return outs

    def all_to_all_single(dev, group):
        send = [rank + j + 1 for j in range(ws)]
        recv = [j + rank + 1 for j in range(ws)]
        out = torch.empty(sum(recv), 2, device=dev)
        dist.all_to_all_single(out, _data(rank, (sum(send), 2)).to(dev), recv, send, group=group)
        even = torch.empty(ws, 3, device=dev)
        dist.all_to_all_single(even, _data(rank, (ws, 3), seed=3).to(dev), group=group)
        return [out, even]

    def point_to_point(dev, group):
        right, left = (rank + 1) % ws, (rank - 1) % ws
        got = torch.empty(3, device=dev)
        if rank % 2 == 0:
            dist.send(_data(rank, (3,)).to(dev), right, group=group)
            dist.recv(got, left, group=group)
        else:
            dist.recv(got, left, group=group)
            dist.send(_data(rank, (3,)).to(dev), right, group=group)
        got2 = torch.empty(2, 2, device=dev)
        works = [
            dist.isend(_data(rank, (2, 2), seed=1).to(dev), right, group=group),
            dist.irecv(got2, left, group=group),
        ]
        for w in works:
            w.wait()
        got3 = torch.empty(5, device=dev)
        ops = [
            dist.P2POp(dist.irecv, got3, left, group=group),
            dist.P2POp(dist.isend, _data(rank, (5,), seed=2).to(dev), right, group=group),
        ]
        for w in dist.batch_isend_irecv(ops):
            w.wait()
        return [got, got2, got3]

    def coalesced(dev, group):
        ts = [_data(rank, (3,)).to(dev), _data(rank, (2, 2), seed=1).to(dev)]
        with dist._coalescing_manager(group=group, async_ops=True) as cm:
            for t in ts:
                dist.all_reduce(t, group=group)
        cm.wait()
        outs = [torch.empty(ws * 2, device=dev), torch.empty(ws * 3, device=dev)]
        ins = [_data(rank, (2,), seed=2).to(dev), _data(rank, (3,), seed=3).to(dev)]
        with dist._coalescing_manager(group=group):
            for o, i in zip(outs, ins, strict=True):
                dist.all_gather_into_tensor(o, i, group=group)
        return [*ts, *outs]

    def objects(dev, group):
        gathered = [None] * ws
        dist.all_gather_object(gathered, {"rank": rank, "x": [rank] * 3}, group=group)
        assert gathered == [{"rank": r, "x": [r] * 3} for r in range(ws)], gathered
        objs = [f"from {rank}"]
        dist.broadcast_object_list(objs, src=0, group=group)
        assert objs == ["from 0"], objs
        dist.barrier(group=group)
        return []

    cases.update(
        all_reduce_async=all_reduce_async,
        broadcast=broadcast,
        reduce=reduce,
        all_gather=all_gather,
        all_gather_into_tensor=all_gather_into_tensor,
        gather=gather,
        scatter=scatter,
        reduce_scatter=reduce_scatter,
        reduce_scatter_tensor=reduce_scatter_tensor,
        all_to_all=all_to_all,
        all_to_all_single=all_to_all_single,
        point_to_point=point_to_point,
        coalesced=coalesced,
        objects=objects,
    )
    return cases


#: The collectives that 4 ranks run (the busy two-core machine of CI runs 4 ranks slowly).
_FOUR_RANK_CASES = (
    "all_reduce torch.float32 RedOpType.SUM",
    "broadcast",
    "all_gather",
    "reduce_scatter_tensor",
    "all_to_all_single",
    "point_to_point",
    "gather",
)


def _worker_collectives_4(rank: int, ws: int, tmp: str) -> None:
    gloo = dist.new_group(backend="gloo")
    cases = _collective_cases(rank, ws)
    for name in _FOUR_RANK_CASES:
        _same(cases[name]("npy", dist.group.WORLD), cases[name]("cpu", gloo), name)


def _worker_collectives(rank: int, ws: int, tmp: str) -> None:
    import torch.distributed._functional_collectives as funcol

    assert type(dist.group.WORLD).__name__ == "ProcessGroupAcc"
    gloo = dist.new_group(backend="gloo")
    for name, case in _collective_cases(rank, ws).items():
        _same(case("npy", dist.group.WORLD), case("cpu", gloo), name)

    # A non-contiguous view: only its elements change, in place, keeping their strides.
    # (Gloo itself wants contiguous CPU tensors: the reference is computed.)
    base = _data(rank, (4, 6)).to("npy")
    view = base.t()[1:4]
    dist.all_reduce(view)
    assert not view.is_contiguous() and view.stride() == (1, 6), view.stride()
    expected = _data(rank, (4, 6))
    expected.t()[1:4] = sum(_data(r, (4, 6)) for r in range(ws)).t()[1:4]
    torch.testing.assert_close(base.cpu(), expected)  # sums in another order

    # all_to_all of uneven lists (gloo's own wants equal sizes): rank r sends r + j + 1
    # elements to rank j.
    ins = [_data(rank, (rank + j + 1,), seed=j).to("npy") for j in range(ws)]
    outs = [torch.empty(j + rank + 1, device="npy") for j in range(ws)]
    dist.all_to_all(outs, ins)
    _same(outs, [_data(j, (j + rank + 1,), seed=rank) for j in range(ws)], "uneven all_to_all")

    # AVG, which gloo lacks: the sum divided by the group's size.
    t = _data(rank, (4,)).to("npy")
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    s = _data(rank, (4,))
    dist.all_reduce(s, group=gloo)
    _same(t, s / ws, "all_reduce AVG")
    out = torch.empty(2, device="npy")
    dist.reduce_scatter_tensor(out, _data(rank, (2 * ws,)).to("npy"), op=dist.ReduceOp.AVG)
    ref = torch.empty(2)
    dist.reduce_scatter_tensor(ref, _data(rank, (2 * ws,)), group=gloo)
    _same(out, ref / ws, "reduce_scatter_tensor AVG")

    # Functional collectives, eager and compiled (what torch.compile and DTensor emit).
    x = _data(rank, (2 * ws, 3))
    expected = {
        "all_reduce": funcol.all_reduce(x, "sum", gloo),
        "all_gather_tensor": funcol.all_gather_tensor(x, 0, gloo),
        "reduce_scatter_tensor": funcol.reduce_scatter_tensor(x, "sum", 0, gloo),
        "all_to_all_single": funcol.all_to_all_single(x, None, None, gloo),
    }
    world = dist.group.WORLD
    xn = x.to("npy")
    got = {
        "all_reduce": funcol.all_reduce(xn, "sum", world),
        "all_gather_tensor": funcol.all_gather_tensor(xn, 0, world),
        "reduce_scatter_tensor": funcol.reduce_scatter_tensor(xn, "sum", 0, world),
        "all_to_all_single": funcol.all_to_all_single(xn, None, None, world),
    }
    for name in expected:
        assert got[name].device.type == "npy", name
        _same(
            got[name],
            expected[name].wait() if hasattr(expected[name], "wait") else expected[name],
            f"funcol.{name}",
        )

    def step(a):
        return funcol.all_reduce(a * 2, "sum", world) + 1

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    _same(compiled(xn), funcol.all_reduce(x * 2, "sum", gloo) + 1, "compiled all_reduce")
    xr = xn.clone()
    torch.ops._c10d_functional.all_reduce_(xr, "sum", world.group_name)
    _same(xr, funcol.all_reduce(x, "sum", gloo), "_c10d_functional.all_reduce_")

    _check_dtensor_and_checkpoint(rank, ws, os.path.join(tmp, "dcp"))


def _check_dtensor_and_checkpoint(rank: int, ws: int, tmp: str) -> None:
    """A DTensor on DeviceMesh("npy"): sharding, redistribution, a matmul and a reduction
    (functional collectives underneath) give CPU's values; a distributed checkpoint of it
    saves and loads (DCP's writer overlaps its copies on the device module's streams)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor, Replicate, Shard

    mesh = init_device_mesh("npy", (ws,))
    full, weight = _data(0, (2 * ws, 6)), _data(0, (6, 3), seed=1)
    d = distribute_tensor(full.to("npy"), mesh, [Shard(0)])
    assert d.to_local().device.type == "npy" and d.to_local().shape == (2, 6)
    _same(d.to_local(), full[2 * rank : 2 * rank + 2], "DTensor shard")
    _same(d.redistribute(mesh, [Replicate()]).to_local(), full, "redistribute to Replicate")
    w = distribute_tensor(weight.to("npy"), mesh, [Replicate()])
    torch.testing.assert_close((d @ w).full_tensor().cpu(), full @ weight)
    torch.testing.assert_close(d.sum().full_tensor().cpu(), full.sum())

    state = {"w": d, "b": torch.arange(3.0).to("npy")}
    dcp.save(state, checkpoint_id=tmp)
    loaded = {
        "w": distribute_tensor(torch.zeros(2 * ws, 6).to("npy"), mesh, [Shard(0)]),
        "b": torch.zeros(3).to("npy"),
    }
    dcp.load(loaded, checkpoint_id=tmp)
    assert loaded["w"].to_local().device.type == "npy"
    _same(loaded["w"].full_tensor(), full, "DCP load of a DTensor")
    _same(loaded["b"], torch.arange(3.0), "DCP load of a tensor")


def _worker_init(rank: int, ws: int, tmp: str) -> None:
    # The process group this worker was given came from a plain init_process_group(): the
    # current accelerator is npy, whose default c10d backend is acc.
    assert type(dist.group.WORLD).__name__ == "ProcessGroupAcc", type(dist.group.WORLD)
    assert dist.Backend.default_device_backend_map["npy"] == "acc"
    t = torch.full((2,), float(rank + 1), device="npy")
    dist.all_reduce(t)
    _same(t, torch.full((2,), float(sum(range(1, ws + 1)))), "all_reduce")
    cpu = torch.full((2,), float(rank))
    dist.all_reduce(cpu)
    _same(cpu, torch.full((2,), float(sum(range(ws)))), "all_reduce of CPU tensors")


class _Net(torch.nn.Module):
    def __init__(self, unused: bool = False, norm: bool = True):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        # Running statistics: buffers that DDP broadcasts from rank 0 before each forward.
        self.norm = torch.nn.BatchNorm1d(16) if norm else None
        self.fc2 = torch.nn.Linear(16, 3)
        self.unused = torch.nn.Linear(4, 4) if unused else None
        self.register_buffer("scale", torch.ones(16))

    def forward(self, x):
        h = self.fc1(x)
        if self.norm is not None:
            h = self.norm(h)
        return self.fc2(torch.relu(h) * self.scale)


def _ddp_run(rank: int, device: str, group, steps: int = 3, no_sync: bool = False, **ddp_kwargs):
    """A few SGD steps of ``DistributedDataParallel`` on ``device``, buckets of a few
    parameters each: the parameters and buffers after them, and how many storages their
    gradients have."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    net = _Net(unused=ddp_kwargs.get("find_unused_parameters", False))
    with torch.no_grad():
        net.scale.add_(rank)  # rank 0's buffers are broadcast when DDP wraps the module
    model = DDP(net.to(device), process_group=group, bucket_cap_mb=0.0005, **ddp_kwargs)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(steps):
        opt.zero_grad()
        if no_sync:
            with model.no_sync():
                x = _data(rank, (4, 6), seed=10 + step).to(device)
                model(x).sum().backward()
        x = _data(rank, (4, 6), seed=step).to(device)
        y = _data(rank, (4,), torch.int64, seed=step).remainder(3).to(device)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    # With gradient_as_bucket_view, each gradient is a view of its bucket: the gradients of a
    # bucket share one storage (DDP's reducer tells its views by Tensor::is_alias_of).
    storages = {p.grad.untyped_storage()._cdata for p in model.parameters() if p.grad is not None}
    state = [p.detach().cpu() for p in model.parameters()] + [b.cpu() for b in model.buffers()]
    return state, len(storages)


def _worker_ddp(rank: int, ws: int, tmp: str) -> None:
    """DDP's own reducer on npy (buckets, the broadcast of buffers) trains to the parameters
    and buffers that CPU DDP with gloo gives, in every mode."""
    gloo = dist.new_group(backend="gloo")
    configs = {
        "several buckets": {},
        "gradient_as_bucket_view": {"gradient_as_bucket_view": True},
        "find_unused_parameters": {"find_unused_parameters": True},
        "no_sync": {"no_sync": True},
        "static_graph": {"static_graph": True},
        "buffers not broadcast": {"broadcast_buffers": False},
    }
    for name, kwargs in configs.items():
        npy_state, npy_storages = _ddp_run(rank, "npy", dist.group.WORLD, **kwargs)
        cpu_state, cpu_storages = _ddp_run(rank, "cpu", gloo, **kwargs)
        assert npy_storages == cpu_storages, (name, npy_storages, cpu_storages)
        if name == "gradient_as_bucket_view":
            assert cpu_storages < len(list(_Net().parameters())), cpu_storages
        for a, b in zip(npy_state, cpu_state, strict=True):
            torch.testing.assert_close(
                a, b, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}"
            )

    # Gradients equal those of one process on every rank's batch.
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    net = _Net(norm=False)
    single = _Net(norm=False)
    single.load_state_dict(net.state_dict())
    model = DDP(net.to("npy"))
    x = _data(rank, (4, 6)).to("npy")
    model(x).pow(2).mean().backward()
    whole = torch.cat([_data(r, (4, 6)) for r in range(ws)])
    single(whole).pow(2).mean().backward()
    for p, q in zip(model.parameters(), single.parameters(), strict=True):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-5, atol=1e-6)


class _Block(torch.nn.Module):
    """A small transformer block: pre-norm self-attention and an MLP, each with a residual."""

    def __init__(self, dim: int = 8):
        super().__init__()
        self.norm1 = torch.nn.LayerNorm(dim)
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.proj = torch.nn.Linear(dim, dim)
        self.norm2 = torch.nn.LayerNorm(dim)
        self.mlp = torch.nn.Sequential(
            torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim)
        )

    def forward(self, x):
        q, k, v = self.qkv(self.norm1(x)).chunk(3, dim=-1)
        attention = torch.softmax(q @ k.transpose(-2, -1) / q.shape[-1] ** 0.5, dim=-1)
        x = x + self.proj(attention @ v)
        return x + self.mlp(self.norm2(x))


def _fsdp_run(rank: int, ws: int, device: str, checkpoint: str):
    """FSDP2 (``fully_shard``) of a transformer block on ``device``: the losses of a few SGD
    steps (not Adam's: the keys' bias has a gradient of zero but for rounding, which Adam
    would scale up to a step), the full parameters after them, and the outputs of a fresh
    model that loaded the distributed checkpoint of the trained one."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    mesh = init_device_mesh(device, (ws,))

    def sharded(seed: int) -> torch.nn.Module:
        torch.manual_seed(seed)
        model = _Block().to(device)
        for part in (model.qkv, model.mlp):
            fully_shard(part, mesh=mesh)
        return fully_shard(model, mesh=mesh)

    model = sharded(0)
    assert all(p.to_local().device.type == device for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    for step in range(3):
        x = _data(rank, (2, 5, 8), seed=step).to(device)
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach().cpu())
    params = [p.full_tensor().cpu() for p in model.parameters()]

    dcp.save({"model": model.state_dict()}, checkpoint_id=checkpoint)
    fresh = sharded(1)
    state = {"model": fresh.state_dict()}
    dcp.load(state, checkpoint_id=checkpoint)
    fresh.load_state_dict(state["model"])
    x = _data(rank, (2, 5, 8), seed=9).to(device)
    return losses, params, [model(x).detach().cpu(), fresh(x).detach().cpu()]


def _worker_fsdp(rank: int, ws: int, tmp: str) -> None:
    """FSDP2 on npy gives CPU's (gloo's) losses, parameters and checkpoint, and frees the
    unsharded parameters between uses, as on CPU."""
    npy = _fsdp_run(rank, ws, "npy", os.path.join(tmp, "npy"))
    cpu = _fsdp_run(rank, ws, "cpu", os.path.join(tmp, "cpu"))
    for what, a, b in zip(("losses", "parameters", "outputs"), npy, cpu, strict=True):
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(
                x, y, rtol=1e-5, atol=1e-6, msg=lambda m, w=what: f"{w}: {m}"
            )
    trained, loaded = npy[2]
    _same(loaded, trained, "the model loaded from the distributed checkpoint")

    # The memory of the unsharded parameters: allocated by unshard(), freed by reshard().
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    model = fully_shard(torch.nn.Linear(64, 64).to("npy"), mesh=init_device_mesh("npy", (ws,)))
    sharded = torch.npy.memory_allocated()
    model.unshard()
    unsharded = torch.npy.memory_allocated()
    model.reshard()
    assert unsharded - sharded >= (64 * 64 + 64) * 4, (sharded, unsharded)
    assert torch.npy.memory_allocated() == sharded, (sharded, torch.npy.memory_allocated())


def _worker_errors(rank: int, ws: int, tmp: str) -> None:
    """Errors that leave the group usable: each is raised on every rank, names the
    collective, and the next collective works. (The group comes from a plain
    init_process_group.)"""
    _worker_init(rank, ws, tmp)

    def expect(fn, *fragments):
        try:
            fn()
        except RuntimeError as e:
            for fragment in fragments:
                assert fragment in str(e), f"{fragment!r} not in {str(e)!r}"
        else:
            raise AssertionError(f"no error; expected one with {fragments}")
        t = torch.ones(2, device="npy")
        dist.all_reduce(t)
        _same(t, torch.full((2,), float(ws)), "all_reduce after an error")

    expect(
        lambda: dist.all_reduce(torch.ones(3 + rank, device="npy")),
        "all_reduce",
        "disagree",
        "rank 0: all_reduce SUM float32[3]",
        "rank 1: all_reduce SUM float32[4]",
    )
    dtype = torch.float64 if rank else torch.float32
    expect(
        lambda: dist.broadcast(torch.ones(3, device="npy", dtype=dtype), src=0),
        "broadcast",
        "float64[3]",
        "float32[3]",
    )
    expect(
        lambda: dist.all_reduce(
            torch.ones(3, device="npy"), op=dist.ReduceOp.MAX if rank else dist.ReduceOp.SUM
        ),
        "all_reduce",
        "MAX",
        "SUM",
    )
    expect(
        lambda: dist.all_gather(
            [torch.empty(2, device="npy"), torch.empty(2)], torch.ones(2, device="npy")
        ),
        "all_gather",
        "expected all tensors on one device",
        "cpu",
        "npy:0",
    )
    expect(
        lambda: dist.all_reduce(torch.ones(2, device="meta")),
        "all_reduce",
        "expected tensors on cpu, npy",
        "meta",
    )
    out = torch.empty(3, device="npy")
    expect(
        lambda: dist.all_to_all_single(
            out, torch.ones(3, device="npy"), [1, 2] if rank else [2, 1], [1, 2]
        ),
        "all_to_all_single",
        "sends",
        "expects",
    )
    if rank == 0:
        expect(
            lambda: dist.recv(torch.empty(3, device="npy"), 1),
            "recv",
            "rank 1 sent float32[4]",
            "float32[3]",
        )
    elif rank == 1:
        dist.send(torch.ones(4, device="npy"), 0)
        t = torch.ones(2, device="npy")
        dist.all_reduce(t)

    # A timeout: rank 1 never joins a collective of a group with a 3 s timeout.
    short = dist.new_group(timeout=timedelta(seconds=3))
    if rank == 1:
        time.sleep(6)
        return
    start = time.monotonic()
    try:
        dist.all_reduce(torch.ones(4, device="npy"), group=short)
    except RuntimeError as e:
        assert "all_reduce (acc backend)" in str(e) and "Timed out" in str(e), str(e)
        assert time.monotonic() - start < 10, time.monotonic() - start
        print("all_reduce failed:", e)
    else:
        raise AssertionError("all_reduce without a peer did not time out")


def _worker_rank_dies(rank: int, ws: int, tmp: str) -> None:
    if rank == 1:
        os._exit(3)
    try:
        dist.all_reduce(torch.ones(4, device="npy"))
    except RuntimeError as e:
        assert "all_reduce (acc backend) failed" in str(e), str(e)
        print("all_reduce failed:", e)
    else:
        raise AssertionError("all_reduce with a dead rank did not fail")


_WORKERS = {
    # name: (worker, backend argument of init_process_group, timeout)
    "collectives": (_worker_collectives, "cpu:gloo,npy:acc", 60),
    "collectives_4": (_worker_collectives_4, "cpu:gloo,npy:acc", 60),
    "ddp": (_worker_ddp, "acc", 60),
    "fsdp": (_worker_fsdp, "cpu:gloo,npy:acc", 60),
    "errors": (_worker_errors, None, 30),
    "rank_dies": (_worker_rank_dies, "cpu:gloo,npy:acc", 30),
}


def _worker_main(scenario: str, rank: int, ws: int, init: str) -> None:
    from torch_acc.backends import numpy as npy_backend

    npy_backend.setup()
    worker, backend, timeout = _WORKERS[scenario]
    kwargs = {} if backend is None else {"backend": backend}
    dist.init_process_group(
        init_method=f"file://{init}",
        rank=rank,
        world_size=ws,
        timeout=timedelta(seconds=timeout),
        **kwargs,
    )
    worker(rank, ws, os.path.dirname(init))  # beside the init file: files all ranks share
    print(f"ok {scenario}", flush=True)
    if scenario not in ("rank_dies", "errors"):
        dist.destroy_process_group()
    os._exit(0)  # a group whose peer failed must not hold the exit


# ---------------------------------------------------------------------------------------------
# Tests.


class TestDistributed(TestCase):
    def assertRanksOk(self, scenario: str, world_size: int = 2):
        results = _spawn(scenario, world_size)
        for rank, (rc, out) in enumerate(results):
            self.assertEqual(rc, 0, f"rank {rank} of {scenario}:\n{out}")
            self.assertIn(f"ok {scenario}", out)
        return results

    def test_collectives_against_gloo_2_ranks(self):
        self.assertRanksOk("collectives", 2)

    def test_collectives_against_gloo_4_ranks(self):
        self.assertRanksOk("collectives_4", 4)

    def test_ddp_matches_cpu_ddp(self):
        self.assertRanksOk("ddp", 2)

    @unittest.skipUnless(
        _compat.FSDP2_ON_PYTHON_DEVICE,
        "this torch's FSDP2 has no PrivateUse1 kernels (_compat.FSDP2_ON_PYTHON_DEVICE)",
    )
    def test_fsdp_matches_cpu_fsdp(self):
        self.assertRanksOk("fsdp", 2)

    @unittest.skipUnless(
        _compat.FSDP2_ON_PYTHON_DEVICE,
        "this torch's FSDP2 has no PrivateUse1 kernels (_compat.FSDP2_ON_PYTHON_DEVICE)",
    )
    def test_fsdp_matches_cpu_fsdp_4_ranks(self):
        self.assertRanksOk("fsdp", 4)

    def test_plain_init_and_errors_that_name_the_collective(self):
        results = self.assertRanksOk("errors", 2)
        self.assertIn("all_reduce failed", results[0][1])  # the timeout

    def test_rank_dies(self):
        results = _spawn("rank_dies", 2)
        self.assertEqual(results[1][0], 3)
        self.assertEqual(results[0][0], 0, results[0][1])
        self.assertIn("all_reduce failed", results[0][1])

    def test_torchrun_demo(self):
        """``torchrun --nproc-per-node 2 -m torch_acc.demo --distributed``: DDP on npy and on
        CPU give the same losses."""
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0", PYTHONWARNINGS="ignore")
        env["PYTHONPATH"] = os.pathsep.join([REPO, env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--standalone",
            "--nproc-per-node",
            "2",
            "-m",
            "torch_acc.demo",
            "--distributed",
            "--epochs",
            "1",
            "--no-progress",
        ]
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=SPAWN_TIMEOUT, check=False
        )
        self.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
        self.assertIn("DistributedDataParallel on 2 ranks: acc backend (npy)", proc.stdout)
        self.assertIn("losses match cpu at every step", proc.stdout)

    def test_transport(self):
        """A backend's own transport moves the host tensors instead of gloo: here one that
        records what it is given and hands it on to gloo."""
        from torch_acc import distributed
        from torch_acc.backends import numpy as npy_backend

        npy_backend.setup()
        seen = []

        class Recording:
            def __init__(self, store, rank, world_size, timeout):
                self.gloo = dist.ProcessGroupGloo(store, rank, world_size, timeout)

            def __getattr__(self, name):
                def call(*args):
                    seen.append((name, [t for t in args if isinstance(t, torch.Tensor)]))
                    return getattr(self.gloo, name)(*args)

                return call

        distributed.register("npy", transport=Recording)
        try:
            dist.init_process_group("acc", store=dist.HashStore(), rank=0, world_size=1)
            t = torch.arange(4.0).to("npy")
            dist.broadcast(t, src=0)
            out = torch.empty(4, device="npy")
            dist.all_gather_into_tensor(out, t * 2)
        finally:
            distributed._transports.pop("npy")
            dist.destroy_process_group()
        self.assertEqual(out.cpu(), torch.arange(4.0) * 2)
        names = [name for name, _ in seen]
        self.assertIn("broadcast", names)
        self.assertIn("_allgather_base", names)
        self.assertIn("allgather", names)  # the ranks' agreement check

    def test_destroy_right_after_a_collective(self):
        """``destroy_process_group()`` while gloo's worker still holds the last collective's
        tensors, whose Python objects it must free with the GIL: on torch 2.6 freeing a group
        held the GIL while gloo joined that worker, a deadlock on CPU tensors too
        (``_compat.PROCESS_GROUP_FREED_WITH_GIL``; without the mend, most of these runs hang).
        The last collective on the world group or on a subgroup, each in a process of its own,
        bounded."""
        script = """if True:
            import sys
            import torch
            import torch.distributed as dist
            from torch_acc.backends import numpy as npy_backend

            npy_backend.setup()
            backend, device, last = sys.argv[1:]
            dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
            dist.all_reduce(torch.ones(4, device=device))
            group = dist.new_group(backend="gloo") if last == "subgroup" else None
            dist.all_reduce(torch.ones(16 << 20), group=group, async_op=True)
            del group
            dist.destroy_process_group()
            print("destroyed")
        """
        env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        for backend, device in (("gloo", "cpu"), ("cpu:gloo,npy:acc", "npy")):
            for last in ("world", "subgroup", "world", "subgroup"):
                with self.subTest(backend=backend, last=last):
                    proc = subprocess.run(
                        [sys.executable, "-c", script, backend, device, last],
                        capture_output=True, text=True, env=env, timeout=60, check=False,
                    )
                    self.assertEqual(proc.returncode, 0, proc.stderr)
                    self.assertEqual(proc.stdout.strip(), "destroyed")

    def test_process_group_reference_refuses_what_is_not_a_group(self):
        from torch_acc import _C

        with self.assertRaisesRegex(RuntimeError, "expected process_group_reference\\(\\) to get"):
            _C.process_group_reference(None)
        with self.assertRaisesRegex(RuntimeError, "Unable to cast"):
            _C.process_group_reference(torch.ones(1))

    def test_backend_registered_for_the_device(self):
        from torch_acc.backends import numpy as npy_backend

        npy_backend.setup()
        self.assertIn("acc", dist.Backend.backend_list)
        self.assertEqual(dist.Backend.default_device_backend_map["npy"], "acc")
        self.assertEqual(dist.Backend.backend_capability["acc"], ["cpu", "npy"])


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--worker":
        _worker_main(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5])
    else:
        run_tests()
