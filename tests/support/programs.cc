#include "tests/support/programs.h"

#include <string>

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

}  // namespace ferry::testing_util
