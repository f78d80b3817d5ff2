// The host kernel library: shared machinery, the elementwise operators and
// the table that maps operator names to kernels.
//
// Model. Every kernel writes `call.outputs` from `call.args`. Elementwise
// kernels walk the output's index space once (StridedLoop), reading each
// operand through byte strides aligned to the output (0 where it
// broadcasts):
//
//   out[i,j] = f(a[i,j], b[0,j])      b: sizes [1,N] -> byte strides [0, sb]
//
// The compute category is chosen once per call: floating when the output or
// any operand is floating (values widened to double, rounded once when
// stored), integer otherwise (int64, wrapping). Comparisons and logical ops
// choose from the operands only and store bools.
//
// Aliasing. Guard<> (runtime/ops/family.h) wraps every kernel: when an output
// overlaps an input with a different layout (say add_(x, x.t())), the kernel
// writes dense temporaries and the result is copied into the output afterwards,
// so every input is read before anything is written. Elementwise kernels whose
// output is exactly an input (relu_(x)) run in place: element i is read before
// it is written and never read again.
//
// Fast path. The common case of a model's elementwise operators, f32 in and
// out, dense, same sizes (or a single-element second operand, a Scalar),
// skips the strided walk and the per-element dtype dispatch: a plain loop
// over float* that computes exactly what the general path does (widen to
// double, the same function, one rounding), in chunks between cancellation
// polls (DenseF32Unary / DenseF32Binary).
#include "runtime/host_kernels.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <unordered_map>
#include <utility>

#include "runtime/absl_compat.h"
#include "runtime/host_kernels_internal.h"
#include "runtime/ops/family.h"

namespace ferry {
namespace host {

DimVector BroadcastByteStrides(const TensorView& t,
                               std::span<const int64_t> out_sizes) {
  const int64_t out_dim = static_cast<int64_t>(out_sizes.size());
  DimVector strides(out_dim, 0);
  const int64_t es = t.element_size();
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t od = out_dim - t.dim() + d;
    if (od < 0) continue;
    if (t.sizes[d] != 1) strides[od] = t.strides[d] * es;
  }
  return strides;
}

TensorView ScalarAsTensor(const KernelArg& arg, ScalarSlot& slot) {
  TensorView view;
  view.data = slot.bytes;
  switch (arg.kind) {
    case KernelArg::Kind::kFloat:
      view.dtype = DType::kF64;
      element::StoreRaw<double>(slot.bytes, arg.float_value);
      break;
    case KernelArg::Kind::kBool:
      view.dtype = DType::kBool;
      element::StoreRaw<uint8_t>(slot.bytes, arg.bool_value ? 1 : 0);
      break;
    default:
      view.dtype = DType::kI64;
      element::StoreRaw<int64_t>(slot.bytes, arg.AsInt());
      break;
  }
  return view;
}

TensorView TensorOrScalar(const KernelCall& call, size_t i, ScalarSlot& slot) {
  const KernelArg& arg = call.args[i];
  if (arg.kind == KernelArg::Kind::kTensor) return arg.tensor;
  return ScalarAsTensor(arg, slot);
}

absl::Status KernelError(const KernelCall& call, absl::string_view message) {
  return absl::InvalidArgumentError(
      absl::StrCat(AsAbsl(call.op), ": ", message));
}

absl::Status UnsupportedDType(const KernelCall& call, DType dtype) {
  return absl::UnimplementedError(absl::StrCat(AsAbsl(call.op), ": dtype ",
                                               AsAbsl(DTypeName(dtype)),
                                               " is not supported"));
}

absl::StatusOr<int64_t> NormalizeDim(const KernelCall& call, int64_t dim,
                                     int64_t ndim) {
  int64_t range = std::max<int64_t>(ndim, 1);
  if (dim < -range || dim >= range) {
    return KernelError(
        call, absl::StrCat("dim ", dim, " is out of range for a ", ndim,
                           "-dim tensor"));
  }
  return dim < 0 ? dim + range : dim;
}

Scratch MakeScratch(DType dtype, std::span<const int64_t> sizes) {
  Scratch scratch;
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  scratch.bytes.resize(std::max<int64_t>(n * ElementSize(dtype), 1));
  scratch.view = ContiguousView(scratch.bytes.data(), dtype, sizes);
  return scratch;
}

DimVector OwnByteStrides(const TensorView& t) {
  DimVector strides(t.dim());
  for (int64_t d = 0; d < t.dim(); ++d)
    strides[d] = t.strides[d] * t.element_size();
  return strides;
}

bool BroadcastsTo(const TensorView& t, std::span<const int64_t> out_sizes) {
  const int64_t out_dim = static_cast<int64_t>(out_sizes.size());
  if (t.dim() > out_dim) return false;
  for (int64_t d = 0; d < t.dim(); ++d) {
    int64_t size = t.sizes[d];
    if (size != 1 && size != out_sizes[out_dim - t.dim() + d]) return false;
  }
  return true;
}

absl::Status CheckBroadcast(const KernelCall& call, const TensorView& t,
                            const TensorView& out) {
  if (BroadcastsTo(t, out.sizes)) return absl::OkStatus();
  return KernelError(call, absl::StrCat("operand ", t.DebugString(),
                                        " does not broadcast to the output ",
                                        out.DebugString()));
}

void ScatterContiguous(const TensorView& dst, const std::byte* src_bytes) {
  TensorView src =
      ContiguousView(const_cast<std::byte*>(src_bytes), dst.dtype, dst.sizes);
  const int64_t es = dst.element_size();
  StridedLoop<2>(dst.sizes, {dst.bytes(), src.bytes()},
                 {OwnByteStrides(dst), OwnByteStrides(src)},
                 [es](const std::array<std::byte*, 2>& p) {
                   std::memcpy(p[0], p[1], es);
                 });
}

// ---------------------------------------------------------------------------
// Elementwise machinery.

namespace {

bool AnyFloat(std::initializer_list<const TensorView*> views) {
  for (const TensorView* v : views)
    if (IsFloatingPoint(v->dtype)) return true;
  return false;
}

// Whether `t` is dense f32 with exactly `sizes`.
bool IsDenseF32(const TensorView& t, std::span<const int64_t> sizes) {
  return t.dtype == DType::kF32 && t.IsContiguous() &&
         std::equal(t.sizes.begin(), t.sizes.end(), sizes.begin(), sizes.end());
}

// Calls body(begin, end) over [0, n) in chunks of kStopPollUnits, polling
// the cancel token between chunks (cancel.h).
template <typename Body>
void InChunks(int64_t n, Body&& body) {
  for (int64_t begin = 0; begin < n; begin += kStopPollUnits) {
    const int64_t end = std::min(n, begin + kStopPollUnits);
    body(begin, end);
    if (StopTick(end - begin)) return;
  }
}

// The fast path of Unary: out and a dense f32 of one shape (a may be out).
template <typename FloatFn>
bool DenseF32Unary(const TensorView& a, const TensorView& out, FloatFn ff) {
  if (!IsDenseF32(out, out.sizes) || !IsDenseF32(a, out.sizes)) return false;
  const float* x = static_cast<const float*>(a.data);
  float* y = static_cast<float*>(out.data);
  InChunks(out.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = static_cast<float>(ff(static_cast<double>(x[i])));
  });
  return true;
}

// The fast path of Binary: out and a dense f32 of one shape, b the same or
// a single element of a floating dtype (read once). a or b may be out.
template <typename FloatFn>
bool DenseF32Binary(const TensorView& a, const TensorView& b,
                    const TensorView& out, FloatFn ff) {
  if (!IsDenseF32(out, out.sizes) || !IsDenseF32(a, out.sizes)) return false;
  const float* x = static_cast<const float*>(a.data);
  float* y = static_cast<float*>(out.data);
  if (IsDenseF32(b, out.sizes)) {
    const float* z = static_cast<const float*>(b.data);
    InChunks(out.numel(), [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        y[i] = static_cast<float>(
            ff(static_cast<double>(x[i]), static_cast<double>(z[i])));
    });
    return true;
  }
  if (b.numel() != 1 || !IsFloatingPoint(b.dtype)) return false;
  const double z = element::LoadAsDouble(b.dtype, b.bytes());
  InChunks(out.numel(), [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      y[i] = static_cast<float>(ff(static_cast<double>(x[i]), z));
  });
  return true;
}

// out = f(a), floating or integer per the category rule above.
template <typename FloatFn, typename IntFn>
absl::Status Unary(const KernelCall& call, const TensorView& a, FloatFn ff,
                   IntFn fi) {
  const TensorView& out = call.outputs[0];
  if (absl::Status s = CheckBroadcast(call, a, out); !s.ok()) return s;
  if (DenseF32Unary(a, out, ff)) return absl::OkStatus();
  const DType oc = out.dtype, ac = a.dtype;
  std::array<DimVector, 2> strides{OwnByteStrides(out),
                                   BroadcastByteStrides(a, out.sizes)};
  if (AnyFloat({&out, &a})) {
    StridedLoop<2>(out.sizes, {out.bytes(), a.bytes()}, strides,
                   [&](const std::array<std::byte*, 2>& p) {
                     element::StoreDouble(oc, p[0],
                                          ff(element::LoadAsDouble(ac, p[1])));
                   });
  } else {
    StridedLoop<2>(out.sizes, {out.bytes(), a.bytes()}, strides,
                   [&](const std::array<std::byte*, 2>& p) {
                     element::StoreInt64(oc, p[0],
                                         fi(element::LoadAsInt64(ac, p[1])));
                   });
  }
  return absl::OkStatus();
}

// out = f(a, b). The integer function reports failures through `bad`.
template <typename FloatFn, typename IntFn>
absl::Status Binary(const KernelCall& call, const TensorView& a,
                    const TensorView& b, FloatFn ff, IntFn fi) {
  const TensorView& out = call.outputs[0];
  if (absl::Status s = CheckBroadcast(call, a, out); !s.ok()) return s;
  if (absl::Status s = CheckBroadcast(call, b, out); !s.ok()) return s;
  if (DenseF32Binary(a, b, out, ff)) return absl::OkStatus();
  const DType oc = out.dtype, ac = a.dtype, bc = b.dtype;
  std::array<DimVector, 3> strides{OwnByteStrides(out),
                                   BroadcastByteStrides(a, out.sizes),
                                   BroadcastByteStrides(b, out.sizes)};
  std::array<std::byte*, 3> bases{out.bytes(), a.bytes(), b.bytes()};
  if (AnyFloat({&out, &a, &b})) {
    StridedLoop<3>(out.sizes, bases, strides,
                   [&](const std::array<std::byte*, 3>& p) {
                     element::StoreDouble(oc, p[0],
                                          ff(element::LoadAsDouble(ac, p[1]),
                                             element::LoadAsDouble(bc, p[2])));
                   });
    return absl::OkStatus();
  }
  const char* bad = nullptr;
  StridedLoop<3>(out.sizes, bases, strides,
                 [&](const std::array<std::byte*, 3>& p) {
                   element::StoreInt64(oc, p[0],
                                       fi(element::LoadAsInt64(ac, p[1]),
                                          element::LoadAsInt64(bc, p[2]), bad));
                 });
  if (bad) return KernelError(call, bad);
  return absl::OkStatus();
}

// out = pred(a, b) as bool; compares as doubles when an operand is floating.
template <typename Pred>
absl::Status Compare(const KernelCall& call, const TensorView& a,
                     const TensorView& b, Pred pred) {
  const TensorView& out = call.outputs[0];
  if (absl::Status s = CheckBroadcast(call, a, out); !s.ok()) return s;
  if (absl::Status s = CheckBroadcast(call, b, out); !s.ok()) return s;
  const DType oc = out.dtype, ac = a.dtype, bc = b.dtype;
  std::array<DimVector, 3> strides{OwnByteStrides(out),
                                   BroadcastByteStrides(a, out.sizes),
                                   BroadcastByteStrides(b, out.sizes)};
  std::array<std::byte*, 3> bases{out.bytes(), a.bytes(), b.bytes()};
  const bool as_float = AnyFloat({&a, &b});
  StridedLoop<3>(out.sizes, bases, strides,
                 [&](const std::array<std::byte*, 3>& p) {
                   bool r = as_float ? pred(element::LoadAsDouble(ac, p[1]),
                                            element::LoadAsDouble(bc, p[2]))
                                     : pred(element::LoadAsInt64(ac, p[1]),
                                            element::LoadAsInt64(bc, p[2]));
                   element::StoreInt64(oc, p[0], r ? 1 : 0);
                 });
  return absl::OkStatus();
}

// Wrapping int64 arithmetic (no signed-overflow UB).
inline int64_t WrapAdd(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) +
                              static_cast<uint64_t>(b));
}
inline int64_t WrapSub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) -
                              static_cast<uint64_t>(b));
}
inline int64_t WrapMul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) *
                              static_cast<uint64_t>(b));
}

constexpr char kIntegerDivisionByZero[] = "integer division by zero";

int64_t TruncDiv(int64_t a, int64_t b, const char*& bad) {
  if (b == 0) {
    bad = kIntegerDivisionByZero;
    return 0;
  }
  if (b == -1) return WrapSub(0, a);  // INT64_MIN / -1 wraps
  return a / b;
}

int64_t FloorDiv(int64_t a, int64_t b, const char*& bad) {
  int64_t q = TruncDiv(a, b, bad);
  if (b != 0 && b != -1 && (a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

double FloorDivDouble(double a, double b) {
  // ATen's div(..., rounding_mode='floor') for floats.
  if (b == 0) return a / b;
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0 && ((b < 0) != (mod < 0))) div -= 1;
  double floor_div = std::floor(div);
  if (div - floor_div > 0.5) floor_div += 1;
  return div == 0 ? std::copysign(0.0, a / b) : floor_div;
}

// --- Arithmetic
// ---------------------------------------------------------------

double AlphaOf(const KernelCall& call, size_t i) {
  return call.args.size() > i && call.args[i].is_number()
             ? call.args[i].AsDouble()
             : 1.0;
}
int64_t IntAlphaOf(const KernelCall& call, size_t i) {
  return call.args.size() > i && call.args[i].is_number() ? call.args[i].AsInt()
                                                          : 1;
}

absl::Status AddKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  const double alpha = AlphaOf(call, 2);
  const int64_t int_alpha = IntAlphaOf(call, 2);
  return Binary(
      call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
      [alpha](double a, double b) { return a + alpha * b; },
      [int_alpha](int64_t a, int64_t b, const char*&) {
        return WrapAdd(a, WrapMul(int_alpha, b));
      });
}

absl::Status SubKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  const double alpha = AlphaOf(call, 2);
  const int64_t int_alpha = IntAlphaOf(call, 2);
  if (call.outputs[0].dtype == DType::kBool)
    return KernelError(call, "subtraction of bool tensors is not supported");
  return Binary(
      call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
      [alpha](double a, double b) { return a - alpha * b; },
      [int_alpha](int64_t a, int64_t b, const char*&) {
        return WrapSub(a, WrapMul(int_alpha, b));
      });
}

absl::Status RsubKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  const double alpha = AlphaOf(call, 2);
  const int64_t int_alpha = IntAlphaOf(call, 2);
  return Binary(
      call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
      [alpha](double a, double b) { return b - alpha * a; },
      [int_alpha](int64_t a, int64_t b, const char*&) {
        return WrapSub(b, WrapMul(int_alpha, a));
      });
}

absl::Status MulKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  return Binary(
      call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
      [](double a, double b) { return a * b; },
      [](int64_t a, int64_t b, const char*&) { return WrapMul(a, b); });
}

// div.Tensor / div.Scalar: true division; div.Tensor_mode: rounding_mode in
// args[2] ("trunc", "floor" or None).
absl::Status DivKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  TensorView a = TensorOrScalar(call, 0, s0);
  TensorView b = TensorOrScalar(call, 1, s1);
  std::string mode;
  if (call.args.size() > 2 && call.args[2].kind == KernelArg::Kind::kString)
    mode = call.args[2].string_value;
  if (mode == "trunc") {
    return Binary(
        call, a, b, [](double x, double y) { return std::trunc(x / y); },
        [](int64_t x, int64_t y, const char*& bad) {
          return TruncDiv(x, y, bad);
        });
  }
  if (mode == "floor") {
    return Binary(call, a, b, FloorDivDouble,
                  [](int64_t x, int64_t y, const char*& bad) {
                    return FloorDiv(x, y, bad);
                  });
  }
  if (!mode.empty())
    return KernelError(call,
                       absl::StrCat("unknown rounding_mode '", mode, "'"));
  if (!IsFloatingPoint(call.outputs[0].dtype)) {
    return KernelError(call, "true division needs a floating output, got " +
                                 std::string(DTypeName(call.outputs[0].dtype)));
  }
  return Binary(
      call, a, b, [](double x, double y) { return x / y; },
      [](int64_t x, int64_t, const char*&) { return x; });
}

absl::Status RemainderKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  return Binary(
      call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
      [](double a, double b) {
        double m = std::fmod(a, b);
        if (m != 0 && ((b < 0) != (m < 0))) m += b;
        return m;
      },
      [](int64_t a, int64_t b, const char*& bad) {
        if (b == 0) {
          bad = kIntegerDivisionByZero;
          return int64_t{0};
        }
        if (b == -1) return int64_t{0};
        int64_t m = a % b;
        if (m != 0 && ((b < 0) != (m < 0))) m += b;
        return m;
      });
}

absl::Status PowKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  return Binary(
      call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
      [](double a, double b) { return std::pow(a, b); },
      [](int64_t a, int64_t b, const char*& bad) {
        if (b < 0) {
          if (a == 1) return int64_t{1};
          if (a == -1) return (b % 2 == 0) ? int64_t{1} : int64_t{-1};
          bad = "integers to negative integer powers are not allowed";
          return int64_t{0};
        }
        int64_t result = 1, base = a;
        while (b > 0) {
          if (b & 1) result = WrapMul(result, base);
          base = WrapMul(base, base);
          b >>= 1;
        }
        return result;
      });
}

double NanPropagatingMax(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return std::max(a, b);
}
double NanPropagatingMin(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  return std::min(a, b);
}

absl::Status MaximumKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  return Binary(call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
                NanPropagatingMax, [](int64_t a, int64_t b, const char*&) {
                  return std::max(a, b);
                });
}

absl::Status MinimumKernel(const KernelCall& call) {
  ScalarSlot s0, s1;
  return Binary(call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
                NanPropagatingMin, [](int64_t a, int64_t b, const char*&) {
                  return std::min(a, b);
                });
}

template <typename Op>
absl::Status BitwiseKernel(const KernelCall& call, Op op) {
  ScalarSlot s0, s1;
  TensorView a = TensorOrScalar(call, 0, s0);
  TensorView b = TensorOrScalar(call, 1, s1);
  if (AnyFloat({&a, &b, &call.outputs[0]}))
    return KernelError(call, "bitwise operators need integer or bool tensors");
  return Binary(
      call, a, b, [](double x, double) { return x; },
      [op](int64_t x, int64_t y, const char*&) { return op(x, y); });
}

absl::Status BitwiseAndKernel(const KernelCall& call) {
  return BitwiseKernel(call, [](int64_t a, int64_t b) { return a & b; });
}
absl::Status BitwiseOrKernel(const KernelCall& call) {
  return BitwiseKernel(call, [](int64_t a, int64_t b) { return a | b; });
}
absl::Status BitwiseXorKernel(const KernelCall& call) {
  return BitwiseKernel(call, [](int64_t a, int64_t b) { return a ^ b; });
}

// --- Comparisons and logic
// -------------------------------------------------------

template <typename Pred>
absl::Status CompareKernel(const KernelCall& call, Pred pred) {
  ScalarSlot s0, s1;
  return Compare(call, TensorOrScalar(call, 0, s0), TensorOrScalar(call, 1, s1),
                 pred);
}

absl::Status EqKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a == b; });
}
absl::Status NeKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a != b; });
}
absl::Status LtKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a < b; });
}
absl::Status LeKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a <= b; });
}
absl::Status GtKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a > b; });
}
absl::Status GeKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a >= b; });
}
absl::Status LogicalAndKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a != 0 && b != 0; });
}
absl::Status LogicalOrKernel(const KernelCall& call) {
  return CompareKernel(call, [](auto a, auto b) { return a != 0 || b != 0; });
}
absl::Status LogicalXorKernel(const KernelCall& call) {
  return CompareKernel(call,
                       [](auto a, auto b) { return (a != 0) != (b != 0); });
}
absl::Status LogicalNotKernel(const KernelCall& call) {
  ScalarSlot zero_slot;
  KernelArg zero;
  zero.kind = KernelArg::Kind::kInt;
  return Compare(call, call.args[0].tensor, ScalarAsTensor(zero, zero_slot),
                 [](auto a, auto) { return a == 0; });
}

// where.self(condition, self, other)
absl::Status WhereKernel(const KernelCall& call) {
  const TensorView& out = call.outputs[0];
  ScalarSlot s1, s2;
  const TensorView& cond = call.args[0].tensor;
  TensorView a = TensorOrScalar(call, 1, s1);
  TensorView b = TensorOrScalar(call, 2, s2);
  for (const TensorView* t : {&cond, static_cast<const TensorView*>(&a),
                              static_cast<const TensorView*>(&b)})
    if (absl::Status s = CheckBroadcast(call, *t, out); !s.ok()) return s;
  const DType oc = out.dtype, cc = cond.dtype, ac = a.dtype, bc = b.dtype;
  std::array<DimVector, 4> strides{
      OwnByteStrides(out), BroadcastByteStrides(cond, out.sizes),
      BroadcastByteStrides(a, out.sizes), BroadcastByteStrides(b, out.sizes)};
  StridedLoop<4>(out.sizes, {out.bytes(), cond.bytes(), a.bytes(), b.bytes()},
                 strides, [&](const std::array<std::byte*, 4>& p) {
                   if (element::LoadAsBool(cc, p[1]))
                     ConvertElement(oc, p[0], ac, p[2]);
                   else
                     ConvertElement(oc, p[0], bc, p[3]);
                 });
  return absl::OkStatus();
}

// --- Unary
// ------------------------------------------------------------------------

template <typename FloatFn>
absl::Status FloatUnaryKernel(const KernelCall& call, FloatFn ff) {
  // Integer inputs promote to a floating output (the spec says which); an
  // integer output here can only come from an integer-preserving op.
  return Unary(call, call.args[0].tensor, ff, [ff](int64_t x) {
    return element::SaturatingToInt64(ff(static_cast<double>(x)));
  });
}

double Relu(double x) { return x > 0 ? x : (std::isnan(x) ? x : 0.0); }
double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

absl::Status ReluKernel(const KernelCall& call) {
  // A lambda, not the function pointer, so the fast path's loop inlines it.
  return Unary(
      call, call.args[0].tensor, [](double x) { return Relu(x); },
      [](int64_t x) { return x > 0 ? x : int64_t{0}; });
}
absl::Status NegKernel(const KernelCall& call) {
  if (call.outputs[0].dtype == DType::kBool)
    return KernelError(call, "negation of a bool tensor is not supported");
  return Unary(
      call, call.args[0].tensor, [](double x) { return -x; },
      [](int64_t x) { return WrapSub(0, x); });
}
absl::Status AbsKernel(const KernelCall& call) {
  return Unary(
      call, call.args[0].tensor, [](double x) { return std::fabs(x); },
      [](int64_t x) { return x < 0 ? WrapSub(0, x) : x; });
}
absl::Status SignKernel(const KernelCall& call) {
  return Unary(
      call, call.args[0].tensor,
      [](double x) { return std::isnan(x) ? x : double((x > 0) - (x < 0)); },
      [](int64_t x) { return int64_t((x > 0) - (x < 0)); });
}
absl::Status IntPreservingUnary(const KernelCall& call, double (*ff)(double)) {
  return Unary(call, call.args[0].tensor, ff, [](int64_t x) { return x; });
}
absl::Status FloorKernel(const KernelCall& call) {
  return IntPreservingUnary(call, [](double x) { return std::floor(x); });
}
absl::Status CeilKernel(const KernelCall& call) {
  return IntPreservingUnary(call, [](double x) { return std::ceil(x); });
}
absl::Status RoundKernel(const KernelCall& call) {
  // Half to even, as ATen.
  return IntPreservingUnary(call, [](double x) { return std::nearbyint(x); });
}
absl::Status TruncKernel(const KernelCall& call) {
  return IntPreservingUnary(call, [](double x) { return std::trunc(x); });
}
absl::Status SinKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::sin(x); });
}
absl::Status CosKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::cos(x); });
}
absl::Status TanKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::tan(x); });
}
absl::Status ExpKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::exp(x); });
}
absl::Status LogKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::log(x); });
}
absl::Status Log1pKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::log1p(x); });
}
absl::Status Expm1Kernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::expm1(x); });
}
absl::Status SqrtKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::sqrt(x); });
}
absl::Status RsqrtKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return 1.0 / std::sqrt(x); });
}
absl::Status ReciprocalKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return 1.0 / x; });
}
absl::Status TanhKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::tanh(x); });
}
absl::Status ErfKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return std::erf(x); });
}
absl::Status SigmoidKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, Sigmoid);
}
absl::Status SiluKernel(const KernelCall& call) {
  return FloatUnaryKernel(call, [](double x) { return x * Sigmoid(x); });
}

// gelu(self, *, approximate='none'|'tanh')
absl::Status GeluKernel(const KernelCall& call) {
  std::string approximate = "none";
  if (call.args.size() > 1 && call.args[1].kind == KernelArg::Kind::kString)
    approximate = call.args[1].string_value;
  if (approximate == "none") {
    return FloatUnaryKernel(call, [](double x) {
      return 0.5 * x * (1.0 + std::erf(x * (1.0 / std::numbers::sqrt2)));
    });
  }
  if (approximate == "tanh") {
    return FloatUnaryKernel(call, [](double x) {
      const double k = std::sqrt(2.0 / std::numbers::pi);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    });
  }
  return KernelError(call,
                     absl::StrCat("unknown approximate '", approximate, "'"));
}

// clamp(self, Scalar? min=None, Scalar? max=None); hardtanh(self, min_val=-1,
// max_val=1).
absl::Status ClampBetween(const KernelCall& call, const KernelArg* lo,
                          const KernelArg* hi) {
  const bool has_lo = lo && lo->is_number();
  const bool has_hi = hi && hi->is_number();
  const double flo = has_lo ? lo->AsDouble() : 0,
               fhi = has_hi ? hi->AsDouble() : 0;
  const int64_t ilo = has_lo ? lo->AsInt() : 0, ihi = has_hi ? hi->AsInt() : 0;
  return Unary(
      call, call.args[0].tensor,
      [=](double x) {
        if (std::isnan(x)) return x;
        if (has_lo) x = std::max(x, flo);
        if (has_hi) x = std::min(x, fhi);
        return x;
      },
      [=](int64_t x) {
        if (has_lo) x = std::max(x, ilo);
        if (has_hi) x = std::min(x, ihi);
        return x;
      });
}

absl::Status ClampKernel(const KernelCall& call) {
  return ClampBetween(call, call.args.size() > 1 ? &call.args[1] : nullptr,
                      call.args.size() > 2 ? &call.args[2] : nullptr);
}

absl::Status HardtanhKernel(const KernelCall& call) {
  KernelArg lo, hi;
  lo.kind = hi.kind = KernelArg::Kind::kFloat;
  lo.float_value = -1;
  hi.float_value = 1;
  const KernelArg* plo =
      call.args.size() > 1 && call.args[1].is_number() ? &call.args[1] : &lo;
  const KernelArg* phi =
      call.args.size() > 2 && call.args[2].is_number() ? &call.args[2] : &hi;
  return ClampBetween(call, plo, phi);
}

absl::Status LeakyReluKernel(const KernelCall& call) {
  const double slope = call.args.size() > 1 && call.args[1].is_number()
                           ? call.args[1].AsDouble()
                           : 0.01;
  return FloatUnaryKernel(call,
                          [slope](double x) { return x > 0 ? x : x * slope; });
}

// --- Kernels with no data to compute
// ---------------------------------------------

// View operators: the result is the argument's storage seen through the
// node's spec, which the executor builds; nothing moves.
absl::Status ViewKernel(const KernelCall&) { return absl::OkStatus(); }

}  // namespace

// ---------------------------------------------------------------------------
// The kernel table.

namespace {

struct KernelEntry {
  std::string_view op;
  HostKernelFn fn;
};

// Elementwise kernels (E) may run in place; the others (G) get temporaries
// when an output overlaps an input.
#define E(fn) &Guard<fn, true>
#define G(fn) &Guard<fn, false>

const KernelEntry kKernels[] = {
    // Arithmetic (functional, in place, Scalar forms share one kernel).
    {"aten::add.Tensor", E(AddKernel)},
    {"aten::add.Scalar", E(AddKernel)},
    {"aten::add_.Tensor", E(AddKernel)},
    {"aten::add_.Scalar", E(AddKernel)},
    {"aten::sub.Tensor", E(SubKernel)},
    {"aten::sub.Scalar", E(SubKernel)},
    {"aten::sub_.Tensor", E(SubKernel)},
    {"aten::sub_.Scalar", E(SubKernel)},
    {"aten::rsub.Tensor", E(RsubKernel)},
    {"aten::rsub.Scalar", E(RsubKernel)},
    {"aten::mul.Tensor", E(MulKernel)},
    {"aten::mul.Scalar", E(MulKernel)},
    {"aten::mul_.Tensor", E(MulKernel)},
    {"aten::mul_.Scalar", E(MulKernel)},
    {"aten::div.Tensor", E(DivKernel)},
    {"aten::div.Scalar", E(DivKernel)},
    {"aten::div.Tensor_mode", E(DivKernel)},
    {"aten::div.Scalar_mode", E(DivKernel)},
    {"aten::div_.Tensor", E(DivKernel)},
    {"aten::div_.Scalar", E(DivKernel)},
    {"aten::remainder.Tensor", E(RemainderKernel)},
    {"aten::remainder.Scalar", E(RemainderKernel)},
    {"aten::pow.Tensor_Tensor", E(PowKernel)},
    {"aten::pow.Tensor_Scalar", E(PowKernel)},
    {"aten::maximum", E(MaximumKernel)},
    {"aten::minimum", E(MinimumKernel)},
    {"aten::bitwise_and.Tensor", E(BitwiseAndKernel)},
    {"aten::bitwise_or.Tensor", E(BitwiseOrKernel)},
    {"aten::bitwise_xor.Tensor", E(BitwiseXorKernel)},
    // Comparisons and logic.
    {"aten::eq.Tensor", E(EqKernel)},
    {"aten::eq.Scalar", E(EqKernel)},
    {"aten::ne.Tensor", E(NeKernel)},
    {"aten::ne.Scalar", E(NeKernel)},
    {"aten::lt.Tensor", E(LtKernel)},
    {"aten::lt.Scalar", E(LtKernel)},
    {"aten::le.Tensor", E(LeKernel)},
    {"aten::le.Scalar", E(LeKernel)},
    {"aten::gt.Tensor", E(GtKernel)},
    {"aten::gt.Scalar", E(GtKernel)},
    {"aten::ge.Tensor", E(GeKernel)},
    {"aten::ge.Scalar", E(GeKernel)},
    {"aten::logical_and", E(LogicalAndKernel)},
    {"aten::logical_or", E(LogicalOrKernel)},
    {"aten::logical_xor", E(LogicalXorKernel)},
    {"aten::logical_not", E(LogicalNotKernel)},
    {"aten::where.self", E(WhereKernel)},
    // Unary.
    {"aten::relu", E(ReluKernel)},
    {"aten::relu_", E(ReluKernel)},
    {"aten::neg", E(NegKernel)},
    {"aten::neg_", E(NegKernel)},
    {"aten::abs", E(AbsKernel)},
    {"aten::abs_", E(AbsKernel)},
    {"aten::sign", E(SignKernel)},
    {"aten::floor", E(FloorKernel)},
    {"aten::ceil", E(CeilKernel)},
    {"aten::round", E(RoundKernel)},
    {"aten::trunc", E(TruncKernel)},
    {"aten::sin", E(SinKernel)},
    {"aten::sin_", E(SinKernel)},
    {"aten::cos", E(CosKernel)},
    {"aten::tan", E(TanKernel)},
    {"aten::exp", E(ExpKernel)},
    {"aten::exp_", E(ExpKernel)},
    {"aten::log", E(LogKernel)},
    {"aten::log1p", E(Log1pKernel)},
    {"aten::expm1", E(Expm1Kernel)},
    {"aten::sqrt", E(SqrtKernel)},
    {"aten::rsqrt", E(RsqrtKernel)},
    {"aten::reciprocal", E(ReciprocalKernel)},
    {"aten::tanh", E(TanhKernel)},
    {"aten::tanh_", E(TanhKernel)},
    {"aten::erf", E(ErfKernel)},
    {"aten::sigmoid", E(SigmoidKernel)},
    {"aten::sigmoid_", E(SigmoidKernel)},
    {"aten::silu", E(SiluKernel)},
    {"aten::silu_", E(SiluKernel)},
    {"aten::gelu", E(GeluKernel)},
    {"aten::gelu_", E(GeluKernel)},
    {"aten::clamp", E(ClampKernel)},
    {"aten::clamp_", E(ClampKernel)},
    {"aten::hardtanh", E(HardtanhKernel)},
    {"aten::hardtanh_", E(HardtanhKernel)},
    {"aten::leaky_relu", E(LeakyReluKernel)},
    {"aten::leaky_relu_", E(LeakyReluKernel)},
    // Filling and copying.
    {"aten::copy_", G(CopyKernel)},
    {"aten::fill_.Scalar", E(FillScalarKernel)},
    {"aten::zero_", E(ZeroKernel)},
    {"aten::clone", G(CloneKernel)},
    {"aten::contiguous", G(CloneKernel)},
    {"aten::_to_copy", G(CloneKernel)},
    {"aten::to.dtype", G(CloneKernel)},
    // Views: nothing to compute (the executor builds the view).
    {"aten::view", &ViewKernel},
    {"aten::reshape", &ViewKernel},
    {"aten::transpose.int", &ViewKernel},
    {"aten::permute", &ViewKernel},
    {"aten::t", &ViewKernel},
    {"aten::expand", &ViewKernel},
    {"aten::slice.Tensor", &ViewKernel},
    {"aten::select.int", &ViewKernel},
    {"aten::unsqueeze", &ViewKernel},
    {"aten::squeeze.dim", &ViewKernel},
    {"aten::squeeze", &ViewKernel},
    {"aten::alias", &ViewKernel},
    {"aten::detach", &ViewKernel},
    {"aten::as_strided", &ViewKernel},
    // Copy forms of the views.
    {"aten::view_copy", G(FlatCopyKernel)},
    {"aten::reshape_copy", G(FlatCopyKernel)},
    {"aten::_unsafe_view_copy", G(FlatCopyKernel)},
    {"aten::unsqueeze_copy", G(FlatCopyKernel)},
    {"aten::squeeze_copy.dim", G(FlatCopyKernel)},
    {"aten::squeeze_copy", G(FlatCopyKernel)},
    {"aten::alias_copy", G(CloneKernel)},
    {"aten::expand_copy", G(CloneKernel)},
    {"aten::permute_copy", G(PermuteCopyKernel)},
    {"aten::transpose_copy.int", G(TransposeCopyKernel)},
    {"aten::t_copy", G(TCopyKernel)},
    {"aten::slice_copy.Tensor", G(SliceCopyKernel)},
    {"aten::select_copy.int", G(SelectCopyKernel)},
    {"aten::cat", G(CatKernel)},
    {"aten::stack", G(StackKernel)},
    {"aten::embedding", G(EmbeddingKernel)},
    {"aten::index_select", G(IndexSelectKernel)},
    // Matrix products.
    {"aten::mm", G(MmKernel)},
    {"aten::addmm", G(AddmmKernel)},
    {"aten::bmm", G(BmmKernel)},
    {"aten::linear", G(LinearKernel)},
    // Reductions and normalizations.
    {"aten::sum.dim_IntList", G(SumDimKernel)},
    {"aten::sum", G(SumAllKernel)},
    {"aten::mean.dim", G(MeanDimKernel)},
    {"aten::mean", G(MeanAllKernel)},
    {"aten::amax", G(AmaxKernel)},
    {"aten::amin", G(AminKernel)},
    {"aten::_softmax", G(SoftmaxKernel)},
    {"aten::softmax.int", G(SoftmaxKernel)},
    {"aten::_log_softmax", G(LogSoftmaxKernel)},
    {"aten::log_softmax.int", G(LogSoftmaxKernel)},
    {"aten::native_layer_norm", G(NativeLayerNormKernel)},
    {"aten::max_pool2d_with_indices", G(MaxPool2dWithIndicesKernel)},
    {"aten::avg_pool2d", G(AvgPool2dKernel)},
};

#undef E
#undef G

using KernelTable = std::unordered_map<std::string_view, HostKernelFn>;

const KernelTable& Kernels() {
  // Built once, never destroyed.
  static const KernelTable* const table = [] {
    auto* built = new KernelTable();
    for (const KernelEntry& entry : kKernels)
      built->emplace(entry.op, entry.fn);
    // The per-family tables (runtime/ops/), which replace rows of kKernels.
    for (std::span<const FamilyKernel> family : FamilyKernelTables())
      for (const FamilyKernel& entry : family) (*built)[entry.op] = entry.fn;
    return built;
  }();
  return *table;
}

}  // namespace
}  // namespace host

HostKernelFn FindHostKernel(std::string_view op) {
  constexpr std::string_view kDefault = ".default";
  if (op.ends_with(kDefault)) op.remove_suffix(kDefault.size());
  const host::KernelTable& table = host::Kernels();
  auto it = table.find(op);
  return it == table.end() ? nullptr : it->second;
}

absl::Status RunHostKernel(const KernelCall& call) {
  HostKernelFn fn = FindHostKernel(call.op);
  if (!fn) {
    return absl::UnimplementedError(
        absl::StrCat("no host kernel for operator ", AsAbsl(call.op)));
  }
  return fn(call);
}

std::vector<std::string> HostKernelOps() {
  std::vector<std::string> names;
  for (const auto& [op, fn] : host::Kernels()) names.emplace_back(op);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// Whether `a` and `b` both lay their elements out densely in row-major order
// with the same sizes: one copy of all the bytes copies element for element.
bool SameDenseLayout(const TensorView& a, const TensorView& b) {
  return a.IsContiguous() && b.IsContiguous() &&
         std::equal(a.sizes.begin(), a.sizes.end(), b.sizes.begin(),
                    b.sizes.end());
}

}  // namespace

absl::Status CopyStridedHost(const TensorView& dst, const TensorView& src) {
  if (!host::BroadcastsTo(src, dst.sizes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "copy: source ", src.DebugString(),
        " does not broadcast to the destination ", dst.DebugString()));
  }
  if (dst.numel() == 0) return absl::OkStatus();
  TensorView source = src;
  std::vector<std::byte> staged;
  if (Overlaps(dst, src) && !SameView(dst, src)) {
    staged = GatherContiguous(src);
    source = ContiguousView(staged.data(), src.dtype, src.sizes);
  }
  const DType dc = dst.dtype, sc = source.dtype;
  if (dc == sc && SameDenseLayout(dst, source)) {
    std::memmove(dst.bytes(), source.bytes(), dst.numel() * dst.element_size());
    return absl::OkStatus();
  }
  std::array<DimVector, 2> strides{
      host::OwnByteStrides(dst), host::BroadcastByteStrides(source, dst.sizes)};
  if (dst.dtype == source.dtype) {
    const int64_t es = dst.element_size();
    host::StridedLoop<2>(dst.sizes, {dst.bytes(), source.bytes()}, strides,
                         [es](const std::array<std::byte*, 2>& p) {
                           std::memmove(p[0], p[1], es);
                         });
  } else {
    host::StridedLoop<2>(dst.sizes, {dst.bytes(), source.bytes()}, strides,
                         [dc, sc](const std::array<std::byte*, 2>& p) {
                           host::ConvertElement(dc, p[0], sc, p[1]);
                         });
  }
  return absl::OkStatus();
}

std::vector<std::byte> GatherContiguous(const TensorView& src) {
  std::vector<std::byte> bytes(src.numel() * src.element_size());
  if (bytes.empty()) return bytes;
  TensorView dense = ContiguousView(bytes.data(), src.dtype, src.sizes);
  if (SameDenseLayout(dense, src)) {
    std::memcpy(bytes.data(), src.bytes(), bytes.size());
    return bytes;
  }
  const int64_t es = src.element_size();
  host::StridedLoop<2>(src.sizes, {dense.bytes(), src.bytes()},
                       {host::OwnByteStrides(dense), host::OwnByteStrides(src)},
                       [es](const std::array<std::byte*, 2>& p) {
                         std::memcpy(p[0], p[1], es);
                       });
  return bytes;
}

}  // namespace ferry
