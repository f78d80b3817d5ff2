// ferry_fuzz_seeds SOURCE_ROOT OUT_DIR: writes the fuzzers' seed inputs.
//  OUT_DIR/pipeline/, OUT_DIR/verify/: every
//  tests/conformance/*/request.textproto
//    and examples/*.textproto as a binary ferry.v1.LowerRequest;
//  OUT_DIR/node/: every node of those requests' methods, as a binary
//    ferry.v1.Node;
//  OUT_DIR/schema/: every schema string of the operator catalogue
//    (passes/ops/catalogue.h).
// scripts/fuzz runs it before each fuzzing session.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "passes/ops/catalogue.h"
#include "passes/proto_io.h"

namespace {

namespace fs = std::filesystem;

bool WriteFile(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  return static_cast<bool>(out);
}

// "tests/conformance/A1_x/request.textproto" -> "conformance_A1_x".
std::string SeedName(const fs::path& file) {
  if (file.filename() == "request.textproto")
    return "conformance_" + file.parent_path().filename().string();
  return "example_" + file.stem().string();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ferry_fuzz_seeds SOURCE_ROOT OUT_DIR\n");
    return 2;
  }
  const fs::path root = argv[1], out = argv[2];
  for (const char* target : {"schema", "pipeline", "verify", "node"})
    fs::create_directories(out / target);

  std::vector<fs::path> requests;
  for (const auto& dir : fs::directory_iterator(root / "tests/conformance"))
    if (fs::exists(dir.path() / "request.textproto"))
      requests.push_back(dir.path() / "request.textproto");
  for (const auto& file : fs::directory_iterator(root / "examples"))
    if (file.path().extension() == ".textproto") requests.push_back(file);

  int written = 0, failed = 0;
  for (const fs::path& file : requests) {
    ferry::v1::LowerRequest request;
    bool bare = false;
    absl::Status status = ferry::ParseRequest(
        ferry::ReadFile(file).value_or(""), ferry::FileFormat::kText,
        file.string(), &request, &bare);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", std::string(status.message()).c_str());
      ++failed;
      continue;
    }
    std::string bytes;
    request.SerializeToString(&bytes);
    for (const char* target : {"pipeline", "verify"})
      written += WriteFile(out / target / SeedName(file), bytes) ? 1 : 0;
    int node = 0;
    for (const ferry::v1::Method& method : request.program().methods())
      for (const ferry::v1::Node& n : method.nodes())
        written +=
            WriteFile(
                out / "node" / (SeedName(file) + "_" + std::to_string(node++)),
                n.SerializeAsString())
                ? 1
                : 0;
  }

  std::vector<std::string> schemas;
  for (const ferry::OpFamily& family : ferry::OpFamilies())
    for (const ferry::OpDef& op : family.ops) schemas.emplace_back(op.schema);
  for (size_t i = 0; i < schemas.size(); ++i)
    written += WriteFile(out / "schema" / ("registry_" + std::to_string(i)),
                         schemas[i])
                   ? 1
                   : 0;
  std::printf(
      "%d seed files in %s (%zu requests, %zu schemas, %d unreadable)\n",
      written, out.c_str(), requests.size(), schemas.size(), failed);
  return failed == 0 && !schemas.empty() ? 0 : 1;
}
