// Semantic validation of an imported program.
//
// Requires: the program imported without errors (proto_io.h), so every
// reference is resolved.
// Establishes: nothing; reports every violation as a diagnostic:
//  - specs: valid dtype, strides of the right rank, non-negative sizes and
//    strides, sizes/strides whose extent overflows int64, constant data whose
//    size does not match the storage its spec spans, unknown device types;
//  - calls: arity and argument types against the schema, and the declared
//    result spec against the operator's shape rule where it has one
//    (elementwise broadcast, matmul, views, reductions, ...);
//  - delegates: target_device parses (tpu:0, cuda:x, cuda:-1, cuda: are
//    errors naming the delegate), argument count matches the module's user
//    inputs, the node's result (tuple/bare) matches `returns_tuple`;
//  - lowered modules' subgraphs, as methods;
//  - what the runtime needs to run the program (so that a program that
//    validates can be executed and verified): outputs are values (a module's
//    are tensors); program data is read with the constant table's layout;
//    delegate arguments are laid out as their module was compiled for;
//    views stay inside the storage they alias; copies keep their source's
//    layout; only metadata operators return scalars; planned values lie
//    inside their method's arenas; nested delegates run on their parent's
//    device, and device modules contain no host/device copies;
//  - the module call graph: no module calls itself, directly or through
//    others; chains of nested modules are at most kMaxModuleNesting long;
//    a method instantiates at most kMaxInstantiatedNodes nodes through its
//    delegates (every call of a module instantiates its graph).
#ifndef FERRY_PASSES_VALIDATE_H_
#define FERRY_PASSES_VALIDATE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"

namespace ferry {

// The longest chain of nested lowered modules (a method's delegate calling
// module m1, whose graph has a delegate calling m2, ...: m1 -> m2 is 2).
inline constexpr int32_t kMaxModuleNesting = 64;
// The most nodes one method may instantiate, its own plus those of every
// module call (recursively, once per call).
inline constexpr int64_t kMaxInstantiatedNodes = 2'000'000;

// What validation's walk saw of the methods' nodes (not the modules'): what
// tells the pipeline that partition has nothing to do (partition.h).
struct MethodNodesSeen {
  bool tagged = false;      // a node carries a delegation tag
  bool own_schema = false;  // a node carries schema text of its own
};

// Returns true when no error was added. Then `addressable`, when given, is
// CheckAddressable(program) (resource_limits.h), counted in validation's
// own walk over the specs, and `seen`, when given, is what the walk saw.
bool ValidateProgram(const Program& program, Diagnostics& diagnostics,
                     absl::Status* addressable = nullptr,
                     MethodNodesSeen* seen = nullptr);

// Only the module call graph checks (cycles, nesting, expansion), which the
// runtime repeats before it instantiates anything: it can be handed programs
// that were never validated. Returns true when no error was added.
bool ValidateModuleCallGraph(const Program& program, Diagnostics& diagnostics);

}  // namespace ferry

#endif  // FERRY_PASSES_VALIDATE_H_
