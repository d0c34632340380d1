# Owner(s): ["module: PrivateUse1"]
"""Payload tensors through ``torch.multiprocessing``: shared as CUDA tensors are (the
receiver reads and writes the sender's memory) where the backend shares payloads
(``library.impl_ipc``; the NumPy backend through POSIX shared memory), sent as CPU copies
otherwise, and an error where they cannot be sent, never a hang. Cases with processes run in
a fresh interpreter with a timeout, so that a hang fails the test."""

import gc
import os
import pickle
import subprocess
import sys
import tempfile
import textwrap
from multiprocessing.reduction import ForkingPickler

import numpy as np
import torch
from torch.testing._internal.common_utils import run_tests, TestCase

import torch_acc
from torch_acc import _ipc, record
from torch_acc.backends import numpy as npy_backend

npy_backend.setup()

#: Generous: a spawned interpreter imports torch, which takes long on a loaded machine.
TIMEOUT_S = 300

PRELUDE = """
import torch
import torch.multiprocessing as mp
from torch_acc.backends import numpy as npy_backend

npy_backend.setup()  # at import: a spawned process imports this module before unpickling
"""


def _run_script(code: str, stdin: bytes | None = None, prelude: str = PRELUDE) -> str:
    """Runs ``code`` after ``prelude`` as a script file (the spawn start method imports it
    again in the child) in a new interpreter; its stdout."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "script.py")
        with open(path, "w") as f:
            f.write(prelude + textwrap.dedent(code))
        try:
            proc = subprocess.run(
                [sys.executable, path],
                input=stdin,
                capture_output=True,
                env=env,
                timeout=TIMEOUT_S,
            )
        except subprocess.TimeoutExpired as e:
            raise AssertionError(f"hung for {TIMEOUT_S} s; output so far: {e.stdout!r}") from None
    if proc.returncode != 0:
        raise AssertionError(f"exit status {proc.returncode}:\n{proc.stderr.decode()}")
    return proc.stdout.decode()


def _send(obj):
    """``obj`` through ``ForkingPickler`` within this process, as a Queue sends it."""
    return pickle.loads(ForkingPickler.dumps(obj))


class TestShareMemory(TestCase):
    def test_share_memory_and_is_shared(self):
        x = torch.arange(6.0).reshape(2, 3).to("npy")
        v = x[1]
        self.assertFalse(x.is_shared())
        self.assertIs(x.share_memory_(), x)
        self.assertTrue(x.is_shared())
        self.assertTrue(v.is_shared())  # a view reads the same payload
        self.assertEqual(x.cpu(), torch.arange(6.0).reshape(2, 3))
        v.add_(10)  # views and base still share after the move
        self.assertEqual(x.cpu()[1], torch.tensor([13.0, 14.0, 15.0]))
        self.assertIs(x.share_memory_(), x)  # again: nothing to move
        self.assertTrue(x.is_shared())

    def test_module_share_memory(self):
        model = torch.nn.Linear(3, 2).to("npy")
        expected = model.weight.detach().cpu()
        model.share_memory()
        self.assertTrue(all(p.is_shared() for p in model.parameters()))
        self.assertEqual(model.weight.detach().cpu(), expected)
        out = model(torch.ones(1, 3, device="npy"))
        self.assertEqual(out.shape, (1, 2))

    def test_cpu_tensors_unchanged(self):
        x = torch.arange(3.0)
        self.assertFalse(x.is_shared())
        x.share_memory_()
        self.assertTrue(x.is_shared())


class TestSendInProcess(TestCase):
    def test_shared_payload_round_trip(self):
        x = torch.arange(6.0).reshape(2, 3).to("npy")
        base, view = _send([x, x.t()[1:]])
        self.assertTrue(x.is_shared())  # sending moved the payload, as CPU does its storage
        self.assertEqual(base.device, torch.device("npy:0"))
        self.assertEqual(base.cpu(), x.cpu())
        self.assertEqual(view.cpu(), x.t()[1:].cpu())
        self.assertEqual(view.stride(), x.t()[1:].stride())
        view.mul_(-1)  # the received tensors write the sender's memory
        self.assertEqual(x.cpu(), torch.tensor([[0.0, -1.0, -2.0], [3.0, -4.0, -5.0]]))
        self.assertEqual(base.cpu(), x.cpu())

    def test_dtypes(self):
        for dtype in (torch.float16, torch.bfloat16, torch.int64, torch.bool, torch.complex64):
            x = torch.arange(4).to(dtype).to("npy")
            y = _send(x)
            self.assertEqual(y.dtype, dtype)
            self.assertEqual(y.cpu(), x.cpu())

    def test_requires_grad(self):
        x = torch.ones(3, device="npy", requires_grad=True)
        y = _send(x)
        self.assertTrue(y.requires_grad)
        self.assertTrue(y.is_leaf)
        p = _send(torch.nn.Parameter(torch.ones(2, device="npy")))
        self.assertEqual(p.cpu(), torch.ones(2))

    def test_payload_with_gaps_is_sent_as_a_copy(self):
        # A strided NumPy array cannot be moved into shared memory as it is laid out.
        x = torch_acc.wrap(np.arange(10.0)[::2])
        y = _send(x)
        self.assertFalse(x.is_shared())
        self.assertEqual(y.cpu(), torch.arange(0.0, 10.0, 2, dtype=torch.float64))
        y.add_(1)
        self.assertEqual(x.cpu(), torch.arange(0.0, 10.0, 2, dtype=torch.float64))

    def test_conjugate_view_is_sent_as_a_copy(self):
        x = torch.tensor([1 + 2j, 3 - 1j]).to("npy")
        self.assertEqual(_send(x.conj()).cpu(), torch.tensor([1 - 2j, 3 + 1j]))

    def test_non_leaf_requiring_grad_is_received_as_the_error(self):
        x = torch.ones(2, device="npy", requires_grad=True) * 2
        with self.assertRaisesRegex(
            RuntimeError,
            r"cannot send a tensor on npy:0 to another process: RuntimeError: "
            r"Cowardly refusing to serialize non-leaf tensor which requires_grad",
        ):
            _send(x)

    def test_sent_memory_outlives_the_senders_tensor(self):
        # As for CPU storages, the sender duplicates the memory's file descriptor for the
        # receiver: the sending process must run until the tensor is received, but need not
        # hold the tensor.
        x = torch.arange(3.0).to("npy")
        data = ForkingPickler.dumps(x)
        del x
        gc.collect()
        self.assertEqual(pickle.loads(data).cpu(), torch.arange(3.0))

    def test_rebuild_error_names_the_function(self):
        def rebuild(handle):
            raise OSError("no such memory")

        data = ForkingPickler.dumps(torch.ones(2, device="npy"))
        backend = record.get("npy")
        hooks = backend.ipc
        backend.ipc = record.IpcFunctions(hooks.share, rebuild, hooks.is_shared)
        try:
            with self.assertRaisesRegex(
                RuntimeError,
                r"cannot receive a tensor shared by the npy backend: its IPC "
                r"function rebuild \(.*rebuild\) raised OSError: no such memory. The sending "
                r"process must keep the tensor alive until it is received, as for CUDA",
            ):
                pickle.loads(data)
        finally:
            backend.ipc = hooks

    def test_receiver_without_the_backend_names_it(self):
        # What a process without the backend runs when it receives a tensor of it.
        rebuild, args = _ipc.reduce_tensor(torch_acc.wrap(np.arange(6.0)[::2]))
        self.assertIs(rebuild, _ipc._rebuild_from_cpu)
        with self.assertRaisesRegex(
            RuntimeError,
            r"cannot receive a tensor on jaxcpu: the jaxcpu backend is not set up "
            r"in this process. Set it up before the tensor is received",
        ):
            rebuild("jaxcpu", *args[1:])


class TestSpawn(TestCase):
    def test_process_arguments_and_queue(self):
        out = _run_script(
            """
            def child(q, x, view, done):
                view.add_(100)  # writes the parent's memory
                q.put((x * 2).cpu())
                q.put(view)
                done.wait(120)  # the sender runs until its tensors are received

            if __name__ == "__main__":
                ctx = mp.get_context("spawn")
                x = torch.arange(4.0).to("npy")
                q, done = ctx.Queue(), ctx.Event()
                p = ctx.Process(target=child, args=(q, x, x[2:], done))
                p.start()
                doubled, view = q.get(timeout=120), q.get(timeout=120)
                done.set()
                p.join(120)
                print(p.exitcode, x.cpu().tolist(), doubled.tolist(), view.device,
                      view.cpu().tolist())
            """
        )
        self.assertEqual(
            out.strip(),
            "0 [0.0, 1.0, 102.0, 103.0] [0.0, 2.0, 204.0, 206.0] npy:0 [102.0, 103.0]",
        )

    def test_queue_from_child_to_parent(self):
        out = _run_script(
            """
            def child(q, done):
                t = torch.full((3,), 7.0).to("npy")
                q.put([t, t[1:]])
                done.wait(120)  # the sender holds the tensor until it is received

            if __name__ == "__main__":
                ctx = mp.get_context("spawn")
                q, done = ctx.Queue(), ctx.Event()
                p = ctx.Process(target=child, args=(q, done))
                p.start()
                t, v = q.get(timeout=120)
                v.fill_(1.0)
                print(t.cpu().tolist(), v.is_shared())
                done.set()
                p.join(120)
                print(p.exitcode)
            """
        )
        self.assertEqual(out.split("\n")[:2], ["[7.0, 1.0, 1.0] True", "0"])

    def test_multiprocessing_spawn(self):
        out = _run_script(
            """
            def work(rank, x):
                x[rank].fill_(rank + 1)

            if __name__ == "__main__":
                x = torch.zeros(2).to("npy")
                mp.spawn(work, args=(x,), nprocs=2, join=True)
                print(x.cpu().tolist())
            """
        )
        self.assertEqual(out.strip(), "[1.0, 2.0]")

    def test_dataloader_default_collate_in_spawned_workers(self):
        # Workers stack each batch on the device (it has no storage for CUDA's shared-memory
        # output) and send it through the backend's IPC; tuples collate element by element.
        out = _run_script(
            """
            class Data(torch.utils.data.Dataset):
                def __len__(self):
                    return 6

                def __getitem__(self, i):
                    return torch.full((2,), float(i), device="npy"), i

            if __name__ == "__main__":
                loader = torch.utils.data.DataLoader(
                    Data(), batch_size=4, num_workers=2, multiprocessing_context="spawn",
                    timeout=120,
                )
                for x, i in loader:
                    print(x.device, x.shape, x.cpu()[:, 0].tolist(), i.device, i.tolist())
            """
        )
        self.assertEqual(
            out.splitlines(),
            [
                "npy:0 torch.Size([4, 2]) [0.0, 1.0, 2.0, 3.0] cpu [0, 1, 2, 3]",
                "npy:0 torch.Size([2, 2]) [4.0, 5.0] cpu [4, 5]",
            ],
        )


if __name__ == "__main__":
    run_tests()
