# Owner(s): ["module: PrivateUse1"]
"""The Python device guard: device indices, streams, events, and autograd on every device."""

import os
import subprocess
import sys
import textwrap
import threading

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

from torch_acc import _C
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import reference


class TwoDeviceGuard(_C.DeviceGuard):
    """Defines only device_count(): everything else keeps the C++ defaults."""

    def __init__(self):
        super().__init__()
        self.counted = 0

    def device_count(self):
        self.counted += 1
        return 2


GUARD = TwoDeviceGuard()
setup_privateuseone_for_python_backend("ref", device_guard=GUARD, hook=reference._Hooks())
reference.setup()


def _grad_check(test, device):
    a_cpu = torch.randn(3, 4)
    b_cpu = torch.randn(4, 2)
    a = a_cpu.to(device).requires_grad_()
    b = b_cpu.to(device).requires_grad_()
    ((a @ b) * 2 + a.sum()).sum().backward()
    ac = a_cpu.clone().requires_grad_()
    bc = b_cpu.clone().requires_grad_()
    ((ac @ bc) * 2 + ac.sum()).sum().backward()
    test.assertEqual(a.grad.device, torch.device(device))
    test.assertEqual(a.grad.cpu(), ac.grad)
    test.assertEqual(b.grad.cpu(), bc.grad)


class TestDeviceIndices(TestCase):
    def test_device_count_comes_from_python(self):
        before = GUARD.counted
        self.assertEqual(torch.ref.device_count(), 2)
        self.assertEqual(torch.accelerator.device_count(), 2)
        self.assertGreater(GUARD.counted, before)

    def test_set_and_exchange_device(self):
        torch.ref.set_device(1)
        try:
            self.assertEqual(torch.ref.current_device(), 1)
            self.assertEqual(torch.accelerator.current_device_index(), 1)
        finally:
            torch.ref.set_device(0)
        self.assertEqual(torch.ref.current_device(), 0)

    def test_current_device_is_per_thread(self):
        torch.ref.set_device(0)
        seen = []

        def worker():
            torch.ref.set_device(1)
            seen.append(torch.ref.current_device())

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        self.assertEqual(seen, [1])
        self.assertEqual(torch.ref.current_device(), 0)

    def test_index_out_of_range(self):
        with self.assertRaisesRegex(ValueError, r"expected a device index in \[0, 2\) for ref"):
            torch.ref.set_device(2)

    def test_tensor_on_second_device(self):
        t = torch.ones(2, 2).to("ref:1")
        self.assertEqual(t.device, torch.device("ref:1"))
        self.assertEqual((t + t).device, torch.device("ref:1"))
        self.assertEqual((t + t).cpu(), torch.full((2, 2), 2.0))


class TestStreamsAndEvents(TestCase):
    def test_default_stream_per_device(self):
        for index in range(2):
            s = torch.Stream(device=f"ref:{index}")
            self.assertEqual(s.device_index, index)
            self.assertEqual(s.stream_id, 0)
            self.assertEqual(s.device_type, torch._C._autograd.DeviceType.PrivateUse1.value)
            self.assertTrue(s.query())
            s.synchronize()

    def test_stream_context_sets_current_stream(self):
        kind = int(torch._C._autograd.DeviceType.PrivateUse1)
        s = torch.Stream(stream_id=5, device_index=1, device_type=kind)
        default = torch.accelerator.current_stream(1)
        torch.accelerator.set_stream(s)
        try:
            cur = torch.accelerator.current_stream(1)
            self.assertEqual((cur.stream_id, cur.device_index), (5, 1))
            # Other devices keep their own current stream.
            self.assertEqual(torch.accelerator.current_stream(0).stream_id, 0)
        finally:
            torch.accelerator.set_stream(default)
        self.assertEqual(torch.accelerator.current_stream(1).stream_id, 0)

    def test_events_are_complete_at_once(self):
        e = torch.Event(device="ref")
        e.record()
        self.assertTrue(e.query())
        e.synchronize()
        e.wait()

    def test_elapsed_time_raises(self):
        a = torch.Event(device="ref", enable_timing=True)
        b = torch.Event(device="ref", enable_timing=True)
        a.record()
        b.record()
        with self.assertRaisesRegex(RuntimeError, "cannot time events"):
            a.elapsed_time(b)


class TestAutograd(TestCase):
    def test_backward_device_0(self):
        _grad_check(self, "ref:0")

    def test_backward_device_1(self):
        _grad_check(self, "ref:1")

    def test_backward_across_devices(self):
        a_cpu = torch.randn(3)
        a = a_cpu.to("ref:0").requires_grad_()
        (a.to("ref:1") * a.to("ref:1") + (a * 3).to("ref:1")).sum().backward()
        self.assertEqual(a.grad.device, torch.device("ref:0"))
        self.assertEqual(a.grad.cpu(), 2 * a_cpu + 3)

    def test_backward_across_devices_through_the_cpu(self):
        x = torch.randn(3, requires_grad=True)
        ((x.to("ref:0") * 2).cpu().to("ref:1") * 3).sum().backward()
        self.assertEqual(x.grad, torch.full((3,), 6.0))

    def test_backward_error_on_one_device_is_kept(self):
        x = torch.ones(3, device="ref:1", requires_grad=True)
        y = x * 2
        y.register_hook(lambda g: g.data_ptr())
        with self.assertRaisesRegex(RuntimeError, "^tensors on ref have no data in memory"):
            y.sum().backward()

    def test_backward_from_thread(self):
        errors = []

        def worker():
            try:
                _grad_check(self, "ref:1")
                _grad_check(self, "ref:0")
            except Exception as e:  # noqa: BLE001 - re-raised in the main thread
                errors.append(e)

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        if errors:
            raise errors[0]


class TestBackwardThreads(TestCase):
    # The autograd engine runs a device's backward on a thread of its own; for a graph whose
    # root is on a Python backend, torch_acc has it run on the calling thread (as the CPU's),
    # since the kernels need the GIL the caller holds (torch_acc/_patches.py: run_backward).

    def _threads(self, root_device):
        """The threads the backward of an ref graph runs on, with its root on root_device."""
        seen = []
        x = torch.randn(4).to("ref").requires_grad_()
        y = x * 2
        y.register_hook(lambda g: seen.append(threading.get_ident()))
        (y * y).sum().to(root_device).backward()
        self.assertEqual(x.grad.cpu(), 8 * x.detach().cpu())
        return seen

    def test_ref_root_runs_on_calling_thread(self):
        self.assertEqual(self._threads("ref"), [threading.get_ident()])
        self.assertTrue(torch._C._is_multithreading_enabled())

    def test_ref_root_from_another_thread(self):
        seen, main = [], threading.get_ident()

        def worker():
            seen.append((threading.get_ident(), self._threads("ref")))

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        [(ident, threads)] = seen
        self.assertNotEqual(ident, main)
        self.assertEqual(threads, [ident])

    def test_cpu_root_keeps_the_device_thread(self):
        # The root on the CPU: the engine sends ref's part to its device thread, as before.
        [ident] = self._threads("cpu")
        self.assertNotEqual(ident, threading.get_ident())

    def test_autograd_grad_on_calling_thread(self):
        seen = []
        x = torch.randn(3).to("ref").requires_grad_()
        y = x.exp()
        y.register_hook(lambda g: seen.append(threading.get_ident()))
        (gx,) = torch.autograd.grad(y.sum(), x)
        self.assertEqual(gx.cpu(), x.detach().cpu().exp())
        self.assertEqual(seen, [threading.get_ident()])

    def test_hook_error_propagates(self):
        # The guard's Python methods run while the hook's error unwinds (stream and device
        # guards' destructors) and must leave it pending; multithreading is restored.
        for root in ("ref", "cpu"):
            with self.subTest(root=root):
                x = torch.randn(3).to("ref").requires_grad_()
                y = x * 2
                y.register_hook(lambda g: 1 / 0)
                with self.assertRaises(ZeroDivisionError):
                    y.sum().to(root).backward()
                self.assertTrue(torch._C._is_multithreading_enabled())


class TestInterpreterExit(TestCase):
    # At exit, a thread the interpreter did not create (an autograd device thread) must not
    # ask for the GIL once finalization begins: CPython ends it with pthread_exit, and the
    # forced unwind aborts the process ("terminate called without an active exception").
    # torch_acc's atexit handler waits for the backend calls in flight, then refuses kernel
    # calls on every other thread and leaks payloads released there (csrc/acc/Shutdown.h).
    # A hook registered before setup runs after that handler, and sees what other threads
    # see from then on: a Python thread stands in for the device thread.
    def _run_after_exit_handler(self, body):
        code = textwrap.dedent(
            """
            import atexit, threading
            import torch

            def after_exit_handler():
            {body}

            atexit.register(after_exit_handler)
            from torch_acc.backends import reference
            reference.setup()
            """
        ).format(body=textwrap.indent(textwrap.dedent(body), " " * 4))
        env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return proc.stdout.splitlines()

    def test_kernels_on_other_threads_are_refused(self):
        lines = self._run_after_exit_handler(
            """
            x = torch.arange(3.0).to("ref")
            errors = []

            def worker():
                try:
                    torch.neg(x)
                except RuntimeError as e:
                    errors.append(str(e))

            t = threading.Thread(target=worker)
            t.start()
            t.join()
            print(errors[0] if errors else "no error")
            print(torch.neg(x).cpu().tolist())
            """
        )
        self.assertIn("the Python interpreter is exiting", lines[0])
        self.assertIn("the ref backend can no longer call into Python on a thread", lines[0])
        # The thread finalizing the interpreter still runs kernels.
        self.assertEqual(lines[1], "[-0.0, -1.0, -2.0]")

    def test_payloads_released_on_other_threads_are_leaked(self):
        lines = self._run_after_exit_handler(
            """
            import weakref
            from torch_acc.payload import wrap

            def dropped_on(thread_target):
                payload = torch.ones(3)
                ref = weakref.ref(payload)
                held = [wrap(payload, device="ref")]
                del payload
                thread_target(held.clear)
                return ref() is None

            def on_thread(fn):
                t = threading.Thread(target=fn)
                t.start()
                t.join()

            print("released on another thread:", dropped_on(on_thread))
            print("released on this thread:", dropped_on(lambda fn: fn()))
            """
        )
        self.assertEqual(
            lines,
            ["released on another thread: False", "released on this thread: True"],
        )

    def test_exit_drain_leaves_no_python_object_to_device_threads(self):
        # The exit handler drains the device threads with one small backward pass each. A pass
        # keeps a copy of the thread-local state it started with and is freed by whichever
        # thread lets go of it last, often the device thread once the pass returned. torch
        # 2.13 and later put a contextvars.Context there (torch.autograd.backward stashes it
        # in TLS); freed on the device thread during finalization, it aborted the process
        # about one exit in thirty (mp.spawn children, seen in CI). The drain's passes must
        # stash nothing; this process's own pass, before exit, is drained by them.
        code = textwrap.dedent(
            """
            import atexit
            import torch

            stashed = []
            atexit.register(lambda: print("stashed at exit:", stashed))
            from torch_acc.backends import reference
            reference.setup()

            def watch_tls():
                stash = torch._C._stash_obj_in_tls
                torch._C._stash_obj_in_tls = lambda key, obj: (stashed.append(key), stash(key, obj))

            atexit.register(watch_tls)
            leaf = torch.ones(2, device="ref", requires_grad=True)
            (leaf.cpu() * 3).sum().backward()
            print("grad:", leaf.grad.cpu().tolist())
            """
        )
        env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.splitlines(), ["grad: [3.0, 3.0]", "stashed at exit: []"])


if __name__ == "__main__":
    run_tests()
