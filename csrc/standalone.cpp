// Entry point of the standalone extension torch_acc._C: the same bindings that
// torch._C._acc has in-tree, at the top level of this module.
#include <torch/csrc/acc/Module.h>
#include <torch/csrc/utils/pybind.h>

PYBIND11_MODULE(_C, m) {
  torch::acc::initBindings(m.ptr());
}
