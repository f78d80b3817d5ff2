// Conversions between the pipeline's in-memory results (passes/pipeline.h)
// and their wire form (proto/ferry/v1/report.proto). The service uses the
// ToProto direction; the `ferry` tool uses FromProto so that a remote
// `ferry lower --server` prints exactly what the in-process run prints.
#ifndef FERRY_SERVER_WIRE_CONVERT_H_
#define FERRY_SERVER_WIRE_CONVERT_H_

#include "ferry/v1/report.pb.h"
#include "google/protobuf/repeated_ptr_field.h"
#include "passes/diagnostics.h"
#include "passes/pipeline.h"

namespace ferry {

void DiagnosticsToProto(
    const Diagnostics& diagnostics,
    google::protobuf::RepeatedPtrField<v1::Diagnostic>* out);
Diagnostics DiagnosticsFromProto(
    const google::protobuf::RepeatedPtrField<v1::Diagnostic>& diagnostics);

void StatsToProto(const LowerStats& stats, v1::LowerStats* out);
LowerStats StatsFromProto(const v1::LowerStats& stats);

// Counts every node of every method and lowered-module graph (the
// `max_nodes` limit) without importing the program.
int64_t CountNodes(const v1::Program& program);

}  // namespace ferry

#endif  // FERRY_SERVER_WIRE_CONVERT_H_
