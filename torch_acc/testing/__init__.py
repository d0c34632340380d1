r"""Tools for backend authors: test a torch_acc device against CPU.

- :func:`instantiate_device_tests` (:mod:`torch_acc.testing.device_tests`): a generic test
  suite (device, views, autograd, serialization, random numbers, compile) instantiated for a
  device, every expected value CPU's;
- :func:`opcheck`: one operator's kernel against CPU on given samples, with the kernel
  contract enforced;
- :mod:`torch_acc.testing.opinfo`: PyTorch's OpInfo database run on a device and on CPU, a
  report per entry (``python -m torch_acc.testing.opinfo --device npy``);
- :mod:`torch_acc.testing.fuzz`: a differential fuzzer, seeded random tensor programs run on
  CPU and on a device, compared after every statement
  (``python -m torch_acc.testing.fuzz --device npy --programs 500``).
"""

from torch_acc.testing.opcheck import opcheck, OpCheckError

__all__ = ["OpCheckError", "instantiate_device_tests", "opcheck"]


def __getattr__(name: str):
    # The suite imports torch.testing._internal.common_utils, which is slow to import and on
    # some releases prints to stdout: loaded when asked for, not by the fuzzer's and the
    # OpInfo harness's workers (whose stdout is their protocol).
    if name == "instantiate_device_tests":
        from torch_acc.testing.device_tests import instantiate_device_tests

        return instantiate_device_tests
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
