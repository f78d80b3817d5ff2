// `ferry verify` as a user runs it: exit codes and report formats.
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

#include "gtest/gtest.h"
#include "runtime/verify.h"

namespace ferry::testing {
namespace {

struct ToolResult {
  int exit_code = -1;
  std::string output;  // stdout
};

ToolResult RunFerry(const std::string& args) {
  const std::string command =
      std::string(FERRY_TOOL) + " " + args + " 2>/dev/null";
  ToolResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  std::array<char, 4096> buffer;
  size_t n;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0)
    result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

const std::string kSource = FERRY_SOURCE_DIR;
const std::string kPrograms = kSource + "/tests/runtime/programs/";

TEST(CmdVerifyTest, MatchingOutputsExitZero) {
  ToolResult r =
      RunFerry("verify --device=sim " + kSource +
               "/tests/conformance/A1_single_delegate/request.textproto");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.output,
            "verify on sim: OK (1 output matches)\n"
            "  forward output 0 (f32): match; max abs error 0, max rel error 0 "
            "(atol 1e-05, "
            "rtol 1e-05)\n");
  ToolResult json =
      RunFerry("verify --device=sim --seed 7 --report=json " + kSource +
               "/tests/conformance/A1_single_delegate/request.textproto");
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_EQ(
      json.output.rfind(
          "{\"ok\":true,\"device\":\"sim\",\"error\":\"\",\"outputs\":[", 0),
      0u)
      << json.output;
}

TEST(CmdVerifyTest, MismatchAndRuntimeErrorsExitOne) {
  ToolResult mismatch = RunFerry("verify --device=sim --original " + kPrograms +
                                 "b2_original.textproto " + kPrograms +
                                 "b2_lowered_no_copy_after_write.textproto");
  EXPECT_EQ(mismatch.exit_code, 1);
  EXPECT_EQ(mismatch.output.rfind("verify on sim: MISMATCH\n", 0), 0u)
      << mismatch.output;
  ToolResult error = RunFerry("verify --device=sim --original=" + kPrograms +
                              "b7_original.textproto " + kPrograms +
                              "b7_lowered_cpu_target_copies.textproto");
  EXPECT_EQ(error.exit_code, 1);
  EXPECT_NE(error.output.find("node 'a_h2d': H2D copy targets cpu"),
            std::string::npos)
      << error.output;
  ToolResult fixed =
      RunFerry("verify --device=sim --original " + kPrograms +
               "b7_original.textproto " + kPrograms + "b7_lowered.textproto");
  EXPECT_EQ(fixed.exit_code, 0) << fixed.output;
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
