// Deterministic tensor data for verification: constants that carry no data
// and user inputs that the caller does not give.
//
// Generator: element i (the LOGICAL index, row-major over sizes, whatever
// the storage layout) of a tensor generated from `seed` is a function of
// z = SplitMix64At(seed, i), the i-th output of the splitmix64 sequence
// started at `seed`:
//   f32   k / 2^23 with k = (z >> 40) - 2^23   uniform in [-1, 1), exact
//   f64   k / 2^52 with k = (z >> 11) - 2^52
//   f16   k / 2^10 with k = (z >> 53) - 2^10
//   bf16  k / 2^7  with k = (z >> 56) - 2^7
//   i8, i16, i32, i64   (z >> 60) - 8          in [-8, 8)
//   u8    z >> 60                               in [0, 16)
//   bool  z >> 63
// Every value is exactly representable in its dtype, so re-laying out a
// tensor (normalize_layout) or converting it never changes the numbers.
// User input `position` of method `method` uses UserInputSeed(seed, method,
// position); a constant without data uses ConstantDataSeed(seed,
// Constant.seed), which is the constant's own seed when `seed` is 0.
#ifndef FERRY_RUNTIME_DATA_GEN_H_
#define FERRY_RUNTIME_DATA_GEN_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "passes/ir.h"

namespace ferry {

// The index-th output (0-based) of splitmix64 seeded with `seed`.
uint64_t SplitMix64At(uint64_t seed, uint64_t index);

// Mixes the verification seed with a method name and input position.
uint64_t UserInputSeed(uint64_t seed, std::string_view method, int position);

// The seed of a constant without data under verification seed `seed`:
// constant_seed + seed * 0x9e3779b97f4a7c15 (mod 2^64).
uint64_t ConstantDataSeed(uint64_t seed, uint64_t constant_seed);

// Writes the generated value of every element of `spec` into `storage`
// (host memory holding at least spec.StorageBytes() bytes; storage_offset
// and strides as the spec says). Bytes the spec does not reach are left as
// they are. Polls the calling thread's cancel token (cancel.h, StopTick) and
// returns false, with the data incomplete, when it says stop.
bool GenerateTensorData(const TensorSpec& spec, uint64_t seed,
                        std::byte* storage);

}  // namespace ferry

#endif  // FERRY_RUNTIME_DATA_GEN_H_
