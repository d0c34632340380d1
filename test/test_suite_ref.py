# Owner(s): ["module: PrivateUse1"]
"""The generic device suite of ``torch_acc.testing`` on ``ref``, the passthrough backend
(CPU's kernels on CPU payloads)."""

from torch.testing._internal.common_utils import run_tests

import torch_acc
from torch_acc.testing import instantiate_device_tests

torch_acc.use("ref")
instantiate_device_tests("ref", globals())

if __name__ == "__main__":
    run_tests()
