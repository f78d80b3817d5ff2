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
// BY_CAPABILITY clears them and tags maximal convex groups of the operators
// the target backend runs (narrowed by the request's allow/deny lists)
// itself ("partition_0", ...), taking in the program data only they read.
// BY_TAG refuses a tag on an operator its backend does not run (E0702).
// A call carrying a schema that differs from the registry's for its name
// stays a custom operator (warning FERRY-W0703). Delegates already in the
// program are never touched.
// Checked by CheckPartitioned (checks.h).
#ifndef FERRY_PASSES_PARTITION_H_
#define FERRY_PASSES_PARTITION_H_

#include <string>
#include <string_view>

#include "passes/pass.h"
#include "passes/schema.h"

namespace ferry {

// Its counter kPartitionsCounter is how many partitions (distinct tags,
// summed over the methods) it leaves: none means no node is tagged.
absl::StatusOr<PassStats> Partition(Program& program,
                                    const LowerOptions& options,
                                    Diagnostics& diagnostics);
inline constexpr char kPartitionsCounter[] = "partitions";

// Whether Partition with `options` leaves a program as it is when no node
// of its methods carries a delegation tag or schema text of its own
// (MethodNodesSeen, validate.h): by tag (nothing to group, no foreign schema
// to warn of) or with no partitioner (no tag to clear) it does; by
// capability it groups untagged nodes.
inline bool PartitionActsOnTagsOnly(const LowerOptions& options) {
  return options.partitioner != LowerOptions::Partitioner::kByCapability;
}

// Whether a call node's operator can be lowered into a delegate: a
// registry operator (no schema of its own, or exactly the registry's), not
// metadata-only, not a copy. Which backend runs it is a further question
// (LowerOptions::backend_operators).
bool IsLowerableCall(const Node& node);

// The registry entry of a call node's operator; null for a custom operator
// (an unknown name, or a schema of its own that differs from the
// registry's).
const OpInfo* RegistryOperator(const Node& node);

// The backend id of the modules a partition for `target` becomes:
// partitioner.backend, else by the target's device type.
std::string PartitionBackend(const LowerOptions& options,
                             std::string_view target);

}  // namespace ferry

#endif  // FERRY_PASSES_PARTITION_H_
