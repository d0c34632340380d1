#pragma once

#include <torch/csrc/acc/PythonMethods.h>

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>
#include <torch/csrc/acc/Shutdown.h>

namespace torch::acc {

// The random number generator of a Python backend, as a real at::Generator.
//
// Its state lives in a Python object that the backend's hooks make
// (`get_new_generator(device_index)`), with the methods in `kMethods`:
// manual_seed(seed), initial_seed() -> int, get_state() -> CPU torch.uint8
// tensor, set_state(state). C++ takes the GIL for every call. Kernels get the
// Python object itself (see Bridge.cpp), so drawing numbers needs no method
// here; the Python object's own calls are serialized by the GIL.
class PythonGeneratorImpl final : public c10::GeneratorImpl {
 public:
  static constexpr std::array<const char*, 4> kMethods = {
      "manual_seed",
      "initial_seed",
      "get_state",
      "set_state",
  };

  // `generator` must have the methods in `kMethods`; `maker` names what made
  // it, for the error when it has not.
  PythonGeneratorImpl(
      c10::DeviceIndex device_index,
      py::handle generator,
      const std::string& maker);

  void set_current_seed(uint64_t seed) override;
  uint64_t current_seed() const override;
  // A non-deterministic seed, set as by manual_seed(), as CPU and CUDA do.
  uint64_t seed() override;
  // Philox offsets are a CUDA notion: a Python generator's offset is always
  // 0 (torch.Generator's pickling reads and restores it).
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;

  // The Python object holding the state. Must hold the GIL.
  py::object object() const;

 private:
  // A deep copy of the Python object (copy.deepcopy).
  PythonGeneratorImpl* clone_impl() const override;

  template <typename... Args>
  py::object call(size_t method, Args&&... args) const;

  OwnedPyObject generator_;
  std::string name_;
};

// The Python object of a PrivateUse1 generator, for a kernel of `op`. A
// generator of another device or kind is a clear error. Must hold the GIL.
py::object generatorObject(const at::Generator& generator, const char* op);

} // namespace torch::acc
