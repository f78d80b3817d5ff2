// What the device backends support, declared in one table, and the count of
// host fallbacks inside device delegates.
//
// The CUDA backend runs each operator of a delegate subgraph either as a
// device kernel of its own (kDevice) or as the host kernel on host copies of
// the operands (kHostOnly: declared, never silent). Operators not in the
// table are not supported by the backend: the capability partitioner leaves
// them on the host. The sim backend follows the same table, so a host-only
// operator counts as a fallback there too and the behaviour is testable
// without a GPU.
//
// Every fallback (a kHostOnly operator, an operator missing from the table,
// or a kDevice operator whose call the device kernel cannot take: more than
// 8 dims, overlapping in-place views, an unsupported dtype) is recorded with
// RecordHostFallback into the innermost HostFallbackScope of the calling
// thread; verification installs one and reports the counts
// (VerifyReport::host_fallbacks).
#ifndef FERRY_RUNTIME_OPS_BACKEND_OPS_H_
#define FERRY_RUNTIME_OPS_BACKEND_OPS_H_

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "passes/options.h"

namespace ferry {

enum class BackendSupport { kUnsupported, kDevice, kHostOnly };

struct BackendOp {
  std::string_view op;  // qualified name, "aten::convolution"
  BackendSupport support;
};

// The CUDA backend's table, sorted by name.
std::span<const BackendOp> CudaBackendTable();
// How the CUDA backend runs `op` ("aten::relu" or "aten::relu.default").
BackendSupport CudaBackendSupport(std::string_view op);
// Every operator the CUDA backend accepts in a delegate (device kernels and
// host-only marks), sorted: what GetCapabilities advertises and what the
// capability partitioner may claim.
std::vector<std::string> CudaBackendOperators();
// The subset of CudaBackendOperators() that runs through the host kernel.
std::vector<std::string> CudaHostOnlyOperators();

// What every backend with a declared table runs, for Lower()'s `backends`
// (the capability partitioner claims only these): {"FerryCudaBackend",
// CudaBackendOperators()}. ferryd and the ferry tool pass it.
BackendOperators DeclaredBackendOperators();

// Counts host fallbacks on the calling thread for its lifetime (nested
// scopes: the innermost counts).
class HostFallbackScope {
 public:
  HostFallbackScope();
  ~HostFallbackScope();
  HostFallbackScope(const HostFallbackScope&) = delete;
  HostFallbackScope& operator=(const HostFallbackScope&) = delete;

  // Operator name -> number of calls that ran on the host.
  const std::map<std::string, int64_t>& counts() const { return counts_; }

 private:
  friend void RecordHostFallback(std::string_view op);
  std::map<std::string, int64_t> counts_;
  HostFallbackScope* outer_;
};

// Counts one call of `op` (".default" dropped) run on the host inside a
// device delegate; no-op without a scope.
void RecordHostFallback(std::string_view op);

}  // namespace ferry

#endif  // FERRY_RUNTIME_OPS_BACKEND_OPS_H_
