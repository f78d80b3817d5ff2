// `ferry verify` as a user runs it: exit codes and report formats.
#include <string>

#include "gtest/gtest.h"
#include "runtime/verify.h"
#include "tests/support/process.h"

namespace ferry::testing {
namespace {

using ToolResult = testing_util::CommandResult;

ToolResult RunFerry(const std::string& args) {
  return testing_util::RunCommand(std::string(FERRY_TOOL) + " " + args +
                                  " 2>/dev/null");
}

const std::string kSource = FERRY_SOURCE_DIR;
const std::string kPrograms = kSource + "/tests/runtime/programs/";

TEST(CmdVerifyTest, MatchingOutputsExitZero) {
  ToolResult r =
      RunFerry("verify --device=sim " + kSource +
               "/tests/conformance/A1_single_delegate/request.textproto");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.out,
            "verify on sim: OK (1 output matches)\n"
            "  forward output 0 (f32[4,4]): match (greatest absolute "
            "difference 0, relative 0; atol 1e-05, rtol 1e-05)\n");
  ToolResult json =
      RunFerry("verify --device=sim --seed 7 --report=json " + kSource +
               "/tests/conformance/A1_single_delegate/request.textproto");
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_EQ(
      json.out.rfind(
          "{\"ok\":true,\"device\":\"sim\",\"error\":\"\",\"outputs\":[", 0),
      0u)
      << json.out;
}

TEST(CmdVerifyTest, MismatchAndRuntimeErrorsExitOne) {
  ToolResult mismatch = RunFerry("verify --device=sim --original " + kPrograms +
                                 "b2_original.textproto " + kPrograms +
                                 "b2_lowered_no_copy_after_write.textproto");
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_EQ(mismatch.out.rfind("verify on sim: MISMATCH in 1 of 1 output (", 0),
            0u)
      << mismatch.out;
  ToolResult error = RunFerry("verify --device=sim --original=" + kPrograms +
                              "b7_original.textproto " + kPrograms +
                              "b7_lowered_cpu_target_copies.textproto");
  EXPECT_EQ(error.exit_code, 1);
  EXPECT_NE(error.out.find("node 'a_h2d': H2D copy targets cpu"),
            std::string::npos)
      << error.out;
  ToolResult fixed =
      RunFerry("verify --device=sim --original " + kPrograms +
               "b7_original.textproto " + kPrograms + "b7_lowered.textproto");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.out;
}

TEST(CmdVerifyTest, CompileErrorsExitOne) {
  EXPECT_EQ(
      RunFerry("verify --device=sim " + kSource +
               "/tests/conformance/E02_unknown_operator/request.textproto")
          .exit_code,
      1);
}

TEST(CmdVerifyTest, UsageAndUnreadableInputExitTwo) {
  EXPECT_EQ(RunFerry("verify").exit_code, 2);
  EXPECT_EQ(RunFerry("verify --device=gpu x.textproto").exit_code, 2);
  EXPECT_EQ(RunFerry("verify --seed=abc x.textproto").exit_code, 2);
  EXPECT_EQ(RunFerry("verify /nonexistent/x.textproto").exit_code, 2);
}

// Exit 3 with or without a GPU: no machine has a cuda:15.
TEST(CmdVerifyTest, MissingDeviceExitsThree) {
  EXPECT_EQ(RunFerry("verify --device=cuda --tag-target=d0=cuda:15 " + kSource +
                     "/tests/conformance/A1_single_delegate/request.textproto")
                .exit_code,
            3);
}

}  // namespace
}  // namespace ferry::testing
