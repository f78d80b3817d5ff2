// The pipeline driver: the stages it advertises are the stages it runs.
#include "passes/pipeline.h"

#include <string>
#include <vector>

#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
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

}  // namespace
}  // namespace ferry
