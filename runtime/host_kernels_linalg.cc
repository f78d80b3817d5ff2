// Host kernels for matrix products (mm, addmm, bmm, linear), and the
// generic convolution loop.
//
// Every matrix product reduces to one primitive, Gemm:
//
//   C[M,N] = alpha * A[M,K] @ B[K,N] + beta * C
//
// on 2-D views with arbitrary strides. Every float dtype goes through
// OpenBLAS: f32 and f64 call cblas_sgemm / cblas_dgemm (row-major) directly;
// a view is BLAS-compatible when one of its strides is 1 and the other at
// least the row length, read as "no transpose" or "transpose"; an
// incompatible operand (broadcast, gapped both ways) is first copied to a
// dense temporary, and an incompatible C is computed in a temporary and
// copied out. f16 and bf16 (and mixes of them with f32) are converted to
// dense f32 once, multiplied by cblas_sgemm and converted back, rounding
// once per element. Only the integers (accumulating in int64, wrapping) and
// mixes with f64 use the plain loop, accumulating in double.
//
// Convolution: the kernel the library registers is the im2col + BLAS one in
// runtime/ops/nn_conv.cc (f32, f64, f16, bf16 of one dtype). The loop here,
// ConvolutionLoopKernel, is its fallback for what BLAS cannot serve: integer
// and mixed-dtype convolutions, read element by element through any strides
// and accumulated in double.
//
// OpenBLAS's kernels: at start-up the library may have picked its generic
// SSE3 kernels for a CPU it does not know; see "Which OpenBLAS kernels"
// below.
//
// Cancellation (cancel.h): a BLAS call cannot be interrupted, so a large
// product is split into blocks of rows or of columns, whichever keeps the
// larger operand whole (BLAS packs its operands in every call), of about
// kBlockMultiplyAdds multiply-adds each (tens of milliseconds), with a stop
// check between blocks; the loops check every kStopPollUnits multiply-adds.
#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string_view>

#include "runtime/absl_compat.h"
#include "runtime/host_kernels_internal.h"

extern "C" {
__attribute__((weak)) void gotoblas_dynamic_init(void);
__attribute__((weak)) void gotoblas_dynamic_quit(void);
}

namespace ferry::host {
namespace {

// --- Which OpenBLAS kernels the products run on ---------------------------
//
// Debian 12's OpenBLAS (0.3.21) is built with DYNAMIC_ARCH: when the library
// loads it reads the CPU's family and model and picks the kernels tuned for
// that core. A core newer than the library (this project's machines: family 6
// model 207, a Xeon that 0.3.21 predates) is not in its tables, and it falls
// back to `Prescott`, the SSE3 kernels: sgemm runs 4x slower than on the
// AVX-512 kernels the CPU can run (bench/verify_vs_eager.py,
// docs/performance.md "Host kernels").
//
// So once, when the program starts (before main, on one thread, before any
// BLAS call): if OpenBLAS chose Prescott but the CPU (and the operating
// system, which libgcc's __builtin_cpu_supports checks) supports AVX-512 or
// AVX2+FMA, pick the matching kernels as OPENBLAS_CORETYPE would have:
// `SkylakeX` (AVX-512 F/CD/BW/DQ/VL) or `Haswell` (AVX2 + FMA). The switch
// is OpenBLAS's own start-up path run again (gotoblas_dynamic_quit and
// gotoblas_dynamic_init, exported by DYNAMIC_ARCH builds; declared weak here,
// so a library built for one core simply skips it). An OPENBLAS_CORETYPE set
// by the user always wins; any detected core other than Prescott is kept.

// The OpenBLAS core type whose kernels this CPU runs, or nullptr.
const char* CoreTypeForThisCpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
  return nullptr;
}

bool ReplaceGenericOpenBlasKernels() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr) return false;  // the user's
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr)
    return false;  // not a DYNAMIC_ARCH build: nothing to choose
  if (std::string_view(openblas_get_corename()) != "Prescott")
    return false;  // the library knew this CPU
  const char* core = CoreTypeForThisCpu();
  if (core == nullptr) return false;  // Prescott is right
  // gotoblas_dynamic_init reads the choice from the environment; child
  // processes (ferryd started by a tool) then start with it directly.
  setenv("OPENBLAS_CORETYPE", core, /*overwrite=*/0);
  gotoblas_dynamic_quit();
  gotoblas_dynamic_init();
  return true;
}

[[maybe_unused]] const bool kGenericKernelsReplaced =
    ReplaceGenericOpenBlasKernels();

// Multiply-adds per BLAS call between two stop checks.
constexpr int64_t kBlockMultiplyAdds = int64_t{1} << 26;

// How BLAS can read a 2-D view: transposed or not, with leading dimension ld.
struct BlasOperand {
  bool ok = false;
  CBLAS_TRANSPOSE trans = CblasNoTrans;
  int64_t ld = 0;
};

BlasOperand AsBlasOperand(const TensorView& t) {
  const int64_t rows = t.sizes[0], cols = t.sizes[1];
  // Strides of size-1 dims do not matter; pick the ones BLAS likes.
  const int64_t row_stride =
      rows == 1 ? std::max<int64_t>(cols, 1) : t.strides[0];
  const int64_t col_stride = cols == 1 ? 1 : t.strides[1];
  if (col_stride == 1 && row_stride >= std::max<int64_t>(cols, 1))
    return {true, CblasNoTrans, row_stride};
  const int64_t col_stride_t =
      cols == 1 ? std::max<int64_t>(rows, 1) : t.strides[1];
  const int64_t row_stride_t = rows == 1 ? 1 : t.strides[0];
  if (row_stride_t == 1 && col_stride_t >= std::max<int64_t>(rows, 1))
    return {true, CblasTrans, col_stride_t};
  return {};
}

absl::Status GemmBlas(const TensorView& a, const TensorView& b,
                      const TensorView& c, double alpha, double beta) {
  const int64_t M = a.sizes[0], K = a.sizes[1], N = b.sizes[1];
  Scratch a_dense, b_dense, c_dense;
  TensorView av = a, bv = b, cv = c;
  BlasOperand ab = AsBlasOperand(av);
  if (!ab.ok) {
    a_dense = MakeScratch(a.dtype, a.sizes);
    ScatterContiguous(a_dense.view, GatherContiguous(a).data());
    av = a_dense.view;
    ab = AsBlasOperand(av);
  }
  BlasOperand bb = AsBlasOperand(bv);
  if (!bb.ok) {
    b_dense = MakeScratch(b.dtype, b.sizes);
    ScatterContiguous(b_dense.view, GatherContiguous(b).data());
    bv = b_dense.view;
    bb = AsBlasOperand(bv);
  }
  BlasOperand cb = AsBlasOperand(cv);
  const bool c_direct = cb.ok && cb.trans == CblasNoTrans;
  if (!c_direct) {
    c_dense = MakeScratch(c.dtype, c.sizes);
    if (beta != 0) ScatterContiguous(c_dense.view, GatherContiguous(c).data());
    cv = c_dense.view;
    cb = AsBlasOperand(cv);
  }
  // The product goes in blocks of about kBlockMultiplyAdds, split along
  // M (rows of A and C) or N (columns of B and C). BLAS packs both operands
  // afresh in every call, so the split keeps the larger one whole: a block
  // of rows packs all of B again, a block of columns all of A. (A linear
  // layer of 197 tokens by 3072 features split by rows packed its weight
  // eight times, more time than the products of all but the largest
  // layers.)
  const bool by_columns = M <= N;
  const int64_t extent = by_columns ? N : M;
  const int64_t per_unit = std::max<int64_t>((by_columns ? M : N) * K, 1);
  const int64_t block =
      std::clamp<int64_t>(kBlockMultiplyAdds / per_unit, 1, extent);
  const int64_t es = a.element_size();
  for (int64_t first = 0; first < extent; first += block) {
    if (first > 0 && StopTick(kStopPollUnits)) return absl::OkStatus();
    const int64_t count = std::min(block, extent - first);
    // Where the block starts in A, B and C: row r of a matrix read as it
    // is (NoTrans) starts r * ld elements in, column j at j; read
    // transposed, the other way round. C is never transposed here.
    const std::byte* a_block = av.bytes();
    const std::byte* b_block = bv.bytes();
    std::byte* c_block = cv.bytes();
    if (by_columns) {
      b_block += first * (bb.trans == CblasNoTrans ? 1 : bb.ld) * es;
      c_block += first * es;
    } else {
      a_block += first * (ab.trans == CblasNoTrans ? ab.ld : 1) * es;
      c_block += first * cb.ld * es;
    }
    const int64_t rows = by_columns ? M : count;
    const int64_t columns = by_columns ? count : N;
    if (a.dtype == DType::kF32) {
      cblas_sgemm(
          CblasRowMajor, ab.trans, bb.trans, rows, columns, K,
          static_cast<float>(alpha), reinterpret_cast<const float*>(a_block),
          ab.ld, reinterpret_cast<const float*>(b_block), bb.ld,
          static_cast<float>(beta), reinterpret_cast<float*>(c_block), cb.ld);
    } else {
      cblas_dgemm(CblasRowMajor, ab.trans, bb.trans, rows, columns, K, alpha,
                  reinterpret_cast<const double*>(a_block), ab.ld,
                  reinterpret_cast<const double*>(b_block), bb.ld, beta,
                  reinterpret_cast<double*>(c_block), cb.ld);
    }
  }
  if (!c_direct) ScatterContiguous(c, c_dense.bytes.data());
  return absl::OkStatus();
}

void GemmLoops(const TensorView& a, const TensorView& b, const TensorView& c,
               double alpha, double beta) {
  const int64_t M = a.sizes[0], K = a.sizes[1], N = b.sizes[1];
  const DType ac = a.dtype, bc = b.dtype, cc = c.dtype;
  const int64_t ae = a.element_size(), be = b.element_size(),
                ce = c.element_size();
  const bool as_float = IsFloatingPoint(a.dtype) || IsFloatingPoint(b.dtype) ||
                        IsFloatingPoint(c.dtype);
  for (int64_t i = 0; i < M; ++i) {
    if (StopTick(N * (K + 1))) return;
    for (int64_t j = 0; j < N; ++j) {
      std::byte* cp = c.bytes() + (i * c.strides[0] + j * c.strides[1]) * ce;
      if (as_float) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc +=
              element::LoadAsDouble(
                  ac, a.bytes() + (i * a.strides[0] + k * a.strides[1]) * ae) *
              element::LoadAsDouble(
                  bc, b.bytes() + (k * b.strides[0] + j * b.strides[1]) * be);
        }
        double result = alpha * acc;
        if (beta != 0) result += beta * element::LoadAsDouble(cc, cp);
        element::StoreDouble(cc, cp, result);
      } else {
        uint64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          acc +=
              static_cast<uint64_t>(element::LoadAsInt64(
                  ac, a.bytes() + (i * a.strides[0] + k * a.strides[1]) * ae)) *
              static_cast<uint64_t>(element::LoadAsInt64(
                  bc, b.bytes() + (k * b.strides[0] + j * b.strides[1]) * be));
        }
        uint64_t result =
            acc * static_cast<uint64_t>(static_cast<int64_t>(alpha));
        if (beta != 0)
          result += static_cast<uint64_t>(static_cast<int64_t>(beta)) *
                    static_cast<uint64_t>(element::LoadAsInt64(cc, cp));
        element::StoreInt64(cc, cp, static_cast<int64_t>(result));
      }
    }
  }
}

// C = alpha * A @ B + beta * C on 2-D views.
absl::Status Gemm(const KernelCall& call, const TensorView& a,
                  const TensorView& b, const TensorView& c, double alpha,
                  double beta) {
  if (a.dim() != 2 || b.dim() != 2 || c.dim() != 2)
    return KernelError(call, "matrix operands must be 2-D");
  const int64_t M = a.sizes[0], K = a.sizes[1], N = b.sizes[1];
  if (b.sizes[0] != K || c.sizes[0] != M || c.sizes[1] != N) {
    return KernelError(
        call, absl::StrCat("shapes ", a.DebugString(), " @ ", b.DebugString(),
                           " -> ", c.DebugString(), " do not fit"));
  }
  if (M == 0 || N == 0) return absl::OkStatus();
  if (a.dtype == DType::kBool || b.dtype == DType::kBool)
    return UnsupportedDType(call, DType::kBool);
  const bool blas = (a.dtype == DType::kF32 || a.dtype == DType::kF64) &&
                    a.dtype == b.dtype && a.dtype == c.dtype && K > 0;
  if (blas) return GemmBlas(a, b, c, alpha, beta);
  auto single_or_half = [](DType dtype) {
    return dtype == DType::kF32 || dtype == DType::kF16 ||
           dtype == DType::kBF16;
  };
  if (single_or_half(a.dtype) && single_or_half(b.dtype) &&
      single_or_half(c.dtype) && K > 0) {
    // Through f32: exact widening, sgemm, one rounding when stored.
    auto widened = [](const TensorView& t, bool copy, Scratch& scratch) {
      if (t.dtype == DType::kF32) return t;
      scratch = MakeScratch(DType::kF32, t.sizes);
      if (copy) (void)CopyStridedHost(scratch.view, t);
      return scratch.view;
    };
    Scratch a32, b32, c32;
    const TensorView av = widened(a, true, a32);
    if (StopTick(a.numel())) return absl::OkStatus();
    const TensorView bv = widened(b, true, b32);
    if (StopTick(b.numel())) return absl::OkStatus();
    const TensorView cv = widened(c, beta != 0, c32);
    if (absl::Status s = GemmBlas(av, bv, cv, alpha, beta); !s.ok()) return s;
    if (c.dtype != DType::kF32) return CopyStridedHost(c, cv);
    return absl::OkStatus();
  }
  GemmLoops(a, b, c, alpha, beta);
  return absl::OkStatus();
}

}  // namespace

// mm(self, mat2)
absl::Status MmKernel(const KernelCall& call) {
  return Gemm(call, call.args[0].tensor, call.args[1].tensor, call.outputs[0],
              1.0, 0.0);
}

// addmm(self, mat1, mat2, *, beta=1, alpha=1): beta * self + alpha * mat1 @
// mat2
absl::Status AddmmKernel(const KernelCall& call) {
  const TensorView& out = call.outputs[0];
  const double beta = call.args[3].is_number() ? call.args[3].AsDouble() : 1.0;
  const double alpha = call.args[4].is_number() ? call.args[4].AsDouble() : 1.0;
  if (beta != 0) {
    absl::Status s = CheckBroadcast(call, call.args[0].tensor, out);
    if (!s.ok()) return s;
    s = CopyStridedHost(out, call.args[0].tensor);
    if (!s.ok()) return KernelError(call, s.message());
  }
  return Gemm(call, call.args[1].tensor, call.args[2].tensor, out, alpha, beta);
}

// bmm(self, mat2): [B,M,K] @ [B,K,N] -> [B,M,N]
absl::Status BmmKernel(const KernelCall& call) {
  const TensorView& a = call.args[0].tensor;
  const TensorView& b = call.args[1].tensor;
  const TensorView& out = call.outputs[0];
  if (a.dim() != 3 || b.dim() != 3 || out.dim() != 3)
    return KernelError(call, "bmm operands must be 3-D");
  if (b.sizes[0] != a.sizes[0] || out.sizes[0] != a.sizes[0])
    return KernelError(call, "batch sizes differ");
  auto matrix = [](const TensorView& t, int64_t i) {
    TensorView m = t;
    m.data = t.bytes() + i * t.strides[0] * t.element_size();
    m.sizes.erase(m.sizes.begin());
    m.strides.erase(m.strides.begin());
    return m;
  };
  for (int64_t i = 0; i < a.sizes[0]; ++i) {
    absl::Status s =
        Gemm(call, matrix(a, i), matrix(b, i), matrix(out, i), 1.0, 0.0);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

// linear(input [*, K], weight [N, K], bias? [N]) -> [*, N]
absl::Status LinearKernel(const KernelCall& call) {
  const TensorView& input = call.args[0].tensor;
  const TensorView& weight = call.args[1].tensor;
  const KernelArg& bias = call.args[2];
  const TensorView& out = call.outputs[0];
  if (input.dim() < 1 || weight.dim() != 2 || out.dim() != input.dim())
    return KernelError(call, "linear expects input [*, K] and weight [N, K]");
  const int64_t K = input.sizes[input.dim() - 1];
  const int64_t N = weight.sizes[0];
  const int64_t M =
      K > 0 ? input.numel() / K : out.numel() / std::max<int64_t>(N, 1);
  if (weight.sizes[1] != K || out.sizes[out.dim() - 1] != N)
    return KernelError(call, "linear shapes do not fit");
  // Flatten the leading dims (dense copies where the views do not allow it).
  std::vector<std::byte> input_dense;
  std::array<int64_t, 2> a_sizes{M, K};
  TensorView a;
  if (input.IsContiguous()) {
    a = ContiguousView(input.data, input.dtype, a_sizes);
  } else {
    input_dense = GatherContiguous(input);
    a = ContiguousView(input_dense.data(), input.dtype, a_sizes);
  }
  TensorView w_t = weight;  // [K, N] view of weight^T
  std::swap(w_t.sizes[0], w_t.sizes[1]);
  std::swap(w_t.strides[0], w_t.strides[1]);
  Scratch out_dense;
  std::array<int64_t, 2> c_sizes{M, N};
  TensorView c;
  const bool out_direct = out.IsContiguous();
  if (out_direct) {
    c = ContiguousView(out.data, out.dtype, c_sizes);
  } else {
    out_dense = MakeScratch(out.dtype, c_sizes);
    c = out_dense.view;
  }
  double beta = 0;
  if (bias.is_tensor()) {
    absl::Status s = CheckBroadcast(call, bias.tensor, c);
    if (!s.ok()) return s;
    s = CopyStridedHost(c, bias.tensor);
    if (!s.ok()) return KernelError(call, s.message());
    beta = 1;
  }
  if (absl::Status s = Gemm(call, a, w_t, c, 1.0, beta); !s.ok()) return s;
  if (!out_direct) ScatterContiguous(out, out_dense.bytes.data());
  return absl::OkStatus();
}

absl::Status CheckConvolutionCall(const KernelCall& call) {
  if (call.args.size() < 9 || call.outputs.size() != 1)
    return KernelError(call, "expects 9 arguments and one output");
  const TensorView& in = call.args[0].tensor;
  if (call.args[6].bool_value)
    return absl::UnimplementedError(absl::StrCat(
        AsAbsl(call.op), ": transposed convolution is not supported"));
  const int64_t spatial = in.dim() - 2;
  if (spatial != 1 && spatial != 2)
    return absl::UnimplementedError(absl::StrCat(
        AsAbsl(call.op), ": only 1-D and 2-D convolution are supported"));
  if (call.args[1].tensor.dim() != in.dim() ||
      call.outputs[0].dim() != in.dim())
    return KernelError(call, "input, weight and output ranks differ");
  return absl::OkStatus();
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed,
//             output_padding, groups) for 1-D and 2-D, not transposed: the
// generic loop (any dtypes, any strides; ops/nn_conv.cc calls it for what
// BLAS cannot serve).
absl::Status ConvolutionLoopKernel(const KernelCall& call) {
  if (absl::Status s = CheckConvolutionCall(call); !s.ok()) return s;
  TensorView in = call.args[0].tensor;
  TensorView weight = call.args[1].tensor;
  const KernelArg& bias = call.args[2];
  TensorView out = call.outputs[0];
  const int64_t spatial = in.dim() - 2;
  auto param = [&](size_t i, int64_t d, int64_t fallback) {
    const std::vector<int64_t>& v = call.args[i].ints;
    if (v.empty()) return fallback;
    return v.size() == 1 ? v[0] : v[std::min<size_t>(d, v.size() - 1)];
  };
  // Treat 1-D as 2-D with a height of 1.
  auto add_unit_height = [](TensorView& t) {
    t.sizes.insert(t.sizes.begin() + 2, 1);
    t.strides.insert(t.strides.begin() + 2, 0);
  };
  int64_t sh = 1, ph = 0, dh = 1;
  int64_t sw, pw, dw;
  if (spatial == 1) {
    add_unit_height(in);
    add_unit_height(weight);
    add_unit_height(out);
    sw = param(3, 0, 1), pw = param(4, 0, 0), dw = param(5, 0, 1);
  } else {
    sh = param(3, 0, 1), ph = param(4, 0, 0), dh = param(5, 0, 1);
    sw = param(3, 1, 1), pw = param(4, 1, 0), dw = param(5, 1, 1);
  }
  const int64_t groups = std::max<int64_t>(call.args[8].AsInt(), 1);
  const int64_t N = in.sizes[0], C = in.sizes[1], H = in.sizes[2],
                W = in.sizes[3];
  const int64_t F = weight.sizes[0], CG = weight.sizes[1], KH = weight.sizes[2],
                KW = weight.sizes[3];
  const int64_t OH = out.sizes[2], OW = out.sizes[3];
  if (C != CG * groups || F % groups != 0 || out.sizes[0] != N ||
      out.sizes[1] != F)
    return KernelError(call, "channel counts do not fit the groups");
  const DType ic = in.dtype, wc = weight.dtype, oc = out.dtype;
  const int64_t ie = in.element_size(), we = weight.element_size(),
                oe = out.element_size();
  const int64_t filters_per_group = F / groups;
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t f = 0; f < F; ++f) {
      const int64_t g = f / filters_per_group;
      double b = 0;
      if (bias.is_tensor()) {
        const TensorView& bt = bias.tensor;
        b = element::LoadAsDouble(
            bt.dtype, bt.bytes() + f * bt.strides[0] * bt.element_size());
      }
      for (int64_t oh = 0; oh < OH; ++oh) {
        if (StopTick(OW * CG * KH * KW)) return absl::OkStatus();
        for (int64_t ow = 0; ow < OW; ++ow) {
          double acc = b;
          for (int64_t c = 0; c < CG; ++c) {
            const int64_t ci = g * CG + c;
            for (int64_t kh = 0; kh < KH; ++kh) {
              const int64_t h = oh * sh - ph + kh * dh;
              if (h < 0 || h >= H) continue;
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t w = ow * sw - pw + kw * dw;
                if (w < 0 || w >= W) continue;
                acc += element::LoadAsDouble(
                           ic, in.bytes() +
                                   (n * in.strides[0] + ci * in.strides[1] +
                                    h * in.strides[2] + w * in.strides[3]) *
                                       ie) *
                       element::LoadAsDouble(
                           wc, weight.bytes() + (f * weight.strides[0] +
                                                 c * weight.strides[1] +
                                                 kh * weight.strides[2] +
                                                 kw * weight.strides[3]) *
                                                    we);
              }
            }
          }
          element::StoreDouble(
              oc,
              out.bytes() + (n * out.strides[0] + f * out.strides[1] +
                             oh * out.strides[2] + ow * out.strides[3]) *
                                oe,
              acc);
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ferry::host
