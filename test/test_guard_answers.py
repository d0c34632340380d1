# Owner(s): ["module: PrivateUse1"]
"""A backend's device guard and hooks are checked where their answers are read.

Each answer is used when it is right, or is a clear error naming the guard or hooks class,
the method and what it returned; never a crash, a ``terminate`` or a tensor on a device that
does not exist. Device guards and hooks are process-global, so each case sets up a backend
in a process of its own, which also turns a crash into a failed test instead of a dead run.
"""

import os
import subprocess
import sys
import textwrap

import torch
from torch.testing._internal.common_utils import run_tests, TestCase

_PRELUDE = """
import torch, torch_acc
from torch_acc import _C
from torch_acc.backend_registration import setup_privateuseone_for_python_backend
from torch_acc.backends import numpy as npy_backend

KIND = int(torch._C._autograd.DeviceType.PrivateUse1)

def attempt(name, call):
    try:
        result = call()
    except Exception as e:  # noqa: BLE001 - the test reads what was raised
        print(name, type(e).__name__, str(e).splitlines()[0])
    else:
        print(name, "returned", result)
"""


def _run(test, body):
    """Runs ``body`` after the prelude in a new process; returns its lines of output by the
    name each starts with (the process must exit normally)."""
    code = _PRELUDE + textwrap.dedent(body)
    env = {**os.environ, "TORCH_DEVICE_BACKEND_AUTOLOAD": "0", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    test.assertEqual(proc.returncode, 0, proc.stdout + proc.stderr)
    lines = {}
    for line in proc.stdout.splitlines():
        name, _, rest = line.partition(" ")
        lines[name] = rest
    return lines


class TestDeviceAnswers(TestCase):
    def test_get_device_out_of_range(self):
        for answer in (-1, 99):
            with self.subTest(answer=answer):
                out = _run(
                    self,
                    f"""
                    class Guard(_C.DeviceGuard):
                        def get_device(self):
                            return {answer}

                    setup_privateuseone_for_python_backend(
                        "npy", device_guard=Guard(), hook=npy_backend._Hooks()
                    )
                    npy_backend.setup()
                    attempt("stream", lambda: torch.accelerator.current_stream())
                    attempt("ones", lambda: torch.ones(2, device="npy"))
                    attempt("index", lambda: torch.npy.current_device())
                    """,
                )
                error = (
                    r"ValueError expected Guard.get_device\(\) to return a device index in "
                    rf"\[0, 1\) \(its device_count\(\)\), but got {answer}"
                )
                for name in ("stream", "ones", "index"):
                    self.assertRegex(out[name], error)

    def test_device_count_not_a_count(self):
        not_a_count = r"expected Guard.device_count\(\) to return a count in \[0, 127\], but got "
        answers = {
            "1000": not_a_count + "1000",
            "-3": not_a_count + "-3",
            "'2'": r"expected Guard.device_count\(\) to return an int, but got <class 'str'>",
            "1 / 0": r"Guard.device_count\(\) raised ZeroDivisionError",
        }
        for answer, error in answers.items():
            with self.subTest(answer=answer):
                out = _run(
                    self,
                    f"""
                    class Guard(_C.DeviceGuard):
                        def device_count(self):
                            return {answer}

                    setup_privateuseone_for_python_backend(
                        "npy", device_guard=Guard(), hook=npy_backend._Hooks()
                    )
                    npy_backend.setup()
                    attempt("count", lambda: torch.npy.device_count())
                    attempt("ones", lambda: torch.ones(2, device="npy"))
                    attempt("to", lambda: torch.ones(2).to("npy"))
                    attempt("set_device", lambda: torch.npy.set_device(0))
                    attempt("empty", lambda: _C.create_empty_tensor((2,), torch.float32, 0))
                    """,
                )
                # No devices, with a warning where the count is all that is asked for ...
                self.assertEqual(out["count"], "returned 0")
                # ... and the reason wherever a device is used.
                for name in ("ones", "to", "set_device", "empty"):
                    self.assertRegex(
                        out[name], "ValueError expected a device index for npy, but it has no "
                        "devices: " + error
                    )

    def test_streams_of_another_device(self):
        out = _run(
            self,
            """
            class Guard(_C.DeviceGuard):
                def device_count(self):
                    return 2

                def get_new_stream(self, device, priority):
                    return torch.Stream(stream_id=0, device_index=1, device_type=KIND)

            setup_privateuseone_for_python_backend("npy", device_guard=Guard())
            attempt("new", lambda: torch.Stream(device="npy:0"))
            attempt("other", lambda: torch.Stream(device="npy:1"))
            """,
        )
        self.assertEqual(
            out["new"],
            "ValueError expected Guard.get_new_stream() to return a stream of npy:0, but got a "
            "stream of npy:1",
        )
        self.assertIn("returned torch.Stream", out["other"])


class TestKeptErrors(TestCase):
    # Where an error cannot propagate (autograd records the stream of each input in a
    # noexcept function; the engine sets the device of its threads with nothing to catch
    # an error), it is kept and raised at the next call that can raise it: the end of the
    # backward pass at the latest. Before, the process terminated.
    def test_get_stream_not_a_stream(self):
        out = _run(
            self,
            """
            class Guard(_C.DeviceGuard):
                def get_stream(self, device):
                    return 5

            setup_privateuseone_for_python_backend(
                "npy", device_guard=Guard(), hook=npy_backend._Hooks()
            )
            npy_backend.setup()
            x = torch.ones(3, device="npy", requires_grad=True)
            attempt("backward", lambda: (x * 2).sum().backward())
            attempt("after", lambda: (torch.ones(2, device="npy") + 1).cpu().tolist())
            attempt("stream", lambda: torch.accelerator.current_stream())
            """,
        )
        self.assertRegex(
            out["backward"],
            r"^TypeError the npy device guard's get_stream\(npy:0\) failed where no error can "
            r"propagate, and stream 0 on device npy:0 was used instead: expected "
            r"Guard.get_stream\(\) to return a torch.Stream, but got <class 'int'>",
        )
        # Raised once: what follows works.
        self.assertEqual(out["after"], "returned [2.0, 2.0]")
        # Asked for directly, the stream is still kept, then raised by the next call.
        self.assertIn("returned torch.Stream", out["stream"])

    def test_get_stream_of_another_device(self):
        out = _run(
            self,
            """
            class Guard(_C.DeviceGuard):
                def device_count(self):
                    return 2

                def get_stream(self, device):
                    return torch.Stream(stream_id=0, device_index=1, device_type=KIND)

            setup_privateuseone_for_python_backend(
                "npy", device_guard=Guard(), hook=npy_backend._Hooks()
            )
            npy_backend.setup()
            x = torch.ones(3, device="npy", requires_grad=True)
            attempt("backward", lambda: (x * 2).sum().backward())
            """,
        )
        self.assertRegex(
            out["backward"],
            r"^ValueError the npy device guard's get_stream\(npy:0\) failed .*: expected "
            r"Guard.get_stream\(\) to return a stream of npy:0, but got a stream of npy:1",
        )

    def test_exchange_stream_raising(self):
        out = _run(
            self,
            """
            class Guard(_C.DeviceGuard):
                def exchange_stream(self, stream):
                    raise KeyError("no such stream")

            setup_privateuseone_for_python_backend("npy", device_guard=Guard())
            stream = torch.Stream(device="npy")
            attempt("set_stream", lambda: torch.accelerator.set_stream(stream))
            attempt("next", lambda: torch.npy.current_device())
            attempt("then", lambda: torch.npy.current_device())
            """,
        )
        self.assertEqual(out["set_stream"], "returned None")
        self.assertRegex(
            out["next"],
            r"^RuntimeError the npy device guard's exchange_stream\(stream 0 on device npy:0\) "
            r"failed where no error can propagate, and stream 0 on device npy:0 was used "
            r"instead: Guard.exchange_stream\(\) raised KeyError: 'no such stream'",
        )
        self.assertEqual(out["then"], "returned 0")

    def test_set_device_raising_on_the_engine_thread(self):
        out = _run(
            self,
            """
            class Guard(_C.DeviceGuard):
                def set_device(self, index):
                    raise RuntimeError("cannot switch devices")

            setup_privateuseone_for_python_backend(
                "npy", device_guard=Guard(), hook=npy_backend._Hooks()
            )
            npy_backend.setup()
            x = torch.ones(3).to("npy").requires_grad_()
            # The root on the CPU: the engine starts npy's device thread, which sets its device.
            attempt("backward", lambda: (x * 2).sum().cpu().backward())
            attempt("set_device", lambda: torch.npy.set_device(0))
            attempt("accelerator", lambda: torch.accelerator.set_device_index(0))
            """,
        )
        self.assertRegex(
            out["backward"],
            r"RuntimeError the npy device guard's set_device\(0\) failed where no error can "
            r"propagate, and the current device was left as it was: Guard.set_device\(\) raised "
            r"RuntimeError: cannot switch devices",
        )
        # Called from Python, it raises at once.
        for name in ("set_device", "accelerator"):
            self.assertEqual(
                out[name],
                "RuntimeError Guard.set_device() raised RuntimeError: cannot switch devices",
            )


class TestEventAnswers(TestCase):
    def test_query_answers_must_be_bools(self):
        out = _run(
            self,
            """
            class Guard(_C.DeviceGuard):
                def create_event(self, device_index, flag):
                    return object()

                def record_event(self, event, stream):
                    pass

                def query_event(self, event):
                    return "yes"

                def query_stream(self, stream):
                    return None

            setup_privateuseone_for_python_backend("npy", device_guard=Guard())
            event = torch.Event(device="npy")
            event.record()
            attempt("event", event.query)
            attempt("stream", lambda: torch.Stream(device="npy").query())
            """,
        )
        self.assertEqual(
            out["event"],
            "TypeError expected Guard.query_event() to return a bool, but got <class 'str'>",
        )
        self.assertEqual(
            out["stream"],
            "TypeError expected Guard.query_stream() to return a bool, but got <class 'NoneType'>",
        )


class TestHookAnswers(TestCase):
    def test_wrong_answers(self):
        out = _run(
            self,
            """
            class Hooks(_C.PrivateUse1Hooks):
                def get_amp_supported_dtype(self):
                    return "float16"

                def mem_get_info(self, device_index):
                    return (1, 2, 3)

                def memory_stats(self, device_index):
                    return [("allocated_bytes.all.current", 1)]

                def is_available(self):
                    return 1

            setup_privateuseone_for_python_backend("npy", hook=Hooks())
            attempt("amp", lambda: torch.npy.get_amp_supported_dtype())
            attempt("autocast", lambda: torch.autocast("npy", dtype=torch.float16).__enter__())
            attempt("mem_get_info", lambda: torch.npy.mem_get_info())
            if hasattr(torch.accelerator, "get_memory_info"):
                attempt("accelerator_mem_get_info", lambda: torch.accelerator.get_memory_info(0))
            attempt("memory_stats", lambda: torch.npy.memory_stats())
            attempt("is_available", lambda: torch.npy.is_available())
            """,
        )
        self.assertEqual(
            out["amp"],
            "TypeError expected Hooks.get_amp_supported_dtype() to return a list of "
            "torch.dtype, but got 'float16'",
        )
        self.assertEqual(out["autocast"], out["amp"])
        pair = (
            "TypeError expected Hooks.mem_get_info() to return a (free, total) pair of "
            "non-negative ints, but got (1, 2, 3)"
        )
        self.assertEqual(out["mem_get_info"], pair)
        if hasattr(torch.accelerator, "get_memory_info"):
            self.assertEqual(out["accelerator_mem_get_info"], pair)
        self.assertEqual(
            out["is_available"],
            "TypeError expected Hooks.is_available() to return a bool, but got <class 'int'>",
        )
        self.assertEqual(
            out["memory_stats"],
            "TypeError expected Hooks.memory_stats() to return a dict of str to int, but got "
            "[('allocated_bytes.all.current', 1)]",
        )

    def test_second_setup_with_other_hooks(self):
        out = _run(
            self,
            """
            class Hooks(_C.PrivateUse1Hooks):
                pass

            class OtherHooks(_C.PrivateUse1Hooks):
                pass

            class Guard(_C.DeviceGuard):
                pass

            setup = setup_privateuseone_for_python_backend
            setup("npy", hook=Hooks())
            attempt("same", lambda: setup("npy", hook=Hooks()))
            attempt("other", lambda: setup("npy", hook=OtherHooks()))
            attempt("guard", lambda: setup("npy", device_guard=Guard()))
            """,
        )
        self.assertTrue(out["same"].startswith("returned"), out["same"])
        self.assertEqual(
            out["other"],
            "RuntimeError backend 'npy' is already set up with hooks Hooks, not OtherHooks: a "
            "backend's hooks cannot be replaced; pass OtherHooks (or a subclass of it) to the "
            "first setup",
        )
        self.assertEqual(
            out["guard"],
            "RuntimeError backend 'npy' is already set up with device guard "
            "_DefaultDeviceGuard, not Guard: a backend's device guard cannot be replaced; pass "
            "Guard (or a subclass of it) to the first setup",
        )

    def test_kernel_before_setup(self):
        out = _run(
            self,
            """
            attempt("impl", lambda: torch_acc.library.impl("neg", lambda x: x))
            """,
        )
        self.assertEqual(
            out["impl"],
            "RuntimeError cannot register a kernel for neg: set up a backend first "
            "(setup_privateuseone_for_python_backend)",
        )


if __name__ == "__main__":
    run_tests()
