// `ferry lower|verify --server` against a real ferryd on loopback prints
// byte for byte what the in-process tool prints, with the same exit code,
// on every conformance case and every error case; the exit codes a build
// farm acts on (4 retry later, 5 internal); `ferry --version` agrees with
// `ferryd --version` and GetCapabilities.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "client/tool/commands.h"
#include "client/tool/status_report.h"
#include "ferry/client.h"
#include "ferry/version.h"
#include "gtest/gtest.h"
#include "passes/resource_limits.h"
#include "tests/support/ferryd_process.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;
using testing_util::Process;
using tool::kExitErrors;
using tool::kExitInternal;
using tool::kExitNoDevice;
using tool::kExitOk;
using tool::kExitRetry;
using tool::kExitUsage;

struct ToolRun {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// A scratch directory for one test, removed at its end.
class Scratch {
 public:
  Scratch() {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = fs::temp_directory_path() /
            (std::string("ferry_parity_") + test->name() + "_" +
             std::to_string(::getpid()));
    fs::create_directories(path_);
  }
  ~Scratch() { fs::remove_all(path_); }
  std::string File(const std::string& name) const {
    return (path_ / name).string();
  }
  std::string Write(const std::string& name, const std::string& text) const {
    testing_util::WriteFile(path_ / name, text);
    return File(name);
  }

 private:
  fs::path path_;
};

// Runs a binary with `args`; stdout and stderr apart.
ToolRun RunBinary(const std::string& binary, std::vector<std::string> args,
                  const Scratch& scratch) {
  args.insert(args.begin(), binary);
  const std::string err_path = scratch.File("run.stderr");
  Process process(args, err_path);
  ToolRun run;
  run.out = process.ReadAll();
  run.exit_code = process.WaitForExit(std::chrono::seconds(120));
  run.err = testing_util::ReadFile(err_path);
  return run;
}

ToolRun Ferry(std::vector<std::string> args, const Scratch& scratch) {
  return RunBinary(FERRY_TOOL, std::move(args), scratch);
}

// A ferryd on 127.0.0.1 (port 0) logging into `scratch`, stopped by its
// PID with SIGTERM.
class Ferryd : public testing_util::FerrydProcess {
 public:
  explicit Ferryd(const Scratch& scratch, std::vector<std::string> flags = {})
      : FerrydProcess(FERRYD_PATH, std::move(flags),
                      scratch.File("ferryd.stderr")) {}
};

// Every program the comparison runs: each conformance case's request, each
// example, and error cases beyond them.
std::vector<std::string> ParityInputs(const Scratch& scratch) {
  std::vector<std::string> inputs;
  const fs::path source(FERRY_SOURCE_DIR);
  for (const auto& entry :
       fs::directory_iterator(source / "tests" / "conformance")) {
    fs::path request = entry.path() / "request.textproto";
    if (fs::exists(request)) inputs.push_back(request.string());
  }
  for (const auto& entry : fs::directory_iterator(source / "examples")) {
    if (entry.path().extension() == ".textproto")
      inputs.push_back(entry.path().string());
  }
  std::sort(inputs.begin(), inputs.end());
  // A dangling reference in a bare program.
  inputs.push_back(scratch.Write("dangling.textproto", R"pb(
    methods {
      name: "forward"
      nodes {
        name: "a"
        input { kind: USER_INPUT }
        tensor { dtype: F32 sizes: 4 }
      }
      nodes {
        name: "relu_1"
        call {
          op: "aten::relu_"
          args { value: "missing" }
        }
        tensor { dtype: F32 sizes: 4 }
      }
      nodes {
        name: "output"
        output { values { value: "relu_1" } }
      }
    })pb"));
  // An unknown operator next to a malformed spec and an unknown option.
  inputs.push_back(scratch.Write("unknown_op.textproto", R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "x"
          input { kind: USER_INPUT }
          tensor { dtype: F32 sizes: -3 }
        }
        nodes {
          name: "y"
          call {
            op: "aten::relu_typo"
            args { value: "x" }
          }
          tensor { dtype: F32 sizes: 4 }
        }
        nodes {
          name: "output"
          output { values { value: "y" } }
        }
      }
    }
    options { tag_targets { key: "gpu" value: "tpu:9" } })pb"));
  // Forty errors, one of them on a node with a 3000-character name.
  std::string many = "methods { name: \"forward\"\n";
  for (int i = 0; i < 40; ++i) {
    many += "nodes { name: \"" +
            (i == 0 ? std::string(3000, 'n') : "r" + std::to_string(i)) +
            "\" call { op: \"aten::relu\" args { value: \"missing" +
            std::to_string(i) + "\" } } tensor { dtype: F32 sizes: 4 } }\n";
  }
  many += "nodes { name: \"output\" output { values { value: \"r1\" } } } }\n";
  inputs.push_back(scratch.Write("many_errors.textproto", many));
  // A 4-byte constant declared f32[100000,100000] with strides [0,0]: over
  // max_tensor_bytes, refused with RESOURCE_EXHAUSTED in-process and remote.
  inputs.push_back(scratch.Write("broadcast.textproto", R"pb(
    methods {
      name: "forward"
      nodes {
        name: "w"
        input { kind: PARAMETER target: "w" }
        tensor { dtype: F32 sizes: 100000 sizes: 100000 strides: 0 strides: 0 }
      }
      nodes {
        name: "r"
        call {
          op: "aten::relu"
          args { value: "w" }
        }
        tensor { dtype: F32 sizes: 100000 sizes: 100000 }
      }
      nodes {
        name: "output"
        output { values { value: "r" } }
      }
    }
    constants {
      name: "w"
      spec { dtype: F32 sizes: 100000 sizes: 100000 strides: 0 strides: 0 }
      data: "\000\000\200?"
    })pb"));
  // Unreadable input: exit 2 before any server is asked.
  inputs.push_back(scratch.Write("garbage.textproto", "}}}{{ not a program"));
  inputs.push_back(
      scratch.Write("truncated.pb", std::string("\x0a\x7f\x0a", 3)));
  return inputs;
}

// One command line of the comparison: `ferry ARGS... FILE`, run
// in-process and with --server.
struct Variant {
  const char* name;
  std::vector<std::string> args;
};

class RemoteParityTest : public ::testing::TestWithParam<Variant> {};

TEST_P(RemoteParityTest, RemoteAndInProcessPrintTheSameBytesAndExitCode) {
  Scratch scratch;
  Ferryd ferryd(scratch);
  ASSERT_TRUE(ferryd.listening()) << ferryd.address() << ferryd.log();
  int compared = 0, failed = 0;
  for (const std::string& input : ParityInputs(scratch)) {
    std::vector<std::string> local_args = GetParam().args;
    local_args.push_back(input);
    std::vector<std::string> remote_args = local_args;
    remote_args.insert(remote_args.begin() + 1, {"--server", ferryd.address()});
    ToolRun local = Ferry(local_args, scratch);
    ToolRun remote = Ferry(remote_args, scratch);
    // Exit 4 means "retry later": a loaded machine can refuse a connection
    // now and then, so the comparison honours it (at most twice more).
    for (int retry = 0;
         retry < 2 && remote.exit_code == 4 && local.exit_code != 4; ++retry) {
      remote = Ferry(remote_args, scratch);
    }
    EXPECT_EQ(remote.exit_code, local.exit_code) << input << "\n" << remote.err;
    EXPECT_EQ(remote.out, local.out) << input;
    EXPECT_EQ(remote.err, local.err) << input;
    // Something was printed, and the run ended by itself (no crash, no
    // timeout): 0 to 3 are the codes these inputs may have.
    EXPECT_FALSE(local.out.empty() && local.err.empty()) << input;
    EXPECT_GE(local.exit_code, 0) << input;
    EXPECT_LE(local.exit_code, kExitNoDevice) << input;
    ++compared;
    if (local.exit_code != 0) ++failed;
  }
  // Every conformance case, the examples and the error cases; both kinds.
  EXPECT_GT(compared, 60);
  EXPECT_GT(failed, 10);
  EXPECT_LT(failed, compared);
  EXPECT_EQ(ferryd.Stop(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Commands, RemoteParityTest,
    ::testing::Values(Variant{"LowerText", {"lower"}},
                      Variant{"LowerJson", {"lower", "--report=json"}},
                      Variant{"VerifySimText", {"verify", "--device=sim"}},
                      Variant{"VerifySimJson",
                              {"verify", "--device=sim", "--report=json"}}),
    [](const ::testing::TestParamInfo<Variant>& info) {
      return std::string(info.param.name);
    });

// The report's one part that differs between runs (pass timings) is
// printed only under --timings; without it two in-process runs are
// identical too.
TEST(RemoteParity, TimingsOnlyUnderTheirFlag) {
  Scratch scratch;
  const std::string file =
      std::string(FERRY_SOURCE_DIR) + "/examples/two_delegates.textproto";
  ToolRun plain = Ferry({"lower", "--report=json", file}, scratch);
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_NE(plain.out.find("\"passes\":[]"), std::string::npos) << plain.out;
  EXPECT_EQ(plain.out.find("micros"), std::string::npos);
  ToolRun timed = Ferry({"lower", "--report=json", "--timings", file}, scratch);
  ASSERT_EQ(timed.exit_code, 0) << timed.err;
  EXPECT_NE(timed.out.find("{\"name\":\"import\",\"micros\":\""),
            std::string::npos)
      << timed.out;
  ToolRun timed_text = Ferry(
      {"lower", "--timings", "-o", scratch.File("out.pb"), file}, scratch);
  ASSERT_EQ(timed_text.exit_code, 0);
  EXPECT_NE(timed_text.err.find("\n  pass import: "), std::string::npos)
      << timed_text.err;
}

TEST(ExitCodes, UnreachableOrStoppedServerIsRetryLater) {
  Scratch scratch;
  Ferryd ferryd(scratch);
  ASSERT_TRUE(ferryd.listening()) << ferryd.log();
  const std::string address = ferryd.address();
  const std::string file =
      std::string(FERRY_SOURCE_DIR) + "/examples/two_delegates.textproto";
  ASSERT_EQ(Ferry({"lower", "--server", address, file}, scratch).exit_code,
            kExitOk);
  ASSERT_EQ(ferryd.Stop(), 0);
  // The client retries UNAVAILABLE within the deadline, then gives up.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"lower", "--deadline", "2", "--server", address, file},
           {"verify", "--device=sim", "--deadline", "2", "--server", address,
            file},
           {"caps", "--deadline", "2", "--server", address}}) {
    ToolRun run = Ferry(args, scratch);
    EXPECT_EQ(run.exit_code, kExitRetry) << args[0] << ": " << run.err;
    EXPECT_TRUE(run.err.find("UNAVAILABLE") != std::string::npos ||
                run.err.find("DEADLINE_EXCEEDED") != std::string::npos)
        << run.err;
  }
}

// Under a memory budget that takes the call's charge (20 x its wire size +
// 1 MiB) and the job's (6 KiB per node) each alone but not both, a job is
// refused deterministically with RESOURCE_EXHAUSTED + RetryInfo
// (MEMORY_BUDGET, after --memory-wait 1ms): retry later. A request that would
// not fit an idle server either (OVER_MEMORY_BUDGET, a QuotaFailure without
// RetryInfo) fails again however long one waits: exit 1.
TEST(ExitCodes, MemoryBudgetIsRetryLaterAndOverTheWholeBudgetIsNot) {
  Scratch scratch;
  Ferryd ferryd(scratch,
                {"--max-memory-bytes", "2MiB", "--cache-bytes", "0",
                 "--max-verify-bytes", "1MiB", "--memory-wait", "1ms"});
  ASSERT_TRUE(ferryd.listening()) << ferryd.log();
  auto chain = [](int nodes) {
    std::string text =
        "methods { name: \"forward\"\n"
        "nodes { name: \"x\" input { kind: USER_INPUT } tensor { dtype: F32 "
        "sizes: 4 } }\n";
    std::string last = "x";
    for (int i = 0; i < nodes; ++i) {
      std::string name = "r" + std::to_string(i);
      text += "nodes { name: \"" + name + "\" call { op: \"aten::relu\" " +
              "args { value: \"" + last +
              "\" } } tensor { dtype: F32 sizes: " + "4 } }\n";
      last = name;
    }
    return text + "nodes { name: \"output\" output { values { value: \"" +
           last + "\" } } } }\n";
  };
  // 200 nodes: a job charge of 1.2 MiB and a call charge of about 1.1 MiB.
  ToolRun busy = Ferry({"lower", "--server", ferryd.address(),
                        scratch.Write("chain200.textproto", chain(200))},
                       scratch);
  EXPECT_EQ(busy.exit_code, kExitRetry) << busy.err;
  EXPECT_NE(busy.err.find("ferry lower: RESOURCE_EXHAUSTED: server memory "
                          "budget full"),
            std::string::npos)
      << busy.err;
  EXPECT_NE(busy.err.find("  retry after "), std::string::npos) << busy.err;
  // 400 nodes: a job charge of 2.4 MiB, over the whole budget.
  ToolRun over = Ferry({"lower", "--server", ferryd.address(),
                        scratch.Write("chain400.textproto", chain(400))},
                       scratch);
  EXPECT_EQ(over.exit_code, kExitErrors) << over.err;
  EXPECT_NE(over.err.find("memory_estimate_bytes"), std::string::npos)
      << over.err;
  // A small program still lowers. (Exit 4 is "retry later": a loaded
  // machine can refuse a connection now and then, as RemoteParityTest
  // allows; a server that died stays refused.)
  const std::vector<std::string> small_args = {
      "lower", "--server", ferryd.address(),
      scratch.Write("chain2.textproto", chain(2))};
  ToolRun small = Ferry(small_args, scratch);
  for (int retry = 0; retry < 2 && small.exit_code == kExitRetry; ++retry)
    small = Ferry(small_args, scratch);
  EXPECT_EQ(small.exit_code, kExitOk) << small.err << "\nferryd:\n"
                                      << ferryd.log();
}

// No request provokes an internal error deterministically, so the mapping
// is checked for every code here.
TEST(ExitCodes, EveryStatusCodeMapsToItsExitCode) {
  using absl::StatusCode;
  const std::vector<std::pair<StatusCode, int>> expected = {
      {StatusCode::kOk, kExitOk},
      {StatusCode::kCancelled, kExitRetry},
      {StatusCode::kUnknown, kExitInternal},
      {StatusCode::kInvalidArgument, kExitErrors},
      {StatusCode::kDeadlineExceeded, kExitRetry},
      {StatusCode::kNotFound, kExitInternal},
      {StatusCode::kAlreadyExists, kExitInternal},
      {StatusCode::kPermissionDenied, kExitUsage},
      {StatusCode::kResourceExhausted, kExitErrors},
      {StatusCode::kFailedPrecondition, kExitNoDevice},
      {StatusCode::kAborted, kExitRetry},
      {StatusCode::kOutOfRange, kExitErrors},
      {StatusCode::kUnimplemented, kExitInternal},
      {StatusCode::kInternal, kExitInternal},
      {StatusCode::kUnavailable, kExitRetry},
      {StatusCode::kDataLoss, kExitInternal},
      {StatusCode::kUnauthenticated, kExitUsage},
  };
  for (const auto& [code, exit_code] : expected) {
    EXPECT_EQ(tool::ExitCodeForStatus(absl::Status(code, "x")), exit_code)
        << absl::StatusCodeToString(code);
  }
  // RESOURCE_EXHAUSTED is "retry later" exactly when the server says when.
  google::rpc::Status details;
  details.set_code(static_cast<int>(StatusCode::kResourceExhausted));
  google::rpc::RetryInfo retry;
  retry.mutable_retry_delay()->set_seconds(1);
  details.add_details()->PackFrom(retry);
  absl::Status busy(StatusCode::kResourceExhausted, "work queue full");
  busy.SetPayload(kErrorDetailsPayload,
                  absl::Cord(details.SerializeAsString()));
  EXPECT_EQ(tool::ExitCodeForStatus(busy), kExitRetry);
  // An in-process limit breach: refused as sent.
  EXPECT_EQ(tool::ExitCodeForStatus(ResourceLimitError(
                {"max_tensor_bytes", "program.constants['w']", 8, 4})),
            kExitErrors);
}

// `ferry --version`, `ferryd --version` and GetCapabilities name the same
// compiler and API versions: the ones in ferry/version.h.
TEST(Version, ToolServerAndCapabilitiesAgree) {
  Scratch scratch;
  ToolRun tool = Ferry({"--version"}, scratch);
  ToolRun server = RunBinary(FERRYD_PATH, {"--version"}, scratch);
  ASSERT_EQ(tool.exit_code, 0);
  ASSERT_EQ(server.exit_code, 0);
  const std::string versions =
      std::string(kCompilerVersion) + " (API " + kApiVersion + ")\n";
  EXPECT_EQ(tool.out, "ferry " + versions);
  EXPECT_EQ(server.out, "ferryd " + versions);

  Ferryd ferryd(scratch);
  ASSERT_TRUE(ferryd.listening()) << ferryd.log();
  ToolRun caps = Ferry({"caps", "--server", ferryd.address()}, scratch);
  ASSERT_EQ(caps.exit_code, 0) << caps.err;
  EXPECT_NE(caps.out.find(std::string("\napi version:     ") + kApiVersion +
                          "\ncompiler:        " + kCompilerVersion + "\n"),
            std::string::npos)
      << caps.out;
  ToolRun json =
      Ferry({"caps", "--report=json", "--server", ferryd.address()}, scratch);
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(
      json.out.find(std::string("\"api_version\":\"") + kApiVersion + "\""),
      std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find(std::string("\"compiler_version\":\"") +
                          kCompilerVersion + "\""),
            std::string::npos);
  // --help documents every exit code.
  ToolRun help = Ferry({"--help"}, scratch);
  for (const char* line : {"  4  retry later", "  5  internal error"}) {
    EXPECT_NE(help.out.find(line), std::string::npos) << help.out;
  }
  EXPECT_EQ(ferryd.Stop(), 0);
}

}  // namespace
}  // namespace ferry
