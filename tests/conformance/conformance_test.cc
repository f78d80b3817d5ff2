// Runs every conformance case (tests/conformance/<ID>_<slug>/):
//  - lowers request.textproto and compares the program with expected.textproto
//    and the diagnostics (severity, code, nodes) with
//    expected_diagnostics.textproto;
//  - checks the copy and delegate counts on the request's "# expect:" line,
//    which come from CASES.md, not from the implementation;
//  - determinism (twice, same bytes) and idempotence (lowering the output
//    again with the same options changes nothing);
//  - after every pass, the checker of what that pass establishes (checks.h);
//  - where the case computes, verification on the simulated device against
//    eager host execution of the original program.
// FERRY_UPDATE_GOLDENS=1 rewrites the golden files (review the diff!).
#include <filesystem>
#include <map>
#include <sstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "ferry/file.h"
#include "ferry/v1/program.pb.h"
#include "ferry/v1/report.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/checks.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"
#include "tests/support/files.h"
#include "tests/support/golden.h"
#include "tests/support/programs.h"
#ifdef FERRY_HAVE_RUNTIME
#include "runtime/verify.h"
#endif

namespace ferry {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> CaseNames() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(FERRY_CONFORMANCE_DIR))
    if (entry.is_directory() && fs::exists(entry.path() / "request.textproto"))
      names.push_back(entry.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

using testing_util::CountsText;
using testing_util::ReadFile;
using testing_util::WriteFile;

bool Updating() { return testing_util::UpdatingGoldens(); }

// "h2d=2 d2h=1 delegates=1" or "error".
std::map<std::string, std::string> Expectations(const std::string& request) {
  std::map<std::string, std::string> out;
  std::istringstream lines(request);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("# expect:", 0) != 0) continue;
    for (absl::string_view token :
         absl::StrSplit(line.substr(9), ' ', absl::SkipEmpty())) {
      std::vector<std::string> kv = absl::StrSplit(token, '=');
      out[kv[0]] = kv.size() > 1 ? kv[1] : "";
    }
  }
  return out;
}

// The diagnostics as the goldens hold them: severity, code and nodes only
// (the wording of messages and hints may change without a new golden), in
// the text form of a CheckReport whose `ok` is left unset.
std::string CompactDiagnostics(const Diagnostics& diagnostics) {
  v1::CheckReport report;
  DiagnosticsToProto(diagnostics, report.mutable_diagnostics());
  for (v1::Diagnostic& diagnostic : *report.mutable_diagnostics()) {
    diagnostic.clear_message();
    diagnostic.clear_hint();
    diagnostic.clear_method();
  }
  std::string text;
  google::protobuf::TextFormat::PrintToString(report, &text);
  return text;
}

std::string LoweredText(const LowerResult& result) {
  v1::Program proto;
  ExportProgram(result.program, &proto);
  return ToText(proto);
}

// Lowers `request`, running each pass's checker (checks.h) after it; the
// names of the passes checked go to `checked`.
absl::StatusOr<LowerResult> LowerChecked(const v1::LowerRequest& request,
                                         std::vector<std::string>& checked) {
  return Lower(request, {}, {}, {}, {},
               [&](std::string_view pass, const Program& program,
                   const LowerOptions& options) {
                 checked.emplace_back(pass);
                 return CheckEstablished(pass, program, options);
               });
}

const std::vector<std::string> kCheckedPasses = {
    "normalize_layout", "partition", "lower", "place_and_copy", "plan_memory"};

class ConformanceTest : public testing::TestWithParam<std::string> {};

TEST_P(ConformanceTest, MatchesGoldens) {
  const fs::path dir = fs::path(FERRY_CONFORMANCE_DIR) / GetParam();
  const std::string request_text = ReadFile(dir / "request.textproto");
  const std::map<std::string, std::string> expect = Expectations(request_text);
  ASSERT_FALSE(expect.empty()) << "request has no '# expect:' line";

  v1::LowerRequest request;
  bool bare = false;
  ASSERT_TRUE(
      ParseRequest(request_text, FileFormat::kText, "request", &request, &bare)
          .ok());
  std::vector<std::string> checked;
  absl::StatusOr<LowerResult> result = LowerChecked(request, checked);
  ASSERT_TRUE(result.ok()) << result.status();

  // Diagnostics.
  const std::string diagnostics = CompactDiagnostics(result->diagnostics);
  const fs::path diagnostics_path = dir / "expected_diagnostics.textproto";
  if (Updating()) {
    if (result->diagnostics.empty())
      fs::remove(diagnostics_path);
    else
      WriteFile(diagnostics_path, diagnostics);
  }
  const std::string expected_diagnostics =
      fs::exists(diagnostics_path) ? ReadFile(diagnostics_path) : "";
  EXPECT_EQ(diagnostics, expected_diagnostics)
      << FormatDiagnosticsText(result->diagnostics, GetParam());

  if (expect.count("error")) {
    EXPECT_FALSE(result->ok) << "expected the request to be refused";
    EXPECT_TRUE(result->diagnostics.HasErrors());
    return;
  }
  ASSERT_TRUE(result->ok) << FormatDiagnosticsText(result->diagnostics,
                                                   GetParam());
  EXPECT_EQ(checked, kCheckedPasses);

  // Counts from CASES.md.
  const LowerStats& s = result->stats;
  auto check = [&](const char* key, int64_t actual) {
    auto it = expect.find(key);
    if (it == expect.end()) return;
    int64_t want = 0;
    ASSERT_TRUE(absl::SimpleAtoi(it->second, &want));
    EXPECT_EQ(actual, want) << key;
  };
  check("h2d", s.h2d_copies);
  check("d2h", s.d2h_copies);
  check("load", s.load_time_copies);
  check("delegates", s.delegates);
  if (!expect.count("load")) {
    EXPECT_EQ(s.load_time_copies, 0);
  }
  // What the pipeline counted as it placed the copies is what the lowered
  // program holds.
  EXPECT_EQ(CountsText(s), CountsText(CountStats(result->program)));

  // The golden program.
  const std::string lowered = LoweredText(*result);
  const fs::path golden = dir / "expected.textproto";
  if (Updating()) WriteFile(golden, lowered);
  ASSERT_TRUE(fs::exists(golden)) << "missing " << golden;
  EXPECT_EQ(lowered, ReadFile(golden));

  // Determinism: the same input gives the same bytes.
  absl::StatusOr<LowerResult> again = Lower(request);
  ASSERT_TRUE(again.ok() && again->ok);
  v1::Program a, b;
  ExportProgram(result->program, &a);
  ExportProgram(again->program, &b);
  EXPECT_EQ(SerializeProgram(a, FileFormat::kBinary),
            SerializeProgram(b, FileFormat::kBinary));

  // Idempotence: lowering the output again changes nothing.
  v1::LowerRequest second;
  *second.mutable_program() = a;
  *second.mutable_options() = request.options();
  std::vector<std::string> rechecked;
  absl::StatusOr<LowerResult> relowered = LowerChecked(second, rechecked);
  ASSERT_TRUE(relowered.ok()) << relowered.status();
  ASSERT_TRUE(relowered->ok)
      << FormatDiagnosticsText(relowered->diagnostics, "relowered");
  EXPECT_EQ(rechecked, kCheckedPasses);
  EXPECT_EQ(LoweredText(*relowered), lowered) << "not idempotent";

#ifdef FERRY_HAVE_RUNTIME
  // Execution against eager host semantics, on the simulated device.
  Diagnostics import_diagnostics;
  Program original = ImportProgram(request.program(), import_diagnostics);
  VerifyOptions options;
  options.device = VerifyDevice::kSim;
  options.seed = 1;
  absl::StatusOr<VerifyReport> report =
      VerifyPrograms(original, result->program, options);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->ok) << report->Summary();
#endif
}

INSTANTIATE_TEST_SUITE_P(Cases, ConformanceTest, testing::ValuesIn(CaseNames()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace ferry
