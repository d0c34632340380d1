// Entry point of the standalone extension torch_acc._C: the same bindings that
// torch._C._acc has in-tree, at the top level of this module.
#include <torch/csrc/acc/Module.h>
#include <torch/csrc/utils/pybind.h>

// NumPy's C API table, defined here: torch_python's own, which the core uses
// in-tree, is not exported. This extension fills its copy whenever torch's is
// (torch::utils::is_numpy_available()), so the core can ask the latter.
#define WITH_NUMPY_IMPORT_ARRAY
#include <torch/csrc/utils/numpy_stub.h>
#include <torch/csrc/utils/tensor_numpy.h>

PYBIND11_MODULE(_C, m) {
#ifdef USE_NUMPY
  if (torch::utils::is_numpy_available() && _import_array() < 0) {
    throw pybind11::error_already_set();
  }
#endif
  torch::acc::initBindings(m.ptr());
}
