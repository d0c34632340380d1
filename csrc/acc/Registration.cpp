#include <torch/csrc/acc/Registration.h>

#include <ATen/SDPBackend.h>
#include <ATen/core/Tensor.h>
#include <ATen/native/transformers/attention.h>

#include <memory>
#include <vector>

namespace torch::acc {

namespace {

std::vector<std::unique_ptr<torch::Library>>& libraries() {
  static std::vector<std::unique_ptr<torch::Library>> libs;
  return libs;
}

// _fused_sdp_choice_stub's entry for PrivateUse1. The kernel is looked up at
// every call: a backend may register it after setup.
int64_t fusedSdpChoice(
    const at::Tensor& query,
    const at::Tensor& key,
    const at::Tensor& value,
    const std::optional<at::Tensor>& attn_mask,
    double dropout_p,
    bool is_causal,
    std::optional<double> scale,
    bool enable_gqa) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("aten::_fused_sdp_choice", "")
                             .typed<int64_t(
                                 const at::Tensor&,
                                 const at::Tensor&,
                                 const at::Tensor&,
                                 const std::optional<at::Tensor>&,
                                 double,
                                 bool,
                                 std::optional<double>,
                                 bool)>();
  if (!op.hasKernelForDispatchKey(c10::DispatchKey::PrivateUse1)) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  const auto choice = op.call(
      query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa);
  // The kernel answers for payloads, which carry no autograd state. The
  // flash-attention kernel of CPU has no gradient for the mask, and CPU's
  // choice refuses it for a mask that requires grad (check_attn_mask_shape).
  if (choice == static_cast<int64_t>(at::SDPBackend::flash_attention) &&
      attn_mask.has_value() && attn_mask->requires_grad()) {
    return static_cast<int64_t>(at::SDPBackend::math);
  }
  return choice;
}

} // namespace

torch::Library& newLibrary(const char* ns, c10::DispatchKey key) {
  libraries().push_back(
      std::make_unique<torch::Library>(
          torch::Library::IMPL,
          ns,
          std::optional<c10::DispatchKey>(key),
          __FILE__,
          __LINE__));
  return *libraries().back();
}

std::string qualifiedAtenName(const std::string& name) {
  return name.rfind("aten::", 0) == 0 ? name : "aten::" + name;
}

std::optional<c10::OperatorHandle> findAtenOp(const std::string& name) {
  const auto qualified = qualifiedAtenName(name);
  const auto dot = qualified.find('.');
  const auto overload =
      dot == std::string::npos ? "" : qualified.substr(dot + 1);
  return c10::Dispatcher::singleton().findSchema(
      {qualified.substr(0, dot), overload});
}

void registerDispatchStubs() {
  static const bool done = [] {
    at::native::_fused_sdp_choice_stub.set_privateuse1_dispatch_ptr(
        &fusedSdpChoice);
    return true;
  }();
  (void)done;
}

} // namespace torch::acc
