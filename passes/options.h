// The options of one lowering, as every pass sees them (pass.h), and their
// resolution from the wire (ferry.v1.LowerOptions). The pipeline resolves
// them once per request (pipeline.h); a pass only reads them.
#ifndef FERRY_PASSES_OPTIONS_H_
#define FERRY_PASSES_OPTIONS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/diagnostics.h"
#include "passes/ir.h"
#include "passes/resource_limits.h"

namespace ferry {
namespace v1 {
class LowerOptions;
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

// The bytes of a blob, FAILED_PRECONDITION when there is none.
using BlobFetcher = std::function<absl::StatusOr<std::string>(const BlobRef&)>;

// Options of one lowering, resolved from ferry.v1.LowerOptions.
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

}  // namespace ferry

#endif  // FERRY_PASSES_OPTIONS_H_
