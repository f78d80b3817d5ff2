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
//  - lowered modules' subgraphs, as methods.
#ifndef FERRY_PASSES_VALIDATE_H_
#define FERRY_PASSES_VALIDATE_H_

#include "passes/diagnostics.h"
#include "passes/ir.h"

namespace ferry {

// Returns true when no error was added.
bool ValidateProgram(const Program& program, Diagnostics& diagnostics);

}  // namespace ferry

#endif  // FERRY_PASSES_VALIDATE_H_
