// Throughput of the lowering pipeline on synthetic programs: chains and
// diamonds of host operators and delegates over three devices, with host
// writes between device readers, from 1k to 1M nodes.
//
//   build/bin/ferry_pipeline_bench --benchmark_counters_tabular=true
//
// Counters: nodes/s for the whole pipeline (binary parse, import, validate,
// the passes, export, binary serialization) and for each pass; the memory
// plan's size over its lower bound (summed over arenas).
#include <benchmark/benchmark.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/arena.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"

namespace ferry {
namespace {

void SetSpec(v1::TensorSpec* spec) {
  spec->set_dtype(v1::F32);
  spec->add_sizes(16);
  spec->add_sizes(16);
}

v1::Node* AddCall(v1::Method* m, const std::string& name, const char* op,
                  std::initializer_list<std::string> args) {
  v1::Node* n = m->add_nodes();
  n->set_name(name);
  n->mutable_call()->set_op(op);
  for (const std::string& a : args) n->mutable_call()->add_args()->set_value(a);
  SetSpec(n->mutable_tensor());
  return n;
}

// About `target` nodes: a repeating block of 9 nodes.
//   h = sin(prev); i = cos(prev)                 (diamond on the host)
//   d = delegate@cuda:k(h, i) -> tuple; g = getitem(d, 0)
//   e = delegate@cuda:k(g, prev) -> tuple; f = getitem(e, 0)   (same device)
//   r = relu_(g)                                 (host write of a device value)
//   s = add(f, g); prev = s
v1::LowerRequest MakeProgram(int64_t target) {
  v1::LowerRequest request;
  v1::Program* program = request.mutable_program();
  for (int k = 0; k < 3; ++k) {
    v1::LoweredModule* mod = program->add_modules();
    mod->set_id(absl::StrCat("add_cuda", k));
    mod->set_backend("FerryCudaBackend");
    v1::CompileSpec* cs = mod->add_compile_specs();
    cs->set_key("target_device");
    cs->set_value(absl::StrCat("cuda:", k));
    v1::Method* g = mod->mutable_graph();
    g->set_name(mod->id());
    for (const char* in : {"x", "y"}) {
      v1::Node* n = g->add_nodes();
      n->set_name(in);
      n->mutable_input()->set_kind(v1::USER_INPUT);
      SetSpec(n->mutable_tensor());
      SetSpec(mod->add_input_layouts());
    }
    AddCall(g, "z", "aten::add.Tensor", {"x", "y"});
    g->add_nodes()->set_name("out");
    g->mutable_nodes(3)->mutable_output()->add_values()->set_value("z");
    mod->set_returns_tuple(true);
  }
  v1::Method* m = program->add_methods();
  m->set_name("forward");
  v1::Node* in = m->add_nodes();
  in->set_name("x");
  in->mutable_input()->set_kind(v1::USER_INPUT);
  SetSpec(in->mutable_tensor());
  std::string prev = "x";
  auto delegate = [&](const std::string& name, int device, const std::string& a,
                      const std::string& b) {
    v1::Node* d = m->add_nodes();
    d->set_name(name);
    d->mutable_delegate()->set_module(absl::StrCat("add_cuda", device));
    d->mutable_delegate()->add_args()->set_value(a);
    d->mutable_delegate()->add_args()->set_value(b);
    SetSpec(d->mutable_tuple()->add_elements());
    v1::Node* gi = m->add_nodes();
    gi->set_name(name + "_0");
    gi->mutable_getitem()->set_source(name);
    SetSpec(gi->mutable_tensor());
    return name + "_0";
  };
  for (int64_t block = 0; m->nodes_size() + 9 <= target; ++block) {
    const std::string id = absl::StrCat(block);
    const int device = static_cast<int>(block % 3);
    AddCall(m, "h" + id, "aten::sin", {prev});
    AddCall(m, "i" + id, "aten::cos", {prev});
    std::string g = delegate("d" + id, device, "h" + id, "i" + id);
    std::string f = delegate("e" + id, device, g, prev);
    AddCall(m, "r" + id, "aten::relu_", {g});
    AddCall(m, "s" + id, "aten::add.Tensor", {f, g});
    prev = "s" + id;
  }
  v1::Node* out = m->add_nodes();
  out->set_name("output");
  out->mutable_output()->add_values()->set_value(prev);
  return request;
}

void BM_Pipeline(benchmark::State& state) {
  const v1::LowerRequest request = MakeProgram(state.range(0));
  const int64_t nodes = request.program().methods(0).nodes_size();
  std::string bytes;
  request.SerializeToString(&bytes);
  std::vector<PassTiming> passes;
  double ratio = 0;
  for (auto _ : state) {
    // As the service does: protobuf messages live on an arena.
    google::protobuf::Arena arena;
    auto* parsed =
        google::protobuf::Arena::CreateMessage<v1::LowerRequest>(&arena);
    bool bare = false;
    if (!ParseRequest(bytes, FileFormat::kBinary, "bench", parsed, &bare)
             .ok()) {
      state.SkipWithError("parse failed");
      return;
    }
    absl::StatusOr<LowerResult> result = Lower(*parsed);
    if (!result.ok() || !result->ok) {
      state.SkipWithError("lowering failed");
      return;
    }
    auto* out = google::protobuf::Arena::CreateMessage<v1::Program>(&arena);
    ExportProgram(result->program, out);
    benchmark::DoNotOptimize(SerializeProgram(*out, FileFormat::kBinary));
    passes = result->stats.passes;
    int64_t size = 0, bound = 0;
    for (const ArenaSummary& a : result->stats.arenas) {
      size += a.bytes;
      bound += a.lower_bound_bytes;
    }
    ratio = bound ? static_cast<double>(size) / bound : 1.0;
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["nodes_per_s"] =
      benchmark::Counter(static_cast<double>(nodes),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["arena_over_bound"] = ratio;
  for (const PassTiming& p : passes)
    state.counters[p.name + "_Mnodes_per_s"] =
        p.micros ? static_cast<double>(nodes) / p.micros : 0;
}
BENCHMARK(BM_Pipeline)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The floor under BM_Pipeline that no pass can lower: parse the same request
// on an arena and serialize a program of the lowered program's size (the
// lowered program, lowered once outside the loop, as a v1::Program), with no
// import, passes or export. BM_Pipeline's time over this one is what Ferry's
// own code costs.
void BM_ProtobufFloor(benchmark::State& state) {
  const v1::LowerRequest request = MakeProgram(state.range(0));
  const int64_t nodes = request.program().methods(0).nodes_size();
  std::string bytes;
  request.SerializeToString(&bytes);
  absl::StatusOr<LowerResult> lowered = Lower(request);
  if (!lowered.ok() || !lowered->ok) {
    state.SkipWithError("lowering failed");
    return;
  }
  v1::Program lowered_proto;
  ExportProgram(lowered->program, &lowered_proto);
  for (auto _ : state) {
    google::protobuf::Arena arena;
    auto* parsed =
        google::protobuf::Arena::CreateMessage<v1::LowerRequest>(&arena);
    bool bare = false;
    if (!ParseRequest(bytes, FileFormat::kBinary, "bench", parsed, &bare)
             .ok()) {
      state.SkipWithError("parse failed");
      return;
    }
    benchmark::DoNotOptimize(
        SerializeProgram(lowered_proto, FileFormat::kBinary));
  }
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["nodes_per_s"] =
      benchmark::Counter(static_cast<double>(nodes),
                         benchmark::Counter::kIsIterationInvariantRate);
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
  state.counters["response_bytes"] =
      static_cast<double>(lowered_proto.ByteSizeLong());
}
BENCHMARK(BM_ProtobufFloor)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->Arg(1000000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
}  // namespace ferry

BENCHMARK_MAIN();
