// The lowering pipeline: validate, normalize_layout, partition, lower,
// place_and_copy, plan_memory, emit. One entry point for the `ferry` tool
// and the service.
#ifndef FERRY_PASSES_PIPELINE_H_
#define FERRY_PASSES_PIPELINE_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "passes/options.h"
#include "passes/resource_limits.h"

namespace ferry {
namespace v1 {
class LowerRequest;
class Program;
}  // namespace v1

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

// Called after each pass that added no error, with the pass's name and the
// program it left; a non-OK status stops the pipeline with that status. The
// tests pass CheckEstablished (checks.h) to check every pass's promises.
using AfterPassFn =
    std::function<absl::Status(std::string_view pass, const Program& program,
                               const LowerOptions& options)>;

// A stage of a long job beginning or finishing, for progress reports: a
// pipeline stage (PipelinePassNames) or a verification step of a method
// (runtime/verify.h). The views are valid during the call only.
struct StageEvent {
  std::string_view stage;
  std::string_view method;  // verification steps only
  bool finished = false;
  int64_t micros = 0;  // when finished: how long the stage took
};
// Called on the thread that runs the stage, before and after it.
using ProgressFn = std::function<void(const StageEvent& event)>;

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
// `backends`: what each backend runs (BackendOperators). `progress` hears
// each stage begin and finish (with the duration LowerStats::passes
// records). `release_request`, when given, is called once the pipeline has
// read all it needs of the request (after import and validation, before the
// passes), so that a caller can free it and the passes' peak does not hold
// it too; the request must not be touched after that call.
absl::StatusOr<LowerResult> Lower(
    const v1::LowerRequest& request, const ContinueFn& keep_going = {},
    const ResourceLimits& limits = {}, const BackendOperators& backends = {},
    const BlobFetcher& fetch_blob = {}, const AfterPassFn& after_pass = {},
    const ProgressFn& progress = {},
    const std::function<void()>& release_request = {});

// Lower of `request`, a ferry.v1.LowerRequest in binary form, whose program
// is read node by node from it (ImportRequestWire) rather than parsed whole
// first: the same result, with less time and memory for a large program.
// InvalidArgument when the bytes are not a LowerRequest. `release_request`:
// as for Lower; the bytes must stay valid until it is called.
absl::StatusOr<LowerResult> LowerWire(
    std::string_view request, const ContinueFn& keep_going = {},
    const ResourceLimits& limits = {}, const BackendOperators& backends = {},
    const BlobFetcher& fetch_blob = {}, const AfterPassFn& after_pass = {},
    const ProgressFn& progress = {},
    const std::function<void()>& release_request = {});

// The stages Lower runs, in order, named as LowerStats::passes names them:
// "import", "validate", then each pass. A lowering that runs to the end
// reports each of them once (GetCapabilities lists them).
std::vector<std::string> PipelinePassNames();

// Counts the copies and delegates of an already lowered program. (Lower's
// own statistics are place_and_copy's counts, made as it places the copies;
// the tests check that both agree.)
LowerStats CountStats(const Program& program);

// The `--report=json` object is ReportJson(LowerReportToProto(result))
// (report_io.h).
// The short human summary (delegates per device, copies per call and their
// bytes, arena sizes), then the diagnostics in text form.
std::string ReportText(const LowerResult& result, std::string_view file);

}  // namespace ferry

#endif  // FERRY_PASSES_PIPELINE_H_
