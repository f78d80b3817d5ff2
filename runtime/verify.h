// Verification: the lowered program on a backend against eager host
// execution of the original program.
//
// Requires: both programs imported and validated; `lowered` is `original`
// after lowering (same methods, same user inputs in the same order).
// Establishes: each method of `original` runs eagerly (host kernels only,
// fresh storage per node, delegates' subgraphs on the host) and the same
// method of `lowered` runs on the chosen backend, both with the same user
// inputs, generated from `options.seed` (data_gen.h; the seed also varies
// the data of constants that carry none). Every output is
// compared: integers and bools exactly; floats with
// |actual - expected| <= atol + rtol * |expected| (NaN matches NaN), where
// atol/rtol depend on the dtype and the backend (Tolerance below) and are
// reported with each comparison. Before a method of `lowered` runs, its user
// inputs and outputs must be where the options it was lowered with say
// (Method::lowered_with; the defaults when absent): in host memory unless
// skip_h2d_for_method_inputs / skip_d2h_for_method_outputs allowed the
// device. A misplaced one is reported in `error`, naming it.
//
// A runtime error in either program (a strictness violation on sim, a
// layout mismatch at a delegate, a kernel error) is not a Status error: the
// report carries it in `error`, naming the node, with ok = false.
#ifndef FERRY_RUNTIME_VERIFY_H_
#define FERRY_RUNTIME_VERIFY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/ir.h"
#include "passes/pipeline.h"
#include "passes/resource_limits.h"
#include "runtime/cancel.h"

namespace ferry {

enum class VerifyDevice { kAuto, kSim, kCuda };

// A named tensor value of a method (ferry.v1.InputValue): a user input given
// by the caller, or an output kept for the caller.
struct GivenInput {
  std::string method;
  std::string input;  // the input's name; "output<i>" for outputs
  DType dtype = DType::kInvalid;
  std::vector<int64_t> sizes;
  std::string data;  // row-major elements
};

struct VerifyOptions {
  VerifyDevice device = VerifyDevice::kAuto;
  uint64_t seed = 0;
  // Inputs given by the caller; the others are generated from `seed`. A
  // given input that names no user input, or whose dtype, sizes or byte
  // count differ from the input's, is InvalidArgument.
  std::vector<GivenInput> inputs;
  // Keep the lowered program's outputs in VerifyReport::lowered_outputs.
  bool keep_outputs = false;
  // Checked between steps; returning false stops with CANCELLED.
  std::function<bool()> keep_going;
  // When set, installed for the whole verification (cancel.h): the executor
  // checks it between nodes and host kernels and the CUDA backend inside
  // long steps; a stop is CANCELLED (the token tells why).
  const CancelToken* cancel = nullptr;
  // What verification may allocate (resource_limits.h), checked before
  // anything is: over a limit is RESOURCE_EXHAUSTED with a
  // ResourceViolation.
  ResourceLimits limits;
  // Hears each step of each method begin and finish (StageEvent with the
  // method): "eager_run", "lowered_run", "compare".
  ProgressFn progress;
};

struct OutputComparison {
  std::string method;
  int output_index = 0;
  std::string dtype;
  bool match = false;
  int64_t mismatched_elements = 0;
  int64_t first_mismatch_index = -1;  // row-major element index; -1: none
  double expected_value = 0, actual_value = 0;  // at first_mismatch_index
  // The greatest absolute and relative differences, as
  // torch.testing.assert_close reports them: over the mismatching elements
  // when there are any, else over all. Relative is |a - e| / |e|, infinite
  // where e is 0 and a is not; a NaN or an infinity against anything else
  // differs by infinity.
  double max_abs_error = 0, max_rel_error = 0;
  // The n-d (row-major) index of the first element with each; empty when
  // no element was compared.
  std::vector<int64_t> max_abs_error_index, max_rel_error_index;
  double atol = 0, rtol = 0;
  std::vector<int64_t> sizes;  // the output's
  int64_t elements = 0;        // compared: the product of `sizes`
};

// Calls of one operator that ran through the host kernel inside a device
// delegate (runtime/ops/backend_ops.h): a host-only operator of the CUDA
// backend's table, or a call its device kernel cannot take.
struct HostFallback {
  std::string op;
  int64_t count = 0;
};

struct VerifyReport {
  bool ok = false;     // every output matches and nothing failed
  std::string device;  // "sim" or "cuda"
  std::string error;   // runtime error naming the node; empty if none
  std::vector<OutputComparison> outputs;
  // Host fallbacks of the lowered program's run, by operator (sorted); on
  // sim, the ones the cuda backend would make.
  std::vector<HostFallback> host_fallbacks;
  // With VerifyOptions::keep_outputs: every method output of the lowered
  // program, as computed on the backend.
  std::vector<GivenInput> lowered_outputs;

  // One line, no newline: "verify on sim: OK (1 output matches)",
  // "verify on sim: MISMATCH in 1 of 2 outputs (forward output 0: 3 / 120
  // elements)", "verify on sim: ERROR: ...", with the host fallbacks.
  std::string Summary() const;
  // What `ferry verify` prints: Summary(), then for each output a line, and
  // for a mismatching one torch.testing.assert_close's figures:
  //   forward output 0 (f32[4,30]): MISMATCH
  //     Mismatched elements: 3 / 120 (2.5%)
  //     Greatest absolute difference: 0.5 at index (1, 2) (up to 1e-05 allowed)
  //     Greatest relative difference: inf at index (0, 3) (up to 1e-05 allowed)
  //     First mismatch at index (0, 3): expected 0, got 0.25
  // The JSON form is ReportJson(VerifyReportToProto(report)) (verify_io.h).
  std::string Text() const;
};

// The n-d row-major index of element `linear` of a tensor of `sizes`.
std::vector<int64_t> UnravelIndex(int64_t linear,
                                  const std::vector<int64_t>& sizes);

// The tolerances floats are compared with on `device` ("sim" or "cuda");
// 0/0 for integers and bool.
struct Tolerance {
  double atol = 0, rtol = 0;
};
Tolerance ToleranceFor(DType dtype, std::string_view device);
// Whether `actual` matches `expected`: NaN matches NaN, an infinity only
// itself, anything else within atol + rtol * |expected|.
bool WithinTolerance(double actual, double expected,
                     const Tolerance& tolerance);

bool CudaAvailable();
// "cpu", "sim", then "cuda:N" for each visible GPU.
std::vector<std::string> VisibleDevices();

// Executes `original` eagerly on the host and `lowered` on the chosen
// backend. FailedPrecondition if the requested device is unavailable
// (kCuda without a GPU, or a program using cuda:N with N >= the number of
// GPUs); CANCELLED when keep_going says so; RESOURCE_EXHAUSTED when the
// programs are over options.limits (VerifyBytes), before anything is
// allocated. Never throws: an allocation failure is RESOURCE_EXHAUSTED, any
// other exception INTERNAL.
absl::StatusOr<VerifyReport> VerifyPrograms(const Program& original,
                                            const Program& lowered,
                                            const VerifyOptions& options);

}  // namespace ferry

#endif  // FERRY_RUNTIME_VERIFY_H_
