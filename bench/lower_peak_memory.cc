// Peak memory of ONE in-process Lower per process, per node and per wire byte
// of the request (issue 13: at most 1 KB per node at 1M nodes).
//
//   build/bin/ferry_lower_peak_memory --nodes 1000000
//
// The request is bench/block_program.h's, built and serialized first; then
// the builder is freed and the process's peak RSS (VmHWM) is reset (Linux's
// /proc/self/clear_refs "5"), so that each figure is the peak above what the
// process held with only the wire bytes in memory:
//   parse   the binary request parsed on an arena (ferryd parses onto the
//           heap, through gRPC's deserializer)
//   lower   the peak during ferry::Lower of the parsed request, which frees
//           the request once it has read it (as ferryd does); a line per
//           stage shows where the peak is reached (freed memory goes back
//           to the system then, ReleaseFreedMemory, as in ferryd)
//   write   the response's wire form written straight from the IR, which
//           it frees as it goes (AppendProgramWire, as ferryd answers)
// Each phase's figure is the high-water mark so far, so "write" is the peak
// of the whole path (bytes in -> five passes -> bytes out).
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "bench/block_program.h"
#include "ferry/v1/program.pb.h"
#include "google/protobuf/arena.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/wire_writer.h"
#include "server/allocator.h"

namespace ferry {
namespace {

// A line "Key:   N kB" of /proc/self/status, in bytes; -1 when unreadable.
int64_t StatusBytes(std::string_view key) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(key, 0) != 0 || line.size() <= key.size() ||
        line[key.size()] != ':')
      continue;
    int64_t kb = 0;
    std::string_view rest = std::string_view(line).substr(key.size() + 1);
    while (!rest.empty() && (rest.front() == ' ' || rest.front() == '\t'))
      rest.remove_prefix(1);
    rest = rest.substr(0, rest.find(' '));
    auto [end, error] =
        std::from_chars(rest.data(), rest.data() + rest.size(), kb);
    return error == std::errc() ? kb * 1024 : -1;
  }
  return -1;
}

// Resets VmHWM to the current resident set; false where the kernel refuses.
bool ResetPeak() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return static_cast<bool>(clear);
}

int Run(int64_t target) {
  std::string bytes;
  int64_t nodes = 0;
  {
    const v1::LowerRequest request = MakeBlockProgram(target);
    nodes = request.program().methods(0).nodes_size();
    request.SerializeToString(&bytes);
  }
  const bool reset = ResetPeak();
  const int64_t base = StatusBytes("VmRSS");
  const int64_t base_peak = StatusBytes("VmHWM");
  std::printf("sizeof Node %zu, Argument %zu, TensorSpec %zu\n", sizeof(Node),
              sizeof(Argument), sizeof(TensorSpec));
  std::printf("nodes %lld, wire bytes %zu, resident before %.1f MiB%s\n",
              static_cast<long long>(nodes), bytes.size(), base / 1048576.0,
              reset ? "" : " (peak reset refused: figures include the build)");
  auto report = [&](const char* phase) {
    const int64_t grown = StatusBytes("VmHWM") - (reset ? base : base_peak);
    std::printf("%-18s peak +%8.1f MiB  %7.0f B/node  %6.1f B/wire byte\n",
                phase, grown / 1048576.0, static_cast<double>(grown) / nodes,
                static_cast<double>(grown) / static_cast<double>(bytes.size()));
  };
  // As ferryd does, Lower releases the request (here, its arena) once it
  // has read it (after import and validation), before the passes run.
  std::optional<absl::StatusOr<LowerResult>> result;
  {
    auto arena = std::make_unique<google::protobuf::Arena>();
    auto* parsed =
        google::protobuf::Arena::CreateMessage<v1::LowerRequest>(arena.get());
    bool bare = false;
    if (!ParseRequest(bytes, FileFormat::kBinary, "bench", parsed, &bare)
             .ok()) {
      std::fprintf(stderr, "parse failed\n");
      return 1;
    }
    report("parse");
    // Each stage's high-water mark, so that the stage that sets the peak is
    // the one to shrink.
    auto stage_peak = [&](const StageEvent& event) {
      if (!event.finished) return;
      const std::string label = std::string("  ").append(event.stage);
      report(label.c_str());
    };
    result.emplace(Lower(*parsed, {}, {}, {}, {}, {}, stage_peak, [&arena] {
      arena.reset();
      ReleaseFreedMemory();
    }));
  }
  if (!result->ok() || !(*result)->ok) {
    std::fprintf(stderr, "lowering failed\n");
    return 1;
  }
  report("lower");
  // As ferryd answers: the wire form written straight from the IR, which
  // is freed as it is written.
  std::string response;
  if (!AppendProgramWire(std::move((*result)->program), response).ok()) {
    std::fprintf(stderr, "writing the wire form failed\n");
    return 1;
  }
  report("write");
  std::printf("response bytes %zu\n", response.size());
  return 0;
}

}  // namespace
}  // namespace ferry

int main(int argc, char** argv) {
  int64_t nodes = 1000000;
  for (int i = 1; i < argc; ++i) {
    std::string_view arg = argv[i];
    std::string_view value;
    if (arg.rfind("--nodes=", 0) == 0) {
      value = arg.substr(8);
    } else if (arg == "--nodes" && i + 1 < argc) {
      value = argv[++i];
    } else {
      std::fprintf(stderr, "usage: %s [--nodes N]\n", argv[0]);
      return 2;
    }
    auto [end, error] =
        std::from_chars(value.data(), value.data() + value.size(), nodes);
    if (error != std::errc() || end != value.data() + value.size() ||
        nodes < 10) {
      std::fprintf(stderr, "--nodes: a whole number of at least 10\n");
      return 2;
    }
  }
  return ferry::Run(nodes);
}
