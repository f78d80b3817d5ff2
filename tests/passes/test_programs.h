// Small helpers for pass tests: programs written in text form.
#ifndef FERRY_TESTS_PASSES_TEST_PROGRAMS_H_
#define FERRY_TESTS_PASSES_TEST_PROGRAMS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/v1/program.pb.h"
#include "passes/ir.h"
#include "passes/pipeline.h"
#include "tests/support/programs.h"  // ParseProgram, ParseOptions

namespace ferry::testing_util {

// A method body in text form (the `nodes { ... }` entries) with helpers:
// Input("a"), Call("t", "aten::add.Tensor", {"a", "b"}), Output({"t"}).
std::string Spec(const std::vector<int64_t>& sizes = {4, 4},
                 const std::string& dtype = "F32");
std::string Input(const std::string& name,
                  const std::vector<int64_t>& sizes = {4, 4});
std::string Call(const std::string& name, const std::string& op,
                 const std::vector<std::string>& args,
                 const std::string& tag = "",
                 const std::vector<int64_t>& sizes = {4, 4},
                 const std::string& extra_args = "");
std::string Output(const std::vector<std::string>& values);
std::string MethodText(const std::string& name, const std::string& nodes);

// Node index by name; -1 when absent.
int32_t Find(const Method& method, const std::string& name);
// Names of the nodes in order, e.g. "a b a_to_cuda0 delegate_d0 t ...".
std::string NodeNames(const Method& method);
// How many calls of `op` the method has.
int CountOp(const Method& method, const std::string& op);
// The operand names of node `name`, e.g. "a_to_cuda0 b".
std::string ArgsOf(const Method& method, const std::string& name);

// Everything a lowering gives, as text: the report (without the stages'
// times) and the lowered program; or the status.
std::string ResultText(const absl::StatusOr<LowerResult>& result);
// The request in wire form.
std::string Binary(const v1::LowerRequest& request);
// A length-delimited field in wire form: field `number`, `value`.
std::string Field(int number, const std::string& value);

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_PASSES_TEST_PROGRAMS_H_
