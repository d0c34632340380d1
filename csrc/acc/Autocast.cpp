#include <torch/csrc/acc/Autocast.h>

#include <torch/csrc/acc/Registration.h>

#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>

namespace torch::acc {

namespace {

constexpr auto kPrivateUse1 = c10::DeviceType::PrivateUse1;

enum class CastPolicy { kLowerPrecisionFp, kFp32, kPromote };

// The boxed equivalent of at::autocast's WrapFunction_ for one policy.
class AutocastKernel final : public c10::OperatorKernel {
 public:
  explicit AutocastKernel(CastPolicy policy) : policy_(policy) {}

  void operator()(
      const c10::OperatorHandle& op,
      c10::DispatchKeySet /*ks*/,
      torch::jit::Stack* stack) {
    c10::impl::ExcludeDispatchKeyGuard no_autocast(
        c10::DispatchKey::AutocastPrivateUse1);
    const auto n = op.schema().arguments().size();
    const auto first = stack->size() - n;
    const auto to = castType(*stack, first);
    for (size_t i = first; i < stack->size(); ++i) {
      auto& value = (*stack)[i];
      if (value.isTensor()) {
        value = at::autocast::cached_cast(to, value.toTensor(), kPrivateUse1);
      } else if (value.isTensorList()) {
        auto tensors = value.toTensorVector();
        for (auto& t : tensors) {
          t = at::autocast::cached_cast(to, t, kPrivateUse1);
        }
        value = std::move(tensors);
      }
    }
    op.callBoxed(stack);
  }

 private:
  at::ScalarType castType(const torch::jit::Stack& stack, size_t first) const {
    switch (policy_) {
      case CastPolicy::kLowerPrecisionFp:
        return at::autocast::get_autocast_dtype(kPrivateUse1);
      case CastPolicy::kFp32:
        return at::kFloat;
      case CastPolicy::kPromote:
        break;
    }
    auto type = at::autocast::get_autocast_dtype(kPrivateUse1);
    for (size_t i = first; i < stack.size(); ++i) {
      const auto& value = stack[i];
      if (value.isTensor()) {
        type = at::autocast::prioritize(type, value.toTensor(), kPrivateUse1);
      } else if (value.isTensorList()) {
        for (const auto& t : value.toTensorVector()) {
          type = at::autocast::prioritize(type, t, kPrivateUse1);
        }
      }
    }
    return type;
  }

  CastPolicy policy_;
};

CastPolicy parsePolicy(const std::string& policy) {
  if (policy == "lower_precision_fp") {
    return CastPolicy::kLowerPrecisionFp;
  } else if (policy == "fp32") {
    return CastPolicy::kFp32;
  } else if (policy == "promote") {
    return CastPolicy::kPromote;
  }
  TORCH_CHECK_VALUE(
      false,
      "expected an autocast policy of 'lower_precision_fp', 'fp32' or "
      "'promote', but got '",
      policy,
      "'");
}

} // namespace

std::vector<std::string> registerAutocastKernels(
    const std::vector<std::string>& ops,
    const std::string& policy) {
  const auto cast = parsePolicy(policy);
  // Stock PyTorch gives AutocastPrivateUse1 no fallback (CPU's and CUDA's
  // autocast keys fall through for operators without an autocast kernel);
  // without one, every other operator fails under autocast.
  static const bool fallthrough = [] {
    constexpr auto key = c10::DispatchKey::AutocastPrivateUse1;
    if (!c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(key)) {
      newLibrary("_", key).fallback(torch::CppFunction::makeFallthrough());
    }
    return true;
  }();
  (void)fallthrough;
  auto& lib = newLibrary("aten", c10::DispatchKey::AutocastPrivateUse1);
  std::vector<std::string> registered;
  for (const auto& name : ops) {
    if (!findAtenOp(name)) {
      continue;
    }
    lib.impl(
        qualifiedAtenName(name).c_str(),
        torch::CppFunction::makeFromBoxedFunctor(
            std::make_unique<AutocastKernel>(cast)));
    registered.push_back(name);
  }
  return registered;
}

} // namespace torch::acc
