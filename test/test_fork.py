# Owner(s): ["module: PrivateUse1"]
"""A Python device in a child made by ``os.fork()``: it works where the backend declares
itself fork-safe, and is a clear error otherwise (as CUDA's "Cannot re-initialize CUDA in
forked subprocess"), never a hang. Each case runs in a fresh interpreter with a timeout, so
that a hang fails the test."""

import os
import subprocess
import sys
import textwrap
import unittest

from torch.testing._internal.common_utils import run_tests, TestCase

#: Generous: a spawned interpreter imports torch, which takes long on a loaded machine.
TIMEOUT_S = 300

PRELUDE = """
import os
import sys
import torch
import torch.multiprocessing as mp
from torch_acc import library
from torch_acc.backends import reference
"""


def _run(code: str) -> str:
    """Runs ``code`` after :data:`PRELUDE` in a new interpreter; its stdout."""
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"hung for {TIMEOUT_S} s; output so far: {e.stdout!r}") from None
    if proc.returncode != 0:
        raise AssertionError(f"exit status {proc.returncode}:\n{proc.stderr}")
    return proc.stdout


FORK_MESSAGE = (
    "Cannot re-initialize ref in forked subprocess: the ref backend was set up before the "
    "fork and does not declare itself fork-safe (torch_acc.library.declare_fork_safe)"
)


@unittest.skipIf(not hasattr(os, "fork"), "os.fork is not available on this platform")
class TestFork(TestCase):
    def test_fork_safe_backend_works_in_child(self):
        out = _run(
            """
            reference.setup()
            x = torch.arange(4.0).to("ref")
            r, w = os.pipe()
            pid = os.fork()
            if pid == 0:
                y = (x * 2 + torch.ones(4).to("ref")).cpu()
                os.write(w, repr(y.tolist()).encode())
                os._exit(0)
            os.close(w)
            print(os.read(r, 1000).decode())
            print(os.waitpid(pid, 0)[1])
            """
        )
        self.assertEqual(out.split(), ["[1.0,", "3.0,", "5.0,", "7.0]", "0"])

    def test_fork_queue_sends_device_tensors(self):
        # The issue: with the fork start method, putting a tensor on a Queue hung the parent.
        out = _run(
            """
            def child(q, x, done):
                q.put(x * 10)
                q.put(x[1:])
                done.wait(120)  # the sender runs until its tensors are received

            if __name__ == "__main__":
                reference.setup()
                x = torch.arange(3.0).to("ref")
                ctx = mp.get_context("fork")
                q, done = ctx.Queue(), ctx.Event()
                p = ctx.Process(target=child, args=(q, x, done))
                p.start()
                a, b = q.get(timeout=120), q.get(timeout=120)
                done.set()
                p.join(120)
                print(a.device, a.cpu().tolist(), b.device, b.cpu().tolist(), p.exitcode)
            """
        )
        self.assertEqual(out.strip(), "ref:0 [0.0, 10.0, 20.0] ref:0 [1.0, 2.0] 0")

    def test_not_fork_safe_backend_raises_in_child(self):
        out = _run(
            """
            def child(q, x):
                for use in (lambda: x * 2, lambda: torch.ones(2).to("ref"), lambda: x.cpu(),
                            lambda: torch.ref.manual_seed(0) or x.uniform_()):
                    try:
                        use()
                        q.put("no error")
                    except RuntimeError as e:
                        q.put(str(e))

            if __name__ == "__main__":
                reference.setup()
                library.declare_fork_safe(False)
                x = torch.arange(3.0).to("ref")
                ctx = mp.get_context("fork")
                q = ctx.Queue()
                p = ctx.Process(target=child, args=(q, x))
                p.start()
                for _ in range(4):
                    print(q.get(timeout=120).splitlines()[0])
                p.join(120)
                print((x * 2).cpu().tolist())  # the parent is unaffected
            """
        )
        lines = out.splitlines()
        self.assertEqual(len(lines), 5, out)
        for line in lines[:4]:
            self.assertIn(FORK_MESSAGE, line)
        self.assertEqual(lines[4], "[0.0, 2.0, 4.0]")

    def test_not_fork_safe_queue_put_is_an_error_not_a_hang(self):
        # The child cannot send the tensor: the parent's get raises why instead of waiting.
        out = _run(
            """
            def child(q, x):
                q.put(x)

            if __name__ == "__main__":
                reference.setup()
                library.declare_fork_safe(False)
                x = torch.arange(3.0).to("ref")
                ctx = mp.get_context("fork")
                q = ctx.Queue()
                p = ctx.Process(target=child, args=(q, x))
                p.start()
                try:
                    q.get(timeout=120)
                except RuntimeError as e:
                    print(e)
                p.join(120)
            """
        )
        self.assertIn(
            "cannot send a tensor on ref:0 to another process: RuntimeError: " + FORK_MESSAGE, out
        )

    def test_backend_set_up_in_the_child_only(self):
        # A parent that never set the backend up leaves nothing to re-initialize.
        out = _run(
            """
            library.declare_fork_safe(False)
            pid = os.fork()
            if pid == 0:
                reference.setup()
                library.declare_fork_safe(False)
                ok = (torch.ones(2).to("ref") * 3).cpu().tolist() == [3.0, 3.0]
                os._exit(0 if ok else 1)
            print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
            """
        )
        self.assertEqual(out.strip(), "0")

    def test_dataloader_workers(self):
        out = _run(
            """
            class Data(torch.utils.data.Dataset):
                def __len__(self):
                    return 4

                def __getitem__(self, i):
                    return torch.full((2,), float(i)).to("ref") * 2

            if __name__ == "__main__":
                reference.setup()
                for safe in (True, False):
                    library.declare_fork_safe(safe)
                    loader = torch.utils.data.DataLoader(
                        Data(), batch_size=None, num_workers=2,
                        multiprocessing_context="fork", timeout=120,
                    )
                    try:
                        print([(t.device.type, t.cpu().tolist()) for t in loader])
                    except RuntimeError as e:
                        print(str(e).splitlines()[-1])
                # Batches collated in the workers: stacked on the device.
                library.declare_fork_safe(True)
                loader = torch.utils.data.DataLoader(
                    Data(), batch_size=3, num_workers=2, multiprocessing_context="fork",
                    timeout=120,
                )
                print([(t.device.type, t.cpu()[:, 0].tolist()) for t in loader])
            """
        )
        lines = out.splitlines()
        self.assertEqual(
            lines[0],
            "[('ref', [0.0, 0.0]), ('ref', [2.0, 2.0]), ('ref', [4.0, 4.0]), ('ref', [6.0, 6.0])]",
        )
        self.assertIn(FORK_MESSAGE, lines[1])
        self.assertEqual(lines[2], "[('ref', [0.0, 2.0, 4.0]), ('ref', [6.0])]")


if __name__ == "__main__":
    run_tests()
