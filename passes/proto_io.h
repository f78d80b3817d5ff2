// Import from and export to the wire form (ferry.v1.Program), and reading
// and writing files in text, binary and JSON form.
#ifndef FERRY_PASSES_PROTO_IO_H_
#define FERRY_PASSES_PROTO_IO_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "google/protobuf/arena.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"

namespace ferry {
namespace v1 {
class Program;
class LowerRequest;
enum DType : int;  // ferry/v1/program.pb.h
}  // namespace v1

// Between the wire's ferry.v1.DType and the IR's DType, for every program
// and tensor that crosses the wire. An unknown value (or DTYPE_UNSPECIFIED)
// is DType::kInvalid, which validation reports.
DType DTypeFromProto(int value);
v1::DType DTypeToProto(DType dtype);

// Resolves names to node indices and schemas. Every structural problem
// (dangling or forward references, duplicate names, unknown enum values, a
// getitem of a non-tuple, an unknown operator without a schema, a schema that
// does not parse, ...) is a diagnostic; the result is usable (for
// export/validation) only when no error was added.
Program ImportProgram(const v1::Program& proto, Diagnostics& diagnostics);

// A ferry.v1.LowerRequest in binary form, seen without parsing its program:
// the program's bytes (nullopt when the request has none) and how many nodes
// it has (CountNodes of it). ReadRequestWire parses the rest of the request
// into `rest`; nullopt when the bytes are not a well-formed request or give
// the program in several parts (then parse the request whole).
struct RequestWire {
  std::optional<std::string_view> program;
  int64_t nodes = 0;
};
std::optional<RequestWire> ReadRequestWire(std::string_view request,
                                           v1::LowerRequest* rest);

// ImportProgram of the program of `request`, a ferry.v1.LowerRequest in
// binary form, read node by node: each node is read from the wire form when
// import reaches it, in place (wire::NodeReader, passes/wire_node.h) or, when
// that reader leaves it to protobuf, parsed onto a small arena that is
// reused. The request is never parsed whole (docs/performance.md,
// "Twenty-first round" and "Twenty-second round").
// `rest` gets the request without its program. The same program and
// diagnostics as parsing the request and importing its program; nullopt when
// the bytes are not a well-formed request (or give the program in several
// parts): then parse the request whole, which says what is wrong.
std::optional<Program> ImportRequestWire(std::string_view request,
                                         v1::LowerRequest* rest,
                                         Diagnostics& diagnostics);

// The exact inverse of ImportProgram for a program that imported cleanly.
void ExportProgram(const Program& program, v1::Program* proto);
// Same, consuming `program`: each module, constant and method is freed once
// it is written, so that the IR and the message are not both whole at once
// (the service's response, docs/performance.md "Memory per node").
// `program` is left empty.
void ExportProgram(Program&& program, v1::Program* proto);

enum class FileFormat { kUnknown, kText, kBinary, kJson };
// By extension: .textproto/.txtpb/.pbtxt -> text, .pb/.binpb -> binary,
// .json -> json.
FileFormat FormatFromPath(std::string_view path);
// "text", "binary"/"binpb"/"pb", "json".
FileFormat ParseFormatName(std::string_view name);

// Reads `path` as a LowerRequest or a Program in `format` (kUnknown: from the
// extension). A bare Program is wrapped into a request with default options.
// InvalidArgument (with the parser's message) for unreadable, truncated,
// garbage or empty input; NotFound for a missing file.
absl::Status ReadRequestFile(std::string_view path, FileFormat format,
                             v1::LowerRequest* request, bool* was_bare_program);
// Parses bytes already in memory, as ReadRequestFile does.
absl::Status ParseRequest(std::string_view bytes, FileFormat format,
                          std::string_view what, v1::LowerRequest* request,
                          bool* was_bare_program);

// The arena to parse a request of `wire_bytes` onto: blocks of up to 1 MiB,
// the first sized to the request, rather than protobuf's default of 8 KiB
// at most (thousands of allocations for a large program). An arena frees a
// parsed request at once, where a heap-parsed one is freed string by string.
google::protobuf::ArenaOptions RequestArenaOptions(size_t wire_bytes);

// Canonical text form (TextFormat, fields in number order).
std::string ToText(const v1::Program& program);
std::string ToText(const v1::LowerRequest& request);
// Serializes `program` in `format`; deterministic.
std::string SerializeProgram(const v1::Program& program, FileFormat format);

// Every node of every method and lowered-module graph (the service's
// `max_nodes` limit), counted without importing the program.
int64_t CountNodes(const v1::Program& program);

}  // namespace ferry

#endif  // FERRY_PASSES_PROTO_IO_H_
