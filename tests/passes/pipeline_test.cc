// The pipeline driver: the stages it advertises are the stages it runs, and
// a caller that frees the request once the pipeline has read it gets the
// same result.
#include "passes/pipeline.h"

#include <memory>
#include <string>
#include <vector>

#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;

// PipelinePassNames() is what GetCapabilities lists; a lowering that runs
// to the end must report exactly those stages, in that order.
TEST(PipelineTest, PassNamesAreTheStagesALoweringReports) {
  v1::LowerRequest request;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "program {" +
          MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                              Call("u", "aten::cos", {"t"}) + Output({"u"})) +
          "} options { partitioner { tag_targets { key: 'd0' value: "
          "'cuda:0' } } }",
      &request));
  absl::StatusOr<LowerResult> result = Lower(request);
  ASSERT_TRUE(result.ok()) << result.status();
  ASSERT_TRUE(result->ok) << FormatDiagnosticsText(result->diagnostics, "f");
  EXPECT_EQ(result->stats.delegates, 1);
  std::vector<std::string> reported;
  for (const PassTiming& pass : result->stats.passes)
    reported.push_back(pass.name);
  EXPECT_EQ(reported, PipelinePassNames());
  EXPECT_EQ(PipelinePassNames(),
            (std::vector<std::string>{"import", "validate", "normalize_layout",
                                      "partition", "lower", "place_and_copy",
                                      "plan_memory"}));
}

// A delegate reads the parameter x, which is copied to the device on every
// call: place_and_copy warns, a diagnostic made after the request was
// released, on a node with a source.
constexpr char kPerCallCopy[] = R"(
program {
  methods {
    name: "forward"
    nodes { name: "x" input { kind: PARAMETER target: "w" } tensor { dtype: F32 sizes: 4 }
            source { file: "model.py" line: 3 name: "x" } }
    nodes { name: "t" call { op: "aten::sin" args { value: "x" } }
            tensor { dtype: F32 sizes: 4 } delegation_tag: "d0"
            source { file: "model.py" line: 4 name: "sin" } }
    nodes { name: "u" call { op: "aten::cos" args { value: "t" } }
            tensor { dtype: F32 sizes: 4 } source { file: "model.py" line: 5 } }
    nodes { name: "out" output { values { value: "u" } } }
  }
  constants { name: "w" spec { dtype: F32 sizes: 4 } }
}
options {
  partitioner { tag_targets { key: "d0" value: "cuda:0" } }
}
)";

TEST(PipelineTest, ReleasingTheRequestAfterValidationChangesNothing) {
  v1::LowerRequest kept;
  ASSERT_TRUE(
      google::protobuf::TextFormat::ParseFromString(kPerCallCopy, &kept));
  absl::StatusOr<LowerResult> expected = Lower(kept);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_TRUE(expected->ok)
      << FormatDiagnosticsText(expected->diagnostics, "m");

  // The request is destroyed when the pipeline says it has read it (the
  // sanitizer build catches any later read); that is after validation and
  // before the first pass.
  auto owned = std::make_unique<v1::LowerRequest>(kept);
  std::vector<std::string> events;
  int released = 0;
  absl::StatusOr<LowerResult> result = Lower(
      *owned, {}, {}, {}, {}, {},
      [&](const StageEvent& event) {
        if (!event.finished) events.push_back(std::string(event.stage));
      },
      [&] {
        ++released;
        events.push_back("released");
        owned.reset();
      });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(released, 1);
  EXPECT_EQ(events,
            (std::vector<std::string>{"import", "validate", "released",
                                      "normalize_layout", "partition", "lower",
                                      "place_and_copy", "plan_memory"}));
  ASSERT_TRUE(result->ok);
  EXPECT_EQ(FormatDiagnosticsText(result->diagnostics, "m"),
            FormatDiagnosticsText(expected->diagnostics, "m"));
  // The pass's warning got its node's source from the IR.
  bool sourced = false;
  for (const Diagnostic& d : result->diagnostics.items())
    sourced |= d.code == codes::kPerCallConstantCopy &&
               d.source.file == "model.py" && d.source.line == 3;
  EXPECT_TRUE(sourced) << FormatDiagnosticsText(result->diagnostics, "m");
}

// A request that fails validation is read to the end of validation: the
// pipeline stops before it would release it.
TEST(PipelineTest, AnInvalidRequestIsNotReleased) {
  v1::LowerRequest request;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "program {" +
          MethodText(
              "f", Input("a") + Call("t", "aten::sin", {"b"}) + Output({"t"})) +
          "}",
      &request));
  int released = 0;
  absl::StatusOr<LowerResult> result =
      Lower(request, {}, {}, {}, {}, {}, {}, [&] { ++released; });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->ok);
  EXPECT_EQ(released, 0);
}

}  // namespace
}  // namespace ferry
