// The executor: loads a program and runs its methods.
//
// Requires: a program that imported and validated cleanly (passes/), which
// outlives the executor.
//
// Load (once):
//  - one arena per entry of each method's `arenas`, in that arena's memory;
//  - every value bound to storage: planned values at their arena offset
//    (views and in-place results at their root's storage, with their own
//    sizes/strides/offset); unplanned values get their own allocation on
//    their spec's device; program data (parameters, buffers, lifted and
//    `constant` nodes) is the constant table's data, or data generated from
//    the constant's seed (data_gen.h), staged once in host memory;
//  - copies with `at_load` run now, once;
//  - each delegate gets its module's subgraph prepared on the module's
//    target device, with the module's own constants staged there.
// Run (per call): user inputs are written into their storage (with their
// spec's layout), nodes run in order, and the method's outputs are read back
// to the host as dense tensors.
//
// Modes:
//  - kEager: the oracle. Everything on the host, every node's result in
//    fresh storage (views alias), placements and memory plans ignored,
//    delegates run their subgraph with host kernels.
//  - kSim: placements honoured, strictly, on simulated devices. Host
//    operators must get host memory only; a delegate on cuda:N must get
//    memory of sim cuda:N (and a host delegate host memory); an H2D must go
//    from host to a device and a D2H back; violations are errors naming the
//    node. Delegates run their subgraph with host kernels on their device's
//    memory.
//  - kCuda: as kSim, with real devices and CUDA kernels for delegates.
//
// Delegates read each input with the layout the module was compiled for
// (`input_layouts`), and their owned constants with the subgraph's constant
// node specs. When the value they are given is laid out otherwise, the run
// fails with an error naming the delegate and both layouts (nothing
// converts silently).
//
// A method with no device arenas and no copy nodes (a program lowered with
// enable_non_cpu_memory_planning=false) keeps device delegates' inputs and
// results in host memory: those delegates copy their inputs to their device
// and their results back themselves, as ExecuTorch backends do when device
// memory is not planned.
#ifndef FERRY_RUNTIME_EXECUTOR_H_
#define FERRY_RUNTIME_EXECUTOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "passes/ir.h"
#include "runtime/tensor_view.h"

namespace ferry {

enum class ExecutionMode { kEager, kSim, kCuda };
std::string_view ExecutionModeName(ExecutionMode mode);  // "eager", ...

// A dense row-major host tensor: what callers pass in and get back.
struct HostTensor {
  DType dtype = DType::kInvalid;
  std::vector<int64_t> sizes;
  std::vector<std::byte> data;  // numel * ElementSize(dtype) bytes

  int64_t numel() const;
  TensorView view() const;
};

// Generated values (data_gen.h) for the USER_INPUT nodes of `method`, in
// node order. Incomplete when the calling thread's cancel token says stop
// (check StopRequested() after).
std::vector<HostTensor> GenerateUserInputs(const Method& method, uint64_t seed);

class Executor {
 public:
  // `data_seed` is the verification seed that constants without data mix
  // into their own seed (data_gen.h).
  static absl::StatusOr<std::unique_ptr<Executor>> Load(const Program& program,
                                                        ExecutionMode mode,
                                                        uint64_t data_seed = 0);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  ExecutionMode mode() const;

  // Runs `method` with one tensor per USER_INPUT node (node order; dtype and
  // sizes as the input's spec says). Returns the outputs, in order, as dense
  // host tensors (scalar outputs as 0-dim i64/f64/bool tensors). Errors name
  // the node (and, inside a delegate, the delegate too). `keep_going` is
  // checked before every node; false stops with CANCELLED.
  absl::StatusOr<std::vector<HostTensor>> Run(
      std::string_view method, std::span<const HostTensor> inputs,
      const std::function<bool()>& keep_going = {});

  // Where the program keeps the user inputs and the outputs of `method`
  // (node order; outputs in output order): the device of the memory each
  // is bound to, the host for host memory. A scalar output is nullopt.
  // NotFound for an unknown method.
  struct Locations {
    std::vector<Device> inputs;
    std::vector<std::optional<Device>> outputs;
  };
  absl::StatusOr<Locations> Where(std::string_view method) const;

  struct Impl;

 private:
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "f32[4,3] strides [1,4] offset 0"
std::string LayoutString(const TensorSpec& spec);
// Whether reading through `a` and through `b` finds every element at the
// same byte (same dtype and sizes; strides compared where size > 1; storage
// offsets compared unless empty).
bool SameElementLayout(const TensorSpec& a, const TensorSpec& b);

}  // namespace ferry

#endif  // FERRY_RUNTIME_EXECUTOR_H_
