// Attention: aten::_native_multi_head_attention, computed directly as ATen's
// CPU kernel does (torch 1.13, aten/src/ATen/native/transformers/
// attention.cpp), for batch-first 3-D query [B, T, E], key and value
// [B, S, E]:
//   q = (query @ Wq^T + bq) / sqrt(E / H), k = key @ Wk^T + bk,
//   v = value @ Wv^T + bv           (W = qkv_weight [3E, E] split by rows)
//   per batch and head: a = softmax(q_h @ k_h^T (masked)) ; c_h = a @ v_h
//   out = concat_h(c_h) @ proj_weight^T + proj_bias          -> output 0
// mask: None, or bool (true = masked out) of mask_type 0 ([T, S], the
// attention mask) or 1 ([B, S], the key padding mask); a row with every key
// masked gives zeros, as ATen's masked softmax does. Output 1 holds the
// attention weights when need_weights (averaged over heads with
// average_attn_weights: [B, T, S], else [B, H, T, S]) and is empty ([0])
// otherwise. Computes in float (f32, f16, bf16; 16-bit results rounded once)
// or double (f64), products through OpenBLAS. The embedding itself
// (aten::embedding) is in host_kernels_shape.cc.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "runtime/absl_compat.h"
#include "runtime/ops/family.h"

namespace ferry::host {
namespace {

void GemmNT(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, int64_t m, int64_t n, int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, lda, b,
              ldb, 0.0f, c, ldc);
}
void GemmNT(const double* a, int64_t lda, const double* b, int64_t ldb,
            double* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0, a, lda, b,
              ldb, 0.0, c, ldc);
}
void GemmNN(const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
            int64_t ldc, int64_t m, int64_t n, int64_t k) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, lda,
              b, ldb, 0.0f, c, ldc);
}
void GemmNN(const double* a, int64_t lda, const double* b, int64_t ldb,
            double* c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, lda,
              b, ldb, 0.0, c, ldc);
}

// y[rows, E] = x[rows, E] @ w[E, E]^T + bias[E]
template <typename T>
void Project(const T* x, int64_t rows, int64_t e, const T* w, const T* bias,
             T* y) {
  GemmNT(x, e, w, e, y, e, rows, e, e);
  if (bias)
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < e; ++i) y[r * e + i] += bias[i];
}

// Softmax of one row of scores in place. NaNs are passed over when looking
// for the maximum (and then make every result NaN); a row with every score
// -inf (every key masked) gives zeros. Each step is a loop of its own, so
// that the maximum and the sum stay in registers and the exponentials are
// not held up by them; the sum is added in order.
template <typename T>
void SoftmaxInPlace(T* row, int64_t n) {
  T best = -std::numeric_limits<T>::infinity();
  for (int64_t s = 0; s < n; ++s) best = row[s] > best ? row[s] : best;
  if (best == -std::numeric_limits<T>::infinity()) {
    std::fill(row, row + n, T(0));
    return;
  }
  for (int64_t s = 0; s < n; ++s) row[s] = std::exp(row[s] - best);
  T sum = 0;
  for (int64_t s = 0; s < n; ++s) sum += row[s];
  for (int64_t s = 0; s < n; ++s) row[s] /= sum;
}

template <typename T>
absl::Status Attention(const KernelCall& call) {
  const TensorView& query = call.args[0].tensor;
  const TensorView& key = call.args[1].tensor;
  const TensorView& value = call.args[2].tensor;
  const int64_t E = call.args[3].AsInt(), H = call.args[4].AsInt();
  const KernelArg& mask = call.args[9];
  const bool need_weights = call.args[10].bool_value;
  const bool average = call.args[11].bool_value;
  const int64_t mask_type =
      call.args[12].is_number() ? call.args[12].AsInt() : -1;
  const int64_t B = query.sizes[0], T_ = query.sizes[1], S = key.sizes[1];
  const int64_t dh = E / H;
  std::vector<T> sq, sk, sv, sw, sb, spw, spb;
  const T* xq = DenseAs<T>(query, sq);
  const T* xk = DenseAs<T>(key, sk);
  const T* xv = DenseAs<T>(value, sv);
  const T* w = DenseAs<T>(call.args[5].tensor, sw);
  const T* b = DenseAs<T>(call.args[6].tensor, sb);
  const T* pw = DenseAs<T>(call.args[7].tensor, spw);
  const T* pb = DenseAs<T>(call.args[8].tensor, spb);
  std::vector<T> q(B * T_ * E), k(B * S * E), v(B * S * E), ctx(B * T_ * E);
  Project<T>(xq, B * T_, E, w, b, q.data());
  Project<T>(xk, B * S, E, w + E * E, b + E, k.data());
  Project<T>(xv, B * S, E, w + 2 * E * E, b + 2 * E, v.data());
  const T scale = T(1) / std::sqrt(static_cast<T>(dh));
  for (T& x : q) x *= scale;
  if (StopTick(3 * B * (T_ + S) * E * E / 3)) return absl::OkStatus();

  const TensorView* weights_out =
      need_weights && call.outputs.size() > 1 ? &call.outputs[1] : nullptr;
  std::vector<T> weights;
  if (weights_out) weights.assign(B * (average ? 1 : H) * T_ * S, T(0));
  std::vector<T> scores(T_ * S);
  auto masked = [&](int64_t bi, int64_t t, int64_t s) {
    if (!mask.is_tensor()) return false;
    const TensorView& m = mask.tensor;
    int64_t offset;
    if (mask_type == 1) {
      offset = bi * m.strides[0] + s * m.strides[1];
    } else {  // [T, S] (also given as [1, T, S] or [B, H, T, S] broadcast)
      const int64_t d = m.dim();
      offset = t * m.strides[d - 2] + s * m.strides[d - 1];
    }
    return element::LoadAsDouble(m.dtype,
                                 m.bytes() + offset * m.element_size()) != 0;
  };
  for (int64_t bi = 0; bi < B; ++bi) {
    for (int64_t h = 0; h < H; ++h) {
      GemmNT(q.data() + bi * T_ * E + h * dh, E, k.data() + bi * S * E + h * dh,
             E, scores.data(), S, T_, S, dh);
      for (int64_t t = 0; t < T_; ++t) {
        T* row = scores.data() + t * S;
        if (mask.is_tensor())
          for (int64_t s = 0; s < S; ++s)
            if (masked(bi, t, s)) row[s] = -std::numeric_limits<T>::infinity();
        SoftmaxInPlace(row, S);
      }
      if (weights_out) {
        T* dst = weights.data() + (average ? bi : bi * H + h) * T_ * S;
        const T f = average ? T(1) / static_cast<T>(H) : T(1);
        for (int64_t i = 0; i < T_ * S; ++i) dst[i] += scores[i] * f;
      }
      GemmNN(scores.data(), S, v.data() + bi * S * E + h * dh, E,
             ctx.data() + bi * T_ * E + h * dh, E, T_, dh, S);
      if (StopTick(2 * T_ * S * dh)) return absl::OkStatus();
    }
  }
  const TensorView& out = call.outputs[0];
  std::vector<T> result(B * T_ * E);
  Project<T>(ctx.data(), B * T_, E, pw, pb, result.data());
  StoreDense<T>(result.data(), out);
  if (weights_out &&
      weights_out->numel() == static_cast<int64_t>(weights.size()))
    StoreDense<T>(weights.data(), *weights_out);
  return absl::OkStatus();
}

// _native_multi_head_attention(query, key, value, int embed_dim,
//   int num_head, qkv_weight, qkv_bias, proj_weight, proj_bias, mask?,
//   bool need_weights=True, bool average_attn_weights=True, int? mask_type)
absl::Status MultiHeadAttentionKernel(const KernelCall& call) {
  if (call.args.size() < 13 || call.outputs.size() != 2)
    return KernelError(call, "expects 13 arguments and 2 outputs");
  for (int i : {0, 1, 2, 5, 6, 7, 8})
    if (!call.args[i].is_tensor())
      return KernelError(call, "query, key, value and the weights are tensors");
  const TensorView& query = call.args[0].tensor;
  const TensorView& key = call.args[1].tensor;
  const TensorView& value = call.args[2].tensor;
  const int64_t E = call.args[3].AsInt(), H = call.args[4].AsInt();
  if (query.dim() != 3 || key.dim() != 3 || value.dim() != 3)
    return absl::UnimplementedError(
        absl::StrCat(AsAbsl(call.op),
                     ": only batch-first 3-D query, key and value are "
                     "supported"));
  if (H <= 0 || E <= 0 || E % H != 0 || query.sizes[2] != E ||
      key.sizes[2] != E || value.sizes != key.sizes ||
      key.sizes[0] != query.sizes[0])
    return KernelError(call, "embed_dim, num_head and the input sizes differ");
  if (call.args[5].tensor.numel() != 3 * E * E ||
      call.args[6].tensor.numel() != 3 * E ||
      call.args[7].tensor.numel() != E * E || call.args[8].tensor.numel() != E)
    return KernelError(call, "weight sizes do not fit embed_dim");
  const TensorView& out = call.outputs[0];
  if (out.sizes != query.sizes) return KernelError(call, "output 0 differs");
  const KernelArg& mask = call.args[9];
  if (mask.is_tensor()) {
    const int64_t mask_type =
        call.args[12].is_number() ? call.args[12].AsInt() : -1;
    const TensorView& m = mask.tensor;
    const bool ok =
        mask_type == 1
            ? (m.dim() == 2 && m.sizes[0] == query.sizes[0] &&
               m.sizes[1] == key.sizes[1])
            : (m.dim() >= 2 && m.sizes[m.dim() - 2] == query.sizes[1] &&
               m.sizes[m.dim() - 1] == key.sizes[1]);
    if (!ok || (mask_type != 0 && mask_type != 1 && mask_type != -1))
      return absl::UnimplementedError(
          absl::StrCat(AsAbsl(call.op), ": mask ", m.DebugString(),
                       " of mask_type ", mask_type, " is not supported"));
  }
  if (!IsFloatingPoint(out.dtype)) return UnsupportedDType(call, out.dtype);
  if (out.numel() == 0) return absl::OkStatus();
  if (out.dtype == DType::kF64) return Attention<double>(call);
  return Attention<float>(call);
}

const FamilyKernel kAttention[] = {
    {"aten::_native_multi_head_attention",
     &Guard<MultiHeadAttentionKernel, false>},
};

}  // namespace

std::span<const FamilyKernel> AttentionKernels() { return kAttention; }

}  // namespace ferry::host
