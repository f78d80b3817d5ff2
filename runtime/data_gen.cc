#include "runtime/data_gen.h"

#include "runtime/cancel.h"
#include "runtime/element.h"
#include "runtime/tensor_view.h"

namespace ferry {

uint64_t SplitMix64At(uint64_t seed, uint64_t index) {
  uint64_t z = seed + (index + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t UserInputSeed(uint64_t seed, std::string_view method, int position) {
  // FNV-1a over the method name, then two splitmix64 steps to spread it.
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : method) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return SplitMix64At(SplitMix64At(seed, h), static_cast<uint64_t>(position));
}

uint64_t ConstantDataSeed(uint64_t seed, uint64_t constant_seed) {
  return constant_seed + seed * 0x9e3779b97f4a7c15ull;
}

namespace {

// The generated value of element `index` stored at `p` in dtype `dtype`.
void StoreGenerated(DType dtype, uint64_t z, std::byte* p) {
  const DType code = dtype;
  switch (dtype) {
    case DType::kF32:
      element::StoreDouble(code, p,
                           static_cast<double>(static_cast<int64_t>(z >> 40) -
                                               (int64_t{1} << 23)) /
                               static_cast<double>(int64_t{1} << 23));
      return;
    case DType::kF64:
      element::StoreDouble(code, p,
                           static_cast<double>(static_cast<int64_t>(z >> 11) -
                                               (int64_t{1} << 52)) /
                               static_cast<double>(int64_t{1} << 52));
      return;
    case DType::kF16:
      element::StoreDouble(
          code, p,
          static_cast<double>(static_cast<int64_t>(z >> 53) - 1024) / 1024.0);
      return;
    case DType::kBF16:
      element::StoreDouble(
          code, p,
          static_cast<double>(static_cast<int64_t>(z >> 56) - 128) / 128.0);
      return;
    case DType::kU8:
      element::StoreInt64(code, p, static_cast<int64_t>(z >> 60));
      return;
    case DType::kBool:
      element::StoreInt64(code, p, static_cast<int64_t>(z >> 63));
      return;
    default:
      element::StoreInt64(code, p, static_cast<int64_t>(z >> 60) - 8);
      return;
  }
}

}  // namespace

bool GenerateTensorData(const TensorSpec& spec, uint64_t seed,
                        std::byte* storage) {
  TensorView view = MakeView(storage, spec);
  const int64_t numel = view.numel();
  if (numel == 0) return true;
  const int64_t es = view.element_size();
  DimVector index(view.dim(), 0);
  int64_t offset = 0;  // of element `index`, in elements
  for (int64_t linear = 0; linear < numel; ++linear) {
    StoreGenerated(spec.dtype,
                   SplitMix64At(seed, static_cast<uint64_t>(linear)),
                   view.bytes() + offset * es);
    if (StopTick()) return false;
    for (int64_t d = view.dim() - 1; d >= 0; --d) {
      offset += view.strides[d];
      if (++index[d] < view.sizes[d]) break;
      offset -= view.strides[d] * view.sizes[d];
      index[d] = 0;
    }
  }
  return true;
}

}  // namespace ferry
