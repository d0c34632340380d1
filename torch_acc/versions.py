r"""What a backend that gives CPU's answers needs to know about the running torch release.

CPU's behaviour changes between the releases torch_acc supports (2.6 to 2.14): which error an
operator raises, which values a conversion accepts, which operators exist. A backend that
follows CPU reads these facts instead of comparing version numbers itself. They are defined,
with the evidence for each, in one place (``torch_acc/_compat.py``); this module is their
public face:

- :data:`TORCH_VERSION`: ``(major, minor)`` of the running torch;
- :data:`BOOL_SUBTRACTION_ERROR`: the exception type CPU raises for a subtraction with a bool
  tensor;
- :data:`FLOAT_TO_INT_TRUNCATES_TO_MAX`: whether a float scalar into an integer dtype may
  truncate to the dtype's maximum (``255.5`` into uint8);
- :data:`EMPTY_RESULTS_SKIP_DTYPE_CHECKS`: whether ``argmax``/``argmin``/``mv`` check dtypes
  only where their kernel runs (empty results and reduced dimensions of size 1 pass);
- :data:`CPU_COMPLEX_DIVISION_BY_POSITION`: whether CPU's complex division by zero or infinity
  gives non-finite parts that depend on the element's position in its loop;
- :data:`REMOVED_ATEN_OPS` and :func:`aten_op_removed`: ATen operators a release removed.

Example::

    >>> # xdoctest: +SKIP
    >>> from torch_acc import versions
    >>> if not versions.aten_op_removed("cholesky"):
    ...     register("aten::cholesky", my_cholesky)
"""

from torch_acc._compat import (
    aten_op_removed,
    BOOL_SUBTRACTION_ERROR,
    CPU_COMPLEX_DIVISION_BY_POSITION,
    EMPTY_RESULTS_SKIP_DTYPE_CHECKS,
    FLOAT_TO_INT_TRUNCATES_TO_MAX,
    REMOVED_ATEN_OPS,
    TORCH_VERSION,
)

__all__ = [
    "BOOL_SUBTRACTION_ERROR",
    "CPU_COMPLEX_DIVISION_BY_POSITION",
    "EMPTY_RESULTS_SKIP_DTYPE_CHECKS",
    "FLOAT_TO_INT_TRUNCATES_TO_MAX",
    "REMOVED_ATEN_OPS",
    "TORCH_VERSION",
    "aten_op_removed",
]
