// plan_memory: one arena per (device type, index), offsets by lifetime.
//
// Requires: a placed program (place_and_copy.h): every value's spec names
// its device.
// Establishes, for every method:
//  - `arenas`: one per device that holds planned storage (host first, then
//    cuda by index), with its size and the lower bound (the largest sum of
//    live bytes at any step) — all devices in one host arena when
//    enable_non_cpu_memory_planning is false;
//  - every storage root that needs memory gets {arena, offset, size,
//    planned}: results of calls and delegates, copies, and graph inputs and
//    outputs unless alloc_graph_input / alloc_graph_output is false. Program
//    data is not planned, except AT_LOAD copies, which live in the device
//    arena for the whole method; mutable buffers are planned (whatever
//    alloc_graph_input / alloc_graph_output say) and also live for the
//    whole method: no other value ever shares their bytes, so their state
//    survives between calls;
//  - views, in-place results and getitems carry their root's placement;
//  - two storages share bytes only if their lifetimes (first definition to
//    last use of any alias) do not overlap.
// Offsets come from a best-fit free list walked in node order; sizes are
// rounded up to kArenaAlignment.
// Checked by CheckPlanned (checks.h).
#ifndef FERRY_PASSES_PLAN_MEMORY_H_
#define FERRY_PASSES_PLAN_MEMORY_H_

#include "passes/pass.h"

namespace ferry {

inline constexpr int64_t kArenaAlignment = 64;

absl::StatusOr<PassStats> PlanMemory(Program& program,
                                     const LowerOptions& options,
                                     Diagnostics& diagnostics);

}  // namespace ferry

#endif  // FERRY_PASSES_PLAN_MEMORY_H_
