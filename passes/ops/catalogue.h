// The operator catalogue: every family of built-in operators, and the
// operator list docs/operators.md is generated from.
//
// Adding an operator: add its row (schema text exactly as ATen prints it,
// rule kind, rule) to its family's kOps in passes/ops/<family>.cc, with the
// rule next to it when no existing one fits; then regenerate
// docs/operators.md (build/bin/ferry_operators_doc > docs/operators.md). A
// new family is one file pair plus one line in catalogue.cc.
#ifndef FERRY_PASSES_OPS_CATALOGUE_H_
#define FERRY_PASSES_OPS_CATALOGUE_H_

#include <span>
#include <string>

#include "passes/ops/common.h"

namespace ferry {

// Every family, in the order docs/operators.md lists them.
std::span<const OpFamily> OpFamilies();

// docs/operators.md: the registered operators by family with their schemas
// and rule kinds, then how to add one.
std::string OperatorsMarkdown();

}  // namespace ferry

#endif  // FERRY_PASSES_OPS_CATALOGUE_H_
