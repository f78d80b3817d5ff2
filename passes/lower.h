// lower: each partition becomes a lowered module and a delegate node.
//
// Requires: a partitioned program (partition.h): tagged groups are convex
// and lowerable.
// Establishes: no node carries a delegation tag. Each group of a method is
// replaced by
//  - a LoweredModule (id "<method>.<tag>", made unique) whose graph has one
//    USER_INPUT per value the group reads from outside (in order of first
//    read), a `constant` node per program-data tensor the group took in (the
//    module owns it), the group's nodes, and an output node returning the
//    group's values read outside (in node order); compile spec
//    `target_device`; input_layouts = the layouts of those inputs now;
//    returns_tuple = true;
//  - a `delegate` node "delegate_<tag>" with a tuple result, and one getitem
//    per returned value, named like the value it replaces, so readers keep
//    their names.
// Nodes are reordered only as far as needed: the delegate goes where the
// group's last node was, and a node between the group's nodes that reads the
// group moves after the delegate.
// Checked by CheckLowered (checks.h).
#ifndef FERRY_PASSES_LOWER_H_
#define FERRY_PASSES_LOWER_H_

#include "passes/pass.h"

namespace ferry {

absl::StatusOr<PassStats> LowerPartitions(Program& program,
                                          const LowerOptions& options,
                                          Diagnostics& diagnostics);

}  // namespace ferry

#endif  // FERRY_PASSES_LOWER_H_
