"""Differences between the torch releases torch_acc supports (2.6 to 2.14), in one place."""

import torch

TORCH_VERSION = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])

#: torch >= 2.10 ships its own, smaller ``torch._C._acc``. The standalone extension never uses
#: it: ``torch_acc._C`` carries the same names (and more). In-tree, ``torch._C._acc`` is ours.
UPSTREAM_ACC = getattr(torch._C, "_acc", None)

#: Whether C++ asks PrivateUse1's hooks for availability (``isAvailable()``, from 2.7; see
#: ``csrc/acc/compat.h``). Before, only the Python device module answers ``is_available``.
HOOKS_HAVE_AVAILABILITY = TORCH_VERSION >= (2, 7)

#: Whether ``DataLoader(pin_memory=True)`` needs ``pin_memory_device=<backend>`` to pin for a
#: Python backend: 2.6 pins for CUDA only unless told the device; 2.13 pins for the current
#: accelerator and deprecates the argument. The releases between are not checked.
DATALOADER_NEEDS_PIN_MEMORY_DEVICE = TORCH_VERSION < (2, 13)

#: Whether ``torch.accelerator`` has memory functions (``memory_allocated``...), which read
#: the device allocator (``c10::DeviceAllocator``; see ``csrc/acc/compat.h``). Not in 2.6.
ACCELERATOR_MEMORY = hasattr(torch.accelerator, "memory_allocated")

#: Whether c10d holds the Python object of a ``Work`` that a Python process group returns
#: (``PyProcessGroup::PyWorkHolder``, in 2.13): without it (2.6), C++ that keeps only the work
#: (the functional collectives) waits on its C++ base once Python drops it. The releases
#: between are not checked.
C10D_HOLDS_PYTHON_WORKS = TORCH_VERSION >= (2, 7)

#: Whether dropping a ``ProcessGroup``'s Python object runs ``~ProcessGroup`` with the GIL
#: held (2.6: a plain ``intrusive_ptr`` holder; 2.13 and 2.14 release the GIL first). A gloo
#: backend's destructor then joins its workers while one of them may wait for the GIL to free
#: the Python objects of its last work's tensors: ``destroy_process_group()`` right after a
#: collective deadlocks, on CPU tensors too. ``torch_acc.distributed`` mends it there. The
#: releases between are not checked.
PROCESS_GROUP_FREED_WITH_GIL = TORCH_VERSION < (2, 13)

#: The error CPU raises for a subtraction with a bool tensor: ``NotImplementedError`` (a
#: ``RuntimeError``) on 2.14, ``RuntimeError`` on 2.13 and 2.6; the releases between are not
#: checked.
BOOL_SUBTRACTION_ERROR = NotImplementedError if TORCH_VERSION >= (2, 14) else RuntimeError

#: Whether c10's checked conversion of a float into an integer dtype takes values that
#: truncate to the dtype's maximum (``255.5`` into uint8 is 255 on 2.14; 2.13 and 2.6 refuse
#: it); the minimum stays exact on both. The releases between are not checked.
FLOAT_TO_INT_TRUNCATES_TO_MAX = TORCH_VERSION >= (2, 14)

#: Whether CPU checks the dtypes of ``argmax``/``argmin`` (complex, bool) and ``mv`` (mixed)
#: only where its kernel runs: 2.6 answers a reduced dimension of size 1 with zeros, a result
#: without elements with an empty tensor, and ``mv`` of empty operands with zeros in the
#: vector's dtype; 2.13 and 2.14 refuse them. The releases between are not checked.
EMPTY_RESULTS_SKIP_DTYPE_CHECKS = TORCH_VERSION < (2, 13)
#: Whether CPU's complex division by a zero or infinite divisor gives other non-finite parts
#: in a loop's vectorised body than c10::complex's formula (which the loop's tail, CUDA and the
#: npy backend use): 2.6's AVX2 kernel scales by an approximate reciprocal of the divisor's
#: larger part (``0j / infj`` is ``nanj`` there, ``-0j`` by the formula); 2.13 and 2.14 give
#: the formula's answer everywhere. The releases between are not checked.
CPU_COMPLEX_DIVISION_BY_POSITION = TORCH_VERSION < (2, 13)
#: aten operators that a supported release removed, with the first release without them. A
#: backend's kernel table may name them: its kernels for them are registered where they exist.
REMOVED_ATEN_OPS = {"cholesky": (2, 14)}


def aten_op_removed(name: str) -> bool:
    """Whether this torch has removed the aten operator of ``name`` (``"cholesky"``, or an
    overload such as ``"cholesky.out"``): see :data:`REMOVED_ATEN_OPS`."""
    since = REMOVED_ATEN_OPS.get(name.split(".")[0])
    return since is not None and TORCH_VERSION >= since


def current_accelerator_setter():
    """``torch._C._accelerator_setCurrentAccelerator`` where torch has it, else None.

    The patch series' ATen change adds it: there ``at::getAccelerator`` itself honours the
    choice, so every C++ caller sees it. No released wheel has it; there
    ``_patches.accelerator_choice`` makes the Python entry points honour the choice.
    Looked up on each call, so that a test can stand in for it.
    """
    return getattr(torch._C, "_accelerator_setCurrentAccelerator", None)


# The stream queries of c10's DeviceGuardImplInterface are noexcept before 2.7: an invalid
# answer there is kept and raised by the next guard call that can raise
# (TORCH_ACC_STREAM_QUERIES_NOEXCEPT in csrc/acc/compat.h).
STREAM_QUERIES_NOEXCEPT = TORCH_VERSION < (2, 7)

#: Whether FSDP2 (``fully_shard``) runs on a Python backend's device: from 2.13, whose FSDP
#: registers its operators (``torch.ops.fsdp``) for PrivateUse1 and keeps the version counters
#: of the all-gather outputs it writes into. 2.6's FSDP2 has neither (its backward fails the
#: autograd engine's version check of a parameter all-gathered again), and fails on the CPU
#: with gloo too (``torch.cpu.Stream`` has no ``record_event``). The releases between are not
#: checked.
FSDP2_ON_PYTHON_DEVICE = TORCH_VERSION >= (2, 13)


def privateuse_backend_slots() -> int:
    """How many device types the running torch has for backends defined outside it: 1 on
    every released wheel (PrivateUse1), 3 with the patch series, whose c10 patch adds
    PrivateUse2 and PrivateUse3 and whose ATen patch binds
    ``torch._C._privateuse_backend_slots``. Looked up on each call, so that a test can stand
    in for it."""
    slots = getattr(torch._C, "_privateuse_backend_slots", None)
    return 1 if slots is None else slots()
