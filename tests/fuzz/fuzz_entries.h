// Fuzz entry points: one function per target, taking the raw bytes a fuzzer
// (or a replayed corpus file) supplies.
//
// The entries are compiled with the project's normal compiler into
// libferry_fuzz_entries, so the checked-in corpus and every regression input
// are replayed by ferry_fuzz_replay_test in the ordinary build; with
// -DFERRY_FUZZ=ON (clang) the same entries are linked into libFuzzer binaries
// (tests/fuzz/CMakeLists.txt, scripts/fuzz, docs/fuzzing.md).
//
// An entry never throws and returns 0. It aborts (a finding) only when an
// invariant of the library is broken, e.g. a program that Lower() accepted
// does not validate once lowered. Client-caused problems (a schema that does
// not parse, a program with diagnostics, a verification that fails) are
// ordinary outcomes, not findings.
#ifndef FERRY_TESTS_FUZZ_FUZZ_ENTRIES_H_
#define FERRY_TESTS_FUZZ_FUZZ_ENTRIES_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace ferry::fuzz {

// The bytes are schema text: ParseSchema (passes/schema.h) and the queries
// on the parsed schema.
int FuzzSchema(const uint8_t* data, size_t size);

// The bytes are a binary ferry.v1.LowerRequest or Program: ParseRequest,
// ImportProgram, ValidateProgram, the export/import round trip,
// ferry::Lower with its result checked (it validates, it round-trips), and
// ferry::LowerWire on the same bytes (it agrees with Lower).
int FuzzPipeline(const uint8_t* data, size_t size);

// The bytes are a binary LowerRequest or Program: when it imports and
// validates, Executor::Load + VerifyPrograms on sim with the program itself
// as the "lowered" program (hostile lowered modules straight from a client),
// then the same after ferry::Lower.
int FuzzVerify(const uint8_t* data, size_t size);

// The bytes are a binary ferry.v1.Node: wire::NodeReader (passes/
// wire_node.h), which ImportRequestWire reads each node of a request with,
// against protobuf's parse of the same bytes.
int FuzzNode(const uint8_t* data, size_t size);

struct Target {
  std::string_view name;  // "schema", "pipeline", "verify", "node"
  int (*entry)(const uint8_t* data, size_t size);
};
std::span<const Target> Targets();
// Null when `name` is not a target.
const Target* FindTarget(std::string_view name);

}  // namespace ferry::fuzz

#endif  // FERRY_TESTS_FUZZ_FUZZ_ENTRIES_H_
