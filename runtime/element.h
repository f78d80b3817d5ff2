// Reading and writing single tensor elements of any Ferry dtype.
//
// Shared by the host kernels and the CUDA kernels (every function is
// FERRY_HD: host and device), so both backends round and convert the same
// way:
//  - f16 and bf16 are stored as their IEEE bit patterns; conversion from
//    float rounds to nearest even, NaN stays NaN;
//  - loads widen to double (floating dtypes) or int64 (integers, bool);
//  - stores narrow as ATen's static_cast does, but with defined results where
//    C++ leaves them undefined: NaN becomes 0 and out-of-range values
//    saturate when a float is stored into an integer dtype; integers wrap.
//
// Dtypes are ferry::DType (passes/dtype.h, a header nvcc compiles).
#ifndef FERRY_RUNTIME_ELEMENT_H_
#define FERRY_RUNTIME_ELEMENT_H_

#include <cstdint>
#include <cstring>

#include "passes/dtype.h"

#if defined(__CUDACC__)
#define FERRY_HD __host__ __device__ inline
#else
#define FERRY_HD inline
#endif

namespace ferry::element {

FERRY_HD bool IsFloat(DType dtype) {
  return dtype == DType::kF32 || dtype == DType::kF16 ||
         dtype == DType::kBF16 || dtype == DType::kF64;
}

FERRY_HD uint32_t FloatBits(float f) {
  uint32_t bits;
  memcpy(&bits, &f, sizeof bits);
  return bits;
}

FERRY_HD float BitsToFloat(uint32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

// IEEE binary16 <-> binary32, round to nearest even.
FERRY_HD uint16_t FloatToHalfBits(float value) {
  uint32_t f = FloatBits(value);
  uint32_t sign = (f >> 16) & 0x8000u;
  uint32_t abs_bits = f & 0x7fffffffu;
  if (abs_bits >= 0x7f800000u) {  // inf or NaN
    return static_cast<uint16_t>(sign | 0x7c00u |
                                 (abs_bits > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs_bits >= 0x477ff000u) {  // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  }
  if (abs_bits < 0x38800000u) {  // below the smallest normal half: subnormal
    if (abs_bits < 0x33000000u) return static_cast<uint16_t>(sign);  // -> 0
    uint32_t exponent = abs_bits >> 23;
    uint32_t mantissa = (abs_bits & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126u - exponent;  // 14..24
    uint32_t half_mantissa = mantissa >> shift;
    uint32_t remainder = mantissa & ((1u << shift) - 1u);
    uint32_t halfway = 1u << (shift - 1u);
    if (remainder > halfway || (remainder == halfway && (half_mantissa & 1u)))
      ++half_mantissa;
    return static_cast<uint16_t>(sign | half_mantissa);
  }
  uint32_t rebased = abs_bits - 0x38000000u;  // exponent bias 127 -> 15
  uint32_t half_bits = rebased >> 13;
  uint32_t remainder = rebased & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (half_bits & 1u)))
    ++half_bits;
  return static_cast<uint16_t>(sign | half_bits);
}

FERRY_HD float HalfBitsToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1fu)
    return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0) return BitsToFloat(sign);
    // Subnormal: value = mantissa * 2^-24.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign ? -magnitude : magnitude;
  }
  return BitsToFloat(sign | ((exponent + 112u) << 23) | (mantissa << 13));
}

// bfloat16 is the top half of a binary32; round to nearest even.
FERRY_HD uint16_t FloatToBFloat16Bits(float value) {
  uint32_t f = FloatBits(value);
  if ((f & 0x7fffffffu) > 0x7f800000u)  // NaN: keep it quiet and NaN
    return static_cast<uint16_t>((f >> 16) | 0x40u);
  uint32_t rounding = 0x7fffu + ((f >> 16) & 1u);
  return static_cast<uint16_t>((f + rounding) >> 16);
}

FERRY_HD float BFloat16BitsToFloat(uint16_t b) {
  return BitsToFloat(static_cast<uint32_t>(b) << 16);
}

template <typename T>
FERRY_HD T LoadRaw(const void* p) {
  T v;
  memcpy(&v, p, sizeof v);
  return v;
}

template <typename T>
FERRY_HD void StoreRaw(void* p, T v) {
  memcpy(p, &v, sizeof v);
}

// The element at `p` as a double.
FERRY_HD double LoadAsDouble(DType dtype, const void* p) {
  switch (dtype) {
    case DType::kF32:
      return LoadRaw<float>(p);
    case DType::kF16:
      return HalfBitsToFloat(LoadRaw<uint16_t>(p));
    case DType::kBF16:
      return BFloat16BitsToFloat(LoadRaw<uint16_t>(p));
    case DType::kF64:
      return LoadRaw<double>(p);
    case DType::kI8:
      return LoadRaw<int8_t>(p);
    case DType::kU8:
      return LoadRaw<uint8_t>(p);
    case DType::kI16:
      return LoadRaw<int16_t>(p);
    case DType::kI32:
      return LoadRaw<int32_t>(p);
    case DType::kI64:
      return static_cast<double>(LoadRaw<int64_t>(p));
    case DType::kBool:
      return LoadRaw<uint8_t>(p) != 0 ? 1.0 : 0.0;
    default:
      return 0;
  }
}

// Float to int64 with defined results: NaN -> 0, saturating at the ends.
FERRY_HD int64_t SaturatingToInt64(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775807.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return static_cast<int64_t>(v);
}

// The element at `p` as an int64 (floats truncate toward zero).
FERRY_HD int64_t LoadAsInt64(DType dtype, const void* p) {
  switch (dtype) {
    case DType::kI8:
      return LoadRaw<int8_t>(p);
    case DType::kU8:
      return LoadRaw<uint8_t>(p);
    case DType::kI16:
      return LoadRaw<int16_t>(p);
    case DType::kI32:
      return LoadRaw<int32_t>(p);
    case DType::kI64:
      return LoadRaw<int64_t>(p);
    case DType::kBool:
      return LoadRaw<uint8_t>(p) != 0 ? 1 : 0;
    default:
      return SaturatingToInt64(LoadAsDouble(dtype, p));
  }
}

FERRY_HD bool LoadAsBool(DType dtype, const void* p) {
  if (IsFloat(dtype)) return LoadAsDouble(dtype, p) != 0.0;
  return LoadAsInt64(dtype, p) != 0;
}

// Stores an integer (wrapping into narrower integer dtypes, as C++ does for
// unsigned arithmetic).
FERRY_HD void StoreInt64(DType dtype, void* p, int64_t v) {
  switch (dtype) {
    case DType::kF32:
      StoreRaw<float>(p, static_cast<float>(v));
      return;
    case DType::kF16:
      StoreRaw<uint16_t>(p, FloatToHalfBits(static_cast<float>(v)));
      return;
    case DType::kBF16:
      StoreRaw<uint16_t>(p, FloatToBFloat16Bits(static_cast<float>(v)));
      return;
    case DType::kF64:
      StoreRaw<double>(p, static_cast<double>(v));
      return;
    case DType::kI8:
      StoreRaw<int8_t>(p, static_cast<int8_t>(static_cast<uint64_t>(v)));
      return;
    case DType::kU8:
      StoreRaw<uint8_t>(p, static_cast<uint8_t>(static_cast<uint64_t>(v)));
      return;
    case DType::kI16:
      StoreRaw<int16_t>(p, static_cast<int16_t>(static_cast<uint64_t>(v)));
      return;
    case DType::kI32:
      StoreRaw<int32_t>(p, static_cast<int32_t>(static_cast<uint64_t>(v)));
      return;
    case DType::kI64:
      StoreRaw<int64_t>(p, v);
      return;
    case DType::kBool:
      StoreRaw<uint8_t>(p, v != 0 ? 1 : 0);
      return;
    default:
      return;
  }
}

FERRY_HD void StoreDouble(DType dtype, void* p, double v) {
  switch (dtype) {
    case DType::kF32:
      StoreRaw<float>(p, static_cast<float>(v));
      return;
    case DType::kF16:
      StoreRaw<uint16_t>(p, FloatToHalfBits(static_cast<float>(v)));
      return;
    case DType::kBF16:
      StoreRaw<uint16_t>(p, FloatToBFloat16Bits(static_cast<float>(v)));
      return;
    case DType::kF64:
      StoreRaw<double>(p, v);
      return;
    case DType::kBool:
      StoreRaw<uint8_t>(p, v != 0.0 ? 1 : 0);
      return;
    default:
      StoreInt64(dtype, p, SaturatingToInt64(v));
      return;
  }
}

}  // namespace ferry::element

#endif  // FERRY_RUNTIME_ELEMENT_H_
