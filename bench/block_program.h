// The synthetic program of the pipeline benchmarks (pipeline_bench.cc,
// lower_peak_memory.cc): a repeating 9-node block over three devices.
#ifndef FERRY_BENCH_BLOCK_PROGRAM_H_
#define FERRY_BENCH_BLOCK_PROGRAM_H_

#include <cstdint>

#include "ferry/v1/program.pb.h"

namespace ferry {

// About `target` nodes in method "forward": a repeating block of 9 nodes.
//   h = sin(prev); i = cos(prev)                 (diamond on the host)
//   d = delegate@cuda:k(h, i) -> tuple; g = getitem(d, 0)
//   e = delegate@cuda:k(g, prev) -> tuple; f = getitem(e, 0)   (same device)
//   r = relu_(g)                                 (host write of a device value)
//   s = add(f, g); prev = s
// Lowering it adds 5 copies per block.
v1::LowerRequest MakeBlockProgram(int64_t target);

}  // namespace ferry

#endif  // FERRY_BENCH_BLOCK_PROGRAM_H_
