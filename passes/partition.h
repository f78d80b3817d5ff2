// partition: decide which host operators are lowered together.
//
// Requires: a validated, layout-normalized program.
// Establishes: the nodes of each method that will be lowered carry a
// delegation tag, and each tag's group is
//  - convex: no path leaves the group and comes back into it;
//  - made of operators a backend can run: registered, not metadata-only, not
//    a copy, writing nothing defined outside the group;
//  - closed over its program data: a parameter/buffer/lifted constant (or a
//    constant node) carries the group's tag only when every reader of it is
//    in the group, and the lowered module will then own it.
// BY_TAG checks the tags the request carries (errors FERRY-E0701/E0702).
// BY_CAPABILITY clears them and tags maximal convex groups of supported
// operators itself ("partition_0", ...), taking in the program data only
// they read. Delegates already in the program are never touched.
#ifndef FERRY_PASSES_PARTITION_H_
#define FERRY_PASSES_PARTITION_H_

#include "passes/pass.h"

namespace ferry {

absl::StatusOr<PassStats> Partition(Program& program,
                                    const LowerOptions& options,
                                    Diagnostics& diagnostics);

// Whether a call node's operator can be lowered into a delegate.
bool IsLowerableCall(const Node& node);

}  // namespace ferry

#endif  // FERRY_PASSES_PARTITION_H_
