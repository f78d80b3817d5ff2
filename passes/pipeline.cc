// The pipeline driver: import, validate, then the passes in order, stopping
// at the first pass that reports an error, checking `keep_going` in between.
#include "passes/pipeline.h"

#include <chrono>
#include <climits>
#include <exception>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/arena.h"
#include "passes/lower.h"
#include "passes/normalize_layout.h"
#include "passes/partition.h"
#include "passes/pass.h"
#include "passes/place_and_copy.h"
#include "passes/plan_memory.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"
#include "passes/validate.h"

namespace ferry {

namespace {

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

// The arenas of every method, in method order.
void AddArenas(const Program& program, LowerStats& stats) {
  for (const Method& method : program.methods)
    for (const Arena& arena : method.arenas)
      stats.arenas.push_back(ArenaSummary{method.name, arena.device, arena.size,
                                          arena.lower_bound});
}

// The value of `stats`' counter `name`; nullopt when it has none.
std::optional<int64_t> CounterOf(const PassStats& stats,
                                 std::string_view name) {
  for (const auto& [counter, value] : stats.counters)
    if (counter == name) return value;
  return std::nullopt;
}

// The statistics of a lowered `program` from what place_and_copy counted as
// it placed it (`placed`, its counters: place_and_copy.h), which no later
// pass changes, and the arenas plan_memory left: CountStats without a walk
// over every node.
LowerStats StatsOfLowered(const PassStats& placed, const Program& program) {
  LowerStats stats;
  std::map<std::string, int64_t> per_device_name;  // in the names' order
  const std::string_view delegates_on = kDelegatesOnCounter;
  for (const auto& [name, value] : placed.counters) {
    if (name == kH2DCopiesCounter) stats.h2d_copies = value;
    if (name == kD2HCopiesCounter) stats.d2h_copies = value;
    if (name == kLoadTimeCopiesCounter) stats.load_time_copies = value;
    if (name == kH2DBytesCounter) stats.h2d_bytes_per_call = value;
    if (name == kD2HBytesCounter) stats.d2h_bytes_per_call = value;
    if (name.starts_with(delegates_on)) {
      stats.delegates += value;
      per_device_name[name.substr(delegates_on.size())] += value;
    }
  }
  stats.delegates_per_device.assign(per_device_name.begin(),
                                    per_device_name.end());
  AddArenas(program, stats);
  return stats;
}

}  // namespace

LowerStats CountStats(const Program& program) {
  LowerStats stats;
  // Counted per device, then named: a program has a few devices and many
  // delegates.
  std::map<Device, int64_t> per_device;
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
        ++per_device[DelegateDevice(index, node)];
      }
    }
  }
  AddArenas(program, stats);
  std::map<std::string, int64_t> per_device_name;  // in the names' order
  for (const auto& [device, count] : per_device)
    per_device_name[device.ToString()] += count;
  stats.delegates_per_device.assign(per_device_name.begin(),
                                    per_device_name.end());
  return stats;
}

namespace {

// The stages in the order LowerUnguarded runs them: import and validate,
// which take the request rather than a PassFn, then the passes. Both the
// run and PipelinePassNames() read these, so the names a lowering reports
// and the names the service advertises are the same list.
constexpr char kImportStage[] = "import";
constexpr char kValidateStage[] = "validate";
constexpr std::pair<const char*, PassFn> kPasses[] = {
    {"normalize_layout", &NormalizeLayout},
    {"partition", &Partition},
    {"lower", &LowerPartitions},
    {"place_and_copy", &PlaceAndCopy},
    {"plan_memory", &PlanMemory},
};

// `parsed`, the request; or, when it is null, `wire`, the request in binary
// form, whose program is read node by node (ImportRequestWire).
absl::StatusOr<LowerResult> LowerUnguarded(
    const v1::LowerRequest* parsed, std::string_view wire,
    const ContinueFn& keep_going, const ResourceLimits& limits,
    const BackendOperators& backends, const BlobFetcher& fetch_blob,
    const AfterPassFn& after_pass, const ProgressFn& progress,
    const std::function<void()>& release_request) {
  using Clock = std::chrono::steady_clock;
  LowerResult result;
  std::vector<PassTiming> timings;
  auto timed = [&](std::string name, auto&& fn) {
    if (progress) progress(StageEvent{name, {}, false, 0});
    auto start = Clock::now();
    auto r = fn();
    timings.push_back(PassTiming{
        std::move(name), std::chrono::duration_cast<std::chrono::microseconds>(
                             Clock::now() - start)
                             .count()});
    if (progress)
      progress(
          StageEvent{timings.back().name, {}, true, timings.back().micros});
    return r;
  };
  // The request the options come from: `parsed`; or, from `wire`, the
  // request without its program (`rest`), or the whole request when the
  // wire form is one ImportRequestWire leaves to protobuf.
  const v1::LowerRequest* request = parsed;
  v1::LowerRequest rest;
  std::unique_ptr<google::protobuf::Arena> whole;
  bool unparseable = false;
  Program program = timed(kImportStage, [&] {
    if (parsed != nullptr)
      return ImportProgram(parsed->program(), result.diagnostics);
    if (std::optional<Program> read =
            ImportRequestWire(wire, &rest, result.diagnostics)) {
      request = &rest;
      return *std::move(read);
    }
    whole = std::make_unique<google::protobuf::Arena>(
        RequestArenaOptions(wire.size()));
    auto* message =
        google::protobuf::Arena::CreateMessage<v1::LowerRequest>(whole.get());
    if (wire.size() > static_cast<size_t>(INT_MAX) ||
        !message->ParseFromArray(wire.data(), static_cast<int>(wire.size()))) {
      unparseable = true;
      return Program{};
    }
    request = message;
    return ImportProgram(message->program(), result.diagnostics);
  });
  if (unparseable)
    return absl::InvalidArgumentError(
        "the request is not a valid ferry.v1.LowerRequest (protobuf parsing "
        "failed)");
  // Diagnostics get their sources from the request's program while there is
  // one, then from the IR (which carries them): the same report either way.
  const bool program_in_request = request != &rest;
  bool request_read = !program_in_request;
  // What place_and_copy counted (the statistics of a lowered program).
  PassStats placed;
  auto finish = [&](bool ok) {
    if (request_read)
      AttachNodeSources(program, result.diagnostics);
    else
      AttachNodeSources(request->program(), result.diagnostics);
    result.ok = ok;
    result.stats = ok ? StatsOfLowered(placed, program) : LowerStats{};
    result.stats.passes = timings;
    if (ok) result.program = std::move(program);
    // `result` is captured by reference: move it out, or the whole lowered
    // program is copied on the way back.
    return std::move(result);
  };
  if (result.diagnostics.HasErrors()) return finish(false);
  LowerOptions options =
      ResolveOptions(request->options(), program, result.diagnostics);
  if (result.diagnostics.HasErrors()) return finish(false);
  // Whether the program's tensors together are addressable
  // (CheckAddressable), counted by validation.
  absl::Status addressable;
  MethodNodesSeen seen;
  bool valid = timed(kValidateStage, [&] {
    return ValidateProgram(program, result.diagnostics, &addressable, &seen);
  });
  if (!valid) return finish(false);
  // The resource model (resource_limits.h): passes check what they would
  // allocate against these before allocating it.
  options.limits = limits;
  options.backend_operators = backends;
  options.fetch_blob = fetch_blob;
  // The allowance bounds constant data (normalize_layout's relayouts, the
  // check below), which only a program with constants can have; measuring
  // the request walks all of it, so a program without constants skips that.
  options.request_bytes = program.constants.empty() ? 0
                          : parsed != nullptr
                              ? static_cast<int64_t>(parsed->ByteSizeLong())
                              : static_cast<int64_t>(wire.size());
  if (!addressable.ok()) return addressable;
  if (!request_read) AttachNodeSources(request->program(), result.diagnostics);
  request_read = true;
  if (release_request) release_request();
  whole.reset();

  // A pass with nothing to do, by what the stages before it found, does not
  // make its walk over every node (a large program without delegates to
  // form pays for no walk that finds nothing): partition when no node is
  // tagged or has a schema of its own, unless it groups by capability; lower
  // when partition left no partition (no node is tagged).
  const bool partition_idle =
      !seen.tagged && !seen.own_schema && PartitionActsOnTagsOnly(options);
  int64_t partitions = 0;
  for (const auto& [name, pass] : kPasses) {
    if (keep_going && !keep_going())
      return absl::CancelledError(
          absl::StrCat("lowering stopped before ", name));
    // `pass = pass`: clang 14 (the fuzz build) cannot capture a binding.
    absl::StatusOr<PassStats> stats =
        timed(name, [&, pass = pass]() -> absl::StatusOr<PassStats> {
          if (pass == &Partition && partition_idle) return PassStats{};
          if (pass == &LowerPartitions && partitions == 0) return PassStats{};
          return pass(program, options, result.diagnostics);
        });
    if (!stats.ok()) return stats.status();
    if (pass == &Partition)
      partitions = CounterOf(*stats, kPartitionsCounter).value_or(0);
    if (pass == &PlaceAndCopy) placed = *std::move(stats);
    if (result.diagnostics.HasErrors()) return finish(false);
    if (after_pass) {
      if (absl::Status checked = after_pass(name, program, options);
          !checked.ok())
        return checked;
    }
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

std::vector<std::string> PipelinePassNames() {
  std::vector<std::string> names = {kImportStage, kValidateStage};
  for (const auto& [name, pass] : kPasses) names.push_back(name);
  return names;
}

namespace {

// LowerUnguarded, with what it throws as a status.
absl::StatusOr<LowerResult> LowerGuarded(
    const v1::LowerRequest* parsed, std::string_view wire,
    const ContinueFn& keep_going, const ResourceLimits& limits,
    const BackendOperators& backends, const BlobFetcher& fetch_blob,
    const AfterPassFn& after_pass, const ProgressFn& progress,
    const std::function<void()>& release_request) {
  try {
    return LowerUnguarded(parsed, wire, keep_going, limits, backends,
                          fetch_blob, after_pass, progress, release_request);
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(
        "out of memory while lowering the program");
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("lowering failed with an exception: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<LowerResult> Lower(
    const v1::LowerRequest& request, const ContinueFn& keep_going,
    const ResourceLimits& limits, const BackendOperators& backends,
    const BlobFetcher& fetch_blob, const AfterPassFn& after_pass,
    const ProgressFn& progress, const std::function<void()>& release_request) {
  return LowerGuarded(&request, {}, keep_going, limits, backends, fetch_blob,
                      after_pass, progress, release_request);
}

absl::StatusOr<LowerResult> LowerWire(
    std::string_view request, const ContinueFn& keep_going,
    const ResourceLimits& limits, const BackendOperators& backends,
    const BlobFetcher& fetch_blob, const AfterPassFn& after_pass,
    const ProgressFn& progress, const std::function<void()>& release_request) {
  return LowerGuarded(nullptr, request, keep_going, limits, backends,
                      fetch_blob, after_pass, progress, release_request);
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
