// Convolution: aten::convolution (1-D and 2-D, any stride, padding,
// dilation and groups; transposed is Unimplemented).
//
// Floating dtypes compute in float (f32, f16, bf16: 16-bit operands are
// widened exactly and the result rounded once when stored) or double (f64):
//  - depthwise (one input and one output channel per group, mobilenet_v2):
//    a direct loop per plane whose inner loop runs over output columns
//    (vectorises for stride 1);
//  - otherwise im2col of each group ([C/g * KH * KW, OH * OW]; skipped for
//    1x1 kernels with stride 1 and no padding) and BLAS products per batch
//    element and group: out[F/g, OH*OW] = W[F/g, K] @ col[K, OH*OW], with
//    the bias as its initial value. The im2col matrix is made and multiplied
//    a band of output rows at a time (about kBandBytes of it, so that BLAS
//    reads it from cache), the band's columns of `out` at once. An im2col
//    row is copied in one piece when the output rows are the input's rows
//    shifted (stride 1, OW == W: Im2ColShiftedRow), else output row by
//    output row, stride-2 columns by vector shuffles.
// The band is a per-thread scratch buffer reused from call to call (fresh
// memory costs a page fault per page: resnet18's first convolution would
// need 7 MiB whole), given back after a call that needed more than
// kKeptColumnBytes (a band of one row that large). Other dtype mixes (integers,
// mixed precision) use the generic double-accumulating loop of
// host_kernels_linalg.cc (ConvolutionLoopKernel). Checks the thread's
// CancelToken once per row of im2col and after each BLAS product.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "runtime/absl_compat.h"
#include "runtime/ops/family.h"

namespace ferry::host {
namespace {

struct ConvGeometry {
  int64_t N, C, H, W;     // input
  int64_t F, CG, KH, KW;  // weight: F filters of CG channels
  int64_t OH, OW;         // output
  int64_t sh, sw, ph, pw, dh, dw;
  int64_t groups;
};

// The output rows [first, last) whose im2col columns are built and
// multiplied at once.
struct Band {
  int64_t first = 0, last = 0;
  int64_t size() const { return last - first; }
};

// c[m, n] (rows `ldc` apart) = a[m, k] @ b[k, n] + beta * c.
void Gemm(const float* a, const float* b, float* c, int64_t m, int64_t n,
          int64_t k, float beta, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0f, a, k, b,
              n, beta, c, ldc);
}
void Gemm(const double* a, const double* b, double* c, int64_t m, int64_t n,
          int64_t k, double beta, int64_t ldc) {
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, n, k, 1.0, a, k, b,
              n, beta, c, ldc);
}

// The output columns [lo, hi) whose input column ow*s - p + kw*d is inside
// [0, W).
inline void ValidColumns(int64_t OW, int64_t W, int64_t s, int64_t p,
                         int64_t off, int64_t& lo, int64_t& hi) {
  // need 0 <= ow*s - p + off < W
  const int64_t first = p - off;  // ow*s >= first
  lo = first <= 0 ? 0 : (first + s - 1) / s;
  const int64_t last = W + p - off;  // ow*s < last
  hi = last <= 0 ? 0 : std::min<int64_t>(OW, (last + s - 1) / s);
  if (hi < lo) hi = lo;
}

// Copies the columns [lo, hi) of one output row of an im2col row:
// dst[ow] = in_row[ow * stride + shift]. `kStride` is the stride when known
// at compile time (2: the loop becomes vector loads and shuffles), 0 when
// read from `stride`. Out of line: inlined into Im2ColRow's loop, GCC 12
// leaves it scalar.
template <int kStride, typename T>
[[gnu::noinline]] void GatherColumns(const T* __restrict in_row, int64_t shift,
                                     T* __restrict dst, int64_t lo, int64_t hi,
                                     int64_t stride) {
  const int64_t s = kStride > 0 ? kStride : stride;
  for (int64_t ow = lo; ow < hi; ++ow) dst[ow] = in_row[ow * s + shift];
}

// One row of the im2col matrix, (c, kh, kw), in the general case: output row
// by output row, the columns [lo, hi) copied and the rest zero.
template <typename T>
void Im2ColRow(const ConvGeometry& g, const T* plane, int64_t kh, int64_t kw,
               const Band& band, T* row) {
  int64_t lo, hi;
  ValidColumns(g.OW, g.W, g.sw, g.pw, kw * g.dw, lo, hi);
  const int64_t shift = kw * g.dw - g.pw;
  for (int64_t oh = band.first; oh < band.last; ++oh) {
    T* dst = row + (oh - band.first) * g.OW;
    const int64_t h = oh * g.sh - g.ph + kh * g.dh;
    if (h < 0 || h >= g.H) {
      std::fill(dst, dst + g.OW, T(0));
      continue;
    }
    const T* in_row = plane + h * g.W;
    std::fill(dst, dst + lo, T(0));
    if (g.sw == 1) {
      if (hi > lo)
        std::memcpy(dst + lo, in_row + lo + shift, (hi - lo) * sizeof(T));
    } else if (g.sw == 2) {
      GatherColumns<2>(in_row, shift, dst, lo, hi, 2);
    } else {
      GatherColumns<0>(in_row, shift, dst, lo, hi, g.sw);
    }
    std::fill(dst + hi, dst + g.OW, T(0));
  }
}

// The same row when the output rows are the input rows shifted (stride 1
// both ways, OW == W: resnet's 3x3 convolutions). The rows whose input row
// exists are then one contiguous span of the input plane: it is copied in one
// piece, and the few columns of each row that fall in the padding (copied
// from the neighbouring input row) are zeroed after. A call per im2col row
// instead of three per output row: for a 56x56 plane that is what the copy
// cost.
template <typename T>
void Im2ColShiftedRow(const ConvGeometry& g, const T* plane, int64_t kh,
                      int64_t kw, const Band& band, T* row) {
  int64_t lo, hi;
  ValidColumns(g.OW, g.W, 1, g.pw, kw * g.dw, lo, hi);
  // Output rows oh of the band with input row h = oh - ph + kh*dh inside
  // [0, H); output row oh starts at at(oh).
  const int64_t dh = kh * g.dh - g.ph;
  const int64_t first = std::clamp<int64_t>(-dh, band.first, band.last);
  const int64_t last = std::clamp<int64_t>(g.H - dh, first, band.last);
  auto at = [&](int64_t oh) { return row + (oh - band.first) * g.OW; };
  std::fill(at(band.first), at(first), T(0));
  std::fill(at(last), at(band.last), T(0));
  if (first == last) return;
  if (lo >= hi) {
    std::fill(at(first), at(last), T(0));
    return;
  }
  // dst[oh*OW + ow] = plane[(oh + dh)*W + ow + shift] for ow in [lo, hi);
  // with OW == W that is one span from the first row's lo to the last's hi.
  const int64_t shift = kw * g.dw - g.pw;
  T* dst = at(first) + lo;
  const T* src = plane + (first + dh) * g.W + lo + shift;
  std::memcpy(dst, src, ((last - first - 1) * g.OW + (hi - lo)) * sizeof(T));
  // Column by column, down the rows: a row has only a few such columns, and
  // a loop per row would become a memset call per row.
  auto zero_column = [&](int64_t ow) {
    for (int64_t oh = first; oh < last; ++oh) at(oh)[ow] = T(0);
  };
  for (int64_t ow = 0; ow < lo; ++ow) zero_column(ow);
  for (int64_t ow = hi; ow < g.OW; ++ow) zero_column(ow);
}

// in: one group's [CG, H, W]; col: the band's columns of the im2col
// matrix, [CG*KH*KW, band.size() * OW]. False when stopped.
template <typename T>
bool Im2Col(const ConvGeometry& g, const T* in, const Band& band, T* col) {
  const int64_t columns = band.size() * g.OW;
  const bool shifted = g.sh == 1 && g.sw == 1 && g.OW == g.W;
  for (int64_t c = 0; c < g.CG; ++c) {
    const T* plane = in + c * g.H * g.W;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        T* row = col + ((c * g.KH + kh) * g.KW + kw) * columns;
        if (shifted) {
          Im2ColShiftedRow(g, plane, kh, kw, band, row);
        } else {
          Im2ColRow(g, plane, kh, kw, band, row);
        }
        if (StopTick(columns)) return false;
      }
    }
  }
  return true;
}

// One depthwise plane: out[OH, OW] = bias + sum_kh,kw w[kh,kw] * in[...].
template <typename T>
void DepthwisePlane(const ConvGeometry& g, const T* in, const T* w, T bias,
                    T* out) {
  std::fill(out, out + g.OH * g.OW, bias);
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const T wv = w[kh * g.KW + kw];
      int64_t lo, hi;
      ValidColumns(g.OW, g.W, g.sw, g.pw, kw * g.dw, lo, hi);
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        const int64_t h = oh * g.sh - g.ph + kh * g.dh;
        if (h < 0 || h >= g.H) continue;
        const T* src = in + h * g.W - g.pw + kw * g.dw;
        T* dst = out + oh * g.OW;
        if (g.sw == 1) {
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += wv * src[ow];
        } else {
          for (int64_t ow = lo; ow < hi; ++ow) dst[ow] += wv * src[ow * g.sw];
        }
      }
    }
  }
}

// Scratch memory kept by a thread between calls; more is freed after use.
constexpr size_t kKeptColumnBytes = size_t{64} << 20;

// The im2col matrix is built and multiplied a band of output rows at a
// time, about this many bytes of it: one core's L2 cache on the machines
// measured, so that BLAS packs it from there. (resnet18 on one thread: 1 MiB
// bands beat 256 KiB, 512 KiB, 2 MiB and the whole matrix;
// docs/performance.md, twenty-sixth round.)
constexpr int64_t kBandBytes = int64_t{1} << 20;
// kBandBytes, or what a test set (ConvolutionBandBytesForTesting).
std::atomic<int64_t> band_bytes{kBandBytes};

// This thread's im2col buffer of `elements` T (contents unspecified),
// trimmed back when the holder goes out of scope.
template <typename T>
class ColumnScratch {
 public:
  explicit ColumnScratch(size_t elements) : col_(Buffer()) {
    col_.resize(elements);
  }
  ~ColumnScratch() {
    if (col_.capacity() * sizeof(T) > kKeptColumnBytes)
      std::vector<T>().swap(col_);
  }
  T* data() { return col_.data(); }

 private:
  static std::vector<T>& Buffer() {
    thread_local std::vector<T> buffer;
    return buffer;
  }
  std::vector<T>& col_;
};

template <typename T>
absl::Status Convolve(const KernelCall& call, const ConvGeometry& g,
                      const TensorView& in, const TensorView& weight,
                      const KernelArg& bias, const TensorView& out) {
  std::vector<T> in_store, w_store, b_store, out_store;
  const T* x = DenseAs<T>(in, in_store);
  const T* w = DenseAs<T>(weight, w_store);
  const T* b = bias.is_tensor() ? DenseAs<T>(bias.tensor, b_store) : nullptr;
  T* y;
  if (IsDense<T>(out)) {
    y = static_cast<T*>(out.data);
  } else {
    out_store.assign(out.numel(), T(0));
    y = out_store.data();
  }
  const int64_t fg = g.F / g.groups;
  const int64_t k = g.CG * g.KH * g.KW;
  const int64_t ohw = g.OH * g.OW;
  const bool depthwise = g.CG == 1 && fg == 1;
  const bool pointwise = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 &&
                         g.ph == 0 && g.pw == 0 && g.OH == g.H && g.OW == g.W;
  // Output rows per band: about band_bytes of im2col matrix, at least one.
  const int64_t band_rows = std::clamp<int64_t>(
      band_bytes.load(std::memory_order_relaxed) /
          std::max<int64_t>(k * g.OW * int64_t{sizeof(T)}, 1),
      1, g.OH);
  ColumnScratch<T> col(depthwise || pointwise ? 0 : k * band_rows * g.OW);
  for (int64_t n = 0; n < g.N; ++n) {
    const T* xn = x + n * g.C * g.H * g.W;
    T* yn = y + n * g.F * ohw;
    if (depthwise) {
      for (int64_t f = 0; f < g.F; ++f) {
        DepthwisePlane<T>(g, xn + f * g.H * g.W, w + f * g.KH * g.KW,
                          b ? b[f] : T(0), yn + f * ohw);
        if (StopTick(ohw * g.KH * g.KW)) return absl::OkStatus();
      }
      continue;
    }
    for (int64_t grp = 0; grp < g.groups; ++grp) {
      const T* xg = xn + grp * g.CG * g.H * g.W;
      T* yg = yn + grp * fg * ohw;
      T beta = 0;
      if (b) {
        for (int64_t f = 0; f < fg; ++f)
          std::fill(yg + f * ohw, yg + (f + 1) * ohw, b[grp * fg + f]);
        beta = 1;
      }
      const T* wg = w + grp * fg * k;
      if (pointwise) {
        Gemm(wg, xg, yg, fg, ohw, k, beta, ohw);
        if (StopTick(fg * ohw * k)) return absl::OkStatus();
        continue;
      }
      for (Band band{0, band_rows}; band.first < g.OH;
           band = {band.last, band.last + band_rows}) {
        band.last = std::min(band.last, g.OH);
        if (!Im2Col<T>(g, xg, band, col.data())) return absl::OkStatus();
        const int64_t columns = band.size() * g.OW;
        Gemm(wg, col.data(), yg + band.first * g.OW, fg, columns, k, beta, ohw);
        if (StopTick(fg * columns * k)) return absl::OkStatus();
      }
    }
  }
  if (!out_store.empty()) StoreDense<T>(out_store.data(), out);
  (void)call;
  return absl::OkStatus();
}

bool IsFloat(DType t) {
  return t == DType::kF32 || t == DType::kF64 || t == DType::kF16 ||
         t == DType::kBF16;
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed,
//             output_padding, groups)
absl::Status ConvolutionBlasKernel(const KernelCall& call) {
  if (absl::Status s = CheckConvolutionCall(call); !s.ok()) return s;
  TensorView in = call.args[0].tensor;
  TensorView weight = call.args[1].tensor;
  const KernelArg& bias = call.args[2];
  TensorView out = call.outputs[0];
  const int64_t spatial = in.dim() - 2;
  const DType dt = out.dtype;
  const bool same_float = IsFloat(dt) && in.dtype == dt && weight.dtype == dt &&
                          (!bias.is_tensor() || bias.tensor.dtype == dt);
  if (!same_float)
    return ConvolutionLoopKernel(call);  // what BLAS cannot serve
  auto param = [&](size_t i, int64_t d, int64_t fallback) {
    const std::vector<int64_t>& v = call.args[i].ints;
    if (v.empty()) return fallback;
    return v.size() == 1 ? v[0] : v[std::min<size_t>(d, v.size() - 1)];
  };
  ConvGeometry g;
  g.sh = 1, g.ph = 0, g.dh = 1;
  if (spatial == 1) {
    for (TensorView* t : {&in, &weight, &out}) {
      t->sizes.insert(t->sizes.begin() + 2, 1);
      t->strides.insert(t->strides.begin() + 2, 0);
    }
    g.sw = param(3, 0, 1), g.pw = param(4, 0, 0), g.dw = param(5, 0, 1);
  } else {
    g.sh = param(3, 0, 1), g.ph = param(4, 0, 0), g.dh = param(5, 0, 1);
    g.sw = param(3, 1, 1), g.pw = param(4, 1, 0), g.dw = param(5, 1, 1);
  }
  g.groups = call.args[8].is_number() ? call.args[8].AsInt() : 1;
  g.N = in.sizes[0], g.C = in.sizes[1], g.H = in.sizes[2], g.W = in.sizes[3];
  g.F = weight.sizes[0], g.CG = weight.sizes[1], g.KH = weight.sizes[2],
  g.KW = weight.sizes[3];
  g.OH = out.sizes[2], g.OW = out.sizes[3];
  if (g.sh <= 0 || g.sw <= 0 || g.dh <= 0 || g.dw <= 0 || g.ph < 0 ||
      g.pw < 0 || g.groups <= 0)
    return KernelError(call, "invalid stride, padding, dilation or groups");
  if (g.C != g.CG * g.groups || g.F % g.groups != 0 || out.sizes[0] != g.N ||
      out.sizes[1] != g.F)
    return KernelError(call, "channel counts do not fit the groups");
  if (bias.is_tensor() && bias.tensor.numel() != g.F)
    return KernelError(call, "bias must have one element per filter");
  const int64_t eh = (g.H + 2 * g.ph - g.dh * (g.KH - 1) - 1) / g.sh + 1;
  const int64_t ew = (g.W + 2 * g.pw - g.dw * (g.KW - 1) - 1) / g.sw + 1;
  if (g.OH != std::max<int64_t>(eh, 0) || g.OW != std::max<int64_t>(ew, 0))
    return KernelError(call, absl::StrCat("output is ", out.DebugString(),
                                          " but the convolution gives ",
                                          std::max<int64_t>(eh, 0), "x",
                                          std::max<int64_t>(ew, 0)));
  if (out.numel() == 0) return absl::OkStatus();
  if (dt == DType::kF64)
    return Convolve<double>(call, g, in, weight, bias, out);
  return Convolve<float>(call, g, in, weight, bias, out);
}

const FamilyKernel kConv[] = {
    {"aten::convolution", &Guard<ConvolutionBlasKernel, false>},
};

}  // namespace

std::span<const FamilyKernel> ConvKernels() { return kConv; }

ConvolutionBandBytesForTesting::ConvolutionBandBytesForTesting(int64_t bytes) {
  band_bytes.store(bytes, std::memory_order_relaxed);
}
ConvolutionBandBytesForTesting::~ConvolutionBandBytesForTesting() {
  band_bytes.store(kBandBytes, std::memory_order_relaxed);
}

}  // namespace ferry::host
