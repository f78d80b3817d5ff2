// The lowering pipeline: validate, normalize_layout, partition, lower,
// place_and_copy, plan_memory, emit. One entry point for the `ferry` tool
// and the service.
#ifndef FERRY_PASSES_PIPELINE_H_
#define FERRY_PASSES_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "passes/resource_limits.h"

namespace ferry {
namespace v1 {
class LowerRequest;
class LowerOptions;
class Program;
}  // namespace v1

// The operators each backend runs in a delegate, by backend id
// ("FerryCudaBackend"): registry names ("aten::add.Tensor"). Filled by the
// caller (ferryd, the ferry tool) from the runtime's declaration; passes/
// never depends on runtime/. A backend not listed runs every lowerable
// registry operator.
struct BackendOperators {
  std::vector<std::pair<std::string, std::vector<std::string>>>
      by_backend;  // sorted by id; each list sorted
  // The backend's operators; null when it declared none.
  const std::vector<std::string>* For(std::string_view backend) const;
};

// Options of one lowering, resolved from ferry.v1.LowerOptions.
// The bytes of a blob, FAILED_PRECONDITION when there is none.
using BlobFetcher = std::function<absl::StatusOr<std::string>(const BlobRef&)>;

struct LowerOptions {
  struct MethodFlag {
    bool default_value = false;
    std::vector<std::pair<std::string, bool>> per_method;  // sorted by name
    bool For(std::string_view method) const;
  };
  MethodFlag skip_h2d_for_method_inputs;
  MethodFlag skip_d2h_for_method_outputs;
  bool error_on_per_call_copies = false;
  bool enable_non_cpu_memory_planning = true;
  bool alloc_graph_input = true;
  bool alloc_graph_output = true;
  bool constant_staging_at_load = false;
  enum class Partitioner { kByTag, kByCapability, kNone };
  Partitioner partitioner = Partitioner::kByTag;
  std::string partition_target = "cuda:0";
  std::vector<std::pair<std::string, std::string>> tag_targets;  // sorted
  std::string partition_backend;  // empty: by target
  // BY_CAPABILITY: partitioner.allow_operators / deny_operators, as
  // registry names, sorted.
  std::vector<std::string> allow_operators;
  std::vector<std::string> deny_operators;
  // Not from the wire: what each backend runs (Lower's `backends`).
  BackendOperators backend_operators;
  // Not from the wire: what the lowering may allocate (resource_limits.h)
  // and the request's serialized size, for max_expansion.
  ResourceLimits limits;
  int64_t request_bytes = 0;
  // Not from the wire: the bytes of a constant given as a blob, for a pass
  // that must rewrite them (normalize_layout); empty: such a constant is an
  // error. The fetcher checks the bytes against the digest.
  BlobFetcher fetch_blob;
};

// Converts the wire options, reporting malformed ones (unknown partitioner
// target device, per-method overrides for methods that do not exist, ...).
LowerOptions ResolveOptions(const v1::LowerOptions& proto,
                            const Program& program, Diagnostics& diagnostics);

struct ArenaSummary {
  std::string method;
  Device device;
  int64_t bytes = 0;
  int64_t lower_bound_bytes = 0;
};

struct PassTiming {
  std::string name;
  int64_t micros = 0;
};

struct LowerStats {
  int64_t h2d_copies = 0;  // per call
  int64_t d2h_copies = 0;  // per call
  int64_t load_time_copies = 0;
  int64_t h2d_bytes_per_call = 0;
  int64_t d2h_bytes_per_call = 0;
  int64_t delegates = 0;
  std::vector<std::pair<std::string, int64_t>> delegates_per_device;  // sorted
  std::vector<ArenaSummary> arenas;
  std::vector<PassTiming> passes;
};

// Called between passes; returning false stops the pipeline with CANCELLED
// (the service uses it for deadlines and cancellation).
using ContinueFn = std::function<bool()>;

struct LowerResult {
  // False when the program did not lower (errors in `diagnostics`).
  bool ok = false;
  Diagnostics diagnostics;
  LowerStats stats;
  Program program;  // the lowered program when ok
};

// Runs the whole pipeline on a request. A non-OK status means the pipeline
// itself could not run (cancelled, internal error) or the request is over a
// resource limit (RESOURCE_EXHAUSTED with a ResourceViolation, checked
// before the allocation it guards; resource_limits.h); problems with the
// program are diagnostics in the result. Never throws: an allocation failure
// is RESOURCE_EXHAUSTED, any other exception INTERNAL.
// `backends`: what each backend runs (BackendOperators).
absl::StatusOr<LowerResult> Lower(const v1::LowerRequest& request,
                                  const ContinueFn& keep_going = {},
                                  const ResourceLimits& limits = {},
                                  const BackendOperators& backends = {},
                                  const BlobFetcher& fetch_blob = {});

// Counts the copies and delegates of an already lowered program.
LowerStats CountStats(const Program& program);

// The `--report=json` object is ReportJson(LowerReportToProto(result))
// (report_io.h).
// The short human summary (delegates per device, copies per call and their
// bytes, arena sizes), then the diagnostics in text form.
std::string ReportText(const LowerResult& result, std::string_view file);

}  // namespace ferry

#endif  // FERRY_PASSES_PIPELINE_H_
