// Programs and requests written in text form, for tests.
#ifndef FERRY_TESTS_SUPPORT_PROGRAMS_H_
#define FERRY_TESTS_SUPPORT_PROGRAMS_H_

#include <string>
#include <string_view>

#include "ferry/v1/program.pb.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "passes/pipeline.h"

namespace ferry::testing_util {

// A LowerRequest in text form; fails the current test when it does not
// parse.
v1::LowerRequest ParseRequestText(std::string_view text);

// Parses a Program (or a LowerRequest, as the tool reads files) in text
// form, imports and validates it; fails the current test on any error.
Program ParseProgram(std::string_view text);
// Imports without validating, and returns validation's diagnostics in
// `validation`: for handing a pass or the runtime a program validation
// refuses, to test its own checks. Import errors still fail the test.
Program ParseProgramUnvalidated(std::string_view text,
                                Diagnostics* validation = nullptr);

// Resolves LowerOptions in text form for `program`; fails the test on errors.
LowerOptions ParseOptions(std::string_view text, const Program& program);

// The counts of `stats` (copies, their bytes, delegates per device, arenas;
// not the passes' timings), one per line: what a lowering reports, to compare
// with CountStats of the program it returned.
std::string CountsText(const LowerStats& stats);

}  // namespace ferry::testing_util

#endif  // FERRY_TESTS_SUPPORT_PROGRAMS_H_
