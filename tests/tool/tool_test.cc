// Runs the `ferry` binary on good, broken and garbage input and checks exit
// codes and output.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>

#include "ferry/v1/program.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/proto_io.h"
#include "tests/support/files.h"
#include "tests/support/process.h"

namespace ferry {
namespace {

namespace fs = std::filesystem;

// The exit code and the output (stdout, and stderr when merged).
using ToolRun = testing_util::CommandResult;

ToolRun Ferry(const std::string& args, bool merge_stderr = true) {
  return testing_util::RunCommand(std::string(FERRY_TOOL) + " " + args +
                                  (merge_stderr ? " 2>&1" : " 2>/dev/null"));
}

class ToolTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("ferry_tool_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string Write(const std::string& name, const std::string& bytes) {
    fs::path p = dir_ / name;
    testing_util::WriteFile(p, bytes);
    return p.string();
  }
  static std::string Example(const std::string& name) {
    return std::string(FERRY_SOURCE_DIR) + "/examples/" + name;
  }
  fs::path dir_;
};

constexpr char kBroken[] = R"(
methods {
  name: "forward"
  nodes { name: "a" input { kind: USER_INPUT } tensor { dtype: F32 sizes: 4 } }
  nodes { name: "relu_1" call { op: "aten::relu_" args { value: "missing" } } tensor { dtype: F32 sizes: 4 } }
  nodes { name: "output" output { values { value: "relu_1" } } }
}
)";

TEST_F(ToolTest, CheckAcceptsEveryExample) {
  for (const auto& e :
       fs::directory_iterator(fs::path(FERRY_SOURCE_DIR) / "examples")) {
    // The programs; *.inputs.json are InputSets for them.
    if (e.path().extension() != ".textproto") continue;
    ToolRun r = Ferry("check " + e.path().string());
    EXPECT_EQ(r.exit_code, 0) << e.path() << "\n" << r.out;
  }
}

TEST_F(ToolTest, CheckNamesTheNodeAndTheProblemInTextAndJson) {
  std::string file = Write("broken.textproto", kBroken);
  ToolRun text = Ferry("check " + file);
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_NE(text.out.find("node 'relu_1': error[FERRY-E0102]"),
            std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("'missing'"), std::string::npos);
  ToolRun json = Ferry("check --report=json " + file, false);
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_EQ(json.out.rfind("{\"ok\":false,\"diagnostics\":[{\"severity\":"
                           "\"ERROR\",\"code\":\"FERRY-E0102\"",
                           0),
            0u)
      << json.out;
  EXPECT_NE(json.out.find("\"nodes\":[\"relu_1\""), std::string::npos);
  // The deprecated spelling prints the same.
  ToolRun old_flag = Ferry("check --diagnostics-format=json " + file, false);
  EXPECT_EQ(old_flag.exit_code, 1);
  EXPECT_EQ(old_flag.out, json.out);
}

TEST_F(ToolTest, VerifyTakesReadableJsonInputsNestedOrFlat) {
  const std::string program = Example("two_delegates.textproto");
  // The shipped example: nested and flat numbers.
  ToolRun shipped =
      Ferry("verify --inputs " + Example("two_delegates.inputs.json") +
            " --dump-outputs=" + (dir_ / "out.json").string() + " " + program);
  EXPECT_EQ(shipped.exit_code, 0) << shipped.out;
  // a = 1..16, b = c = 0.5 everywhere: the output is a + b + c = a + 1.
  const std::string spec = R"("spec": {"dtype": "F32", "sizes": [4, 4]})";
  auto value = [&](const std::string& input, const std::string& numbers) {
    return R"({"method": "forward", "input": ")" + input + R"(", )" + spec +
           R"(, "numbers": )" + numbers + "}";
  };
  std::string flat_halves = "[0.5";
  for (int i = 1; i < 16; ++i) flat_halves += ", 0.5";
  flat_halves += "]";
  const std::string inputs =
      Write("in.json", R"({"values": [)" +
                           value("a",
                                 "[[1,2,3,4],[5,6,7,8],[9,10,11,12],[13,14,15,"
                                 "16]]") +
                           ", " + value("b", flat_halves) + ", " +
                           value("c", flat_halves) + "]}");
  const std::string out = (dir_ / "out.textproto").string();
  ToolRun run = Ferry("verify --inputs " + inputs + " --dump-outputs=" + out +
                      " " + program);
  ASSERT_EQ(run.exit_code, 0) << run.out;
  v1::InputSet outputs;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      testing_util::ReadFile(out), &outputs));
  ASSERT_EQ(outputs.values_size(), 1);
  const std::string& data = outputs.values(0).data();
  ASSERT_EQ(data.size(), 16 * sizeof(float));
  for (int i = 0; i < 16; ++i) {
    float element = 0;
    std::memcpy(&element, data.data() + i * sizeof(float), sizeof(float));
    EXPECT_EQ(element, static_cast<float>(i + 2)) << "element " << i;
  }
}

TEST_F(ToolTest, BadJsonInputsAreUsageErrorsNamingTheInput) {
  const std::string program = Example("two_delegates.textproto");
  const std::string head =
      R"({"values": [{"method": "forward", "input": "a", "spec": {"dtype": ")";
  struct Case {
    std::string json, says;
  };
  for (const Case& c : std::vector<Case>{
           {head + R"(F32", "sizes": [4, 4]}, "numbers": [1, 2]}]})",
            "2 numbers for sizes [4,4] (16 elements)"},
           {head + R"(F32", "sizes": [4, 4]}, "numbers": [[1, 2], [3, 4]]}]})",
            "dimension 0 has 2 entries"},
           {head + R"(I64", "sizes": [2]}, "numbers": [1.5, 2]}]})",
            "not a whole number"},
           {head + R"(F32", "sizes": [2]}, "numbers": ["x", 2]}]})",
            "not a number"},
           {head + R"(F32", "sizes": [1000000, 1000000]}, "numbers": []}]})",
            "over 16777216 elements"},
           {R"({"values": [1]})", "values[0]: not a JSON object"},
           {R"([1, 2])", "not a JSON object"},
           {R"({"values": [{"nonsense": 1}]})", "not a ferry.v1.InputValue"}}) {
    ToolRun r =
        Ferry("verify --inputs " + Write("bad.json", c.json) + " " + program);
    EXPECT_EQ(r.exit_code, 2) << c.json << "\n" << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.json << "\n" << r.out;
    EXPECT_NE(r.out.find("bad.json"), std::string::npos) << r.out;
  }
}

TEST_F(ToolTest, ServerAddressesAreValidated) {
  const std::string program = Example("two_delegates.textproto");
  for (const char* bad : {"127.0.0.1:PORT", "127.0.0.1", "127.0.0.1:0",
                          "127.0.0.1:70000", ":50051", "unix:", "a:1,b"}) {
    ToolRun r = Ferry(std::string("lower --server '") + bad + "' " + program);
    EXPECT_EQ(r.exit_code, 2) << bad << "\n" << r.out;
    EXPECT_NE(r.out.find("HOST:PORT"), std::string::npos) << r.out;
  }
  // Well-formed but nothing listens: retry later (exit 4), not usage.
  ToolRun unreachable =
      Ferry("lower --deadline 5 --server 127.0.0.1:1 " + program);
  EXPECT_EQ(unreachable.exit_code, 4) << unreachable.out;
}

TEST_F(ToolTest, GarbageEmptyAndTruncatedInputIsExitTwoNeverACrash) {
  EXPECT_EQ(Ferry("check " + Write("empty.textproto", "")).exit_code, 2);
  EXPECT_EQ(Ferry("check " + Write("junk.textproto", "}}}{{ not a program"))
                .exit_code,
            2);
  EXPECT_EQ(Ferry("check " + Write("junk.json", "[1, 2")).exit_code, 2);
  EXPECT_EQ(Ferry("check " + (dir_ / "does_not_exist.pb").string()).exit_code,
            2);
  EXPECT_EQ(Ferry("check " + Write("x.unknownext", "methods {}")).exit_code, 2);
  // Binary: every truncation of a real program, and random bytes.
  v1::LowerRequest request;
  bool bare = false;
  ASSERT_TRUE(ReadRequestFile(Example("two_delegates.textproto"),
                              FileFormat::kUnknown, &request, &bare)
                  .ok());
  std::string bytes;
  request.SerializeToString(&bytes);
  for (size_t cut :
       {size_t{1}, bytes.size() / 3, bytes.size() / 2, bytes.size() - 1}) {
    ToolRun r = Ferry("lower " + Write("cut.pb", bytes.substr(0, cut)));
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 1 || r.exit_code == 2)
        << "cut at " << cut << ": " << r.exit_code << "\n"
        << r.out;
  }
  std::mt19937 rng(11);
  std::string random(512, '\0');
  for (char& c : random) c = static_cast<char>(rng());
  ToolRun r = Ferry("check " + Write("random.pb", random));
  EXPECT_TRUE(r.exit_code == 1 || r.exit_code == 2) << r.exit_code;
}

TEST_F(ToolTest, UsageErrorsAreExitTwo) {
  EXPECT_EQ(Ferry("").exit_code, 2);
  EXPECT_EQ(Ferry("frobnicate").exit_code, 2);
  EXPECT_EQ(Ferry("check").exit_code, 2);
  EXPECT_EQ(
      Ferry("check --bogus " + Example("two_delegates.textproto")).exit_code,
      2);
  EXPECT_EQ(Ferry("lower --constant-staging=sometimes " +
                  Example("two_delegates.textproto"))
                .exit_code,
            2);
  EXPECT_EQ(Ferry("check --format=yaml " + Example("two_delegates.textproto"))
                .exit_code,
            2);
}

TEST_F(ToolTest, FmtPrintsTheCanonicalTextAndFormatOverridesTheExtension) {
  ToolRun once = Ferry("fmt " + Example("two_delegates.textproto"), false);
  ASSERT_EQ(once.exit_code, 0);
  std::string canonical = Write("canonical.txt", once.out);
  ToolRun twice = Ferry("fmt --format=text " + canonical, false);
  EXPECT_EQ(twice.exit_code, 0);
  EXPECT_EQ(twice.out, once.out);  // fmt is a fixed point
}

TEST_F(ToolTest, LowerWritesTheProgramAndAReport) {
  std::string out = (dir_ / "lowered.pb").string();
  ToolRun r = Ferry("lower --report=json --timings -o " + out + " " +
                        Example("host_relu_between_delegates.textproto"),
                    false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("{\"ok\":true", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("\"h2d_copies\":\"4\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"d2h_copies\":\"2\""), std::string::npos);
  // --timings lists every pass with its time.
  EXPECT_NE(r.out.find("\"name\":\"place_and_copy\""), std::string::npos);
  // The written program is a valid, already-lowered program.
  ToolRun check = Ferry("check " + out);
  EXPECT_EQ(check.exit_code, 0) << check.out;
  // The text summary goes to stderr.
  ToolRun text = Ferry("lower -o " + (dir_ / "l.textproto").string() + " " +
                       Example("two_delegates.textproto"));
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.out.find("copies per call: 3 H2D"), std::string::npos)
      << text.out;
  EXPECT_NE(text.out.find("delegates: 2 (cuda:0: 2)"), std::string::npos);
}

TEST_F(ToolTest, LowerFlagsOverrideTheRequest) {
  ToolRun r =
      Ferry("lower --report=json --skip-h2d-inputs --skip-d2h-outputs " +
                Example("two_delegates.textproto"),
            false);
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("\"h2d_copies\":\"0\",\"d2h_copies\":\"0\""),
            std::string::npos)
      << r.out;
  ToolRun bad = Ferry("lower --skip-h2d-inputs --no-device-memory-planning " +
                      Example("two_delegates.textproto"));
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("FERRY-E0501"), std::string::npos) << bad.out;
}

TEST_F(ToolTest, AllowAndDenyOpFlagsNarrowTheCapabilityPartitioner) {
  const std::string file = Example("capability.textproto");
  // Without a list: mm, gelu and softmax form one cuda:0 delegate.
  ToolRun all = Ferry("lower --report=json " + file, false);
  ASSERT_EQ(all.exit_code, 0) << all.out;
  EXPECT_NE(all.out.find("\"delegates\":\"1\","), std::string::npos) << all.out;
  // gelu denied stays on the host and splits the delegate in two, with a
  // D2H before it and an H2D after it.
  ToolRun denied =
      Ferry("lower --report=json --deny-op aten::gelu " + file, false);
  ASSERT_EQ(denied.exit_code, 0) << denied.out;
  EXPECT_NE(denied.out.find("\"h2d_copies\":\"2\",\"d2h_copies\":\"2\""),
            std::string::npos)
      << denied.out;
  EXPECT_NE(denied.out.find("\"delegates\":\"2\","), std::string::npos);
  // The =VALUE form and repetition: denying mm too leaves only softmax.
  ToolRun two = Ferry(
      "lower --report=json --deny-op=aten::gelu --deny-op aten::mm " + file,
      false);
  ASSERT_EQ(two.exit_code, 0) << two.out;
  EXPECT_NE(two.out.find("\"delegates\":\"1\","), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("\"h2d_copies\":\"1\",\"d2h_copies\":\"1\""),
            std::string::npos)
      << two.out;
  EXPECT_NE(two.out.find("\"h2d_bytes_per_call\":\"32\""), std::string::npos);
  // --allow-op: only mm is claimed; gelu and softmax run on the host.
  ToolRun allowed =
      Ferry("lower --report=json --allow-op aten::mm " + file, false);
  ASSERT_EQ(allowed.exit_code, 0) << allowed.out;
  EXPECT_NE(allowed.out.find("\"delegates\":\"1\","), std::string::npos);
  EXPECT_NE(allowed.out.find("\"d2h_bytes_per_call\":\"32\""),
            std::string::npos)
      << allowed.out;
  // Unknown operators are the pipeline's error; a missing value is usage.
  ToolRun unknown = Ferry("lower --deny-op aten::bogus " + file);
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.out.find("unknown operator 'aten::bogus'"),
            std::string::npos)
      << unknown.out;
  ToolRun missing = Ferry("lower " + file + " --deny-op");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("--deny-op needs an operator"), std::string::npos)
      << missing.out;
  EXPECT_EQ(Ferry("lower --deny-op= " + file).exit_code, 2);
  for (const char* command : {"lower", "verify"}) {
    ToolRun help = Ferry(std::string(command) + " --help", false);
    EXPECT_NE(help.out.find("--allow-op OP"), std::string::npos) << command;
    EXPECT_NE(help.out.find("--deny-op OP"), std::string::npos) << command;
  }
}

// Messages like a compiler's: the node's source line first, and "did you
// mean" for misspelt flags, flag values and devices.
TEST_F(ToolTest, DiagnosticsStartWithTheSourceLineAndMisspellingsGetAHint) {
  std::string file = Write("src.textproto", R"(
methods {
  name: "forward"
  nodes { name: "a" input { kind: USER_INPUT } tensor { dtype: F32 sizes: 4 } }
  nodes { name: "r" call { op: "aten::rellu" args { value: "a" } }
          tensor { dtype: F32 sizes: 4 } source { file: "model.py" line: 42 } }
  nodes { name: "output" output { values { value: "r" } } }
}
)");
  ToolRun check = Ferry("check " + file);
  EXPECT_EQ(check.exit_code, 1);
  EXPECT_EQ(check.out,
            "model.py:42: method 'forward': node 'r': error[FERRY-E0110]: "
            "unknown operator 'aten::rellu'\n"
            "  hint: did you mean 'aten::relu'?\n");
  ToolRun json = Ferry("check --report=json " + file);
  EXPECT_NE(json.out.find("\"source\":{\"file\":\"model.py\",\"line\":42"),
            std::string::npos)
      << json.out;

  const std::string example = Example("two_delegates.textproto");
  ToolRun flag = Ferry("lower --skip-h2d-input " + example);
  EXPECT_EQ(flag.exit_code, 2);
  EXPECT_NE(flag.out.find("ferry lower: unknown option '--skip-h2d-input'; "
                          "did you mean '--skip-h2d-inputs'?"),
            std::string::npos)
      << flag.out;
  ToolRun value = Ferry("lower --partitioner=capabilty " + example);
  EXPECT_EQ(value.exit_code, 2);
  EXPECT_NE(value.out.find("did you mean 'capability'?"), std::string::npos)
      << value.out;
  ToolRun device = Ferry("verify --device=cdua " + example);
  EXPECT_EQ(device.exit_code, 2);
  EXPECT_NE(device.out.find("ferry verify: unknown --device 'cdua' (auto, "
                            "sim, cuda); did you mean 'cuda'?"),
            std::string::npos)
      << device.out;
  ToolRun target =
      Ferry("lower --partitioner=capability --target-device=cdua:0 " + example);
  EXPECT_EQ(target.exit_code, 1);
  EXPECT_NE(target.out.find("  hint: did you mean 'cuda:0'?"),
            std::string::npos)
      << target.out;
}

// --progress=always prints one line per pipeline pass, in pipeline order,
// on stderr (stdout stays the report); verify adds its steps per method.
TEST_F(ToolTest, ProgressAlwaysPrintsOneLinePerPassOnStderr) {
  const std::string example = Example("two_delegates.textproto");
  ToolRun lowered = testing_util::RunCommand(
      std::string(FERRY_TOOL) + " lower --progress=always --report=json " +
      example + " -o " + (dir_ / "out.binpb").string() + " 2>" +
      (dir_ / "err.txt").string());
  ASSERT_EQ(lowered.exit_code, 0) << lowered.out;
  EXPECT_EQ(lowered.out.find("ferry lower: ["), std::string::npos)
      << "progress went to stdout: " << lowered.out;
  std::string err = testing_util::ReadFile(dir_ / "err.txt");
  const std::vector<std::string> passes = {
      "import", "validate",       "normalize_layout", "partition",
      "lower",  "place_and_copy", "plan_memory"};
  size_t at = 0;
  for (size_t i = 0; i < passes.size(); ++i) {
    std::string line = "ferry lower: [" + std::to_string(i + 1) + "/" +
                       std::to_string(passes.size()) + "] " + passes[i] + " ";
    size_t found = err.find(line, at);
    ASSERT_NE(found, std::string::npos) << line << " missing in\n" << err;
    at = found + line.size();
  }
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'),
            static_cast<long>(passes.size()))
      << err;

  ToolRun verified = Ferry("verify --progress=always --device=sim " + example);
  ASSERT_EQ(verified.exit_code, 0) << verified.out;
  for (const char* step : {"eager_run", "lowered_run", "compare"}) {
    EXPECT_NE(verified.out.find(std::string("ferry verify: forward: ") + step),
              std::string::npos)
        << step << " missing in\n"
        << verified.out;
  }
}

// Without a terminal on stderr, auto (the default) prints no progress, and
// never prints none anywhere; an unknown mode is a usage error.
TEST_F(ToolTest, ProgressAutoPrintsNothingWithoutATerminal) {
  const std::string example = Example("two_delegates.textproto");
  for (const char* mode : {"", "--progress=auto ", "--progress=never "}) {
    ToolRun r = Ferry(std::string("lower ") + mode + example);
    ASSERT_EQ(r.exit_code, 0) << r.out;
    EXPECT_EQ(r.out.find("ferry lower: ["), std::string::npos) << mode << "\n"
                                                               << r.out;
  }
  EXPECT_EQ(Ferry("lower --progress=sometimes " + example).exit_code, 2);
}

}  // namespace
}  // namespace ferry
