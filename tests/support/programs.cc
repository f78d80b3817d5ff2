#include "tests/support/programs.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/proto_io.h"
#include "passes/validate.h"

namespace ferry::testing_util {

v1::LowerRequest ParseRequestText(std::string_view text) {
  v1::LowerRequest request;
  EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(std::string(text),
                                                            &request))
      << text;
  return request;
}

Program ParseProgramUnvalidated(std::string_view text,
                                Diagnostics* validation) {
  // ParseRequest, as the tool reads a file: a request or a bare program.
  v1::LowerRequest request;
  bool bare = false;
  absl::Status status =
      ParseRequest(text, FileFormat::kText, "test program", &request, &bare);
  EXPECT_TRUE(status.ok()) << status << "\n" << text;
  Diagnostics diagnostics;
  Program program = ImportProgram(request.program(), diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors())
      << FormatDiagnosticsText(diagnostics, "test program");
  if (diagnostics.HasErrors()) return program;
  Diagnostics validated;
  ValidateProgram(program, validated);
  if (validation != nullptr) *validation = std::move(validated);
  return program;
}

Program ParseProgram(std::string_view text) {
  Diagnostics validation;
  Program program = ParseProgramUnvalidated(text, &validation);
  EXPECT_FALSE(validation.HasErrors())
      << FormatDiagnosticsText(validation, "test program");
  return program;
}

LowerOptions ParseOptions(std::string_view text, const Program& program) {
  v1::LowerOptions proto;
  EXPECT_TRUE(
      google::protobuf::TextFormat::ParseFromString(std::string(text), &proto))
      << text;
  Diagnostics diagnostics;
  LowerOptions options = ResolveOptions(proto, program, diagnostics);
  EXPECT_FALSE(diagnostics.HasErrors())
      << FormatDiagnosticsText(diagnostics, "options");
  return options;
}

std::string CountsText(const LowerStats& stats) {
  std::string text = absl::StrCat(
      "h2d ", stats.h2d_copies, " (", stats.h2d_bytes_per_call, " B)\nd2h ",
      stats.d2h_copies, " (", stats.d2h_bytes_per_call, " B)\nat load ",
      stats.load_time_copies, "\ndelegates ", stats.delegates, "\n");
  for (const auto& [device, count] : stats.delegates_per_device)
    absl::StrAppend(&text, "  on ", device, ": ", count, "\n");
  for (const ArenaSummary& a : stats.arenas)
    absl::StrAppend(&text, "arena ", a.method, " ", a.device.ToString(), " ",
                    a.bytes, " B (lower bound ", a.lower_bound_bytes, " B)\n");
  return text;
}

}  // namespace ferry::testing_util
