// A structure-aware mutator for the pipeline and verify targets: it edits a
// ferry.v1.LowerRequest through protobuf reflection (a field's value, an
// element added, removed, duplicated or swapped, a message cleared or copied
// from another of its type, a oneof switched), so that most mutants still
// parse and keep their references, and reach validation, lowering and the
// runtime rather than dying in the wire parser. libFuzzer calls it through
// LLVMFuzzerCustomMutator (fuzz_main.cc), alternating with its own byte
// mutations.
#ifndef FERRY_TESTS_FUZZ_PROTO_MUTATOR_H_
#define FERRY_TESTS_FUZZ_PROTO_MUTATOR_H_

#include <cstdint>
#include <random>

namespace google::protobuf {
class Message;
}  // namespace google::protobuf

namespace ferry::fuzz {

// Applies one random structural edit to `message` (any message type; Ferry
// uses it on LowerRequest). Strings are drawn from those already in the
// message and a dictionary (registered operators, device names, kinds), so
// that edited references often name something that exists.
void MutateMessage(google::protobuf::Message* message, std::mt19937_64& rng);

// LLVMFuzzerCustomMutator's body for the request targets: parses `data` as
// a request (ParseRequest, binary), applies 1-4 edits and writes the result
// back if it fits `max_size`. Returns the new size, or 0 when `data` is no
// request or the result does not fit (the caller then mutates bytes).
size_t MutateRequestBytes(uint8_t* data, size_t size, size_t max_size,
                          unsigned int seed);

}  // namespace ferry::fuzz

#endif  // FERRY_TESTS_FUZZ_PROTO_MUTATOR_H_
