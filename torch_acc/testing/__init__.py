r"""Tools for backend authors: test a torch_acc device against CPU.

:mod:`torch_acc.testing.fuzz` is a differential fuzzer: seeded random tensor programs run on
CPU and on a device, compared after every statement. :func:`opcheck` checks one operator's
kernel against CPU on given samples, with the kernel contract enforced.
"""

from torch_acc.testing.opcheck import opcheck, OpCheckError

__all__ = ["OpCheckError", "opcheck"]
