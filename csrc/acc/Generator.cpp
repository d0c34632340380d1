#include <torch/csrc/acc/Generator.h>

#include <torch/csrc/autograd/python_variable.h>

namespace torch::acc {

namespace {

std::string qualname(py::handle obj) {
  return py::str(py::type::handle_of(obj).attr("__qualname__"))
      .cast<std::string>();
}

} // namespace

PythonGeneratorImpl::PythonGeneratorImpl(
    c10::DeviceIndex device_index,
    py::handle generator,
    const std::string& maker)
    : c10::GeneratorImpl(
          c10::Device(c10::DeviceType::PrivateUse1, device_index),
          c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      generator_(generator),
      name_(qualname(generator)) {
  for (const char* method : kMethods) {
    TORCH_CHECK_TYPE(
        py::hasattr(generator, method),
        "expected ",
        maker,
        "() to return a generator with the methods manual_seed, "
        "initial_seed, get_state and set_state, but got ",
        name_,
        ", which has no ",
        method);
  }
}

template <typename... Args>
py::object PythonGeneratorImpl::call(size_t method, Args&&... args) const {
  const GilForCall gil;
  try {
    return object().attr(kMethods[method])(std::forward<Args>(args)...);
  } catch (py::error_already_set& e) {
    TORCH_CHECK(false, name_, ".", kMethods[method], "() raised ", e.what());
  }
}

py::object PythonGeneratorImpl::object() const {
  return generator_.get();
}

void PythonGeneratorImpl::set_current_seed(uint64_t seed) {
  call(0, py::int_(seed));
}

uint64_t PythonGeneratorImpl::current_seed() const {
  const GilForCall gil;
  py::object seed = call(1);
  try {
    return seed.cast<uint64_t>();
  } catch (py::cast_error&) {
    TORCH_CHECK_TYPE(
        false,
        "expected ",
        name_,
        ".initial_seed() to return an int in [0, 2**64), but got ",
        py::str(py::type::handle_of(seed)).cast<std::string>());
  }
}

uint64_t PythonGeneratorImpl::seed() {
  const auto seed = c10::detail::getNonDeterministicRandom();
  set_current_seed(seed);
  return seed;
}

void PythonGeneratorImpl::set_offset(uint64_t offset) {
  TORCH_CHECK_VALUE(
      offset == 0,
      "the ",
      name_,
      " generator of ",
      device(),
      " has no offset (offsets belong to Philox generators): expected 0, but "
      "got ",
      offset);
}

uint64_t PythonGeneratorImpl::get_offset() const {
  return 0;
}

void PythonGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  at::detail::check_rng_state(new_state);
  // The caller owns `new_state`; the backend gets a copy it may keep.
  const at::Tensor state(
      c10::intrusive_ptr<c10::TensorImpl>::unsafe_reclaim_from_nonowning(
          const_cast<c10::TensorImpl*>(&new_state)));
  call(3, state.clone());
}

c10::intrusive_ptr<c10::TensorImpl> PythonGeneratorImpl::get_state() const {
  const GilForCall gil;
  py::object state = call(2);
  const bool ok = THPVariable_Check(state.ptr()) && [&] {
    const auto& t = THPVariable_Unpack(state.ptr());
    return t.device().is_cpu() && t.scalar_type() == c10::kByte &&
        t.layout() == c10::kStrided;
  }();
  TORCH_CHECK_TYPE(
      ok,
      "expected ",
      name_,
      ".get_state() to return a CPU torch.uint8 tensor, but got ",
      THPVariable_Check(state.ptr())
          ? py::str(state.attr("dtype")).cast<std::string>() + " tensor on " +
              py::str(state.attr("device")).cast<std::string>()
          : py::str(py::type::handle_of(state)).cast<std::string>());
  return THPVariable_Unpack(state.ptr()).clone().getIntrusivePtr();
}

PythonGeneratorImpl* PythonGeneratorImpl::clone_impl() const {
  const GilForCall gil;
  py::object copy = py::module_::import("copy").attr("deepcopy")(object());
  return new PythonGeneratorImpl(
      device().index(), copy, "copy.deepcopy(" + name_ + ")");
}

py::object generatorObject(const at::Generator& generator, const char* op) {
  auto* impl =
      dynamic_cast<PythonGeneratorImpl*>(generator.unsafeGetGeneratorImpl());
  TORCH_CHECK_VALUE(
      impl != nullptr,
      "expected a generator of ",
      c10::get_privateuse1_backend(),
      " for ",
      op,
      ", but got a generator of ",
      generator.device());
  return impl->object();
}

} // namespace torch::acc
