// Import/export round trips, file formats and hostile input.
#include "passes/proto_io.h"

#include <filesystem>
#include <random>
#include <set>
#include <sstream>

#include "absl/strings/ascii.h"
#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "gtest/gtest.h"
#include "passes/pipeline.h"
#include "tests/support/files.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing_util::ReadFile;

std::vector<fs::path> ProgramFiles() {
  std::vector<fs::path> files;
  const fs::path root(FERRY_SOURCE_DIR);
  for (const char* dir : {"examples", "tests/conformance"})
    for (const auto& e : fs::recursive_directory_iterator(root / dir))
      // expected_diagnostics.textproto holds a CheckReport, not a program.
      if (e.path().extension() == ".textproto" &&
          e.path().filename() != "expected_diagnostics.textproto")
        files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Reads one of ProgramFiles() (a request or a bare program).
bool ReadProgramFile(const fs::path& file, v1::LowerRequest* request) {
  bool bare = false;
  return ReadRequestFile(file.string(), FileFormat::kUnknown, request, &bare)
      .ok();
}

TEST(ProtoIo, EveryExampleAndTestProgramRoundTripsByteIdentically) {
  std::vector<fs::path> files = ProgramFiles();
  ASSERT_GT(files.size(), 50u);
  for (const fs::path& file : files) {
    v1::LowerRequest request;
    ASSERT_TRUE(ReadProgramFile(file, &request)) << file;
    Diagnostics d;
    Program program = ImportProgram(request.program(), d);
    if (d.HasErrors()) continue;  // the invalid-input cases
    v1::Program exported;
    ExportProgram(program, &exported);
    EXPECT_EQ(ToText(exported), ToText(request.program())) << file;
  }
}

// The consuming export (the service's) writes the same bytes as the const
// one, for every program that lowers, and leaves the program empty.
TEST(ProtoIo, ConsumingExportWritesTheSameBytesAndFreesTheProgram) {
  int lowered = 0;
  for (const fs::path& file : ProgramFiles()) {
    v1::LowerRequest request;
    ASSERT_TRUE(ReadProgramFile(file, &request)) << file;
    absl::StatusOr<LowerResult> result = Lower(request);
    if (!result.ok() || !result->ok) continue;
    ++lowered;
    v1::Program kept;
    ExportProgram(result->program, &kept);
    v1::Program consumed;
    ExportProgram(std::move(result->program), &consumed);
    EXPECT_EQ(SerializeProgram(consumed, FileFormat::kBinary),
              SerializeProgram(kept, FileFormat::kBinary))
        << file;
    EXPECT_EQ(ToText(consumed), ToText(kept)) << file;
    EXPECT_TRUE(result->program.methods.empty() &&
                result->program.modules.empty() &&
                result->program.constants.empty())
        << file;
  }
  EXPECT_GT(lowered, 30);
}

TEST(ProtoIo, EveryDTypeMapsToTheWireAndBack) {
  // Each IR dtype has a wire value of its own that reads back as it.
  std::set<int> wire;
  for (int d = 0; d <= static_cast<int>(kLastDType); ++d) {
    const DType dtype = static_cast<DType>(d);
    const v1::DType proto = DTypeToProto(dtype);
    EXPECT_TRUE(v1::DType_IsValid(proto)) << DTypeName(dtype);
    // The same name on both sides ("f32" is F32).
    const std::string name =
        dtype == DType::kInvalid
            ? "DTYPE_UNSPECIFIED"
            : absl::AsciiStrToUpper(std::string(DTypeName(dtype)));
    EXPECT_EQ(v1::DType_Name(proto), name);
    EXPECT_EQ(DTypeFromProto(proto), dtype) << DTypeName(dtype);
    wire.insert(proto);
  }
  EXPECT_EQ(static_cast<int>(wire.size()), v1::DType_ARRAYSIZE);
  // Values the wire does not define are invalid.
  EXPECT_EQ(DTypeFromProto(-1), DType::kInvalid);
  EXPECT_EQ(DTypeFromProto(v1::DType_ARRAYSIZE), DType::kInvalid);
}

TEST(ProtoIo, BinaryAndJsonReadBackTheSameRequest) {
  const fs::path file = fs::path(FERRY_SOURCE_DIR) /
                        "tests/conformance/B1_transposed_parameter/"
                        "request.textproto";
  v1::LowerRequest request;
  bool bare = true;
  ASSERT_TRUE(
      ReadRequestFile(file.string(), FileFormat::kUnknown, &request, &bare)
          .ok());
  EXPECT_FALSE(bare);
  std::string binary;
  ASSERT_TRUE(request.SerializeToString(&binary));
  v1::LowerRequest from_binary;
  ASSERT_TRUE(
      ParseRequest(binary, FileFormat::kBinary, "b", &from_binary, &bare).ok());
  EXPECT_FALSE(bare);
  EXPECT_EQ(ToText(from_binary), ToText(request));
  // A bare program in binary form.
  std::string program_binary =
      SerializeProgram(request.program(), FileFormat::kBinary);
  ASSERT_TRUE(ParseRequest(program_binary, FileFormat::kBinary, "p",
                           &from_binary, &bare)
                  .ok());
  EXPECT_TRUE(bare);
  EXPECT_EQ(ToText(from_binary.program()), ToText(request.program()));
  std::string json = SerializeProgram(request.program(), FileFormat::kJson);
  ASSERT_TRUE(
      ParseRequest(json, FileFormat::kJson, "j", &from_binary, &bare).ok());
  EXPECT_TRUE(bare);
  EXPECT_EQ(ToText(from_binary.program()), ToText(request.program()));
}

TEST(ProtoIo, HostileInputIsAnErrorNotACrash) {
  v1::LowerRequest request;
  bool bare = false;
  EXPECT_FALSE(ParseRequest("", FileFormat::kText, "e", &request, &bare).ok());
  EXPECT_FALSE(
      ParseRequest("  \n", FileFormat::kJson, "e", &request, &bare).ok());
  EXPECT_FALSE(ParseRequest("program { methods {", FileFormat::kText, "t",
                            &request, &bare)
                   .ok());
  std::string valid =
      ReadFile(fs::path(FERRY_SOURCE_DIR) / "examples/two_delegates.textproto");
  v1::LowerRequest parsed;
  ASSERT_TRUE(ParseRequest(valid, FileFormat::kText, "v", &parsed, &bare).ok());
  std::string binary;
  parsed.SerializeToString(&binary);
  // Every truncation and random garbage: parse or fail, then lower or
  // report, never crash.
  std::mt19937 rng(7);
  for (size_t cut = 1; cut < binary.size(); cut += 7) {
    std::string truncated = binary.substr(0, cut);
    if (ParseRequest(truncated, FileFormat::kBinary, "cut", &request, &bare)
            .ok())
      (void)Lower(request);
  }
  for (int round = 0; round < 300; ++round) {
    std::string garbage = binary;
    for (int k = 0; k < 4; ++k)
      garbage[rng() % garbage.size()] = static_cast<char>(rng());
    if (ParseRequest(garbage, FileFormat::kBinary, "g", &request, &bare).ok())
      (void)Lower(request);
  }
}

}  // namespace
}  // namespace ferry
