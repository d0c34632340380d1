# Owner(s): ["module: PrivateUse1"]
"""The c10d backend of Python devices (``acc``) on the passthrough backend: the collectives of
one process, and two ranks whose DDP training matches CPU DDP over gloo. (The standalone
package's ``test_distributed`` goes through every collective, FSDP2 and the failures.)"""

import os
import subprocess
import sys
import tempfile
from datetime import timedelta

import torch
import torch.distributed as dist
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc.backends import reference

TIMEOUT = 120


def _train(device: str, group, rank: int) -> list[torch.Tensor]:
    """Three SGD steps of DDP on ``device``; the parameters after them."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    ddp = DDP(model.to(device), process_group=group)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    gen = torch.Generator().manual_seed(rank)
    for _ in range(3):
        x, y = torch.randn(4, 6, generator=gen), torch.randint(0, 3, (4,), generator=gen)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp(x.to(device)), y.to(device)).backward()
        opt.step()
    return [p.detach().cpu() for p in ddp.parameters()]


def _worker(rank: int, init: str) -> None:
    reference.setup()
    dist.init_process_group(
        init_method=f"file://{init}", rank=rank, world_size=2, timeout=timedelta(seconds=60)
    )  # the current accelerator is ref: cpu:gloo,ref:acc
    t = torch.arange(4.0, device="ref") * (rank + 1)
    dist.all_reduce(t)
    assert torch.equal(t.cpu(), torch.arange(4.0) * 3), t
    gathered = [torch.empty(2, device="ref") for _ in range(2)]
    dist.all_gather(gathered, torch.full((2,), float(rank), device="ref"))
    assert torch.equal(torch.cat(gathered).cpu(), torch.tensor([0.0, 0.0, 1.0, 1.0]))
    on_ref = _train("ref", dist.group.WORLD, rank)
    on_cpu = _train("cpu", dist.new_group(backend="gloo"), rank)
    for a, b in zip(on_ref, on_cpu, strict=True):
        torch.testing.assert_close(a, b)
    dist.destroy_process_group()
    print("ok", flush=True)


class TestC10dBackend(TestCase):
    def setUp(self):
        reference.setup()
        dist.init_process_group("acc", store=dist.HashStore(), rank=0, world_size=1)
        self.addCleanup(dist.destroy_process_group)

    def test_backend_of_the_device(self):
        self.assertEqual(dist.Backend.default_device_backend_map["ref"], "acc")
        self.assertEqual(dist.get_backend(), "acc")

    def test_collectives_in_place(self):
        t = torch.arange(6.0, device="ref").view(2, 3).t()  # a view, not contiguous
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        self.assertEqual(t.cpu(), torch.arange(6.0).view(2, 3).t())
        dist.broadcast(t, src=0)
        out = torch.empty(3, 2, device="ref")
        dist.all_gather_into_tensor(out, t)
        self.assertEqual(out.cpu(), t.cpu())
        half = torch.ones(4, dtype=torch.half, device="ref")
        dist.reduce_scatter_tensor(half[:2], half[2:] * 2)  # into a view of half
        self.assertEqual(half.cpu(), torch.tensor([2.0, 2.0, 1.0, 1.0], dtype=torch.half))

    def test_async_work_and_future(self):
        t = torch.ones(3, device="ref")
        work = dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True)
        self.assertTrue(work.wait())
        self.assertEqual(t.cpu(), torch.ones(3))
        work = dist.all_reduce(t, async_op=True)
        values = work.get_future().wait()
        self.assertEqual(values[0].device.type, "ref")
        self.assertEqual(t.cpu(), torch.ones(3))

    def test_a_tensor_of_another_device_is_refused(self):
        with self.assertRaisesRegex(RuntimeError, "expected tensors on cpu, ref"):
            dist.all_reduce(torch.ones(2, device="meta"))

    def test_two_ranks_train_as_cpu_ddp(self):
        with tempfile.TemporaryDirectory() as tmp:
            init = os.path.join(tmp, "init")
            env = dict(os.environ, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
            ranks = [
                subprocess.Popen(
                    [sys.executable, __file__, "--worker", str(rank), init],
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                )
                for rank in range(2)
            ]
            try:
                outs = [p.communicate(timeout=TIMEOUT)[0] for p in ranks]
            finally:
                for p in ranks:
                    p.kill()
        for rank, (p, out) in enumerate(zip(ranks, outs, strict=True)):
            self.assertEqual(p.returncode, 0, f"rank {rank}:\n{out}")
            self.assertIn("ok", out.splitlines())


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        _worker(int(sys.argv[2]), sys.argv[3])
    else:
        run_tests()
