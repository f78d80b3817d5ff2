#include "server/wire_convert.h"

#include <algorithm>

#include "ferry/v1/program.pb.h"

namespace ferry {
namespace {

v1::Severity SeverityToProto(Severity severity) {
  switch (severity) {
    case Severity::kNote:
      return v1::NOTE;
    case Severity::kWarning:
      return v1::WARNING;
    case Severity::kError:
      return v1::ERROR;
  }
  return v1::SEVERITY_UNSPECIFIED;
}

Severity SeverityFromProto(v1::Severity severity) {
  switch (severity) {
    case v1::NOTE:
      return Severity::kNote;
    case v1::WARNING:
      return Severity::kWarning;
    default:
      return Severity::kError;
  }
}

}  // namespace

void DiagnosticsToProto(
    const Diagnostics& diagnostics,
    google::protobuf::RepeatedPtrField<v1::Diagnostic>* out) {
  out->Reserve(out->size() + static_cast<int>(diagnostics.items().size()));
  for (const Diagnostic& diagnostic : diagnostics.items()) {
    v1::Diagnostic* wire = out->Add();
    wire->set_severity(SeverityToProto(diagnostic.severity));
    wire->set_code(diagnostic.code);
    wire->set_message(diagnostic.message);
    for (const std::string& node : diagnostic.nodes) wire->add_nodes(node);
    wire->set_hint(diagnostic.hint);
    wire->set_method(diagnostic.method);
  }
}

Diagnostics DiagnosticsFromProto(
    const google::protobuf::RepeatedPtrField<v1::Diagnostic>& diagnostics) {
  Diagnostics result;
  for (const v1::Diagnostic& wire : diagnostics) {
    Diagnostic& diagnostic = result.Add(
        SeverityFromProto(wire.severity()), wire.code(), wire.message(),
        std::vector<std::string>(wire.nodes().begin(), wire.nodes().end()),
        wire.hint());
    diagnostic.method = wire.method();
  }
  return result;
}

void StatsToProto(const LowerStats& stats, v1::LowerStats* out) {
  out->set_h2d_copies(stats.h2d_copies);
  out->set_d2h_copies(stats.d2h_copies);
  out->set_load_time_copies(stats.load_time_copies);
  out->set_h2d_bytes_per_call(stats.h2d_bytes_per_call);
  out->set_d2h_bytes_per_call(stats.d2h_bytes_per_call);
  out->set_delegates(stats.delegates);
  for (const ArenaSummary& arena : stats.arenas) {
    v1::ArenaStats* wire = out->add_arenas();
    wire->set_device(arena.device.ToString());
    wire->set_bytes(arena.bytes);
    wire->set_lower_bound_bytes(arena.lower_bound_bytes);
    wire->set_method(arena.method);
  }
  for (const PassTiming& pass : stats.passes) {
    v1::PassStats* wire = out->add_passes();
    wire->set_name(pass.name);
    wire->set_micros(pass.micros);
  }
  for (const auto& [device, count] : stats.delegates_per_device) {
    (*out->mutable_delegates_per_device())[device] = count;
  }
}

LowerStats StatsFromProto(const v1::LowerStats& stats) {
  LowerStats result;
  result.h2d_copies = stats.h2d_copies();
  result.d2h_copies = stats.d2h_copies();
  result.load_time_copies = stats.load_time_copies();
  result.h2d_bytes_per_call = stats.h2d_bytes_per_call();
  result.d2h_bytes_per_call = stats.d2h_bytes_per_call();
  result.delegates = stats.delegates();
  for (const v1::ArenaStats& wire : stats.arenas()) {
    ArenaSummary arena;
    arena.method = wire.method();
    absl::StatusOr<Device> device = ParseTargetDevice(wire.device());
    arena.device = device.ok() ? *device : Device::Cpu();
    arena.bytes = wire.bytes();
    arena.lower_bound_bytes = wire.lower_bound_bytes();
    result.arenas.push_back(std::move(arena));
  }
  for (const v1::PassStats& wire : stats.passes()) {
    result.passes.push_back(PassTiming{wire.name(), wire.micros()});
  }
  for (const auto& [device, count] : stats.delegates_per_device()) {
    result.delegates_per_device.emplace_back(device, count);
  }
  std::sort(result.delegates_per_device.begin(),
            result.delegates_per_device.end());
  return result;
}

int64_t CountNodes(const v1::Program& program) {
  int64_t nodes = 0;
  for (const v1::Method& method : program.methods())
    nodes += method.nodes_size();
  for (const v1::LoweredModule& module : program.modules()) {
    nodes += module.graph().nodes_size();
  }
  return nodes;
}

}  // namespace ferry
