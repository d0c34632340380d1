r"""Tools for backend authors: test a torch_acc device against CPU.

:mod:`torch_acc.testing.fuzz` is a differential fuzzer: seeded random tensor programs run on
CPU and on a device, compared after every statement.
"""
