"""Differences between the torch releases torch_acc supports (2.6 to 2.14), in one place."""

import torch

TORCH_VERSION = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])

#: torch >= 2.10 ships its own, smaller ``torch._C._acc``. torch_acc never uses it: the
#: standalone extension ``torch_acc._C`` carries the same names (and more).
HAS_UPSTREAM_ACC = hasattr(torch._C, "_acc")

#: Whether C++ asks PrivateUse1's hooks for availability (``isAvailable()``, from 2.7; see
#: ``csrc/acc/compat.h``). Before, only the Python device module answers ``is_available``.
HOOKS_HAVE_AVAILABILITY = TORCH_VERSION >= (2, 7)
