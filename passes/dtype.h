// Element types: the one DType of the IR (ir.h) and the runtime (the host
// and CUDA kernels read it through runtime/element.h).
//
// A header of its own, with nothing but the enum, so that code nvcc compiles
// can include it. Conversion to and from the wire's ferry.v1.DType is
// DTypeFromProto / DTypeToProto (proto_io.h), checked at compile time
// against kLastDType.
#ifndef FERRY_PASSES_DTYPE_H_
#define FERRY_PASSES_DTYPE_H_

#include <cstdint>

namespace ferry {

enum class DType : uint8_t {
  kInvalid = 0,
  kF32,
  kF16,
  kBF16,
  kF64,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kBool,
};
// The last enumerator: a dtype added after it must move this, and then
// proto_io.cc's conversions do not build until they handle it.
inline constexpr DType kLastDType = DType::kBool;

}  // namespace ferry

#endif  // FERRY_PASSES_DTYPE_H_
