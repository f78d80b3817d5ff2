// Runtime benchmarks (Google Benchmark).
//
//  - BM_KernelOnly / BM_ExecutorHostChain: a chain of N host nodes on small
//    tensors (f32[16]), once as bare kernel calls and once through the
//    executor (sim mode: strictness checks included). The "per_node"
//    counters give the time per node; their difference is the executor's
//    overhead per host node beyond the kernel (target: < 1 us).
//  - BM_ExecutorSimDelegateChain: N delegates on sim cuda:0, each one
//    elementwise op: the per-delegate cost of binding and running a
//    subgraph.
//  - BM_H2D / BM_D2H (pinned and pageable host memory): copy bandwidth
//    through the device API on a GPU; they report an error where none is
//    visible.
#include <benchmark/benchmark.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "passes/diagnostics.h"
#include "passes/proto_io.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/host_kernels.h"

namespace ferry {
namespace {

constexpr int kElements = 16;

Program ParseOrDie(const std::string& text) {
  v1::LowerRequest request;
  bool bare = false;
  absl::Status status =
      ParseRequest(text, FileFormat::kText, "bench", &request, &bare);
  Diagnostics diagnostics;
  Program program = ImportProgram(request.program(), diagnostics);
  if (!status.ok() || diagnostics.HasErrors()) {
    std::fprintf(stderr, "bench program does not import:\n%s\n",
                 FormatDiagnosticsText(diagnostics, "bench").c_str());
    std::abort();
  }
  return program;
}

// x -> add(x, x) -> relu -> add(., x) -> relu ... (n nodes) -> output.
std::string HostChainText(int n) {
  const std::string spec =
      absl::StrCat("tensor { dtype: F32 sizes: ", kElements, " }");
  std::string text = absl::StrCat(
      "methods { name: \"forward\"\n  nodes { name: \"x\" input { kind: "
      "USER_INPUT } ",
      spec, " }\n");
  std::string previous = "x";
  for (int i = 0; i < n; ++i) {
    const std::string name = absl::StrCat("n", i);
    if (i % 2 == 0) {
      absl::StrAppend(&text, "  nodes { name: \"", name,
                      "\" call { op: \"aten::add.Tensor\" args { value: \"",
                      previous, "\" } args { value: \"x\" } } ", spec, " }\n");
    } else {
      absl::StrAppend(&text, "  nodes { name: \"", name,
                      "\" call { op: \"aten::relu\" args { value: \"", previous,
                      "\" } } ", spec, " }\n");
    }
    previous = name;
  }
  absl::StrAppend(&text,
                  "  nodes { name: \"output\" output { values { value: \"",
                  previous, "\" } } }\n}\n");
  return text;
}

std::vector<HostTensor> Inputs() {
  HostTensor x;
  x.dtype = DType::kF32;
  x.sizes = {kElements};
  x.data.resize(kElements * sizeof(float));
  std::vector<float> values(kElements, 0.25f);
  std::memcpy(x.data.data(), values.data(), x.data.size());
  return {x};
}

void BM_ExecutorHostChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Program program = ParseOrDie(HostChainText(n));
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Load(program, ExecutionMode::kSim);
  if (!executor.ok()) {
    state.SkipWithError(std::string(executor.status().message()).c_str());
    return;
  }
  std::vector<HostTensor> inputs = Inputs();
  for (auto _ : state) {
    absl::StatusOr<std::vector<HostTensor>> out =
        (*executor)->Run("forward", inputs);
    benchmark::DoNotOptimize(out);
  }
  state.counters["per_node"] =
      benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate |
                                benchmark::Counter::kInvert);
}
BENCHMARK(BM_ExecutorHostChain)->Arg(64)->Arg(1024);

// The same kernels, called directly on prepared arguments.
void BM_KernelOnly(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  std::vector<std::vector<float>> buffers(n + 1,
                                          std::vector<float>(kElements, 0.25f));
  std::array<int64_t, 1> sizes{kElements};
  struct Prepared {
    HostKernelFn fn;
    std::string op;
    std::vector<KernelArg> args;
    std::vector<TensorView> outputs;
  };
  std::vector<Prepared> calls;
  for (int i = 0; i < n; ++i) {
    Prepared p;
    p.op = i % 2 == 0 ? "aten::add.Tensor" : "aten::relu";
    p.fn = FindHostKernel(p.op);
    KernelArg prev;
    prev.kind = KernelArg::Kind::kTensor;
    prev.tensor = ContiguousView(buffers[i].data(), DType::kF32, sizes);
    p.args.push_back(prev);
    if (i % 2 == 0) {
      KernelArg x = prev;
      x.tensor = ContiguousView(buffers[0].data(), DType::kF32, sizes);
      KernelArg alpha;
      alpha.kind = KernelArg::Kind::kInt;
      alpha.int_value = 1;
      p.args.push_back(x);
      p.args.push_back(alpha);
    }
    p.outputs.push_back(
        ContiguousView(buffers[i + 1].data(), DType::kF32, sizes));
    calls.push_back(std::move(p));
  }
  for (auto _ : state) {
    for (const Prepared& p : calls) {
      absl::Status status = p.fn(KernelCall{p.op, p.args, p.outputs});
      benchmark::DoNotOptimize(status);
    }
  }
  state.counters["per_node"] =
      benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate |
                                benchmark::Counter::kInvert);
}
BENCHMARK(BM_KernelOnly)->Arg(64)->Arg(1024);

// x -> H2D -> n delegates (each relu on sim cuda:0) -> D2H -> output.
std::string DelegateChainText(int n) {
  const std::string host =
      absl::StrCat("tensor { dtype: F32 sizes: ", kElements, " }");
  const std::string dev = absl::StrCat("tensor { dtype: F32 sizes: ", kElements,
                                       " device { type: \"cuda\" } }");
  std::string text = absl::StrCat(
      "methods { name: \"forward\"\n  nodes { name: \"x\" input { kind: "
      "USER_INPUT } ",
      host, " }\n",
      "  nodes { name: \"x_h2d\" call { op: \"et_copy::_h2d_copy\" args { "
      "value: \"x\" } } ",
      dev, " }\n");
  std::string previous = "x_h2d";
  for (int i = 0; i < n; ++i) {
    const std::string name = absl::StrCat("d", i);
    absl::StrAppend(&text, "  nodes { name: \"", name,
                    "\" delegate { module: \"m\" args { value: \"", previous,
                    "\" } } ", dev, " }\n");
    previous = name;
  }
  absl::StrAppend(
      &text,
      "  nodes { name: \"y\" call { op: \"et_copy::_d2h_copy\" args { value: "
      "\"",
      previous, "\" } } ", host, " }\n",
      "  nodes { name: \"output\" output { values { value: \"y\" } } }\n}\n");
  absl::StrAppend(
      &text, "modules { id: \"m\" backend: \"FerryCudaBackend\"\n",
      "  compile_specs { key: \"target_device\" value: \"cuda:0\" }\n",
      "  graph { name: \"m\"\n    nodes { name: \"a\" input { kind: USER_INPUT "
      "} ",
      host,
      " }\n    nodes { name: \"r\" call { op: \"aten::relu\" args { value: "
      "\"a\" } } ",
      host,
      " }\n    nodes { name: \"out\" output { values { value: \"r\" } } }\n  "
      "}\n",
      "  input_layouts { dtype: F32 sizes: ", kElements, " }\n}\n");
  return text;
}

void BM_ExecutorSimDelegateChain(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Program program = ParseOrDie(DelegateChainText(n));
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Load(program, ExecutionMode::kSim);
  if (!executor.ok()) {
    state.SkipWithError(std::string(executor.status().message()).c_str());
    return;
  }
  std::vector<HostTensor> inputs = Inputs();
  for (auto _ : state) {
    absl::StatusOr<std::vector<HostTensor>> out =
        (*executor)->Run("forward", inputs);
    benchmark::DoNotOptimize(out);
  }
  state.counters["per_delegate"] =
      benchmark::Counter(n, benchmark::Counter::kIsIterationInvariantRate |
                                benchmark::Counter::kInvert);
}
BENCHMARK(BM_ExecutorSimDelegateChain)->Arg(64);

// --- GPU copy bandwidth
// ----------------------------------------------------------

enum class HostKind { kPinned, kPageable };

void CopyBandwidth(benchmark::State& state, bool to_device,
                   HostKind host_kind) {
  if (!CudaAvailable()) {
    state.SkipWithError("no GPU is visible");
    return;
  }
  const int64_t bytes = state.range(0);
  DeviceSet devices(MemoryKind::kCuda);
  absl::StatusOr<DeviceMemory*> device = devices.For(Device::Cuda(0));
  if (!device.ok()) {
    state.SkipWithError(std::string(device.status().message()).c_str());
    return;
  }
  absl::StatusOr<DeviceBuffer> device_buffer = (*device)->Allocate(bytes);
  absl::StatusOr<DeviceBuffer> pinned = devices.host().Allocate(bytes);
  std::vector<std::byte> pageable(host_kind == HostKind::kPageable ? bytes : 0);
  if (!device_buffer.ok() || !pinned.ok()) {
    state.SkipWithError("allocation failed");
    return;
  }
  std::byte* host =
      host_kind == HostKind::kPinned ? pinned->data() : pageable.data();
  for (auto _ : state) {
    absl::Status status =
        to_device ? (*device)->CopyFromHost(device_buffer->data(), host, bytes)
                  : (*device)->CopyToHost(host, device_buffer->data(), bytes);
    if (!status.ok()) {
      state.SkipWithError(std::string(status.message()).c_str());
      return;
    }
  }
  state.SetBytesProcessed(state.iterations() * bytes);
}

void BM_H2D_Pinned(benchmark::State& state) {
  CopyBandwidth(state, true, HostKind::kPinned);
}
void BM_D2H_Pinned(benchmark::State& state) {
  CopyBandwidth(state, false, HostKind::kPinned);
}
void BM_H2D_Pageable(benchmark::State& state) {
  CopyBandwidth(state, true, HostKind::kPageable);
}
void BM_D2H_Pageable(benchmark::State& state) {
  CopyBandwidth(state, false, HostKind::kPageable);
}
BENCHMARK(BM_H2D_Pinned)
    ->RangeMultiplier(16)
    ->Range(64 << 10, 256 << 20)
    ->UseRealTime();
BENCHMARK(BM_D2H_Pinned)
    ->RangeMultiplier(16)
    ->Range(64 << 10, 256 << 20)
    ->UseRealTime();
BENCHMARK(BM_H2D_Pageable)->Arg(64 << 20)->UseRealTime();
BENCHMARK(BM_D2H_Pageable)->Arg(64 << 20)->UseRealTime();

}  // namespace
}  // namespace ferry

BENCHMARK_MAIN();
