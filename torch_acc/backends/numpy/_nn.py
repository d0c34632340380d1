"""Neural-network kernels of the ``npy`` backend: activations and their gradients."""

import numpy as np


def _threshold_backward(grad, self, threshold):
    return np.where(self <= threshold, np.zeros((), grad.dtype), grad)


KERNELS = {
    "relu": lambda self: np.maximum(self, np.zeros((), self.dtype)),
    "threshold_backward": _threshold_backward,
}
