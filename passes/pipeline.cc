// The pipeline driver: import, validate, then the passes in order, stopping
// at the first pass that reports an error, checking `keep_going` in between.
#include "passes/pipeline.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <map>
#include <new>

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "passes/diagnostic_codes.h"
#include "passes/lower.h"
#include "passes/normalize_layout.h"
#include "passes/partition.h"
#include "passes/pass.h"
#include "passes/place_and_copy.h"
#include "passes/plan_memory.h"
#include "passes/proto_io.h"
#include "passes/schema.h"
#include "passes/validate.h"

namespace ferry {

bool LowerOptions::MethodFlag::For(std::string_view method) const {
  for (const auto& [name, value] : per_method)
    if (name == method) return value;
  return default_value;
}

namespace {

LowerOptions::MethodFlag ResolveFlag(const v1::MethodFlag& proto,
                                     std::string_view option,
                                     const Program& program,
                                     Diagnostics& diagnostics) {
  LowerOptions::MethodFlag flag;
  flag.default_value = proto.default_value();
  std::map<std::string, bool> sorted(proto.per_method().begin(),
                                     proto.per_method().end());
  for (const auto& [name, value] : sorted) {
    bool exists = false;
    for (const Method& m : program.methods) exists |= m.name == name;
    if (!exists)
      diagnostics.Warning(
          codes::kUnknownMethodOverride,
          absl::StrCat(std::string(option), " names method '", name,
                       "', which the program does not have"),
          {}, "check the method name");
    flag.per_method.emplace_back(name, value);
  }
  return flag;
}

// The options lowering records on `method` (ferry.v1.LoweredWith).
LoweredWith RecordedOptions(const LowerOptions& options,
                            std::string_view method) {
  LoweredWith with;
  with.skip_h2d_for_method_inputs =
      options.skip_h2d_for_method_inputs.For(method);
  with.skip_d2h_for_method_outputs =
      options.skip_d2h_for_method_outputs.For(method);
  with.error_on_per_call_copies = options.error_on_per_call_copies;
  with.enable_non_cpu_memory_planning = options.enable_non_cpu_memory_planning;
  with.alloc_graph_input = options.alloc_graph_input;
  with.alloc_graph_output = options.alloc_graph_output;
  with.constant_staging =
      options.constant_staging_at_load ? v1::AT_LOAD : v1::PER_CALL;
  return with;
}

bool AnySet(const LowerOptions::MethodFlag& flag) {
  if (flag.default_value) return true;
  for (const auto& [name, value] : flag.per_method)
    if (value) return true;
  return false;
}

}  // namespace

LowerOptions ResolveOptions(const v1::LowerOptions& proto,
                            const Program& program, Diagnostics& diagnostics) {
  LowerOptions options;
  options.skip_h2d_for_method_inputs =
      ResolveFlag(proto.skip_h2d_for_method_inputs(),
                  "skip_h2d_for_method_inputs", program, diagnostics);
  options.skip_d2h_for_method_outputs =
      ResolveFlag(proto.skip_d2h_for_method_outputs(),
                  "skip_d2h_for_method_outputs", program, diagnostics);
  options.error_on_per_call_copies = proto.error_on_per_call_copies();
  if (proto.has_enable_non_cpu_memory_planning())
    options.enable_non_cpu_memory_planning =
        proto.enable_non_cpu_memory_planning();
  if (proto.has_alloc_graph_input())
    options.alloc_graph_input = proto.alloc_graph_input();
  if (proto.has_alloc_graph_output())
    options.alloc_graph_output = proto.alloc_graph_output();
  switch (proto.constant_staging()) {
    case v1::PER_CALL:
      break;
    case v1::AT_LOAD:
      options.constant_staging_at_load = true;
      break;
    default:
      diagnostics.Error(
          codes::kBadOption,
          absl::StrCat("unknown constant_staging value ",
                       static_cast<int>(proto.constant_staging())),
          {}, "use PER_CALL or AT_LOAD");
  }
  if (!options.enable_non_cpu_memory_planning &&
      (AnySet(options.skip_h2d_for_method_inputs) ||
       AnySet(options.skip_d2h_for_method_outputs)))
    diagnostics.Error(
        codes::kBadOption,
        "skip_h2d_for_method_inputs / skip_d2h_for_method_outputs need "
        "enable_non_cpu_memory_planning",
        {}, "turn device memory planning on, or drop the skip options");
  const v1::PartitionerOptions& p = proto.partitioner();
  switch (p.kind()) {
    case v1::BY_TAG:
      options.partitioner = LowerOptions::Partitioner::kByTag;
      break;
    case v1::BY_CAPABILITY:
      options.partitioner = LowerOptions::Partitioner::kByCapability;
      break;
    case v1::NONE:
      options.partitioner = LowerOptions::Partitioner::kNone;
      break;
    default:
      diagnostics.Error(
          codes::kBadOption,
          absl::StrCat("unknown partitioner kind ", static_cast<int>(p.kind())),
          {}, "use BY_TAG, BY_CAPABILITY or NONE");
  }
  if (!p.target_device().empty()) options.partition_target = p.target_device();
  auto check_target = [&](const std::string& text, std::string_view what) {
    absl::StatusOr<Device> d = ParseTargetDevice(text);
    if (!d.ok())
      diagnostics.Error(
          codes::kBadOption,
          absl::StrCat(std::string(what), ": ", d.status().message()), {},
          "devices are written 'cuda:N' or 'cpu'");
  };
  check_target(options.partition_target, "partitioner.target_device");
  std::map<std::string, std::string> tags(p.tag_targets().begin(),
                                          p.tag_targets().end());
  for (const auto& [tag, target] : tags) {
    check_target(target, absl::StrCat("partitioner.tag_targets['", tag, "']"));
    options.tag_targets.emplace_back(tag, target);
  }
  options.partition_backend = p.backend();
  // Operator lists: registry names (".default" accepted), sorted.
  auto resolve_operators = [&](const auto& names, std::string_view what,
                               std::vector<std::string>& out) {
    for (const std::string& name : names) {
      const OpInfo* info = LookupOp(name);
      if (info == nullptr) {
        diagnostics.Error(
            codes::kBadOption,
            absl::StrCat(std::string(what), ": unknown operator '", name, "'"),
            {},
            "name registered operators, e.g. 'aten::relu_' "
            "(docs/operators.md)");
        continue;
      }
      out.push_back(info->schema->QualifiedName());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
  };
  resolve_operators(p.allow_operators(), "partitioner.allow_operators",
                    options.allow_operators);
  resolve_operators(p.deny_operators(), "partitioner.deny_operators",
                    options.deny_operators);
  return options;
}

const std::vector<std::string>* BackendOperators::For(
    std::string_view backend) const {
  for (const auto& [id, operators] : by_backend) {
    if (id == backend) return &operators;
  }
  return nullptr;
}

LowerStats CountStats(const Program& program) {
  LowerStats stats;
  std::map<std::string, int64_t> per_device;
  const ProgramIndex index(program);
  for (const Method& method : program.methods) {
    for (const Node& node : method.nodes) {
      if (IsH2DCopy(node)) {
        if (node.at_load) {
          ++stats.load_time_copies;
        } else {
          ++stats.h2d_copies;
          stats.h2d_bytes_per_call += node.tensor.StorageBytes().value_or(0);
        }
      } else if (IsD2HCopy(node)) {
        ++stats.d2h_copies;
        stats.d2h_bytes_per_call += node.tensor.StorageBytes().value_or(0);
      } else if (node.kind == NodeKind::kDelegate) {
        ++stats.delegates;
        ++per_device[DelegateDevice(index, node).ToString()];
      }
    }
    for (const Arena& arena : method.arenas)
      stats.arenas.push_back(ArenaSummary{method.name, arena.device, arena.size,
                                          arena.lower_bound});
  }
  stats.delegates_per_device.assign(per_device.begin(), per_device.end());
  return stats;
}

namespace {

absl::StatusOr<LowerResult> LowerUnguarded(const v1::LowerRequest& request,
                                           const ContinueFn& keep_going,
                                           const ResourceLimits& limits,
                                           const BackendOperators& backends,
                                           const BlobFetcher& fetch_blob) {
  using Clock = std::chrono::steady_clock;
  LowerResult result;
  std::vector<PassTiming> timings;
  auto timed = [&](std::string name, auto&& fn) {
    auto start = Clock::now();
    auto r = fn();
    timings.push_back(PassTiming{
        std::move(name), std::chrono::duration_cast<std::chrono::microseconds>(
                             Clock::now() - start)
                             .count()});
    return r;
  };
  Program program = timed("import", [&] {
    return ImportProgram(request.program(), result.diagnostics);
  });
  auto finish = [&](bool ok) {
    result.ok = ok;
    result.stats = ok ? CountStats(program) : LowerStats{};
    result.stats.passes = timings;
    if (ok) result.program = std::move(program);
    return result;
  };
  if (result.diagnostics.HasErrors()) return finish(false);
  LowerOptions options =
      ResolveOptions(request.options(), program, result.diagnostics);
  if (result.diagnostics.HasErrors()) return finish(false);
  bool valid = timed(
      "validate", [&] { return ValidateProgram(program, result.diagnostics); });
  if (!valid) return finish(false);
  // The resource model (resource_limits.h): passes check what they would
  // allocate against these before allocating it.
  options.limits = limits;
  options.backend_operators = backends;
  options.fetch_blob = fetch_blob;
  options.request_bytes = static_cast<int64_t>(request.ByteSizeLong());
  if (absl::Status addressable = CheckAddressable(program); !addressable.ok())
    return addressable;

  static constexpr std::pair<const char*, PassFn> kPasses[] = {
      {"normalize_layout", &NormalizeLayout},
      {"partition", &Partition},
      {"lower", &LowerPartitions},
      {"place_and_copy", &PlaceAndCopy},
      {"plan_memory", &PlanMemory},
  };
  for (const auto& [name, pass] : kPasses) {
    if (keep_going && !keep_going())
      return absl::CancelledError(
          absl::StrCat("lowering stopped before ", name));
    // `pass = pass`: clang 14 (the fuzz build) cannot capture a binding.
    absl::StatusOr<PassStats> stats = timed(name, [&, pass = pass] {
      return pass(program, options, result.diagnostics);
    });
    if (!stats.ok()) return stats.status();
    if (result.diagnostics.HasErrors()) return finish(false);
  }
  if (int64_t output = ConstantDataBytes(program),
      allowed = ExpansionAllowance(options.request_bytes, limits);
      output > allowed)
    return ResourceLimitError(ResourceViolation{
        "max_expansion", "program.constants", output, allowed});
  // Emit: each method records the options it was lowered with, so that
  // verification can tell where its inputs and outputs must be.
  for (Method& method : program.methods)
    method.lowered_with = RecordedOptions(options, method.name);
  return finish(true);
}

}  // namespace

absl::StatusOr<LowerResult> Lower(const v1::LowerRequest& request,
                                  const ContinueFn& keep_going,
                                  const ResourceLimits& limits,
                                  const BackendOperators& backends,
                                  const BlobFetcher& fetch_blob) {
  try {
    return LowerUnguarded(request, keep_going, limits, backends, fetch_blob);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory while lowering the program");
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("lowering failed with an exception: ", e.what()));
  }
}

namespace {
std::string Bytes(int64_t bytes) { return absl::StrCat(bytes, " B"); }
}  // namespace

std::string ReportText(const LowerResult& result, std::string_view file) {
  const LowerStats& s = result.stats;
  std::string out;
  if (result.ok) {
    absl::StrAppend(&out, std::string(file), ": lowered");
    absl::StrAppend(&out, "\n  delegates: ", s.delegates);
    if (!s.delegates_per_device.empty()) {
      absl::StrAppend(&out, " (");
      for (size_t i = 0; i < s.delegates_per_device.size(); ++i)
        absl::StrAppend(&out, i ? ", " : "", s.delegates_per_device[i].first,
                        ": ", s.delegates_per_device[i].second);
      absl::StrAppend(&out, ")");
    }
    absl::StrAppend(&out, "\n  copies per call: ", s.h2d_copies, " H2D (",
                    Bytes(s.h2d_bytes_per_call), "), ", s.d2h_copies, " D2H (",
                    Bytes(s.d2h_bytes_per_call), ")");
    if (s.load_time_copies)
      absl::StrAppend(&out, "; ", s.load_time_copies, " at load");
    for (const ArenaSummary& a : s.arenas)
      absl::StrAppend(&out, "\n  arena ", a.method, " ", a.device.ToString(),
                      ": ", Bytes(a.bytes), " (lower bound ",
                      Bytes(a.lower_bound_bytes), ")");
    absl::StrAppend(&out, "\n");
  } else {
    absl::StrAppend(&out, std::string(file), ": did not lower (",
                    result.diagnostics.error_count(), " error",
                    result.diagnostics.error_count() == 1 ? "" : "s", ")\n");
  }
  absl::StrAppend(&out, FormatDiagnosticsText(result.diagnostics, file));
  return out;
}

}  // namespace ferry
