// The pipeline's results (diagnostics.h, pipeline.h) in their wire form
// (proto/ferry/v1/report.proto), and the one JSON form of every report.
//
// The service answers with the ToProto direction; the `ferry` tool prints
// the same messages, and a remote `ferry lower --server` reads them back
// with FromProto, so that it prints exactly what the in-process run prints.
#ifndef FERRY_PASSES_REPORT_IO_H_
#define FERRY_PASSES_REPORT_IO_H_

#include <string>

#include "ferry/v1/program.pb.h"
#include "ferry/v1/report.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "passes/diagnostics.h"
#include "passes/pipeline.h"

namespace ferry {

void DiagnosticsToProto(
    const Diagnostics& diagnostics,
    google::protobuf::RepeatedPtrField<v1::Diagnostic>* out);
Diagnostics DiagnosticsFromProto(
    const google::protobuf::RepeatedPtrField<v1::Diagnostic>& diagnostics);

// Fills each diagnostic's `source` from the Node.source of its primary node
// (nodes[0], looked up in its method) in `program`, the program as the
// client sent it, so that import errors get theirs too. Diagnostics without
// a method, or naming no node of it with a source, keep theirs (none).
void AttachNodeSources(const v1::Program& program, Diagnostics& diagnostics);
// Same, from the IR's Node.source: for diagnostics made after the request
// was released (Lower's `release_request`). Finds what the wire form's
// lookup finds for every node that came from the request.
void AttachNodeSources(const Program& program, Diagnostics& diagnostics);

void StatsToProto(const LowerStats& stats, v1::LowerStats* out);
LowerStats StatsFromProto(const v1::LowerStats& stats);

// The `ferry lower --report=json` object: {ok, diagnostics, stats}.
v1::LowerReport LowerReportToProto(const LowerResult& result);
// Back into the pipeline's form (no program: reports carry none).
LowerResult LowerResultFromProto(const v1::LowerReport& report);

// `report` (any message) on one line, in protobuf's JSON mapping with one
// fixed set of options, so that a report reads the same wherever it comes
// from (the tool, a remote run, the service's log lines):
//  - field names as in the .proto (`h2d_copies`, not `h2dCopies`);
//  - every field, set or not (`"ok":false`, `"h2d_copies":"0"`, `[]`),
//    except proto3 `optional` fields that are unset;
//  - enums by name (`"severity":"ERROR"`); 64-bit integers as strings
//    (`"bytes":"4096"`) and non-finite doubles as "NaN", "Infinity",
//    "-Infinity", as the mapping says;
//  - map keys sorted (deterministic serialization), so that the same report
//    gives the same bytes.
std::string ReportJson(const google::protobuf::Message& report);

}  // namespace ferry

#endif  // FERRY_PASSES_REPORT_IO_H_
