// Launch geometry shared by the CUDA kernel files: grid-stride loops over
// `work` elements with kThreads threads a block.
#ifndef FERRY_RUNTIME_CUDA_LAUNCH_H_
#define FERRY_RUNTIME_CUDA_LAUNCH_H_

#include <cstdint>

namespace ferry::cuda {

inline constexpr int kThreads = 256;

// Blocks for `work` elements, at least 1 and at most 65535 (the loops are
// grid-stride, so fewer blocks than elements is fine).
inline int Blocks(int64_t work) {
  int64_t blocks = (work + kThreads - 1) / kThreads;
  if (blocks > 65535) blocks = 65535;
  return blocks < 1 ? 1 : static_cast<int>(blocks);
}

}  // namespace ferry::cuda

#endif  // FERRY_RUNTIME_CUDA_LAUNCH_H_
