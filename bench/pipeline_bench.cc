// Throughput of the lowering pipeline on synthetic programs: chains and
// diamonds of host operators and delegates over three devices, with host
// writes between device readers, from 1k to 1M nodes.
//
//   build/bin/ferry_pipeline_bench --benchmark_counters_tabular=true
//
// Counters: nodes/s for the whole pipeline (binary parse, import, validate,
// the passes, writing the binary response) and for each pass and each step
// around them (parse; write: the wire form straight from the IR, which it
// frees as it goes; teardown: freeing the request and the response); the
// memory plan's size over its lower bound (summed over arenas).
//
// BM_Pipeline parses the request whole, then lowers it (ferry::Lower);
// BM_PipelineWire lowers it from its bytes (ferry::LowerWire, which reads
// the program node by node: its "import" includes the parse), as ferryd
// does a unary Lower.
//
//   build/bin/ferry_pipeline_bench --keep-freed-memory ...
//
// keeps freed memory for the next iteration as ferryd does by default
// (server/allocator.h, KeepFreedMemory; ferryd's --keep-freed-bytes):
// without it, jemalloc gives large allocations back as soon as they are
// freed and every iteration faults its pages in afresh, as a process that
// lowers once does.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bench/block_program.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/arena.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/wire_writer.h"
#include "server/allocator.h"

namespace ferry {
namespace {

// The request parsed from `bytes` on `arena`; null (and the benchmark marked
// failed) when it does not parse. ferryd parses onto an arena with the same
// options (RequestArenaOptions), through gRPC's deserializer.
const v1::LowerRequest* ParseOnArena(const std::string& bytes,
                                     google::protobuf::Arena* arena,
                                     benchmark::State& state) {
  auto* parsed =
      google::protobuf::Arena::CreateMessage<v1::LowerRequest>(arena);
  bool bare = false;
  if (!ParseRequest(bytes, FileFormat::kBinary, "bench", parsed, &bare).ok()) {
    state.SkipWithError("parse failed");
    return nullptr;
  }
  return parsed;
}

// The programs' sizes, in nodes, timed in milliseconds of wall time.
void LargeSizes(benchmark::internal::Benchmark* b) {
  b->Arg(10000)->Arg(100000)->Arg(1000000);
  b->Unit(benchmark::kMillisecond)->UseRealTime();
}
void AllSizes(benchmark::internal::Benchmark* b) {
  b->Arg(1000);
  LargeSizes(b);
}

// The program's size and the nodes per second of one iteration.
void SetNodeCounters(benchmark::State& state, int64_t nodes) {
  state.counters["nodes"] = static_cast<double>(nodes);
  state.counters["nodes_per_s"] =
      benchmark::Counter(static_cast<double>(nodes),
                         benchmark::Counter::kIsIterationInvariantRate);
}

// The pipeline on the request as ferryd lowers it: parsed whole onto an
// arena, then lowered (`node_by_node` false); or read node by node from its
// bytes by LowerWire (then "parse" is part of "import").
void RunPipeline(benchmark::State& state, bool node_by_node) {
  const v1::LowerRequest request = MakeBlockProgram(state.range(0));
  const int64_t nodes = request.program().methods(0).nodes_size();
  std::string bytes;
  request.SerializeToString(&bytes);
  std::vector<PassTiming> passes;
  // The steps around the passes, in microseconds, of the last iteration:
  // parse, write (IR to wire bytes, freeing the IR), and freeing the request
  // and the response (teardown).
  using Clock = std::chrono::steady_clock;
  auto micros = [](Clock::time_point from) {
    return std::chrono::duration<double, std::micro>(Clock::now() - from)
        .count();
  };
  double parse_us = 0, write_us = 0, teardown_us = 0;
  double ratio = 0;
  for (auto _ : state) {
    // As the service does, the request is freed once the pipeline has read
    // it, and the lowered program is consumed as it is written.
    absl::StatusOr<LowerResult> result;
    if (node_by_node) {
      result = LowerWire(bytes);
    } else {
      auto request_arena = std::make_unique<google::protobuf::Arena>(
          RequestArenaOptions(bytes.size()));
      Clock::time_point start = Clock::now();
      const v1::LowerRequest* parsed =
          ParseOnArena(bytes, request_arena.get(), state);
      if (parsed == nullptr) return;
      parse_us = micros(start);
      result = Lower(*parsed, {}, {}, {}, {}, {}, {}, [&] {
        start = Clock::now();
        request_arena.reset();
        teardown_us = micros(start);
      });
    }
    if (!result.ok() || !result->ok) {
      state.SkipWithError("lowering failed");
      return;
    }
    passes = result->stats.passes;
    int64_t size = 0, bound = 0;
    for (const ArenaSummary& a : result->stats.arenas) {
      size += a.bytes;
      bound += a.lower_bound_bytes;
    }
    ratio = bound ? static_cast<double>(size) / bound : 1.0;
    {
      // As ferryd answers: the wire form written straight from the IR,
      // which it frees as it goes (no v1::Program message).
      Clock::time_point start = Clock::now();
      std::string wire;
      if (!AppendProgramWire(std::move(result->program), wire).ok()) {
        state.SkipWithError("writing the wire form failed");
        return;
      }
      benchmark::DoNotOptimize(wire);
      write_us = micros(start);
      start = Clock::now();
      result = LowerResult{};
      std::string().swap(wire);
      teardown_us += micros(start);
    }
  }
  SetNodeCounters(state, nodes);
  state.counters["arena_over_bound"] = ratio;
  for (const PassTiming& p : passes)
    state.counters[p.name + "_Mnodes_per_s"] =
        p.micros ? static_cast<double>(nodes) / p.micros : 0;
  for (const auto& [name, us] :
       {std::pair<const char*, double>{"parse", parse_us},
        {"write", write_us},
        {"teardown", teardown_us}})
    state.counters[std::string(name) + "_Mnodes_per_s"] =
        us > 0 ? static_cast<double>(nodes) / us : 0;
}

void BM_Pipeline(benchmark::State& state) { RunPipeline(state, false); }
BENCHMARK(BM_Pipeline)->Apply(AllSizes);

void BM_PipelineWire(benchmark::State& state) { RunPipeline(state, true); }
BENCHMARK(BM_PipelineWire)->Apply(AllSizes);

// The floor under BM_Pipeline that no pass can lower: parse the same request
// on an arena and serialize a program of the lowered program's size (the
// lowered program, lowered once outside the loop, as a v1::Program), with no
// import, passes or export. BM_Pipeline's time over this one is what Ferry's
// own code costs.
void BM_ProtobufFloor(benchmark::State& state) {
  const v1::LowerRequest request = MakeBlockProgram(state.range(0));
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
    google::protobuf::Arena arena(RequestArenaOptions(bytes.size()));
    const v1::LowerRequest* parsed = ParseOnArena(bytes, &arena, state);
    if (parsed == nullptr) return;
    benchmark::DoNotOptimize(
        SerializeProgram(lowered_proto, FileFormat::kBinary));
  }
  SetNodeCounters(state, nodes);
  state.counters["request_bytes"] = static_cast<double>(bytes.size());
  state.counters["response_bytes"] =
      static_cast<double>(lowered_proto.ByteSizeLong());
}
BENCHMARK(BM_ProtobufFloor)->Apply(AllSizes);

// The protobuf parse alone, two ways, to size an import that reads the wire
// itself (docs/performance.md, "Twentieth round"): BM_ParseWhole parses the
// request at once onto an arena, as ferryd and BM_Pipeline do, then reads
// each node; BM_ParseNodeByNode finds each node's bytes in the wire form and
// parses that node alone onto a small arena, reset as it goes, so that what
// is read stays in cache. Both read the same fields of every node (its name,
// arguments and sizes), as an import would.
int64_t ReadNode(const v1::Node& node) {
  int64_t sum = static_cast<int64_t>(node.name().size());
  if (node.has_call()) sum += node.call().args_size();
  if (node.has_tensor()) sum += node.tensor().sizes_size();
  return sum;
}

void BM_ParseWhole(benchmark::State& state) {
  const v1::LowerRequest request = MakeBlockProgram(state.range(0));
  std::string bytes;
  request.SerializeToString(&bytes);
  int64_t read = 0;
  for (auto _ : state) {
    google::protobuf::Arena arena(RequestArenaOptions(bytes.size()));
    const v1::LowerRequest* parsed = ParseOnArena(bytes, &arena, state);
    if (parsed == nullptr) return;
    for (const v1::Method& method : parsed->program().methods())
      for (const v1::Node& node : method.nodes()) read += ReadNode(node);
  }
  benchmark::DoNotOptimize(read);
  SetNodeCounters(state, request.program().methods(0).nodes_size());
}
BENCHMARK(BM_ParseWhole)->Apply(LargeSizes);

// Calls `fn(bytes)` with the bytes of each occurrence of the message field
// `field` in the message `message`; false when the wire form is malformed.
template <typename Fn>
bool ForEachMessageField(std::string_view message, int field, Fn&& fn) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(
      reinterpret_cast<const uint8_t*>(message.data()),
      static_cast<int>(message.size()));
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) != field ||
        WireFormatLite::GetTagWireType(tag) !=
            WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!WireFormatLite::SkipField(&in, tag)) return false;
      continue;
    }
    uint32_t length = 0;
    if (!in.ReadVarint32(&length)) return false;
    const void* data = "";  // an empty message may end the buffer
    int available = 0;
    if (length > 0 && (!in.GetDirectBufferPointer(&data, &available) ||
                       static_cast<uint32_t>(available) < length))
      return false;
    fn(std::string_view(static_cast<const char*>(data), length));
    in.Skip(static_cast<int>(length));
  }
  return in.ConsumedEntireMessage();
}

void BM_ParseNodeByNode(benchmark::State& state) {
  const v1::LowerRequest request = MakeBlockProgram(state.range(0));
  std::string bytes;
  request.SerializeToString(&bytes);
  // LowerRequest.program, Program.methods, Method.nodes.
  constexpr int kProgram = 1, kMethods = 1, kNodes = 2, kNodesPerReset = 256;
  std::vector<char> block(256 << 10);
  int64_t read = 0;
  for (auto _ : state) {
    google::protobuf::ArenaOptions options;
    options.initial_block = block.data();
    options.initial_block_size = block.size();
    google::protobuf::Arena arena(options);
    int parsed = 0;
    bool ok = true;
    auto node = [&](std::string_view wire) {
      auto* n = google::protobuf::Arena::CreateMessage<v1::Node>(&arena);
      ok = n->ParseFromArray(wire.data(), static_cast<int>(wire.size())) && ok;
      read += ReadNode(*n);
      if (++parsed % kNodesPerReset == 0) arena.Reset();
    };
    auto method = [&](std::string_view wire) {
      ok = ForEachMessageField(wire, kNodes, node) && ok;
    };
    auto program = [&](std::string_view wire) {
      ok = ForEachMessageField(wire, kMethods, method) && ok;
    };
    ok = ForEachMessageField(bytes, kProgram, program) && ok;
    if (!ok) {
      state.SkipWithError("the request does not parse");
      return;
    }
  }
  benchmark::DoNotOptimize(read);
  SetNodeCounters(state, request.program().methods(0).nodes_size());
}
BENCHMARK(BM_ParseNodeByNode)->Apply(LargeSizes);

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  // --keep-freed-memory is this program's; the rest are Google Benchmark's.
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--keep-freed-memory") == 0) {
      if (!ferry::KeepFreedMemory()) {
        std::fputs("--keep-freed-memory: the allocator is not jemalloc\n",
                   stderr);
        return 2;
      }
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
