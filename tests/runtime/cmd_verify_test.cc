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

// The resource limits verification is held to are flags of the tool, as
// they are of ferryd: A1 takes 1,408 bytes (both runs) and 64 per tensor.
TEST(CmdVerifyTest, LimitsAreFlags) {
  const std::string a1 =
      " " + kSource + "/tests/conformance/A1_single_delegate/request.textproto";
  auto with_stderr = [](const std::string& args) {
    return testing_util::RunCommand(std::string(FERRY_TOOL) + " " + args +
                                    " 2>&1");
  };
  ToolResult over =
      with_stderr("verify --device=sim --max-verify-bytes=1kB" + a1);
  EXPECT_EQ(over.exit_code, 1);
  EXPECT_NE(over.out.find("verification needs 1408 bytes"), std::string::npos)
      << over.out;
  EXPECT_NE(over.out.find("over max_verify_bytes (1000)"), std::string::npos)
      << over.out;
  EXPECT_EQ(
      RunFerry("verify --device=sim --max-verify-bytes=1408" + a1).exit_code,
      0);
  ToolResult tensor =
      with_stderr("verify --device=sim --max-tensor-bytes 63" + a1);
  EXPECT_EQ(tensor.exit_code, 1);
  EXPECT_NE(tensor.out.find("needs 64 bytes, over max_tensor_bytes (63)"),
            std::string::npos)
      << tensor.out;
  EXPECT_EQ(
      RunFerry("verify --device=sim --max-tensor-bytes=64B" + a1).exit_code, 0);
  ToolResult bad =
      with_stderr("verify --device=sim --max-verify-bytes=lots" + a1);
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.out.find("--max-verify-bytes needs a byte size"),
            std::string::npos)
      << bad.out;
  EXPECT_EQ(RunFerry("verify --device=sim --max-verify-bytes=0" + a1).exit_code,
            2);
  // A ferryd's limits are its own.
  ToolResult remote =
      with_stderr("verify --server 127.0.0.1:1 --max-verify-bytes=1GiB" + a1);
  EXPECT_EQ(remote.exit_code, 2);
  EXPECT_NE(remote.out.find("run in-process only"), std::string::npos)
      << remote.out;
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
