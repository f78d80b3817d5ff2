#include "passes/report_io.h"

#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"

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

constexpr char kTypeUrlPrefix[] = "type.googleapis.com";

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
    if (!diagnostic.source.file.empty()) {
      v1::SourceLocation* source = wire->mutable_source();
      source->set_file(diagnostic.source.file);
      source->set_line(diagnostic.source.line);
      source->set_name(diagnostic.source.name);
    }
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
    diagnostic.source = DiagnosticSource{
        wire.source().file(), wire.source().line(), wire.source().name()};
  }
  return result;
}

void AttachNodeSources(const v1::Program& program, Diagnostics& diagnostics) {
  // Built on first need: most reports have no diagnostics.
  // (method, node) -> source; a lowered module's graph is the method
  // "module:ID", as import names it.
  std::map<std::pair<std::string, std::string_view>, const v1::SourceLocation*>
      sources;
  std::deque<std::string> unnamed;  // "#3": the name import gives node 3
  auto index = [&](const std::string& method, const v1::Method& graph) {
    for (int i = 0; i < graph.nodes_size(); ++i) {
      const v1::Node& node = graph.nodes(i);
      if (!node.has_source() || node.source().file().empty()) continue;
      std::string_view name = node.name();
      if (name.empty()) name = unnamed.emplace_back(absl::StrCat("#", i));
      // The first node of a name wins (a duplicate is E0101).
      sources.emplace(std::pair<std::string, std::string_view>(method, name),
                      &node.source());
    }
  };
  bool indexed = false;
  for (Diagnostic& d : diagnostics.mutable_items()) {
    if (d.method.empty() || d.nodes.empty() || !d.source.file.empty()) continue;
    if (!indexed) {
      for (const v1::Method& method : program.methods())
        index(method.name(), method);
      for (const v1::LoweredModule& module : program.modules())
        index("module:" + module.id(), module.graph());
      indexed = true;
    }
    auto it = sources.find(
        std::pair<std::string, std::string_view>(d.method, d.nodes.front()));
    if (it == sources.end()) continue;
    d.source = DiagnosticSource{it->second->file(), it->second->line(),
                                it->second->name()};
  }
}

void AttachNodeSources(const Program& program, Diagnostics& diagnostics) {
  std::map<std::pair<std::string, std::string_view>, const SourceLocation*>
      sources;
  auto index = [&](const std::string& method, const Method& graph) {
    for (const Node& node : graph.nodes)
      if (node.source != nullptr && !node.source->file.empty())
        sources.emplace(
            std::pair<std::string, std::string_view>(method, node.name),
            node.source.get());
  };
  bool indexed = false;
  for (Diagnostic& d : diagnostics.mutable_items()) {
    if (d.method.empty() || d.nodes.empty() || !d.source.file.empty()) continue;
    if (!indexed) {
      for (const Method& method : program.methods) index(method.name, method);
      for (const LoweredModule& module : program.modules)
        index("module:" + module.id, module.graph);
      indexed = true;
    }
    auto it = sources.find(
        std::pair<std::string, std::string_view>(d.method, d.nodes.front()));
    if (it == sources.end()) continue;
    d.source =
        DiagnosticSource{it->second->file, it->second->line, it->second->name};
  }
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

v1::LowerReport LowerReportToProto(const LowerResult& result) {
  v1::LowerReport report;
  report.set_ok(result.ok);
  DiagnosticsToProto(result.diagnostics, report.mutable_diagnostics());
  StatsToProto(result.stats, report.mutable_stats());
  return report;
}

LowerResult LowerResultFromProto(const v1::LowerReport& report) {
  LowerResult result;
  result.ok = report.ok();
  result.diagnostics = DiagnosticsFromProto(report.diagnostics());
  result.stats = StatsFromProto(report.stats());
  return result;
}

std::string ReportJson(const google::protobuf::Message& report) {
  namespace pb = google::protobuf;
  // MessageToJsonString serializes without determinism, which prints map
  // entries in hash order; serializing here first sorts them by key.
  std::string bytes;
  {
    pb::io::StringOutputStream stream(&bytes);
    pb::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    report.SerializeToCodedStream(&coded);
  }
  const pb::DescriptorPool* pool = report.GetDescriptor()->file()->pool();
  static pb::util::TypeResolver* const generated =
      pb::util::NewTypeResolverForDescriptorPool(
          kTypeUrlPrefix, pb::DescriptorPool::generated_pool());
  std::unique_ptr<pb::util::TypeResolver> other;
  pb::util::TypeResolver* resolver = generated;
  if (pool != pb::DescriptorPool::generated_pool()) {
    other.reset(
        pb::util::NewTypeResolverForDescriptorPool(kTypeUrlPrefix, pool));
    resolver = other.get();
  }
  pb::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  // Cannot fail: the bytes are the message's own serialization and the
  // resolver knows its type.
  (void)pb::util::BinaryToJsonString(
      resolver,
      std::string(kTypeUrlPrefix) + "/" + report.GetDescriptor()->full_name(),
      bytes, &json, options);
  return json;
}

}  // namespace ferry
