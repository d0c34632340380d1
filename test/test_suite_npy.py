# Owner(s): ["module: PrivateUse1"]
"""The generic device suite of ``torch_acc.testing`` on ``npy``, the NumPy reference backend."""

from torch.testing._internal.common_utils import run_tests

import torch_acc
from torch_acc.testing import instantiate_device_tests

torch_acc.use("npy")
instantiate_device_tests("npy", globals())

if __name__ == "__main__":
    run_tests()
