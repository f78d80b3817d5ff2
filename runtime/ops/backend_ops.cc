// The CUDA backend's declared operator table and the host-fallback counter
// (backend_ops.h). runtime/cuda/cuda_backend.cc dispatches by this table;
// tests/runtime/op_tables_test.cc checks it names registry operators with
// host kernels.
#include "runtime/ops/backend_ops.h"

#include <algorithm>

#include "passes/ir.h"

namespace ferry {
namespace {

constexpr BackendSupport D = BackendSupport::kDevice;
constexpr BackendSupport H = BackendSupport::kHostOnly;

// Keep sorted by name (a test checks).
constexpr BackendOp kCudaOps[] = {
    {"aten::_log_softmax", D},
    {"aten::_native_batch_norm_legit_no_training", D},
    {"aten::_native_multi_head_attention", H},
    {"aten::_reshape_alias", D},  // view
    {"aten::_softmax", D},
    {"aten::_to_copy", D},
    {"aten::_unsafe_view", D},
    {"aten::abs", D},
    {"aten::abs_", D},
    {"aten::add.Scalar", D},
    {"aten::add.Tensor", D},
    {"aten::add_.Scalar", D},
    {"aten::add_.Tensor", D},
    {"aten::addmm", D},
    {"aten::alias", D},  // view
    {"aten::alias_copy", D},
    {"aten::amax", D},
    {"aten::amin", D},
    {"aten::arange", H},
    {"aten::arange.start", H},
    {"aten::arange.start_step", H},
    {"aten::as_strided", D},  // view
    {"aten::avg_pool2d", H},
    {"aten::bmm", D},
    {"aten::cat", D},
    {"aten::ceil", D},
    {"aten::clamp", D},
    {"aten::clamp_", D},
    {"aten::clone", D},
    {"aten::contiguous", D},
    {"aten::convolution", D},
    {"aten::copy_", D},
    {"aten::cos", D},
    {"aten::detach", D},  // view
    {"aten::div.Scalar", D},
    {"aten::div.Tensor", D},
    {"aten::div_.Scalar", D},
    {"aten::div_.Tensor", D},
    {"aten::embedding", D},
    {"aten::empty.memory_format", D},
    {"aten::eq.Scalar", D},
    {"aten::eq.Tensor", D},
    {"aten::erf", D},
    {"aten::exp", D},
    {"aten::exp_", D},
    {"aten::expand", D},  // view
    {"aten::expand_copy", D},
    {"aten::fill_.Scalar", D},
    {"aten::floor", D},
    {"aten::ge.Scalar", D},
    {"aten::ge.Tensor", D},
    {"aten::gelu", D},
    {"aten::gelu_", D},
    {"aten::gt.Scalar", D},
    {"aten::gt.Tensor", D},
    {"aten::hardtanh", D},
    {"aten::hardtanh_", D},
    {"aten::index_select", H},
    {"aten::le.Scalar", D},
    {"aten::le.Tensor", D},
    {"aten::leaky_relu", D},
    {"aten::leaky_relu_", D},
    {"aten::linear", D},
    {"aten::log", D},
    {"aten::log_softmax.int", D},
    {"aten::logical_and", D},
    {"aten::logical_not", D},
    {"aten::logical_or", D},
    {"aten::logical_xor", D},
    {"aten::lt.Scalar", D},
    {"aten::lt.Tensor", D},
    {"aten::masked_fill.Scalar", D},
    {"aten::masked_fill.Tensor", H},
    {"aten::max_pool2d_with_indices", D},
    {"aten::maximum", D},
    {"aten::mean", D},
    {"aten::mean.dim", D},
    {"aten::minimum", D},
    {"aten::mm", D},
    {"aten::mul.Scalar", D},
    {"aten::mul.Tensor", D},
    {"aten::mul_.Scalar", D},
    {"aten::mul_.Tensor", D},
    {"aten::native_batch_norm", D},
    {"aten::native_layer_norm", D},
    {"aten::ne.Scalar", D},
    {"aten::ne.Tensor", D},
    {"aten::neg", D},
    {"aten::neg_", D},
    {"aten::ones", D},
    {"aten::permute", D},  // view
    {"aten::pow.Tensor_Scalar", D},
    {"aten::pow.Tensor_Tensor", D},
    {"aten::reciprocal", D},
    {"aten::relu", D},
    {"aten::relu_", D},
    {"aten::reshape", D},  // view
    {"aten::round", D},
    {"aten::rsqrt", D},
    {"aten::rsub.Scalar", D},
    {"aten::rsub.Tensor", D},
    {"aten::select.int", D},  // view
    {"aten::sigmoid", D},
    {"aten::sigmoid_", D},
    {"aten::sign", D},
    {"aten::silu", D},
    {"aten::silu_", D},
    {"aten::sin", D},
    {"aten::sin_", D},
    {"aten::slice.Tensor", D},  // view
    {"aten::softmax.int", D},
    {"aten::split.Tensor", D},  // view
    {"aten::sqrt", D},
    {"aten::squeeze", D},      // view
    {"aten::squeeze.dim", D},  // view
    {"aten::sub.Scalar", D},
    {"aten::sub.Tensor", D},
    {"aten::sub_.Scalar", D},
    {"aten::sub_.Tensor", D},
    {"aten::sum", D},
    {"aten::sum.dim_IntList", D},
    {"aten::t", D},  // view
    {"aten::tan", D},
    {"aten::tanh", D},
    {"aten::tanh_", D},
    {"aten::to.dtype", D},
    {"aten::transpose.int", D},  // view
    {"aten::triu", H},
    {"aten::trunc", D},
    {"aten::unsqueeze", D},  // view
    {"aten::view", D},       // view
    {"aten::where.self", D},
    {"aten::zero_", D},
    {"aten::zeros", D},
};

thread_local HostFallbackScope* current_scope = nullptr;

std::string_view Canonical(std::string_view op) {
  constexpr std::string_view kDefault = ".default";
  if (op.ends_with(kDefault)) op.remove_suffix(kDefault.size());
  return op;
}

}  // namespace

std::span<const BackendOp> CudaBackendTable() { return kCudaOps; }

BackendSupport CudaBackendSupport(std::string_view op) {
  op = Canonical(op);
  const BackendOp* end = std::end(kCudaOps);
  const BackendOp* it = std::lower_bound(
      std::begin(kCudaOps), end, op,
      [](const BackendOp& e, std::string_view name) { return e.op < name; });
  return it != end && it->op == op ? it->support : BackendSupport::kUnsupported;
}

std::vector<std::string> CudaBackendOperators() {
  std::vector<std::string> names;
  for (const BackendOp& e : kCudaOps) names.emplace_back(e.op);
  return names;
}

std::vector<std::string> CudaHostOnlyOperators() {
  std::vector<std::string> names;
  for (const BackendOp& e : kCudaOps)
    if (e.support == BackendSupport::kHostOnly) names.emplace_back(e.op);
  return names;
}

BackendOperators DeclaredBackendOperators() {
  BackendOperators declared;
  declared.by_backend.emplace_back(kCudaBackendId, CudaBackendOperators());
  return declared;
}

HostFallbackScope::HostFallbackScope() : outer_(current_scope) {
  current_scope = this;
}

HostFallbackScope::~HostFallbackScope() { current_scope = outer_; }

void RecordHostFallback(std::string_view op) {
  if (current_scope == nullptr) return;
  ++current_scope->counts_[std::string(Canonical(op))];
}

}  // namespace ferry
