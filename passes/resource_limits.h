// The resource model: what a request may make Ferry allocate, computed from
// its specs with overflow checks and compared with per-request limits
// *before* anything is allocated (DESIGN.md §7).
//
// Three limits, the same for the `ferry` tool and ferryd (which advertises
// them in GetCapabilities.limits and sets them with --max-tensor-bytes,
// --max-verify-bytes and --max-expansion):
//  - max_tensor_bytes: any one tensor's storage, the larger of the bytes its
//    spec spans (storage_offset included) and its dense size (what a
//    contiguous copy, a generated input or a returned output takes);
//  - max_verify_bytes: everything verification may allocate for a program,
//    both runs together (VerifyBytes below);
//  - max_expansion: the data a lowering produces per byte of request, with
//    small requests counted as kExpansionFloorBytes (a 4-byte constant with
//    strides [0,0] declared f32[8000,8000] and made contiguous would turn an
//    81-byte request into 256 MB).
//
// Over a limit is absl::ResourceExhaustedError carrying a ResourceViolation
// (which limit, the node or constant, bytes needed) as a payload, so that
// the service can answer RESOURCE_EXHAUSTED with a QuotaFailure naming it.
#ifndef FERRY_PASSES_RESOURCE_LIMITS_H_
#define FERRY_PASSES_RESOURCE_LIMITS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "passes/ir.h"

namespace ferry {

struct ResourceLimits {
  int64_t max_tensor_bytes = int64_t{1} << 30;  // 1 GiB
  int64_t max_verify_bytes = int64_t{2} << 30;  // 2 GiB
  int64_t max_expansion = 16;
};

// Requests smaller than this count as this large for max_expansion.
inline constexpr int64_t kExpansionFloorBytes = int64_t{1} << 20;

// A limit as a flag or config value gives it: "1048576", "64KiB", "64MiB",
// "1GiB", "10kB", "10MB", "1GB" (ferryd's configuration, the `ferry`
// tool's --max-verify-bytes).
absl::StatusOr<int64_t> ParseByteSize(absl::string_view text);

// a * b, a + b; nullopt on overflow (or a negative operand).
std::optional<int64_t> CheckedMul(int64_t a, int64_t b);
std::optional<int64_t> CheckedAdd(int64_t a, int64_t b);

// The bytes one tensor takes: max(spec.StorageBytes(), spec.NumBytes());
// nullopt when either overflows or the spec spans no valid storage.
std::optional<int64_t> TensorBytes(const TensorSpec& spec);

// Why a request is over a limit.
struct ResourceViolation {
  std::string limit;    // "max_tensor_bytes", "max_verify_bytes", ...
  std::string subject;  // "program.methods['m'].nodes['n']", ...
  int64_t bytes = 0;    // what it would take; INT64_MAX on overflow
  int64_t allowed = 0;  // the limit
  // "<subject> needs <bytes> bytes, over max_tensor_bytes (<allowed>)"
  std::string Description() const;
  // How a refusal for it reads, wherever it is refused (ferryd's
  // RESOURCE_EXHAUSTED status and its QuotaFailure, the in-process `ferry`
  // tool), so that both print the same: "over a resource limit: <Description>"
  std::string RefusalMessage() const;
  // "<Description> (see GetCapabilities.limits)"
  std::string QuotaDescription() const;
};

// RESOURCE_EXHAUSTED with `violation` attached.
absl::Status ResourceLimitError(const ResourceViolation& violation);
// The violation a status carries, if it is one of ResourceLimitError's.
std::optional<ResourceViolation> GetResourceViolation(
    const absl::Status& status);

// Subjects: "program.methods['m'].nodes['n']",
// "program.modules['id'].nodes['n']", "program.constants['c']".
std::string NodeSubject(absl::string_view method, absl::string_view node);
std::string ModuleNodeSubject(absl::string_view module, absl::string_view node);
std::string ConstantSubject(absl::string_view constant);

// Every tensor the program declares (node results of methods and lowered
// modules, tuple elements, constants, module input layouts) within
// max_tensor_bytes. The first one over it is the error.
absl::Status CheckTensorBytes(const Program& program,
                              const ResourceLimits& limits);

// Whatever the limits, the bytes of all tensors of one method (or module
// graph) together stay under kAddressableBytes, so that memory planning's
// offsets and arena sizes cannot overflow. The first node past it is the
// error (limit "addressable_bytes").
inline constexpr int64_t kAddressableBytes = int64_t{1} << 62;
absl::Status CheckAddressable(const Program& program);

// CheckAddressable's count for one method or module graph: each spec's
// bytes (TensorBytes) and 64 for its alignment, in node order, up to the
// first node past kAddressableBytes. A walk over the specs with work of its
// own counts them in it (validation does: ValidateProgram) rather than
// making CheckAddressable's.
class AddressableCount {
 public:
  // Counts `spec`, a result of `node`.
  void Add(const Node& node, const TensorSpec& spec);
  // OK, or the error at the first node past the bound, named by `subject`
  // (NodeSubject or ModuleNodeSubject of its graph).
  absl::Status Status(
      absl::FunctionRef<std::string(absl::string_view node)> subject) const;

 private:
  int64_t bytes_ = 0;  // saturating
  std::optional<std::string> over_;
};

// The most bytes a lowering of a `request_bytes` request may produce:
// max_expansion * max(request_bytes, kExpansionFloorBytes).
int64_t ExpansionAllowance(int64_t request_bytes, const ResourceLimits& limits);

// Bytes of constant data a program carries (the bulk of a lowered program).
int64_t ConstantDataBytes(const Program& program);

// An upper bound of what verifying `lowered` against `original` allocates:
// for each program, every constant's storage (twice for the lowered one:
// host and device copies), every node result in its own storage (eager
// mode's fresh storage per node; unplanned values on a backend) and the
// arenas; generated user inputs; both runs' dense outputs; plus
// `given_input_bytes`. Error when one tensor is over max_tensor_bytes or the
// total is over max_verify_bytes.
absl::StatusOr<int64_t> VerifyBytes(const Program& original,
                                    const Program& lowered,
                                    int64_t given_input_bytes,
                                    const ResourceLimits& limits);

}  // namespace ferry

#endif  // FERRY_PASSES_RESOURCE_LIMITS_H_
