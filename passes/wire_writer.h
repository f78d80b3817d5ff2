// The lowered program's binary wire form (ferry.v1.Program), written straight
// from the IR: no v1::Program message is built. The bytes are the same as
// ExportProgram followed by SerializeProgram(..., FileFormat::kBinary), which
// the tests check on every example and conformance program; the text and
// JSON forms still go through the message (proto_io.h).
//
// One walk over the IR, writing at the end of the output as it grows. A
// nested message's length goes before its contents but is known only after
// them: each gets room for the length it is expected to need (a byte for a
// node's parts; more for a method, by its node count), and its contents move
// when the length turns out wider or narrower.
#ifndef FERRY_PASSES_WIRE_WRITER_H_
#define FERRY_PASSES_WIRE_WRITER_H_

#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "passes/ir.h"

namespace ferry {

// Appends `program`'s wire form to `out`. With `field` > 0 it is written as
// that field of an enclosing message (tag and length first), e.g. field 2 of
// a ferry.v1.LowerResponse, and `then` (the enclosing message's later fields,
// already serialized) follows it in the same allocation. An error
// (RESOURCE_EXHAUSTED, `out` as it was) when the program's wire form is over
// 2 GiB, more than protobuf reads.
absl::Status AppendProgramWire(const Program& program, std::string& out,
                               int field = 0, std::string_view then = {});
// Same, consuming `program`: each method, constant and module is freed once
// it is written, so the IR and the wire form are not both whole at once.
// `program` is left empty.
absl::Status AppendProgramWire(Program&& program, std::string& out,
                               int field = 0, std::string_view then = {});

}  // namespace ferry

#endif  // FERRY_PASSES_WIRE_WRITER_H_
