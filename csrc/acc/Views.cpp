#include <torch/csrc/acc/Views.h>

#include <torch/csrc/acc/PayloadTensor.h>
#include <torch/csrc/acc/Registration.h>
#include <torch/csrc/acc/compat.h>

#include <ATen/ExpandUtils.h>
#include <ATen/InferSize.h>
#include <ATen/TensorUtils.h>
#include <ATen/core/VariableHooksInterface.h>
#include <ATen/ops/detach_ops.h>
#include <ATen/ops/empty.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <utility>
#include <vector>

namespace torch::acc {

namespace {

// A view of `base` on its payload. Like every view, it keeps the base's
// conjugate and negative bits: they say how to read the shared data.
at::Tensor viewOn(
    const at::Tensor& base,
    c10::ScalarType dtype,
    c10::IntArrayRef sizes,
    c10::IntArrayRef strides,
    int64_t offset) {
  auto view = makePayloadView(base, dtype, sizes, strides, offset);
  view._set_conj(base.is_conj());
  view._set_neg(base.is_neg());
  return view;
}

at::Tensor viewOf(const at::Tensor& base, const at::Tensor& meta) {
  return viewOn(
      base,
      meta.scalar_type(),
      meta.sizes(),
      meta.strides(),
      meta.storage_offset());
}

// The kernel of every view operator: run the operator's meta kernel on a meta
// tensor with the same metadata, and make each result a tensor on the base's
// payload with the metadata the meta kernel gave it.
void viewKernel(
    const c10::OperatorHandle& op,
    c10::DispatchKeySet /*ks*/,
    torch::jit::Stack* stack) {
  const auto n = op.schema().arguments().size();
  auto& self_iv = (*stack)[stack->size() - n];
  const at::Tensor base = self_iv.toTensor();
  if (maybePayloadImpl(base) == nullptr) {
    // A tensor with PrivateUse1 keys but storage of its own, such as the meta
    // tensor inside a FakeTensor: its view is computed as on meta.
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
    return;
  }
  self_iv =
      at::empty({tensorExtent(base)}, base.options().device(c10::kMeta))
          .as_strided(base.sizes(), base.strides(), base.storage_offset());
  op.callBoxed(stack);
  for (size_t i = stack->size() - op.schema().returns().size();
       i < stack->size();
       ++i) {
    auto& out = (*stack)[i];
    if (out.isTensor()) {
      out = viewOf(base, out.toTensor());
    } else if (out.isTensorList()) {
      std::vector<at::Tensor> views;
      for (const auto& m : out.toTensorVector()) {
        views.push_back(viewOf(base, m));
      }
      out = views;
    }
  }
}

// Elements the payload of `t` spans, by the payload's own layout (what a
// storage of CPU would hold); a tensor without a payload yet spans its own
// extent.
int64_t payloadExtent(const at::Tensor& t) {
  const auto& slot = *payloadImpl(t).slot();
  return std::max(tensorExtent(t), slot.extent());
}

// The kernel of the in-place view operators (t_, transpose_, squeeze_,
// unsqueeze_, as_strided_): they change the tensor's metadata only, as on
// CPU. The operator's meta kernel, run on a meta tensor with the same
// metadata over as many elements as the payload has, checks the arguments and
// computes the new metadata.
void inplaceViewKernel(
    const c10::OperatorHandle& op,
    c10::DispatchKeySet /*ks*/,
    torch::jit::Stack* stack) {
  const auto n = op.schema().arguments().size();
  auto& self_iv = (*stack)[stack->size() - n];
  const at::Tensor self = self_iv.toTensor();
  if (maybePayloadImpl(self) == nullptr) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
    return;
  }
  const auto meta =
      at::empty({payloadExtent(self)}, self.options().device(c10::kMeta))
          .as_strided(self.sizes(), self.strides(), self.storage_offset());
  self_iv = meta;
  op.callBoxed(stack);
  payloadImpl(self).set_sizes_and_strides(
      meta.sizes(), meta.strides(), meta.storage_offset());
  torch::jit::drop(*stack, op.schema().returns().size());
  stack->push_back(self);
}

// view(dtype): a payload holds values, not bytes that could be read as
// another dtype; only the same dtype is a view.
void viewDtypeKernel(
    const c10::OperatorHandle& op,
    c10::DispatchKeySet /*ks*/,
    torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[stack->size() - 2].toTensor();
  const auto dtype = (*stack)[stack->size() - 1].toScalarType();
  if (maybePayloadImpl(self) == nullptr) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
    return;
  }
  TORCH_CHECK(
      dtype == self.scalar_type(),
      "aten::view.dtype: cannot view a tensor on ",
      self.device(),
      " of dtype ",
      self.scalar_type(),
      " as ",
      dtype,
      ": its data is a Python payload, which has no bytes to reinterpret. "
      "Copy it through the CPU instead: t.cpu().view(",
      dtype,
      ").to(t.device)");
  auto view =
      viewOn(self, dtype, self.sizes(), self.strides(), self.storage_offset());
  torch::jit::drop(*stack, 2);
  stack->push_back(std::move(view));
}

// resize_ as on CPU: metadata only when the payload has the elements; else
// the payload, shared with every alias and view, grows keeping its elements.
void resizeKernel(
    const c10::OperatorHandle& op,
    c10::DispatchKeySet /*ks*/,
    torch::jit::Stack* stack) {
  const at::Tensor self = (*stack)[stack->size() - 3].toTensor();
  if (maybePayloadImpl(self) == nullptr) {
    op.redispatchBoxed(c10::DispatchKeySet(c10::DispatchKey::Meta), stack);
    return;
  }
  const auto sizes = (*stack)[stack->size() - 2].toDimVector();
  const auto& format = (*stack)[stack->size() - 1];
  resizePayloadTensor(
      self,
      sizes,
      format.isNone() ? std::nullopt
                      : std::make_optional(format.toMemoryFormat()));
  torch::jit::drop(*stack, 3);
  stack->push_back(self);
}

constexpr const char* kInplaceViewOps[] = {
    "as_strided_",
    "squeeze_",
    "squeeze_.dim",
    "squeeze_.dims",
    "t_",
    "transpose_",
    "unsqueeze_",
};

// The metadata of a view: what a view operator computes.
struct ViewGeometry {
  c10::DimVector sizes;
  c10::DimVector strides;
  int64_t offset;
};

ViewGeometry geometryOf(const at::Tensor& t) {
  return {
      c10::DimVector(t.sizes()),
      c10::DimVector(t.strides()),
      t.storage_offset()};
}

// Direct metadata of the common view operators, computed from the base and
// the arguments on the stack (`args[0]` is the base). Each returns nullopt
// for arguments it leaves to the general path (`viewKernel`): anything
// invalid, so that the operator's meta kernel raises its own error.
using DirectView = std::optional<ViewGeometry> (*)(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args);

// A dimension index wrapped into [0, ndim), or nullopt when out of range.
std::optional<int64_t> wrapDim(int64_t dim, int64_t ndim) {
  if (dim < -ndim || dim >= ndim) {
    return std::nullopt;
  }
  return dim < 0 ? dim + ndim : dim;
}

std::optional<ViewGeometry> sameView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> /*args*/) {
  return geometryOf(self);
}

std::optional<ViewGeometry> viewView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  const auto size = args[1].toDimVector();
  // infer_size_dv raises the operator's own error for a size that does not
  // fit; a layout the view cannot express goes to the meta kernel's error.
  const auto inferred = at::infer_size_dv(size, self.numel());
  auto strides =
      at::detail::computeStride(self.sizes(), self.strides(), inferred);
  if (!strides) {
    return std::nullopt;
  }
  return ViewGeometry{inferred, std::move(*strides), self.storage_offset()};
}

std::optional<ViewGeometry> transposeView(
    const at::Tensor& self,
    int64_t dim0,
    int64_t dim1) {
  const auto d0 = wrapDim(dim0, self.dim());
  const auto d1 = wrapDim(dim1, self.dim());
  if (!d0 || !d1) {
    return std::nullopt;
  }
  auto g = geometryOf(self);
  std::swap(g.sizes[*d0], g.sizes[*d1]);
  std::swap(g.strides[*d0], g.strides[*d1]);
  return g;
}

std::optional<ViewGeometry> transposeIntView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  return transposeView(self, args[1].toInt(), args[2].toInt());
}

std::optional<ViewGeometry> tView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> /*args*/) {
  if (self.dim() < 2) {
    return geometryOf(self);
  }
  return self.dim() == 2 ? transposeView(self, 0, 1) : std::nullopt;
}

std::optional<ViewGeometry> permuteView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  const auto dims = args[1].toDimVector();
  const auto ndim = self.dim();
  if (static_cast<int64_t>(dims.size()) != ndim) {
    return std::nullopt;
  }
  ViewGeometry g{c10::DimVector(ndim), c10::DimVector(ndim), 0};
  g.offset = self.storage_offset();
  std::vector<bool> seen(ndim, false);
  for (int64_t i = 0; i < ndim; ++i) {
    const auto d = wrapDim(dims[i], ndim);
    if (!d || seen[*d]) {
      return std::nullopt;
    }
    seen[*d] = true;
    g.sizes[i] = self.size(*d);
    g.strides[i] = self.stride(*d);
  }
  return g;
}

std::optional<ViewGeometry> selectView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  const auto dim = wrapDim(args[1].toInt(), self.dim());
  if (!dim) {
    return std::nullopt;
  }
  const auto size = self.size(*dim);
  auto index = args[2].toInt();
  if (index < -size || index >= size) {
    return std::nullopt;
  }
  if (index < 0) {
    index += size;
  }
  auto g = geometryOf(self);
  g.offset += index * g.strides[*dim];
  g.sizes.erase(g.sizes.begin() + *dim);
  g.strides.erase(g.strides.begin() + *dim);
  return g;
}

std::optional<ViewGeometry> sliceView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  const auto dim = wrapDim(args[1].toInt(), self.dim());
  const auto step = args[4].toInt();
  if (!dim || step <= 0) {
    return std::nullopt;
  }
  // The clamping of at::native::slice: out-of-range bounds are clamped, not
  // errors.
  const auto size = self.size(*dim);
  auto start = args[2].isNone() ? 0 : args[2].toInt();
  auto end = args[3].isNone() ? size : args[3].toInt();
  if (start < 0) {
    start += size;
  }
  if (end < 0) {
    end += size;
  }
  start = std::clamp<int64_t>(start, 0, size);
  end = std::clamp<int64_t>(end, start, size);
  auto g = geometryOf(self);
  g.offset += start * g.strides[*dim];
  g.sizes[*dim] = (end - start + step - 1) / step;
  g.strides[*dim] *= step;
  return g;
}

std::optional<ViewGeometry> expandView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  // Fewer sizes than dimensions: the meta kernel's error.
  if (args[1].toDimVector().size() < static_cast<size_t>(self.dim())) {
    return std::nullopt;
  }
  // Raises the operator's own errors for sizes that do not expand.
  auto r = at::inferExpandGeometry_dimvector(
      self.sizes(), self.strides(), args[1].toDimVector());
  return ViewGeometry{
      std::move(r.sizes), std::move(r.strides), self.storage_offset()};
}

std::optional<ViewGeometry> unsqueezeView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  const auto dim = wrapDim(args[1].toInt(), self.dim() + 1);
  if (!dim) {
    return std::nullopt;
  }
  auto g = geometryOf(self);
  const auto stride = *dim >= self.dim() ? 1 : g.sizes[*dim] * g.strides[*dim];
  g.sizes.insert(g.sizes.begin() + *dim, 1);
  g.strides.insert(g.strides.begin() + *dim, stride);
  return g;
}

std::optional<ViewGeometry> squeezeView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> /*args*/) {
  ViewGeometry g{{}, {}, self.storage_offset()};
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (self.size(d) != 1) {
      g.sizes.push_back(self.size(d));
      g.strides.push_back(self.stride(d));
    }
  }
  return g;
}

std::optional<ViewGeometry> squeezeDimView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  const auto dim = wrapDim(args[1].toInt(), self.dim());
  if (!dim) {
    return std::nullopt;
  }
  auto g = geometryOf(self);
  if (g.sizes[*dim] == 1) {
    g.sizes.erase(g.sizes.begin() + *dim);
    g.strides.erase(g.strides.begin() + *dim);
  }
  return g;
}

std::optional<ViewGeometry> asStridedView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  ViewGeometry g{
      args[1].toDimVector(),
      args[2].toDimVector(),
      args[3].isNone() ? self.storage_offset() : args[3].toInt()};
  if (g.sizes.size() != g.strides.size() || g.offset < 0) {
    return std::nullopt;
  }
  // Within the base's extent, as the meta kernel checks against the storage
  // it is given.
  int64_t last = g.offset;
  for (size_t d = 0; d < g.sizes.size(); ++d) {
    if (g.sizes[d] < 0 || g.strides[d] < 0) {
      return std::nullopt;
    }
    if (g.sizes[d] == 0) {
      return g;
    }
    last += (g.sizes[d] - 1) * g.strides[d];
  }
  return last < tensorExtent(self) ? std::optional<ViewGeometry>(std::move(g))
                                   : std::nullopt;
}

std::optional<ViewGeometry> diagonalView(
    const at::Tensor& self,
    c10::ArrayRef<c10::IValue> args) {
  const auto offset = args[1].toInt();
  const auto d1 = wrapDim(args[2].toInt(), self.dim());
  const auto d2 = wrapDim(args[3].toInt(), self.dim());
  if (!d1 || !d2 || *d1 == *d2) {
    return std::nullopt;
  }
  // As at::native::diagonal.
  auto g = geometryOf(self);
  int64_t diag_size = 0;
  if (offset >= 0) {
    diag_size =
        std::max<int64_t>(std::min(g.sizes[*d1], g.sizes[*d2] - offset), 0);
  } else {
    diag_size =
        std::max<int64_t>(std::min(g.sizes[*d1] + offset, g.sizes[*d2]), 0);
  }
  if (diag_size > 0) {
    g.offset +=
        offset >= 0 ? offset * g.strides[*d2] : -offset * g.strides[*d1];
  }
  const auto diag_stride = g.strides[*d1] + g.strides[*d2];
  const auto hi = std::max(*d1, *d2);
  const auto lo = std::min(*d1, *d2);
  for (const auto d : {hi, lo}) {
    g.sizes.erase(g.sizes.begin() + d);
    g.strides.erase(g.strides.begin() + d);
  }
  g.sizes.push_back(diag_size);
  g.strides.push_back(diag_stride);
  return g;
}

// The kernel of a common view operator: its metadata computed directly, by
// `direct`, and the meta kernel's path (viewKernel) for anything else.
template <DirectView direct>
void directViewKernel(
    const c10::OperatorHandle& op,
    c10::DispatchKeySet ks,
    torch::jit::Stack* stack) {
  const auto n = op.schema().arguments().size();
  const auto args = torch::jit::last(*stack, n);
  const at::Tensor& base = args[0].toTensor();
  if (maybePayloadImpl(base) != nullptr) {
    if (auto g = direct(base, args)) {
      auto view =
          viewOn(base, base.scalar_type(), g->sizes, g->strides, g->offset);
      torch::jit::drop(*stack, n);
      stack->push_back(std::move(view));
      return;
    }
  }
  viewKernel(op, ks, stack);
}

// View operators whose metadata is computed directly (the common ones).
using MakeKernel = torch::CppFunction (*)();
template <DirectView direct>
constexpr MakeKernel kDirect =
    &torch::CppFunction::makeFromBoxedFunction<&directViewKernel<direct>>;

constexpr std::pair<const char*, MakeKernel> kDirectViewOps[] = {
    {"alias", kDirect<&sameView>},
    {"as_strided", kDirect<&asStridedView>},
    {"detach", kDirect<&sameView>},
    {"diagonal", kDirect<&diagonalView>},
    {"expand", kDirect<&expandView>},
    {"lift_fresh", kDirect<&sameView>},
    {"permute", kDirect<&permuteView>},
    {"select.int", kDirect<&selectView>},
    {"slice.Tensor", kDirect<&sliceView>},
    {"squeeze", kDirect<&squeezeView>},
    {"squeeze.dim", kDirect<&squeezeDimView>},
    {"t", kDirect<&tView>},
    {"transpose.int", kDirect<&transposeIntView>},
    {"unsqueeze", kDirect<&unsqueezeView>},
    {"view", kDirect<&viewView>},
    {"_unsafe_view", kDirect<&viewView>},
};

// Operators that return views of (or alias) their first argument, and whose
// metadata their meta kernel computes (the rest of them, and every one where
// kDirectViewOps' functions decline). Overloads that a torch release lacks
// are skipped.
// Only operators with an autograd formula of their own: a PrivateUse1 kernel
// for a CompositeImplicitAutograd one (narrow, chunk) would take the place of
// its decomposition under autograd too, and leave it without a derivative.
constexpr const char* kViewOps[] = {
    "split.Tensor",
    "split_with_sizes",
    "squeeze.dims",
    "unbind.int",
    "unfold",
    "_reshape_alias",
};

} // namespace

void registerViewKernels() {
  static bool done = false;
  if (done) {
    return;
  }
  done = true;
  auto& lib = newLibrary();
  const auto add = [&](const char* name, MakeKernel make) {
    if (findAtenOp(name)) {
      lib.impl(qualifiedAtenName(name).c_str(), make());
    }
  };
  for (const auto& [name, make] : kDirectViewOps) {
    add(name, make);
  }
  for (const char* name : kViewOps) {
    add(name, &torch::CppFunction::makeFromBoxedFunction<&viewKernel>);
  }
  for (const char* name : kInplaceViewOps) {
    add(name, &torch::CppFunction::makeFromBoxedFunction<&inplaceViewKernel>);
  }
  add("view.dtype",
      &torch::CppFunction::makeFromBoxedFunction<&viewDtypeKernel>);
  add("resize_", &torch::CppFunction::makeFromBoxedFunction<&resizeKernel>);
}

#if TORCH_ACC_DETACH_COPIES_FRESH_RESULT
// detach() in place of its Autograd and ADInplaceOrView kernels for
// PrivateUse1: a result that the backend's kernel made fresh becomes the
// non-differentiable view itself, as later releases make it, instead of a
// shallow copy without its Python object. Otherwise a gradient that
// AccumulateGrad steals through detach() reaches Python as a plain Tensor, not
// as the backend's subclass that its kernels returned (issue 13, item 19).
at::Tensor detachKeepingFreshResult(
    c10::DispatchKeySet ks,
    const at::Tensor& self) {
  at::Tensor out;
  {
    at::AutoDispatchBelowADInplaceOrView guard;
    out = at::_ops::detach::redispatch(
        ks & c10::after_ADInplaceOrView_keyset, self);
  }
  // Fresh: not the input, and referenced from nowhere else (a Python object
  // that the impl owns does not count; one that Python still holds does).
  if (out.defined() && !out.is_same(self) && out.use_count() == 1) {
    auto* impl = out.unsafeGetTensorImpl();
    impl->set_version_counter(torch::autograd::impl::version_counter(self));
    impl->set_allow_tensor_metadata_change(false);
    impl->set_autograd_meta(nullptr);
    return out;
  }
  return torch::autograd::make_variable_non_differentiable_view(
      self, out, /*allow_tensor_metadata_change=*/false);
}
#endif

// The autograd fallback that torch registers for its own devices' Autograd
// keys (VariableFallbackKernel.cpp): an operator without an autograd kernel
// runs, and a backward through it warns or raises as
// torch._C._set_autograd_fallback_mode says.
void autogradFallback(
    const c10::OperatorHandle& op,
    c10::DispatchKeySet ks,
    torch::jit::Stack* stack) {
  at::impl::GetVariableHooks()->basic_autograd_not_implemented_fallback(
      op, ks, stack);
}

void registerAutogradKernels() {
  static bool done = false;
  if (done) {
    return;
  }
  done = true;
  // torch 2.6 leaves AutogradPrivateUse1 without that fallback ("maybe the
  // extension wants to override it"), so every operator without an autograd
  // kernel of its own (functional collectives, custom operators) fails under
  // autograd on PrivateUse1; later releases register it as for CPU.
  if (!c10::Dispatcher::singleton().hasBackendFallbackForDispatchKey(
          c10::DispatchKey::AutogradPrivateUse1)) {
    newLibrary("_", c10::DispatchKey::AutogradPrivateUse1)
        .fallback(
            torch::CppFunction::makeFromBoxedFunction<&autogradFallback>());
  }
#if TORCH_ACC_DETACH_COPIES_FRESH_RESULT
  newLibrary("aten", c10::DispatchKey::AutogradPrivateUse1)
      .impl("detach", TORCH_FN(detachKeepingFreshResult));
#endif
}

} // namespace torch::acc
