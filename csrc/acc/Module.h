#pragma once

#include <torch/csrc/python_headers.h>

namespace torch::acc {

// Adds the submodule `_acc` to `module` (torch._C) and defines its bindings.
void initModule(PyObject* module);

// Defines the bindings of `_acc` on `module` itself; the standalone extension
// `torch_acc._C` is such a module.
void initBindings(PyObject* module);

} // namespace torch::acc
