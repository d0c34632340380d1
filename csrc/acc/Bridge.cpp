#include <torch/csrc/acc/Bridge.h>

#include <torch/csrc/acc/DeviceGuard.h>
#include <torch/csrc/acc/Generator.h>
#include <torch/csrc/acc/Hooks.h>
#include <torch/csrc/acc/Registration.h>
#include <torch/csrc/acc/Shutdown.h>
#include <torch/csrc/acc/compat.h>

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/isclose.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/irange.h>
#include <c10/util/strides.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <unordered_map>

namespace torch::acc {

namespace {

constexpr auto kPrivateUse1 = c10::DeviceType::PrivateUse1;

// The backend's fallback, set once; a strong reference kept until exit (never
// released, so nothing touches Python at shutdown).
PyObject* fallback_fn = nullptr;

c10::DeviceIndex currentDevice() {
  return c10::impl::getDeviceGuardImpl(kPrivateUse1)->getDevice().index();
}

[[noreturn]] void mixedDevices(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(
      false,
      "Expected all tensors to be on the same device, but found at least two "
      "devices, ",
      a.device(),
      " and ",
      b.device(),
      "!");
}

// How a non-tensor argument becomes a Python value, decided once per
// argument from the schema: enums travel as ints in IValues, but torch's
// Python APIs give them as their Python objects.
enum class ValueKind : uint8_t {
  kGeneric,
  kScalarType,
  kLayout,
  kMemoryFormat,
  // Resolved once the device is known (Call::generators).
  kGenerator,
};

bool typeIs(const c10::Argument& arg, c10::TypeKind kind) {
  const auto& t = arg.real_type();
  if (t->kind() == kind) {
    return true;
  }
  const auto* opt = t->castRaw<c10::OptionalType>();
  return opt != nullptr && opt->getElementType()->kind() == kind;
}

ValueKind valueKind(const c10::Argument& arg) {
  if (typeIs(arg, c10::TypeKind::ScalarTypeType)) {
    return ValueKind::kScalarType;
  }
  if (typeIs(arg, c10::TypeKind::LayoutType)) {
    return ValueKind::kLayout;
  }
  if (typeIs(arg, c10::TypeKind::MemoryFormatType)) {
    return ValueKind::kMemoryFormat;
  }
  if (typeIs(arg, c10::TypeKind::GeneratorType)) {
    return ValueKind::kGenerator;
  }
  return ValueKind::kGeneric;
}

// The Python value of a non-tensor argument, as torch's Python APIs give it.
py::object toPython(ValueKind kind, c10::IValue value) {
  if (value.isNone()) {
    return py::none();
  }
  switch (kind) {
    case ValueKind::kScalarType:
      return py::cast(static_cast<c10::ScalarType>(value.toInt()));
    case ValueKind::kLayout:
      return py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(
          torch::getTHPLayout(static_cast<c10::Layout>(value.toInt()))));
    case ValueKind::kMemoryFormat:
      return py::cast(static_cast<c10::MemoryFormat>(value.toInt()));
    case ValueKind::kGeneric:
    case ValueKind::kGenerator:
      break;
  }
  // Numbers directly: most scalar arguments are (alpha=1, dims, flags), and
  // toPyObject's general conversion costs more than the conversion itself.
  if (value.isInt()) {
    return py::int_(value.toInt());
  }
  if (value.isBool()) {
    return py::bool_(value.toBool());
  }
  if (value.isDouble()) {
    return py::float_(value.toDouble());
  }
  return torch::jit::toPyObject(std::move(value));
}

// One call of a Python kernel: arguments in, results out.
class Call {
 public:
  // The payload (or Python scalar) for a tensor argument.
  py::object tensorArg(const at::Tensor& t) {
    if (!t.defined()) {
      return py::none();
    }
    if (t.is_privateuseone()) {
      if (first_ == nullptr) {
        first_ = &t;
      } else if (t.device() != first_->device()) {
        mixedDevices(*first_, t);
      }
      if (C10_UNLIKELY(t.is_conj() || t.is_neg())) {
        // A payload holds plain values: the kernel gets them with the bits
        // applied (for the operators PyTorch's conjugate and negative
        // fallbacks let through, which CPU kernels read the bits of).
        return materialize(resolveBits(t));
      }
      return materialize(t);
    }
    if (t.dim() == 0 && t.device().is_cpu()) {
      // A CPU scalar, as CUDA accepts it. A wrapped Python number stays a
      // Python number; a 0-dim tensor becomes a payload on the device, so
      // that its dtype takes part in type promotion as on CPU
      // (int32 tensor + float64 0-dim tensor is float64).
      if (t.unsafeGetTensorImpl()->is_wrapped_number()) {
        return torch::jit::toPyObject(t.item());
      }
      const auto index =
          first_ != nullptr ? first_->device().index() : currentDevice();
      return materialize(t.to(c10::Device(kPrivateUse1, index)));
    }
    cpu_ = t;
    return py::none();
  }

  // `optional_tensors`: whether the argument is a Tensor?[] (whose IValue is
  // a generic list).
  py::object arg(
      const c10::IValue& value,
      ValueKind kind,
      bool optional_tensors) {
    if (value.isTensor()) {
      return tensorArg(value.toTensor());
    }
    if (value.isTensorList() || (optional_tensors && value.isList())) {
      py::list out;
      for (const c10::IValue& item : value.toListRef()) {
        if (!item.isTensor()) {
          out.append(py::none());
        } else if (
            optional_tensors && item.toTensor().defined() &&
            item.toTensor().device().is_cpu()) {
          // Indices (Tensor?[], as index and index_put take them) may be on
          // the CPU, as CUDA accepts them: they are moved to the device.
          out.append(indexArg(item.toTensor()));
        } else {
          out.append(tensorArg(item.toTensor()));
        }
      }
      return std::move(out);
    }
    noteDevice(value);
    return toPython(kind, value);
  }

  // What arg() records of a value that holds no tensor: a `device` argument
  // (the results' device where no tensor says it).
  void noteDevice(const c10::IValue& value) {
    if (value.isDevice()) {
      device_ = value.toDevice();
    }
  }

  py::object indexArg(const at::Tensor& t) {
    const auto index =
        first_ != nullptr ? first_->device().index() : currentDevice();
    return materialize(t.to(c10::Device(kPrivateUse1, index)));
  }

  // The device of the results: that of the payload tensors, else the
  // `device` argument, else the current one.
  c10::DeviceIndex deviceIndex() {
    if (cpu_.defined() && first_ != nullptr) {
      mixedDevices(*first_, cpu_);
    }
    TORCH_CHECK(
        !cpu_.defined(),
        "Expected all tensors to be on the same device, but got a tensor on ",
        cpu_.device(),
        " for an operator running on ",
        c10::get_privateuse1_backend());
    if (first_ != nullptr) {
      return first_->device().index();
    }
    if (device_.has_value() && device_->type() == kPrivateUse1 &&
        device_->has_index()) {
      return checkDeviceIndex(device_->index());
    }
    return currentDevice();
  }

  // Generator arguments become the Python object holding the generator's
  // state; none given is the default generator of the device, as native
  // kernels take it. `args[i]` is a placeholder until the device is known.
  void generator(size_t i, const c10::IValue& value) {
    generators_.emplace_back(
        i,
        value.isNone() ? std::nullopt
                       : std::make_optional(value.toGenerator()));
  }

  void generators(
      c10::SmallVector<py::object, 8>& args,
      c10::DeviceIndex index,
      const char* op) {
    for (const auto& [i, generator] : generators_) {
      args[i] = generatorObject(
          generator ? *generator
                    : at::globalContext().defaultGenerator(
                          c10::Device(kPrivateUse1, index)),
          op);
    }
  }

 private:
  std::vector<std::pair<size_t, std::optional<at::Generator>>> generators_;
  // The first payload tensor argument; arguments are IValues on the stack,
  // which outlive the call, so no reference count is taken.
  const at::Tensor* first_ = nullptr;
  at::Tensor cpu_;
  std::optional<c10::Device> device_;
};

// Whether kernel results are compared with the operator's meta function
// (setCheckKernels).
std::atomic<bool> check_kernels{false};

// The name of a Python function in errors: its qualified name.
std::string functionName(PyObject* fn) {
  const auto name = py::getattr(fn, "__qualname__", py::none());
  return name.is_none() ? py::repr(fn).cast<std::string>()
                        : name.cast<std::string>();
}

// The name of a Python function in the profiler's traces: its module and
// qualified name.
std::string qualifiedFunctionName(PyObject* fn) {
  const auto module = py::getattr(fn, "__module__", py::none());
  const auto name = functionName(fn);
  return module.is_none() ? name
                          : py::str(module).cast<std::string>() + "." + name;
}

// The name of an object's type in errors: numpy.ndarray, int.
std::string typeName(py::handle obj) {
  const auto type = py::type::handle_of(obj);
  const auto module = py::str(type.attr("__module__")).cast<std::string>();
  const auto name = py::str(type.attr("__qualname__")).cast<std::string>();
  return module == "builtins" ? name : module + "." + name;
}

// `n` CPU values 1, 2, ... 7, 1, 2... of `dtype`: small, non-zero (no division
// by zero) and different from their neighbours.
at::Tensor distinctValues(int64_t n, c10::ScalarType dtype) {
  return at::arange(n, at::kLong).remainder_(7).add_(1).to(dtype);
}

// Runs `op` boxed below `key` on a stack of stand-ins (or of any arguments
// the stack holds the only references to). A boxed call of an
// unboxed kernel that returns references (the out= tensors of an overload with
// several returns, such as linalg_lstsq.out) drops its arguments from the stack
// before it pushes the references on torch 2.6: where the stack holds the only
// reference to an out= stand-in, that is a use after free. The arguments are
// kept alive across the call.
void redispatchOnStandIns(
    const c10::OperatorHandle& op,
    c10::DispatchKey key,
    torch::jit::Stack* stack) {
  const torch::jit::Stack arguments(*stack);
  op.redispatchBoxed(c10::DispatchKeySet(key), stack);
}

// Runs CPU's kernel of `op` on stand-ins (what it decides, not what it
// computes), without its warnings: the meta function has given them once.
void runOnCpu(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  struct Discard final : c10::WarningHandler {
    void process(const c10::Warning& /*warning*/) override {}
  };
  Discard discard;
  const c10::WarningUtils::WarningHandlerGuard guard(&discard);
  redispatchOnStandIns(op, c10::DispatchKey::CPU, stack);
}

// Tensors on `device` (meta, or the CPU filled with `fill`) with the metadata
// of the arguments: what the operator's meta function, or CPU's kernel, is
// given in place of tensors on the device. A tensor given for several
// arguments (an out= tensor that is also an input) has one stand-in: CPU's
// rules for an output that is also read depend on it.
class StandIns {
 public:
  // `fill` for values that differ from one element to the next.
  static constexpr int kDistinct = -1;

  StandIns(c10::DeviceType device, int fill) : device_(device), fill_(fill) {}

  at::Tensor operator()(const at::Tensor& t) {
    // CPU scalars stay: operators take them beside tensors of any device.
    if (!t.defined() || t.device().type() == device_ ||
        (t.dim() == 0 && t.is_cpu())) {
      return t;
    }
    for (const auto& [impl, standIn] : seen_) {
      if (impl == t.unsafeGetTensorImpl()) {
        return standIn;
      }
    }
    auto out = at::empty_strided(
        t.sizes(), t.strides(), t.options().device(c10::Device(device_)));
    if (device_ != c10::kMeta && fill_ == kDistinct) {
      out = distinctValues(tensorExtent(out), t.scalar_type())
                .as_strided(t.sizes(), t.strides(), 0);
    } else if (device_ != c10::kMeta) {
      out.fill_(fill_);
    }
    seen_.emplace_back(t.unsafeGetTensorImpl(), out);
    return out;
  }

  c10::IValue operator()(const c10::IValue& value) {
    if (value.isTensor()) {
      return (*this)(value.toTensor());
    }
    if (value.isTensorList()) {
      c10::List<at::Tensor> out;
      for (const auto& t : value.toTensorVector()) {
        out.push_back((*this)(t));
      }
      return out;
    }
    if (value.isList()) {
      const auto list = value.toList();
      if (list.elementType()->isSubtypeOf(*c10::OptionalType::ofTensor())) {
        c10::List<std::optional<at::Tensor>> out;
        for (const size_t i : c10::irange(list.size())) {
          const c10::IValue item = list.get(i);
          out.push_back(
              item.isTensor()
                  ? std::optional<at::Tensor>((*this)(item.toTensor()))
                  : std::nullopt);
        }
        return out;
      }
    }
    return value;
  }

 private:
  c10::DeviceType device_;
  int fill_;
  c10::SmallVector<std::pair<const c10::TensorImpl*, at::Tensor>, 4> seen_;
};

torch::jit::Stack standIns(
    c10::ArrayRef<c10::IValue> inputs,
    c10::DeviceType device,
    int fill = 0) {
  StandIns make(device, fill);
  torch::jit::Stack stack;
  stack.reserve(inputs.size());
  for (const auto& value : inputs) {
    stack.push_back(make(value));
  }
  return stack;
}

// Whether the operator, run by CPU's kernel on stand-ins of `inputs` (zeros,
// then ones), raises: an error for zeros only depends on the values (an
// integer division by zero), not on what the arguments are.
bool cpuRefuses(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs) {
  auto zeros = standIns(inputs, c10::kCPU, 0);
  try {
    runOnCpu(op, &zeros);
    return false;
  } catch (const c10::NotImplementedError&) {
    return false; // No CPU kernel to ask.
  } catch (const std::exception&) {
  }
  auto ones = standIns(inputs, c10::kCPU, 1);
  try {
    runOnCpu(op, &ones);
    return false;
  } catch (const std::exception&) {
    return true;
  }
}

// Whether an out= argument has another dtype than the first tensor argument:
// where CPU's dtype rules for out= (exact for some operators, a safe cast for
// others) decide.
bool outDtypeDiffers(
    const c10::FunctionSchema& schema,
    c10::ArrayRef<c10::IValue> inputs) {
  std::optional<c10::ScalarType> first;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].isTensor() || !inputs[i].toTensor().defined()) {
      continue;
    }
    const auto dtype = inputs[i].toTensor().scalar_type();
    if (!first) {
      first = dtype;
    } else if (schema.arguments()[i].is_out() && dtype != *first) {
      return true;
    }
  }
  return false;
}

// What decides the answer of an operator's meta function for `inputs`, as
// text: each tensor's dtype, layout and device (a CPU scalar's value too: its
// stand-in is itself, which a meta function may read), which arguments are
// one tensor, and every other argument's value. nullopt where an argument is
// of a kind not described here.
std::optional<std::string> metaKey(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs) {
  std::ostringstream key;
  key << op.operator_name();
  c10::SmallVector<const c10::TensorImpl*, 8> seen;
  const auto tensor = [&](const at::Tensor& t) {
    if (!t.defined()) {
      key << "|u";
      return;
    }
    const auto* impl = t.unsafeGetTensorImpl();
    const auto same = std::find(seen.begin(), seen.end(), impl);
    if (same != seen.end()) {
      key << "|=" << (same - seen.begin());
      return;
    }
    seen.push_back(impl);
    key << "|t" << static_cast<int>(t.scalar_type()) << t.device() << t.sizes()
        << t.strides() << t.storage_offset() << t.is_conj() << t.is_neg()
        << t.unsafeGetTensorImpl()->is_wrapped_number();
    if (t.dim() == 0 && t.is_cpu()) {
      key << '=' << t.item();
    }
  };
  for (const auto& value : inputs) {
    if (value.isTensor()) {
      tensor(value.toTensor());
    } else if (value.isTensorList()) {
      key << "|[";
      for (const auto& t : value.toTensorVector()) {
        tensor(t);
      }
      key << ']';
    } else if (
        value.isNone() || value.isBool() || value.isInt() || value.isDouble() ||
        value.isString() || value.isIntList() || value.isDoubleList() ||
        value.isBoolList() || value.isDevice()) {
      key << '|' << value.tagKind() << ':' << value;
    } else {
      return std::nullopt; // Scalars of other kinds, generators, objects...
    }
  }
  return key.str();
}

// The meta functions' answers (output stand-ins) by metaKey, for runMeta: a
// meta function written in Python costs far more than a kernel (mul.out's,
// which DDP's reducer calls for each gradient, about 0.4 ms). Answers are
// the same for the same key, so each is computed once. Not kept: errors, and
// answers that resize an out= tensor (the meta function runs again, and
// raises or warns as CPU does each time). Read and written with the GIL held;
// emptied when full.
std::unordered_map<std::string, torch::jit::Stack>& metaAnswers() {
  static auto* answers =
      new std::unordered_map<std::string, torch::jit::Stack>();
  return *answers;
}
constexpr size_t kMetaAnswers = 1024;

// Whether each out= argument among `inputs` already has the size of the meta
// function's result for it (the results are the out= arguments, in order).
bool resizesNoOutput(
    const c10::FunctionSchema& schema,
    c10::ArrayRef<c10::IValue> inputs,
    const torch::jit::Stack& meta) {
  size_t j = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!schema.arguments()[i].is_out()) {
      continue;
    }
    if (j >= meta.size() || !inputs[i].isTensor() || !meta[j].isTensor() ||
        !inputs[i].toTensor().sizes().equals(meta[j].toTensor().sizes())) {
      return false;
    }
    ++j;
  }
  return true;
}

// CPU's argument checks, before a kernel writes anything, for out= overloads
// and for writes into a tensor some of whose elements share memory: the
// operator's meta function, run on meta stand-ins of `inputs`. PyTorch's
// meta functions written in Python are not all CPU's rules, stricter or
// laxer: where the meta function refuses, and where an out= tensor's dtype
// makes the rules matter, CPU's kernel run on stand-ins decides. Returns the
// meta function's results, or nullopt where there are none to compare with.
std::optional<torch::jit::Stack> runMeta(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs) {
  const auto key = metaKey(op, inputs);
  if (key) {
    const auto found = metaAnswers().find(*key);
    if (found != metaAnswers().end()) {
      return found->second;
    }
  }
  auto stack = standIns(inputs, c10::kMeta);
  std::exception_ptr refused;
  bool compared = true;
  try {
    redispatchOnStandIns(op, c10::DispatchKey::Meta, &stack);
  } catch (const c10::NotImplementedError&) {
    compared = false;
  } catch (const std::exception&) {
    refused = std::current_exception();
  }
  if (!refused && !outDtypeDiffers(op.schema(), inputs)) {
    if (!compared) {
      return std::nullopt;
    }
    if (key && resizesNoOutput(op.schema(), inputs, stack)) {
      if (metaAnswers().size() >= kMetaAnswers) {
        metaAnswers().clear();
      }
      metaAnswers().emplace(*key, stack);
    }
    return stack;
  }
  if (cpuRefuses(op, inputs)) {
    if (refused) {
      std::rethrow_exception(refused);
    }
    auto cpu = standIns(inputs, c10::kCPU, 0);
    runOnCpu(op, &cpu);
  }
  return refused || !compared ? std::nullopt
                              : std::make_optional(std::move(stack));
}

// CPU's structured kernels resize their out= tensors (in the meta function)
// before the kernel runs, so an error the kernel then raises leaves them
// resized: the same with the meta function's results, before a payload
// kernel runs. out= tensors are the returns, in order. A resized tensor is
// contiguous, except where CPU's kernel lays it out as its inputs (a
// TensorIterator output follows the inputs' strides; meta functions written
// in Python do not): with an input that is not contiguous, CPU's kernel on
// stand-ins decides. Returns the arguments resized.
c10::SmallVector<size_t, 1> resizeOutputs(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs,
    const torch::jit::Stack& meta) {
  const auto& args = op.schema().arguments();
  c10::SmallVector<std::pair<size_t, c10::IntArrayRef>, 1> resizes;
  size_t j = 0;
  for (size_t i = 0; i < inputs.size() && j < meta.size(); ++i) {
    if (!args[i].is_out()) {
      continue;
    }
    const auto& result = meta[j++];
    if (inputs[i].isTensor() && result.isTensor() &&
        inputs[i].toTensor().defined() &&
        inputs[i].toTensor().sizes() != result.toTensor().sizes()) {
      resizes.emplace_back(i, result.toTensor().sizes());
    }
  }
  const auto laid_out = [](const c10::IValue& value) {
    return value.isTensor() && value.toTensor().defined() &&
        value.toTensor().numel() > 1 && !value.toTensor().is_contiguous();
  };
  // An out= tensor that is also an input: CPU's TensorIterator refuses to
  // resize it, which meta functions written in Python do not check.
  const auto read_too = [&](size_t i) {
    const auto* impl = inputs[i].toTensor().unsafeGetTensorImpl();
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (k != i && inputs[k].isTensor() &&
          inputs[k].toTensor().unsafeGetTensorImpl() == impl) {
        return true;
      }
    }
    return false;
  };
  // An out= tensor some of whose elements share memory (an expanded one): CPU's
  // overlap check, where it has one, sees it before the resize that would
  // make it dense.
  const auto overlapping = [&](size_t i) {
    return at::has_internal_overlap(inputs[i].toTensor()) ==
        at::MemOverlap::Yes;
  };
  const bool must_ask =
      std::any_of(resizes.begin(), resizes.end(), [&](const auto& r) {
        return read_too(r.first) || overlapping(r.first);
      });
  // CPU's out= stand-ins, as CPU's kernel resized them; none where it raised
  // (it raises too, after resizing: contiguous will do), unless CPU raises
  // for a resized tensor that is read too or shares elements.
  c10::SmallVector<at::Tensor, 1> cpu_outs;
  if (must_ask ||
      (!resizes.empty() &&
       std::any_of(inputs.begin(), inputs.end(), laid_out))) {
    for (const int fill : {0, 1}) {
      auto cpu = standIns(inputs, c10::kCPU, fill);
      cpu_outs.clear();
      for (const auto& [i, sizes] : resizes) {
        cpu_outs.push_back(cpu[i].toTensor());
      }
      try {
        runOnCpu(op, &cpu);
        break;
      } catch (const std::exception&) {
        cpu_outs.clear();
        if (fill == 1 && must_ask) {
          throw;
        }
      }
    }
  }
  c10::SmallVector<size_t, 1> resized;
  for (size_t r = 0; r < resizes.size(); ++r) {
    const auto& [i, sizes] = resizes[r];
    auto out = inputs[i].toTensor();
    out.resize_(sizes);
    if (r < cpu_outs.size() && cpu_outs[r].sizes().equals(sizes) &&
        !cpu_outs[r].strides().equals(out.strides()) &&
        cpu_outs[r].is_non_overlapping_and_dense()) {
      out.as_strided_(sizes, cpu_outs[r].strides(), out.storage_offset());
    }
    resized.push_back(i);
  }
  return resized;
}

// What CPU does where the written tensor (argument `i`) and the input `k`
// share some elements.
enum class Overlap : uint8_t {
  // CPU computes as if the input were read before anything is written (mm):
  // a payload kernel, which computes from the inputs as they are, agrees.
  kAllowed,
  // CPU refuses (TensorIterator's operators).
  kRefused,
  // CPU computes, but its result depends on the order it writes (a
  // reduction that clears its output first reads the cleared elements).
  kOrderDependent,
};

// What cpuOverlap's answer depends on: the operator, which arguments share
// elements, every argument's dtype and layout (the shared two's relative
// offset too) and the other arguments' values. The stand-ins' values are the
// bridge's own, so the same question gets the same answer.
std::string overlapQuestion(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs,
    size_t i,
    size_t k) {
  std::ostringstream key;
  key.precision(std::numeric_limits<double>::max_digits10);
  key << op.schema().name() << '.' << op.schema().overload_name() << '/' << i
      << '/' << k;
  const auto base = inputs[i].toTensor().storage_offset();
  const auto layout = [&](const at::Tensor& t) {
    if (!t.defined()) {
      key << "|-";
    } else if (t.dim() == 0 && t.is_cpu()) {
      key << '|' << t.scalar_type() << '=' << t.item();
    } else {
      key << '|' << t.scalar_type() << t.sizes() << t.strides();
    }
  };
  for (size_t j = 0; j < inputs.size(); ++j) {
    const auto& value = inputs[j];
    if (value.isTensor()) {
      layout(value.toTensor());
      if (j == i || j == k) {
        key << '@' << value.toTensor().storage_offset() - base;
      }
    } else if (value.isTensorList()) {
      for (const auto& t : value.toTensorVector()) {
        layout(t);
      }
    } else if (
        value.isList() &&
        value.toList().elementType()->isSubtypeOf(
            *c10::OptionalType::ofTensor())) {
      const auto list = value.toList();
      for (const size_t i : c10::irange(list.size())) {
        const c10::IValue item = list.get(i);
        layout(item.isTensor() ? item.toTensor() : at::Tensor());
      }
    } else {
      key << '|' << value;
    }
  }
  return key.str();
}

// Asks CPU's kernel, on stand-ins with the same distinct values: once with
// `out` and `in` on one buffer, laid out as on their payload, and once on
// separate buffers. Refused where CPU cannot be asked (no CPU kernel, or a
// different dtype, so that one buffer cannot stand for both).
Overlap askCpuOverlap(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs,
    size_t i,
    size_t k) {
  const at::Tensor& out = inputs[i].toTensor();
  const at::Tensor& in = inputs[k].toTensor();
  if (in.scalar_type() != out.scalar_type()) {
    return Overlap::kRefused;
  }
  const auto values = distinctValues(
      std::max(tensorExtent(out), tensorExtent(in)), out.scalar_type());
  // The written elements after CPU's kernel ran, or nullopt where it raised,
  // with the other tensor arguments filled with `fill`.
  const auto run = [&](bool shared, int fill) -> std::optional<at::Tensor> {
    auto stack = standIns(inputs, c10::kCPU, fill);
    const auto written = values.clone();
    const auto read = shared ? written : values.clone();
    const auto result =
        written.as_strided(out.sizes(), out.strides(), out.storage_offset());
    const auto source =
        read.as_strided(in.sizes(), in.strides(), in.storage_offset());
    // Every argument that is `out` or `in` (a tensor given twice): the
    // written one is `out`, the others read `in` (`mm(a, a, out=a)`).
    for (size_t j = 0; j < inputs.size(); ++j) {
      if (!inputs[j].isTensor()) {
        continue;
      }
      const auto* impl = inputs[j].toTensor().unsafeGetTensorImpl();
      if (j == i) {
        stack[j] = result;
      } else if (j == k || impl == in.unsafeGetTensorImpl()) {
        stack[j] = source;
      } else if (impl == out.unsafeGetTensorImpl()) {
        stack[j] = result;
      }
    }
    try {
      runOnCpu(op, &stack);
    } catch (const std::exception&) {
      return std::nullopt;
    }
    return result;
  };
  const auto same = [](const at::Tensor& a, const at::Tensor& b) {
    return a.sizes() == b.sizes() &&
        (a.is_floating_point() || a.is_complex()
             ? at::isclose(a, b, 0, 0, /*equal_nan=*/true).all().item<bool>()
             : a.equal(b));
  };
  // The other arguments as ones first, zeros where CPU refuses ones (an index
  // into a dimension of size 1), then, where CPU takes them, as distinct
  // values: a product with ones would hide an element read after it was
  // written. Where CPU raises on separate buffers the values made it raise, not
  // the sharing: the next fill is tried. Where it raises on one buffer only,
  // that is CPU's overlap error.
  bool asked = false;
  for (const int fill : {1, 0, StandIns::kDistinct}) {
    if (fill == 0 && asked) {
      continue;
    }
    const auto apart = run(false, fill);
    if (!apart) {
      continue;
    }
    const auto together = run(true, fill);
    if (!together) {
      return Overlap::kRefused;
    }
    if (!same(*apart, *together)) {
      return Overlap::kOrderDependent;
    }
    asked = true;
  }
  return asked ? Overlap::kAllowed : Overlap::kRefused;
}

// askCpuOverlap, remembered: an in-place or out= call on its own input
// (`x.neg_()`, `torch.add(x, y, out=x)`) asks once per operator and layout, not
// at every call.
Overlap cpuOverlap(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs,
    size_t i,
    size_t k) {
  static std::mutex mutex;
  static std::unordered_map<std::string, Overlap> answers;
  auto question = overlapQuestion(op, inputs, i, k);
  {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto found = answers.find(question);
    if (found != answers.end()) {
      return found->second;
    }
  }
  const auto answer = askCpuOverlap(op, inputs, i, k);
  const std::lock_guard<std::mutex> lock(mutex);
  if (answers.size() >= 4096) {
    answers.clear();
  }
  answers.emplace(std::move(question), answer);
  return answer;
}

// CPU's rule for a written tensor (argument `i`) and the inputs on the same
// payload. CPU's overlap check (at::get_overlap_status) compares dense layouts
// only: the same elements in the same layout are fine, some of the same
// elements are an error. Where it lets the kernel run on shared elements (the
// same layout, or layouts it cannot compare), CPU computes in the order it
// writes, which a payload kernel, computing from the inputs as they were, may
// not match: CPU's kernel on stand-ins decides (see Overlap), and an
// order-dependent answer is refused. `resized`: the written tensor was just
// resized, after CPU's check (the layout it is written in, not the one CPU's
// check saw), so only the order matters.
void checkOverlap(
    const c10::OperatorHandle& op,
    c10::ArrayRef<c10::IValue> inputs,
    size_t i,
    bool resized = false) {
  const at::Tensor& out = inputs[i].toTensor();
  auto* written = maybePayloadImpl(out);
  // A written tensor some of whose elements share memory gets CPU's error for
  // that (its meta function, or copy_into), which CPU raises first.
  if (written == nullptr || out.numel() == 0 ||
      at::has_internal_overlap(out) == at::MemOverlap::Yes) {
    return;
  }
  const auto& schema = op.schema();
  const auto& args = schema.arguments();
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto* alias = args[k].alias_info();
    if (k == i || (alias != nullptr && alias->isWrite()) ||
        !inputs[k].isTensor()) {
      continue;
    }
    const at::Tensor& in = inputs[k].toTensor();
    auto* read = maybePayloadImpl(in);
    if (read == nullptr || read->slot() != written->slot() || in.numel() == 0) {
      continue;
    }
    const auto a = out.storage_offset(), a_end = tensorExtent(out);
    const auto b = in.storage_offset(), b_end = tensorExtent(in);
    if (!(a < b_end && b < a_end)) {
      continue;
    }
    const bool dense =
        out.is_non_overlapping_and_dense() && in.is_non_overlapping_and_dense();
    const bool same =
        dense && a == b && a_end == b_end && out.strides().equals(in.strides());
    // Elements CPU's check sees as shared: its error unless CPU's kernel takes
    // them and computes what a payload kernel computes.
    const bool partial = dense && !same && !resized;
    const auto cpu = cpuOverlap(op, inputs, i, k);
    const bool allowed = partial
        ? cpu == Overlap::kAllowed
        : cpu != Overlap::kOrderDependent && (same || cpu == Overlap::kAllowed);
    TORCH_CHECK(
        allowed,
        schema.name(),
        ": unsupported operation: some elements of the input tensor ('",
        args[k].name(),
        "') and the written-to tensor ('",
        args[i].name(),
        "')",
        resized ? " (as resized to fit the result)" : "",
        " refer to a single memory location",
        cpu == Overlap::kOrderDependent || resized
            ? c10::str(
                  " (CPU computes this, but its result ",
                  cpu == Overlap::kOrderDependent ? "depends" : "can depend",
                  " on the order in which it writes them; the ",
                  c10::get_privateuse1_backend(),
                  " backend computes from the input as it was)")
            : std::string(),
        ". Please clone() the tensor before performing the operation.");
  }
}

bool hasOutArguments(const c10::FunctionSchema& schema) {
  const auto& args = schema.arguments();
  return std::any_of(args.begin(), args.end(), [](const c10::Argument& a) {
    return a.is_out();
  });
}

// The mutable argument a return aliases (in-place and out= overloads).
std::optional<size_t> aliasedArg(
    const c10::FunctionSchema& schema,
    const c10::Argument& ret) {
  if (ret.alias_info() == nullptr || !ret.alias_info()->isWrite()) {
    return std::nullopt;
  }
  const auto& args = schema.arguments();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].alias_info() != nullptr &&
        args[i].alias_info()->beforeSets() == ret.alias_info()->beforeSets()) {
      return i;
    }
  }
  return std::nullopt;
}

std::string describe(const at::Tensor& t) {
  return c10::str(t.scalar_type(), " ", t.sizes());
}

// A registered Python kernel. How each argument and result converts is
// worked out from the schema once, here, rather than on every call. Its
// function and keyword names are strong references kept until exit, like the
// registration itself (never released, so nothing touches Python at
// shutdown).
//
// What the kernel returns is checked, always and cheaply: the number of
// results, None only where the operator may leave a result undefined, no
// input payload returned as the result of an operator that does not alias
// its inputs, and payloads for mutated tensors of their dtype (and, in
// place, their size). The results of out= overloads, and in checked mode
// (setCheckKernels) every result, are compared with the operator's meta
// function. Every violation names the operator and the kernel.
class PythonKernel final : public c10::OperatorKernel {
 public:
  PythonKernel(
      py::object fn,
      const c10::OperatorHandle& op,
      bool cpu_passthrough)
      : fn_(fn.release().ptr()),
        op_(op),
        name_(op.schema().name()),
        kernel_name_(qualifiedFunctionName(fn_)),
        cpu_passthrough_(cpu_passthrough) {
    const auto& schema = op.schema();
    if (!schema.overload_name().empty()) {
      name_ += "." + schema.overload_name();
    }
    has_out_ = hasOutArguments(schema);
    // Backward operators may leave gradients undefined (of a missing bias,
    // say), and operators with several results some of them (attention
    // weights not asked for); a single result is never undefined.
    undefined_ok_ = schema.name().find("backward") != std::string::npos ||
        schema.returns().size() > 1;
    py::list kwnames;
    for (const auto& a : schema.arguments()) {
      if (a.kwarg_only()) {
        // Interned, like the parameter names of Python functions: CPython
        // matches keywords to parameters by identity before comparing text.
        PyObject* name = PyUnicode_FromString(a.name().c_str());
        if (name == nullptr) {
          throw py::error_already_set();
        }
        PyUnicode_InternInPlace(&name);
        kwnames.append(py::reinterpret_steal<py::object>(name));
      }
      args_.push_back(
          {valueKind(a),
           a.type()->isSubtypeOf(*c10::ListType::ofOptionalTensors()),
           a.alias_info() != nullptr && a.alias_info()->isWrite(),
           a.is_out()});
      // A generator's state is the backend's Python object: `fn` draws.
      cpu_passthrough_ =
          cpu_passthrough_ && args_.back().kind != ValueKind::kGenerator;
      if (a.name() == "pin_memory") {
        pin_memory_ = args_.size() - 1;
      }
    }
    kwnames_ = py::tuple(kwnames).release().ptr();
    nkw_ = static_cast<size_t>(PyTuple_GET_SIZE(kwnames_));
    for (const auto& r : schema.returns()) {
      Return ret{Return::kOther, aliasedArg(schema, r), r.type()};
      if (r.type()->kind() == c10::TypeKind::TensorType) {
        ret.kind = Return::kTensor;
      } else if (r.type()->isSubtypeOf(*c10::ListType::ofTensors())) {
        ret.kind = Return::kTensorList;
      }
      if (r.type()->kind() == c10::TypeKind::OptionalType) {
        undefined_ok_ = true;
      }
      returns_.push_back(std::move(ret));
    }
  }

  // The boxed calling convention (every operator).
  void operator()(
      const c10::OperatorHandle& /*op*/,
      c10::DispatchKeySet /*ks*/,
      torch::jit::Stack* stack) const {
    const auto n = args_.size();
    const GilForCall gil; // see Shutdown.h
    auto inputs = torch::jit::last(*stack, n);
    // CPU's argument checks before anything is written: overlaps (on the
    // layouts before out= tensors are resized, as CPU's), then out=.
    for (size_t i = 0; i < n; ++i) {
      if (args_[i].mutated && inputs[i].isTensor()) {
        checkOverlap(op_, inputs, i);
      }
    }
    std::optional<torch::jit::Stack> meta;
    if (has_out_ || checking()) {
      meta = runMeta(op_, inputs);
      if (has_out_ && meta) {
        for (const auto i : resizeOutputs(op_, inputs, *meta)) {
          checkOverlap(op_, inputs, i, /*resized=*/true);
        }
      }
    }
    Call call;
    c10::SmallVector<py::object, 8> args;
    args.reserve(n);
    // Mutated tensors with conjugate or negative bits: the kernel gets a copy
    // with the bits applied, which is written back after the call.
    c10::SmallVector<std::pair<size_t, at::Tensor>, 1> resolved;
    for (size_t i = 0; i < n; ++i) {
      if (args_[i].kind == ValueKind::kGenerator) {
        call.generator(i, inputs[i]);
        args.push_back(py::none());
        continue;
      }
      if (args_[i].mutated && inputs[i].isTensor()) {
        if (!meta && sharesElements(inputs[i].toTensor())) {
          // Whether CPU refuses to write into it depends on the operator:
          // its meta function raises CPU's error where CPU does.
          meta = runMeta(op_, inputs);
        }
        if (hasBits(inputs[i].toTensor())) {
          resolved.emplace_back(i, resolveBits(inputs[i].toTensor()));
          args.push_back(call.tensorArg(resolved.back().second));
          continue;
        }
      }
      if (cpu_passthrough_ && !holdsTensors(inputs[i], args_[i])) {
        // CPU's kernel takes the value as it is: no Python value is made.
        call.noteDevice(inputs[i]);
        args.push_back(py::none());
        continue;
      }
      args.push_back(
          call.arg(inputs[i], args_[i].kind, args_[i].optional_tensors));
    }
    c10::DeviceIndex device_index = -1;
    py::object result = invoke(call, args, inputs, device_index);

    c10::SmallVector<c10::IValue, 2> outputs;
    const auto results = resultItems(result);
    for (size_t j = 0; j < returns_.size(); ++j) {
      outputs.push_back(output(
          j, inputs, resolved, args, std::move(results[j]), device_index));
    }
    if (meta) {
      checkAgainstMeta(outputs, *meta);
    }
    torch::jit::drop(*stack, n);
    for (auto& o : outputs) {
      stack->push_back(std::move(o));
    }
  }

  // The unboxed calling convention of the functional operators with one
  // tensor result whose signatures UnboxedSignatures lists (no generators).
  template <class... Args>
  at::Tensor callUnboxed(const Args&... values) const {
    const GilForCall gil; // see Shutdown.h
    std::optional<torch::jit::Stack> meta;
    if (C10_UNLIKELY(checking())) {
      const std::array<c10::IValue, sizeof...(Args)> inputs{
          c10::IValue(values)...};
      meta = runMeta(op_, inputs);
    }
    Call call;
    c10::SmallVector<py::object, 8> args;
    args.reserve(sizeof...(Args));
    size_t i = 0;
    (args.push_back(unboxedArg(call, args_[i++], values, cpu_passthrough_)),
     ...);
    c10::DeviceIndex device_index = -1;
    const py::object result = cpu_passthrough_
        ? invoke(
              call,
              args,
              std::array<c10::IValue, sizeof...(Args)>{c10::IValue(values)...},
              device_index)
        : invoke(call, args, {}, device_index);
    auto tensor = tensorResult(0, args, result, device_index);
    if (meta) {
      checkAgainstMeta({c10::IValue(tensor)}, *meta);
    }
    return tensor;
  }

 private:
  struct Arg {
    ValueKind kind;
    bool optional_tensors;
    // Written by the operator (in-place and out= arguments).
    bool mutated;
    bool out;
  };
  struct Return {
    enum Kind : uint8_t { kTensor, kTensorList, kOther } kind;
    // The mutable argument the return aliases (in-place and out=).
    std::optional<size_t> aliased;
    c10::TypePtr type;
  };

  static bool checking() {
    return check_kernels.load(std::memory_order_relaxed);
  }

  static bool hasBits(const at::Tensor& t) {
    return t.defined() && t.is_privateuseone() && (t.is_conj() || t.is_neg());
  }

  // Whether some elements of a tensor share memory (an expanded tensor).
  static bool sharesElements(const at::Tensor& t) {
    return t.defined() && t.numel() > 1 &&
        at::has_internal_overlap(t) == at::MemOverlap::Yes;
  }

  [[noreturn]] void fail(const std::string& what) const {
    TORCH_CHECK(
        false,
        "the ",
        c10::get_privateuse1_backend(),
        " kernel for ",
        name_,
        " (",
        functionName(fn_),
        ") ",
        what);
  }

  // The results of a call, one per return of the schema.
  c10::SmallVector<py::object, 2> resultItems(const py::object& result) const {
    c10::SmallVector<py::object, 2> items;
    if (returns_.empty()) {
      return items; // An operator without results: nothing to check.
    }
    if (returns_.size() == 1) {
      items.push_back(result);
      return items;
    }
    if (!PyTuple_Check(result.ptr()) && !PyList_Check(result.ptr())) {
      fail(
          c10::str(
              "returned ",
              typeName(result),
              ", but the operator has ",
              returns_.size(),
              " results: expected a tuple of ",
              returns_.size()));
    }
    const auto size =
        static_cast<size_t>(PySequence_Fast_GET_SIZE(result.ptr()));
    if (size != returns_.size()) {
      fail(
          c10::str(
              "returned ",
              size,
              " results, but the operator has ",
              returns_.size()));
    }
    for (size_t j = 0; j < size; ++j) {
      items.push_back(
          py::reinterpret_borrow<py::object>(
              PySequence_Fast_GET_ITEM(result.ptr(), j)));
    }
    return items;
  }

  static py::object unboxedArg(
      Call& call,
      const Arg& /*arg*/,
      const at::Tensor& t,
      bool /*cpu_passthrough*/) {
    return call.tensorArg(t);
  }

  // The signatures unboxed take no device, tensor list or generator: a
  // passthrough call converts none of their other values.
  template <class T>
  static py::object unboxedArg(
      Call& call,
      const Arg& arg,
      const T& value,
      bool cpu_passthrough) {
    return cpu_passthrough
        ? py::none()
        : call.arg(c10::IValue(value), arg.kind, arg.optional_tensors);
  }

  // Whether an argument's value holds tensors (a tensor, a tensor list).
  static bool holdsTensors(const c10::IValue& value, const Arg& arg) {
    return value.isTensor() || value.isTensorList() ||
        (arg.optional_tensors && value.isList());
  }

  // Calls the function with `args`, the converted arguments (generators
  // filled in here), and sets `device_index` to the device of its results. A
  // passthrough kernel runs CPU's kernel on the payloads instead, given the
  // operator's arguments, `inputs`.
  py::object invoke(
      Call& call,
      c10::SmallVector<py::object, 8>& args,
      c10::ArrayRef<c10::IValue> inputs,
      c10::DeviceIndex& device_index) const {
    device_index = call.deviceIndex();
    if (cpu_passthrough_) {
      const KernelTiming timing(kernel_name_, device_index);
      return passthrough(args, inputs);
    }
    call.generators(args, device_index, name_.c_str());
    c10::SmallVector<PyObject*, 8> argv;
    argv.reserve(args.size());
    for (const auto& a : args) {
      argv.push_back(a.ptr());
    }
    PyObject* raw = nullptr;
    {
      // The kernel's time is the device's while a profiler is on (Hooks.h).
      const KernelTiming timing(kernel_name_, device_index);
      raw = PyObject_Vectorcall(
          fn_, argv.data(), args.size() - nkw_, nkw_ == 0 ? nullptr : kwnames_);
    }
    if (raw == nullptr) {
      raiseFromKernel();
    }
    return py::reinterpret_steal<py::object>(raw);
  }

  // The CPU tensor a payload tensor argument's payload (`payload`, converted
  // by the call) is; an error for any other payload.
  at::Tensor payloadTensor(py::handle payload, size_t i) const {
    if (!THPVariable_Check(payload.ptr()) ||
        !THPVariable_Unpack(payload.ptr()).device().is_cpu()) {
      fail(
          c10::str(
              "runs CPU's kernel on payloads that are CPU tensors, but got ",
              typeName(payload),
              " for argument '",
              op_.schema().arguments()[i].name(),
              "'"));
    }
    return THPVariable_Unpack(payload.ptr());
  }

  // A tensor argument of a passthrough call as CPU's kernel takes it: a
  // payload tensor's payload, anything else (a CPU scalar, an undefined
  // tensor, a CPU index) as it is. The call has checked the devices.
  at::Tensor passthroughTensor(
      const at::Tensor& t,
      py::handle payload,
      size_t i) const {
    return t.defined() && t.is_privateuseone() ? payloadTensor(payload, i) : t;
  }

  // What the Python kernel of a backend whose payloads are CPU tensors
  // computes, CPU's kernel on the payloads, without Python: registered with
  // cpu_passthrough (library.impl). `args` are the call's conversions of
  // `inputs` (the payloads), the results those the Python kernel would
  // return.
  py::object passthrough(
      c10::ArrayRef<py::object> args,
      c10::ArrayRef<c10::IValue> inputs) const {
    torch::jit::Stack stack;
    stack.reserve(inputs.size());
    // The out= payloads: CPU's kernel may resize an out= tensor (one the
    // meta function could not size first), so it gets a view of its own and
    // the payload keeps its shape.
    c10::SmallVector<std::pair<size_t, at::Tensor>, 1> outs;
    for (const auto i : c10::irange(inputs.size())) {
      const auto& value = inputs[i];
      if (value.isTensor()) {
        auto t = passthroughTensor(value.toTensor(), args[i], i);
        if (args_[i].out && t.defined()) {
          outs.emplace_back(i, t);
          t = t.as_strided(t.sizes(), t.strides(), t.storage_offset());
        }
        stack.emplace_back(std::move(t));
      } else if (value.isTensorList()) {
        const auto items = value.toTensorVector();
        c10::List<at::Tensor> list;
        list.reserve(items.size());
        for (const auto k : c10::irange(items.size())) {
          list.push_back(passthroughTensor(items[k], args[i][py::int_(k)], i));
        }
        stack.emplace_back(std::move(list));
      } else if (args_[i].optional_tensors && value.isList()) {
        const auto items = value.toListRef();
        c10::List<std::optional<at::Tensor>> list;
        list.reserve(items.size());
        for (const auto k : c10::irange(items.size())) {
          if (items[k].isTensor() && items[k].toTensor().defined()) {
            list.push_back(passthroughTensor(
                items[k].toTensor(), args[i][py::int_(k)], i));
          } else {
            list.push_back(std::nullopt);
          }
        }
        stack.emplace_back(std::move(list));
      } else if (value.isDevice()) {
        stack.emplace_back(c10::Device(c10::kCPU));
      } else if (pin_memory_ == i) {
        stack.emplace_back();
      } else {
        stack.push_back(value);
      }
    }
    {
      // The payloads are plain CPU tensors: a dispatch mode the caller
      // entered saw the operator on the device already, and must not see it
      // (or what CPU's kernel calls) again on the CPU.
      const c10::impl::ExcludeDispatchKeyGuard no_modes(
          c10::DispatchKeySet(
              {c10::DispatchKey::Python, c10::DispatchKey::PythonTLSSnapshot}));
      if (outs.empty()) {
        op_.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::CPU), &stack);
      } else {
        // The stack holds the only references to the out= views, which torch
        // 2.6 drops before it pushes them back as results: kept alive.
        redispatchOnStandIns(op_, c10::DispatchKey::CPU, &stack);
      }
    }
    c10::SmallVector<py::object, 2> results;
    for (const auto j : c10::irange(returns_.size())) {
      results.push_back(passthroughResult(j, std::move(stack[j]), args, outs));
    }
    if (results.size() == 1) {
      return std::move(results[0]);
    }
    py::tuple tuple(results.size());
    for (const auto j : c10::irange(results.size())) {
      tuple[j] = std::move(results[j]);
    }
    return std::move(tuple);
  }

  // Result `j` of CPU's kernel as the Python kernel returns it: a payload
  // per tensor (an in-place result is its argument's payload, an out= result
  // the given payload unless CPU's kernel resized it), Python values for the
  // rest.
  py::object passthroughResult(
      size_t j,
      c10::IValue value,
      c10::ArrayRef<py::object> args,
      c10::ArrayRef<std::pair<size_t, at::Tensor>> outs) const {
    const auto wrapped = [](at::Tensor t) {
      return t.defined()
          ? py::reinterpret_steal<py::object>(THPVariable_Wrap(std::move(t)))
          : py::none();
    };
    if (value.isTensor()) {
      auto t = std::move(value).toTensor();
      for (const auto& [i, payload] : outs) {
        if (returns_[j].aliased == i && t.sizes().equals(payload.sizes())) {
          return args[i];
        }
      }
      return wrapped(std::move(t));
    }
    if (value.isTensorList()) {
      py::list list;
      for (auto& t : value.toTensorVector()) {
        list.append(wrapped(std::move(t)));
      }
      return std::move(list);
    }
    return torch::jit::toPyObject(std::move(value));
  }

  // Re-raises the Python error the kernel raised as one that names the
  // operator and the kernel, of the same type where it can be made with a
  // message (else of the built-in type it derives from), chained to the
  // original.
  [[noreturn]] void raiseFromKernel() const {
    py::error_already_set original;
    if (!original.matches(PyExc_Exception)) {
      throw original;
    }
    const auto message = c10::str(
        "in the ",
        c10::get_privateuse1_backend(),
        " kernel for ",
        name_,
        " (",
        functionName(fn_),
        "): ",
        py::str(original.value()).cast<std::string>());
    py::object wrapped;
    py::handle type = original.type();
    while (!type.is_none()) {
      try {
        wrapped = type(message);
        if (PyObject_IsInstance(wrapped.ptr(), type.ptr()) == 1 &&
            PyExceptionInstance_Check(wrapped.ptr())) {
          break;
        }
      } catch (py::error_already_set&) {
      }
      wrapped = py::object();
      // The next base class in the type's MRO that is built in.
      py::handle next = py::none();
      for (py::handle base : py::reinterpret_borrow<py::tuple>(
               reinterpret_cast<PyTypeObject*>(type.ptr())->tp_mro)) {
        if (!base.is(type) &&
            PyObject_IsSubclass(base.ptr(), PyExc_Exception) == 1 &&
            py::str(base.attr("__module__")).cast<std::string>() ==
                "builtins") {
          next = base;
          break;
        }
      }
      type = next;
    }
    if (!wrapped) {
      wrapped = py::reinterpret_borrow<py::object>(PyExc_RuntimeError)(message);
    }
    PyException_SetCause(wrapped.ptr(), original.value().inc_ref().ptr());
    PyException_SetContext(wrapped.ptr(), original.value().inc_ref().ptr());
    PyErr_SetObject(
        reinterpret_cast<PyObject*>(Py_TYPE(wrapped.ptr())), wrapped.ptr());
    throw py::error_already_set();
  }

  // The tensor of a functional result. None is an undefined tensor only where
  // the operator may leave a result undefined (the gradients a backward
  // operator leaves out).
  at::Tensor tensorResult(
      size_t j,
      c10::ArrayRef<py::object> args,
      py::handle r,
      c10::DeviceIndex device_index) const {
    if (r.is_none()) {
      if (!undefined_ok_) {
        fail(
            c10::str(
                "returned None for result ",
                j,
                ", but the operator always has a tensor there"));
      }
      return at::Tensor();
    }
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i].is(r)) {
        fail(
            c10::str(
                "returned the payload of its argument '",
                op_.schema().arguments()[i].name(),
                "' as result ",
                j,
                ", but the operator's results do not alias its inputs; return a "
                "new payload (a copy)"));
      }
    }
    return wrap(r, device_index);
  }

  c10::IValue output(
      size_t j,
      c10::ArrayRef<c10::IValue> inputs,
      c10::ArrayRef<std::pair<size_t, at::Tensor>> resolved,
      c10::ArrayRef<py::object> args,
      py::object r,
      c10::DeviceIndex device_index) const {
    const auto& ret = returns_[j];
    switch (ret.kind) {
      case Return::kTensor:
        if (ret.aliased) {
          const auto i = *ret.aliased;
          const at::Tensor& original = inputs[i].toTensor();
          const at::Tensor* mutated = &original;
          for (const auto& [k, copy] : resolved) {
            if (k == i) {
              mutated = &copy;
            }
          }
          bindMutated(*mutated, i, args[i], r);
          if (mutated != &original) {
            original.copy_(*mutated);
          }
          return original;
        }
        return tensorResult(j, args, r, device_index);
      case Return::kTensorList: {
        std::vector<at::Tensor> tensors;
        for (py::handle item : r) {
          tensors.push_back(tensorResult(j, args, item, device_index));
        }
        return tensors;
      }
      case Return::kOther:
        break;
    }
    return torch::jit::toIValue(r, ret.type);
  }

  // A tensor the kernel mutates: the payload it returned for it (unless it
  // wrote into the one it was given, or returned None) is bound to it.
  void bindMutated(
      const at::Tensor& tensor,
      size_t i,
      py::handle given,
      py::handle result) const {
    if (result.is_none() || result.is(given)) {
      return;
    }
    const PayloadFields fields(result);
    const auto dtype = fields.dtype();
    if (dtype != tensor.scalar_type()) {
      fail(
          c10::str(
              "returned a ",
              dtype,
              " payload for the tensor it mutates ('",
              op_.schema().arguments()[i].name(),
              "'), which is ",
              tensor.scalar_type()));
    }
    if (!args_[i].out && !tensor.sizes().equals(fields.sizes())) {
      fail(
          c10::str(
              "returned a payload of shape ",
              c10::IntArrayRef(fields.sizes()),
              " for the tensor it mutates in place ('",
              op_.schema().arguments()[i].name(),
              "'), whose shape is ",
              tensor.sizes()));
    }
    rebind(tensor, result);
  }

  // The results against those of the operator's meta function: shapes and
  // dtypes.
  void checkAgainstMeta(
      c10::ArrayRef<c10::IValue> outputs,
      const torch::jit::Stack& meta) const {
    const auto compare =
        [&](size_t j, const at::Tensor& got, const at::Tensor& expected) {
          if (got.defined() != expected.defined()) {
            fail(
                c10::str(
                    "returned ",
                    got.defined() ? describe(got) : "None",
                    " for result ",
                    j,
                    ", but the operator's meta function gives ",
                    expected.defined() ? describe(expected)
                                       : "an undefined tensor"));
          }
          if (got.defined() &&
              (got.scalar_type() != expected.scalar_type() ||
               !got.sizes().equals(expected.sizes()))) {
            fail(
                c10::str(
                    "returned ",
                    describe(got),
                    " for result ",
                    j,
                    ", but the operator's meta function gives ",
                    describe(expected)));
          }
        };
    for (size_t j = 0; j < outputs.size() && j < meta.size(); ++j) {
      if (outputs[j].isTensor() && meta[j].isTensor()) {
        compare(j, outputs[j].toTensor(), meta[j].toTensor());
      } else if (outputs[j].isTensorList() && meta[j].isTensorList()) {
        const auto got = outputs[j].toTensorVector();
        const auto expected = meta[j].toTensorVector();
        if (got.size() != expected.size()) {
          fail(
              c10::str(
                  "returned ",
                  got.size(),
                  " tensors for result ",
                  j,
                  ", but the operator's meta function gives ",
                  expected.size()));
        }
        for (size_t k = 0; k < got.size(); ++k) {
          compare(j, got[k], expected[k]);
        }
      }
    }
  }

  PyObject* fn_;
  c10::OperatorHandle op_;
  std::string name_;
  // The kernel's name in the profiler's traces.
  std::string kernel_name_;
  // Whether CPU's kernel runs on the payloads instead of `fn` (passthrough()):
  // asked for at registration, and the operator takes no generator.
  bool cpu_passthrough_;
  // The index of a `pin_memory` argument, which CPU's kernel gets as None.
  std::optional<size_t> pin_memory_;
  PyObject* kwnames_;
  size_t nkw_;
  bool has_out_ = false;
  // Whether a tensor result may be undefined (None).
  bool undefined_ok_ = false;
  std::vector<Arg> args_;
  std::vector<Return> returns_;
};

// The common signatures of functional operators with one tensor result,
// whose kernels take the unboxed calling convention (see makeKernel()): a boxed
// call copies each tensor argument onto the stack, and where torch has
// TensorImpl::incref_pyobject (2.13 does, 2.6 does not) copying a tensor
// that has a Python object takes the GIL, and dropping the copy takes it
// again. Unboxed, a kernel gets references.
using TensorRef = const at::Tensor&;
using ScalarRef = const c10::Scalar&;

template <class... Args>
struct Signature {};

using UnboxedSignatures = std::tuple<
    Signature<TensorRef>, // relu, exp
    Signature<TensorRef, TensorRef>, // mm, mul.Tensor
    Signature<TensorRef, ScalarRef>, // mul.Scalar
    Signature<TensorRef, TensorRef, ScalarRef>, // add.Tensor
    Signature<TensorRef, ScalarRef, ScalarRef>, // add.Scalar
    Signature<TensorRef, TensorRef, TensorRef>, // where.self
    Signature<TensorRef, TensorRef, TensorRef, ScalarRef, ScalarRef>, // addmm
    Signature<TensorRef, int64_t, bool>, // _log_softmax
    // _log_softmax_backward_data
    Signature<TensorRef, TensorRef, int64_t, c10::ScalarType>,
    Signature<TensorRef, std::optional<c10::ScalarType>>, // sum
    Signature<
        TensorRef,
        at::OptionalIntArrayRef,
        bool,
        std::optional<c10::ScalarType>>>; // sum.dim_IntList

bool sameTypes(c10::ArrayRef<c10::Argument> a, c10::ArrayRef<c10::Argument> b) {
  return std::equal(
      a.begin(),
      a.end(),
      b.begin(),
      b.end(),
      [](const c10::Argument& x, const c10::Argument& y) {
        return *x.real_type() == *y.real_type();
      });
}

// Whether an operator's arguments and results have a signature's types.
// Real types: a ScalarType is an int to the schema's type(), and so is a
// SymInt, whose C++ type differs.
template <class... Args>
bool takes(const c10::FunctionSchema& schema, Signature<Args...> /*unused*/) {
  static const auto inferred =
      c10::inferFunctionSchemaFlattenedReturns<at::Tensor(Args...)>();
  return sameTypes(inferred.arguments(), schema.arguments()) &&
      sameTypes(inferred.returns(), schema.returns());
}

// Whether nothing in an operator's schema is aliased (no in-place, out= or
// view overload): the unboxed signatures above are those of such operators.
bool functional(const c10::FunctionSchema& schema) {
  const auto aliased = [](const c10::Argument& a) {
    return a.alias_info() != nullptr;
  };
  return std::none_of(
             schema.arguments().begin(), schema.arguments().end(), aliased) &&
      std::none_of(schema.returns().begin(), schema.returns().end(), aliased);
}

// Sets `kernel` to the unboxed kernel of `python` for a signature the
// operator takes, unless already set.
template <class... Args>
void unboxedFor(
    std::optional<torch::CppFunction>& kernel,
    std::unique_ptr<PythonKernel>& python,
    const c10::FunctionSchema& schema,
    Signature<Args...> signature) {
  if (kernel || !takes(schema, signature)) {
    return;
  }
  kernel.emplace(
      [python = std::shared_ptr<const PythonKernel>(std::move(python))](
          Args... args) { return python->callUnboxed(args...); });
}

// The kernel of a Python function for an operator: unboxed (which boxed
// callers reach through torch's unboxing wrapper) for a signature above,
// else boxed.
torch::CppFunction makeKernel(
    py::object fn,
    const c10::OperatorHandle& op,
    bool cpu_passthrough) {
  const auto& schema = op.schema();
  auto python =
      std::make_unique<PythonKernel>(std::move(fn), op, cpu_passthrough);
  if (functional(schema)) {
    std::optional<torch::CppFunction> kernel;
    std::apply(
        [&](auto... signatures) {
          (unboxedFor(kernel, python, schema, signatures), ...);
        },
        UnboxedSignatures{});
    if (kernel) {
      return std::move(*kernel);
    }
  }
  return torch::CppFunction::makeFromBoxedFunctor(std::move(python));
}

void fallbackKernel(
    const c10::OperatorHandle& op,
    c10::DispatchKeySet /*ks*/,
    torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const auto n = schema.arguments().size();
  const GilForCall gil; // see Shutdown.h
  TORCH_CHECK(fallback_fn != nullptr, "no fallback is installed");
  py::list args;
  py::dict kwargs;
  auto inputs = torch::jit::last(*stack, n);
  // CPU's argument checks before anything is written: overlaps with what an
  // in-place or out= overload writes (on the layouts before out= tensors are
  // resized, as CPU's), then out=.
  for (size_t i = 0; i < n; ++i) {
    const auto* alias = schema.arguments()[i].alias_info();
    if (alias != nullptr && alias->isWrite() && inputs[i].isTensor()) {
      checkOverlap(op, inputs, i);
    }
  }
  if (hasOutArguments(schema)) {
    if (const auto meta = runMeta(op, inputs)) {
      for (const auto i : resizeOutputs(op, inputs, *meta)) {
        checkOverlap(op, inputs, i, /*resized=*/true);
      }
    }
  }
  for (size_t i = 0; i < n; ++i) {
    const auto& a = schema.arguments()[i];
    // Tensors as tensors: toPython would make a wrapped number (a Python
    // scalar given for a Tensor argument) the Python number again, which the
    // overload that gets it may not take.
    py::object value = inputs[i].isTensor()
        ? py::reinterpret_steal<py::object>(
              THPVariable_Wrap(inputs[i].toTensor()))
        : toPython(valueKind(a), inputs[i]);
    if (a.kwarg_only()) {
      kwargs[py::str(a.name())] = value;
    } else {
      args.append(value);
    }
  }
  py::object result = py::handle(fallback_fn)(
      schema.name(), schema.overload_name(), py::tuple(args), kwargs);
  torch::jit::drop(*stack, n);
  const auto& returns = schema.returns();
  if (returns.size() == 1) {
    stack->push_back(torch::jit::toIValue(result, returns[0].type()));
  } else {
    for (size_t j = 0; j < returns.size(); ++j) {
      stack->push_back(
          torch::jit::toIValue(result[py::int_(j)], returns[j].type()));
    }
  }
}

} // namespace

void checkCopyOverlap(const at::Tensor& dst, const at::Tensor& src) {
  static const auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("aten::copy_", "");
  const std::array<c10::IValue, 3> inputs{dst, src, false};
  checkOverlap(op, inputs, 0);
}

at::Tensor resolveBits(const at::Tensor& t) {
  if (!t.is_conj() && !t.is_neg()) {
    return t;
  }
  // A copy into a tensor without the bits, not resolve_conj/resolve_neg:
  // those clone, and the conjugate and negative fallbacks let clone through
  // to the backend's kernel with the bits set, whose arguments the bridge
  // would resolve again, without end. copy_ resolves them (_copy_from).
  auto plain = at::empty_like(t);
  plain.copy_(t);
  return plain;
}

bool setCheckKernels(bool enabled) {
  return check_kernels.exchange(enabled);
}

void registerKernel(
    const std::string& name,
    py::object fn,
    bool cpu_passthrough) {
  const auto handle = findAtenOp(name);
  TORCH_CHECK_VALUE(
      handle.has_value(),
      "expected the name of an aten operator overload such as 'add.Tensor', "
      "but got '",
      name,
      "'");
  newLibrary().impl(
      qualifiedAtenName(name).c_str(),
      makeKernel(std::move(fn), *handle, cpu_passthrough));
}

void setFallback(py::object fn) {
  TORCH_CHECK(fallback_fn == nullptr, "the fallback is already installed");
  fallback_fn = fn.release().ptr();
  newLibrary("_").fallback(
      torch::CppFunction::makeFromBoxedFunction<&fallbackKernel>());
}

} // namespace torch::acc
