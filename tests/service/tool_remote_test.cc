// `ferry lower|verify|caps --server`: the tool through a real ferryd prints
// what the in-process tool prints, and exits with the same codes.
#include <gtest/gtest.h>

#include "client/testing/synthetic_program.h"
#include "passes/proto_io.h"
#include "tests/service/service_test_support.h"

namespace ferry::testing {
namespace {

class ToolRemoteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ferryd_ = std::make_unique<FerrydProcess>(
        FERRYD_PATH, std::vector<std::string>{}, dir_.File("ferryd.stderr"));
    ASSERT_TRUE(ferryd_->listening()) << ferryd_->address() << ferryd_->log();
    address_ = ferryd_->address();
    // Answering, not only listening: a tool whose first GetCapabilities
    // fails goes on without a Lookup, as it should, but then the tests
    // below would not see the calls they count.
    std::unique_ptr<Client> probe = Connect(address_);
    ASSERT_TRUE(Eventually([&] { return probe->GetCapabilities().ok(); }))
        << ferryd_->log();
    dir_.Write("chain.textproto", ToText(SyntheticChainRequest(60)));
    dir_.Write("bad.textproto", R"pb(
      program {
        methods {
          name: "forward"
          nodes {
            name: "out"
            call {
              op: "aten::relu"
              args { value: "nope" }
            }
            tensor { dtype: F32 sizes: 4 }
          }
          nodes {
            name: "output"
            output { values { value: "out" } }
          }
        }
      })pb");
  }
  void TearDown() override {
    EXPECT_EQ(ferryd_->Stop(std::chrono::seconds(20)), 0) << ferryd_->log();
  }

  struct Run {
    int exit_code;
    std::string out;
    std::string err;
  };
  Run Tool(std::vector<std::string> args) {
    args.insert(args.begin(), FERRY_TOOL_PATH);
    std::string err_path = dir_.File("tool.stderr");
    Process tool(args, err_path);
    std::string out = tool.ReadAll();
    int code = tool.WaitForExit(std::chrono::seconds(60));
    return Run{code, out, ReadFile(err_path)};
  }

  TempDir dir_;
  std::unique_ptr<FerrydProcess> ferryd_;
  std::string address_;
};

TEST_F(ToolRemoteTest, LowerPrintsWhatTheInProcessToolPrints) {
  std::string file = dir_.File("chain.textproto");
  Run local = Tool({"lower", file});
  Run remote = Tool({"lower", "--server", address_, file});
  EXPECT_EQ(local.exit_code, 0);
  EXPECT_EQ(remote.exit_code, 0);
  EXPECT_EQ(remote.out, local.out);
  EXPECT_EQ(remote.err, local.err);

  Run local_json = Tool({"lower", "--report=json", file});
  Run remote_json =
      Tool({"lower", "--report=json", "--server=" + address_, file});
  // Pass timings, which differ between runs, only under --timings.
  EXPECT_EQ(local_json.out.find("\"micros\":\""), std::string::npos)
      << local_json.out;
  EXPECT_EQ(remote_json.out, local_json.out);
}

// A large program already lowered is answered by Lookup: the second run
// sends no program (the server logs a Lookup hit and no second Lower), and
// prints the same. --server takes a list of replicas too.
// --progress=always prints the same lines through --server (LowerStream,
// VerifyStream) as in-process, durations aside; stdout is unchanged.
TEST_F(ToolRemoteTest, ProgressLinesAreTheInProcessOnes) {
  dir_.Write("progress.textproto", ToText(SyntheticChainRequest(20, 9)));
  std::string file = dir_.File("progress.textproto");
  auto without_durations = [](std::string text) {
    std::string out;
    for (size_t at = 0; at < text.size();) {
      size_t ms = text.find(" ms\n", at);
      if (ms == std::string::npos) {
        out += text.substr(at);
        break;
      }
      size_t number = text.rfind(' ', ms - 1);
      out += text.substr(at, number - at) + " ms\n";
      at = ms + 4;
    }
    return out;
  };
  for (std::vector<std::string> args :
       {std::vector<std::string>{"lower", "--progress=always"},
        std::vector<std::string>{"verify", "--progress=always",
                                 "--device=sim"}}) {
    args.push_back(file);
    Run local = Tool(args);
    args.insert(args.begin() + 1, {"--server", address_});
    Run remote = Tool(args);
    ASSERT_EQ(local.exit_code, 0) << local.err;
    ASSERT_EQ(remote.exit_code, 0) << remote.err;
    EXPECT_NE(local.err.find("] plan_memory "), std::string::npos) << local.err;
    EXPECT_EQ(without_durations(remote.err), without_durations(local.err));
    EXPECT_EQ(remote.out, local.out);
  }
}

TEST_F(ToolRemoteTest, LowerAsksByDigestBeforeSendingALargeProgram) {
  dir_.Write("large.textproto", ToText(SyntheticChainRequest(3000, 5)));
  std::string file = dir_.File("large.textproto");
  Run first = Tool({"lower", "--server", address_, file});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  Run second = Tool({"lower", "--server", address_ + "," + address_, file});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
  std::string log = ReadFile(dir_.File("ferryd.stderr"));
  auto count = [&](const std::string& needle) {
    int n = 0;
    for (size_t at = 0; (at = log.find(needle, at)) != std::string::npos;
         at += needle.size()) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("\"method\":\"Lower\""), 1) << log;
  EXPECT_EQ(count("\"method\":\"Lookup\",\"code\":\"NOT_FOUND\""), 1)
      << log << first.err;
  EXPECT_EQ(count("\"method\":\"Lookup\",\"code\":\"OK\""), 1)
      << log << second.err;
}

TEST_F(ToolRemoteTest, VerifyOnSimMatchesTheInProcessTool) {
  std::string file = dir_.File("chain.textproto");
  Run local = Tool({"verify", "--device=sim", "--seed", "3", file});
  Run remote = Tool(
      {"verify", "--device=sim", "--seed", "3", "--server", address_, file});
  EXPECT_EQ(local.exit_code, 0);
  EXPECT_EQ(remote.exit_code, 0) << remote.err;
  EXPECT_EQ(remote.out, local.out);
  Run local_json =
      Tool({"verify", "--device=sim", "--seed", "3", "--report=json", file});
  Run remote_json = Tool({"verify", "--device=sim", "--seed", "3",
                          "--report=json", "--server", address_, file});
  EXPECT_EQ(local_json.exit_code, 0);
  EXPECT_EQ(remote_json.exit_code, 0) << remote_json.err;
  EXPECT_EQ(remote_json.out, local_json.out);
}

TEST_F(ToolRemoteTest, MalformedProgramAndMissingDeviceExitCodes) {
  // A malformed program's diagnostics come back in the body: printed as the
  // in-process tool prints them, exit 1.
  std::string bad_file = dir_.File("bad.textproto");
  Run bad = Tool({"lower", "--server", address_, bad_file});
  Run bad_local = Tool({"lower", bad_file});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_EQ(bad_local.exit_code, 1);
  EXPECT_NE(bad.err.find("FERRY-E0102"), std::string::npos) << bad.err;
  EXPECT_EQ(bad.err, bad_local.err);
  Run bad_verify =
      Tool({"verify", "--device=sim", "--server", address_, bad_file});
  Run bad_verify_local = Tool({"verify", "--device=sim", bad_file});
  EXPECT_EQ(bad_verify.exit_code, 1);
  EXPECT_EQ(bad_verify.err, bad_verify_local.err);
  Run cuda = Tool({"verify", "--device=cuda", "--server", address_,
                   dir_.File("chain.textproto")});
  // 3 where no GPU is visible to the server, as in-process.
  Run cuda_local =
      Tool({"verify", "--device=cuda", dir_.File("chain.textproto")});
  EXPECT_EQ(cuda.exit_code, cuda_local.exit_code);
}

// 150 errors, and a node name of 5 KB, used to overflow the trailers (the
// tool saw "received initial metadata size exceeds limit"): now every
// diagnostic arrives, exactly as the in-process tool reports them.
TEST_F(ToolRemoteTest, ManyErrorsAndHugeNamesArriveComplete) {
  v1::LowerRequest request;
  v1::Method* method = request.mutable_program()->add_methods();
  method->set_name("forward");
  const std::string long_name(5000, 'n');
  for (int i = 0; i < 150; ++i) {
    v1::Node* node = method->add_nodes();
    node->set_name(i == 0 ? long_name : "r" + std::to_string(i));
    node->mutable_call()->set_op("aten::relu");
    node->mutable_call()->add_args()->set_value("missing" + std::to_string(i));
    node->mutable_tensor()->set_dtype(v1::F32);
    node->mutable_tensor()->add_sizes(4);
  }
  method->add_nodes()->set_name("output");
  method->mutable_nodes(150)->mutable_output()->add_values()->set_value("r1");
  dir_.Write("many.textproto", ToText(request));
  std::string file = dir_.File("many.textproto");
  Run local = Tool({"lower", "--report=json", file});
  Run remote = Tool({"lower", "--report=json", "--server", address_, file});
  EXPECT_EQ(local.exit_code, 1);
  EXPECT_EQ(remote.exit_code, 1) << remote.err;
  EXPECT_EQ(remote.out, local.out);
  size_t count = 0;
  for (size_t at = 0;
       (at = remote.out.find("FERRY-E0102", at)) != std::string::npos; ++at) {
    ++count;
  }
  EXPECT_EQ(count, 150u);
  EXPECT_NE(remote.out.find(long_name), std::string::npos);
}

// A 4-byte constant declared f32[100000,100000] with strides [0,0]: 40 GB
// once made contiguous. In-process and through ferryd it fails cleanly,
// and ferryd (which used to abort on std::bad_alloc) goes on.
TEST_F(ToolRemoteTest, OverResourceLimitsFailsCleanlyEverywhere) {
  dir_.Write("broadcast.textproto", R"pb(
    program {
      methods {
        name: "forward"
        nodes {
          name: "w"
          input { kind: PARAMETER target: "w" }
          tensor {
            dtype: F32
            sizes: 100000
            sizes: 100000
            strides: 0
            strides: 0
          }
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
      }
    })pb");
  std::string file = dir_.File("broadcast.textproto");
  for (const char* command : {"lower", "verify"}) {
    Run local = Tool({command, file});
    EXPECT_EQ(local.exit_code, 1) << command << ": " << local.err;
    EXPECT_NE(local.err.find("program.constants['w'] needs 40000000000 bytes, "
                             "over max_tensor_bytes"),
              std::string::npos)
        << local.err;
    Run remote = Tool({command, "--server", address_, file});
    EXPECT_EQ(remote.exit_code, 1) << command << ": " << remote.err;
    EXPECT_NE(remote.err.find("RESOURCE_EXHAUSTED"), std::string::npos)
        << remote.err;
    EXPECT_NE(remote.err.find("limit: program.constants['w'] needs"),
              std::string::npos)
        << remote.err;
  }
  Run caps = Tool({"caps", "--server", address_});
  EXPECT_EQ(caps.exit_code, 0) << caps.err;
}

TEST_F(ToolRemoteTest, CapsPrintsLimitsAndHealth) {
  Run caps = Tool({"caps", "--server", address_});
  EXPECT_EQ(caps.exit_code, 0) << caps.err;
  EXPECT_NE(caps.out.find("api version:     1.0.0"), std::string::npos)
      << caps.out;
  EXPECT_NE(caps.out.find("health:          ferry.v1.Compiler SERVING"),
            std::string::npos)
      << caps.out;
  EXPECT_NE(caps.out.find("resources:       tensor 1024 MiB, verify 2048 MiB, "
                          "expansion 16x, memory 3072 MiB"),
            std::string::npos)
      << caps.out;
  Run json = Tool({"caps", "--report=json", "--server", address_});
  EXPECT_EQ(json.exit_code, 0);
  EXPECT_NE(json.out.find("\"max_request_bytes\""), std::string::npos);
  // The deprecated spelling still works.
  Run old_flag = Tool({"caps", "--json", "--server", address_});
  EXPECT_EQ(old_flag.exit_code, 0);
  EXPECT_NE(old_flag.out.find("\"max_request_bytes\""), std::string::npos);
  Run no_server = Tool({"caps"});
  EXPECT_EQ(no_server.exit_code, 2);
}

}  // namespace
}  // namespace ferry::testing
