// Messages like a compiler's: Node.source as "file:line:" in front of a
// diagnostic (text and JSON), and "did you mean" for unknown operators,
// value names, options and devices.
#include "passes/diagnostics.h"

#include <string>
#include <vector>

#include "ferry/v1/program.pb.h"
#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "passes/ir.h"
#include "passes/pipeline.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"

namespace ferry {
namespace {

v1::LowerRequest Request(const std::string& text) {
  v1::LowerRequest request;
  bool bare = false;
  absl::Status parsed =
      ParseRequest(text, FileFormat::kText, "test", &request, &bare);
  EXPECT_TRUE(parsed.ok()) << parsed;
  return request;
}

LowerResult LowerText(const std::string& text) {
  absl::StatusOr<LowerResult> result = Lower(Request(text));
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *std::move(result) : LowerResult{};
}

// The first diagnostic with `code`; fails the test when there is none.
Diagnostic Find(const Diagnostics& diagnostics, const std::string& code) {
  for (const Diagnostic& d : diagnostics.items())
    if (d.code == code) return d;
  ADD_FAILURE() << "no " << code << " in\n"
                << FormatDiagnosticsText(diagnostics, "test");
  return {};
}

// y calls a misspelt operator, z reads a misspelt value; both nodes carry
// the frontend's source location, the output none.
constexpr char kMisspelt[] = R"(
program {
  methods {
    name: "forward"
    nodes { name: "x" input { kind: USER_INPUT } tensor { dtype: F32 sizes: 4 }
            source { file: "model.py" line: 12 name: "x" } }
    nodes { name: "y" call { op: "aten::reluu" args { value: "x" } }
            tensor { dtype: F32 sizes: 4 } source { file: "model.py" line: 13 name: "relu" } }
    nodes { name: "z" call { op: "aten::relu" args { value: "yy" } }
            tensor { dtype: F32 sizes: 4 } source { file: "model.py" line: 14 } }
    nodes { name: "out" output { values { value: "q" } } }
  }
}
)";

TEST(DidYouMeanTest, SuggestsTheClosestKnownNameWithinAThirdOfItsLength) {
  const std::vector<std::string> known = {"cuda", "cpu", "aten::relu",
                                          "aten::relu_", "aten::add.Tensor"};
  EXPECT_EQ(DidYouMean("cdua", known), "did you mean 'cuda'?");  // swap
  EXPECT_EQ(DidYouMean("cuda0", known), "did you mean 'cuda'?");
  EXPECT_EQ(DidYouMean("aten::reluu", known), "did you mean 'aten::relu'?");
  EXPECT_EQ(DidYouMean("aten::add.Tensr", known),
            "did you mean 'aten::add.Tensor'?");
  // One edit for three letters; two for four are too many.
  EXPECT_EQ(DidYouMean("tpu", known), "did you mean 'cpu'?");
  EXPECT_EQ(DidYouMean("gpu0", known), "");
  // One letter: replacing it is no misspelling.
  EXPECT_EQ(DidYouMean("q", std::vector<std::string>{"x", "qq"}), "");
  EXPECT_EQ(DidYouMean("aten::softmax", known), "");
  // A known name is no misspelling of itself; nothing is close to "".
  EXPECT_EQ(DidYouMean("cuda", std::vector<std::string>{"cuda"}), "");
  EXPECT_EQ(DidYouMean("", known), "");
  EXPECT_EQ(DidYouMean(std::string(300, 'a'),
                       std::vector<std::string>{std::string(299, 'a')}),
            "");
}

TEST(DidYouMeanTest, TiesGoToTheNameThatSortsFirstWhateverTheOrder) {
  EXPECT_EQ(DidYouMean("ab", std::vector<std::string>{"bb", "ac"}),
            "did you mean 'ac'?");
  EXPECT_EQ(DidYouMean("ab", std::vector<std::string>{"ac", "bb"}),
            "did you mean 'ac'?");
}

TEST(DidYouMeanTest, OneSuggesterStopsAfterItsBudget) {
  std::vector<std::string> known;
  for (int i = 0; i < 20000; ++i) known.push_back("value_" + std::to_string(i));
  NameSuggester suggester;
  int answered = 0, calls = 0;
  for (; calls < 2000; ++calls) {
    if (suggester.DidYouMean("value_123x", known).empty()) break;
    ++answered;
  }
  EXPECT_GT(answered, 0);
  EXPECT_LT(calls, 2000) << "never ran out of budget";
  // Spent: later names get nothing, even a close one.
  EXPECT_EQ(suggester.DidYouMean("value_7", known), "");
  // A fresh suggester answers again.
  EXPECT_EQ(DidYouMean("valu_7", known), "did you mean 'value_7'?");
}

TEST(DiagnosticSourceTest, TextStartsWithTheNodesFileAndLine) {
  LowerResult result = LowerText(kMisspelt);
  ASSERT_FALSE(result.ok);
  const Diagnostic op = Find(result.diagnostics, codes::kUnknownOperator);
  EXPECT_EQ(op.source.file, "model.py");
  EXPECT_EQ(op.source.line, 13);
  EXPECT_EQ(op.source.name, "relu");
  const std::string text = FormatDiagnosticsText(result.diagnostics, "p.txt");
  EXPECT_NE(text.find("model.py:13: method 'forward': node 'y': "
                      "error[FERRY-E0110]: unknown operator 'aten::reluu'\n"
                      "  hint: did you mean 'aten::relu'?\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("model.py:14: method 'forward': node 'z': "
                      "error[FERRY-E0102]: reference to undefined value 'yy'\n"
                      "  hint: did you mean 'y'?\n"),
            std::string::npos)
      << text;
  // The output node has no source: the program file names the place (and
  // no one-letter name is close to 'q').
  EXPECT_NE(text.find("p.txt: method 'forward': node 'out': "
                      "error[FERRY-E0102]: reference to undefined value 'q'\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("'q'\n  hint"), std::string::npos) << text;
}

TEST(DiagnosticSourceTest, JsonCarriesItAndReadsBackTheSame) {
  LowerResult result = LowerText(kMisspelt);
  v1::LowerReport report = LowerReportToProto(result);
  const std::string json = ReportJson(report);
  EXPECT_NE(json.find("\"hint\":\"did you mean 'aten::relu'?\","
                      "\"method\":\"forward\",\"source\":{\"file\":"
                      "\"model.py\",\"line\":13,\"name\":\"relu\"}"),
            std::string::npos)
      << json;
  // Without a source there is no field (the output node 'out').
  EXPECT_NE(json.find("\"nodes\":[\"out\"],\"hint\":\"\",\"method\":"
                      "\"forward\"}"),
            std::string::npos)
      << json;
  LowerResult back = LowerResultFromProto(report);
  EXPECT_EQ(FormatDiagnosticsText(back.diagnostics, "p.txt"),
            FormatDiagnosticsText(result.diagnostics, "p.txt"));
}

TEST(DiagnosticSourceTest, ALineOfZeroPrintsTheFileOnly) {
  Diagnostics diagnostics;
  diagnostics.SetMethod("forward");
  diagnostics.Error("FERRY-E0302", "bad", {"n"}).source =
      DiagnosticSource{"gen.py", 0, ""};
  EXPECT_EQ(FormatDiagnosticsText(diagnostics, "p.txt"),
            "gen.py: method 'forward': node 'n': error[FERRY-E0302]: bad\n");
}

TEST(DidYouMeanTest, UnknownOperatorWithNoCloseNameKeepsTheGeneralHint) {
  std::string text = kMisspelt;
  text.replace(text.find("aten::reluu"), 11, "aten::zzzzzzzzzz");
  const Diagnostic op =
      Find(LowerText(text).diagnostics, codes::kUnknownOperator);
  EXPECT_EQ(op.hint,
            "give the node its ATen schema in call.schema, or use a "
            "registered operator (see docs/format.md)");
}

// A valid program, for the option and device cases.
constexpr char kRelu[] = R"(
program {
  methods {
    name: "forward"
    nodes { name: "x" input { kind: USER_INPUT } tensor { dtype: F32 sizes: 4 } }
    nodes { name: "y" call { op: "aten::relu" args { value: "x" } }
            tensor { dtype: F32 sizes: 4 } }
    nodes { name: "out" output { values { value: "y" } } }
  }
}
)";

TEST(DidYouMeanTest, OptionsNameUnknownOperatorsAndDevicesWithAHint) {
  const std::string text = std::string(kRelu) + R"(
options {
  partitioner { kind: BY_CAPABILITY target_device: "cdua:1"
                deny_operators: "aten::rellu" }
}
)";
  LowerResult result = LowerText(text);
  ASSERT_FALSE(result.ok);
  std::vector<std::string> hints;
  for (const Diagnostic& d : result.diagnostics.items())
    if (d.code == codes::kBadOption) hints.push_back(d.hint);
  EXPECT_EQ(hints, (std::vector<std::string>{"did you mean 'cuda:1'?",
                                             "did you mean 'aten::relu'?"}));
}

TEST(DidYouMeanTest, OptionKeysAndValuesInTextGetAHint) {
  v1::LowerRequest request;
  bool bare = false;
  absl::Status key = ParseRequest(
      std::string(kRelu) +
          "options { skip_h2d_for_method_input { default_value: true } }",
      FileFormat::kText, "test", &request, &bare);
  EXPECT_NE(key.message().find(
                "has no field named \"skip_h2d_for_method_input\". (did you "
                "mean 'skip_h2d_for_method_inputs'?)"),
            std::string::npos)
      << key;
  absl::Status value =
      ParseRequest(std::string(kRelu) + "options { constant_staging: AT_LAOD }",
                   FileFormat::kText, "test", &request, &bare);
  EXPECT_NE(value.message().find("(did you mean 'AT_LOAD'?)"),
            std::string::npos)
      << value;
}

TEST(DidYouMeanTest, AModuleTargetDeviceGetsTheDeviceItMeant) {
  EXPECT_EQ(DidYouMeanDevice("cdua:0"), "did you mean 'cuda:0'?");
  EXPECT_EQ(DidYouMeanDevice(" CPUU "), "did you mean 'cpu'?");
  EXPECT_EQ(DidYouMeanDevice("cuda:x"), "");  // the type is right
  EXPECT_EQ(DidYouMeanDevice("tensorcore:0"), "");
  const std::string text = R"(
program {
  modules {
    id: "m0" backend: "CudaBackend"
    compile_specs { key: "target_device" value: "cdua:0" }
    graph {
      name: "m0"
      nodes { name: "a" input { kind: USER_INPUT } tensor { dtype: F32 sizes: 4 } }
      nodes { name: "r" call { op: "aten::relu" args { value: "a" } }
              tensor { dtype: F32 sizes: 4 } }
      nodes { name: "o" output { values { value: "r" } } }
    }
  }
  methods {
    name: "forward"
    nodes { name: "x" input { kind: USER_INPUT } tensor { dtype: F32 sizes: 4 } }
    nodes { name: "d" delegate { module: "m0" args { value: "x" } }
            tensor { dtype: F32 sizes: 4 } source { file: "model.py" line: 7 } }
    nodes { name: "out" output { values { value: "d" } } }
  }
}
)";
  LowerResult result = LowerText(text);
  const Diagnostic bad = Find(result.diagnostics, codes::kBadTargetDevice);
  EXPECT_EQ(bad.hint, "did you mean 'cuda:0'?");
  EXPECT_EQ(bad.source.file, "model.py");
  EXPECT_EQ(bad.source.line, 7);
}

}  // namespace
}  // namespace ferry
