// The pipeline driver: the stages it advertises are the stages it runs, and
// a caller that frees the request once the pipeline has read it gets the
// same result.
#include "passes/pipeline.h"

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ferry/v1/program.pb.h"
#include "ferry/v1/report.pb.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "passes/proto_io.h"
#include "passes/report_io.h"
#include "passes/resource_limits.h"
#include "passes/validate.h"
#include "tests/passes/test_programs.h"
#include "tests/support/files.h"

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

// Partition and lower are not run where validation found nothing for them:
// no node tagged and none with a schema of its own. Each condition alone
// keeps partition's work: a node with another schema for a registered name
// is warned of (by tag, the default partitioner), and a tagged node lowered.
TEST(PipelineTest, PartitionRunsWhereANodeHasATagOrASchemaOfItsOwn) {
  auto lower = [](const std::string& nodes) {
    v1::LowerRequest request;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "program {" + MethodText("f", Input("a") + nodes) +
            "} options { partitioner { tag_targets { key: 'd0' value: "
            "'cuda:0' } } }",
        &request));
    absl::StatusOr<LowerResult> result = Lower(request);
    EXPECT_TRUE(result.ok()) << result.status();
    EXPECT_TRUE(result->ok) << FormatDiagnosticsText(result->diagnostics, "f");
    return *std::move(result);
  };
  auto warned = [](const LowerResult& result) {
    int warnings = 0;
    for (const Diagnostic& d : result.diagnostics.items())
      warnings += d.code == codes::kSchemaDiffersFromRegistry;
    return warnings;
  };
  const LowerResult plain =
      lower(Call("t", "aten::sin", {"a"}) + Output({"t"}));
  EXPECT_EQ(warned(plain), 0);
  EXPECT_EQ(plain.stats.delegates, 0);
  const LowerResult own_schema = lower(
      "nodes { name: 't' call { op: 'aten::sin' args { value: 'a' } "
      "args { int_value: 2 } schema: 'aten::sin(Tensor self, int k) -> "
      "Tensor' } tensor { dtype: F32 sizes: 4 sizes: 4 } }\n" +
      Output({"t"}));
  EXPECT_EQ(warned(own_schema), 1);
  const LowerResult tagged =
      lower(Call("t", "aten::sin", {"a"}, "d0") + Output({"t"}));
  EXPECT_EQ(tagged.stats.delegates, 1);
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

// Whether a method's tensors together stay addressable (CheckAddressable)
// is counted by validation, in its own walk over the specs: the same answer,
// the same node, and Lower refuses there, before any pass.
TEST(PipelineTest, TensorsPastTheAddressableBoundAreRefusedAtTheFirstNode) {
  // f32 [2^29, 2^30]: 2^61 bytes, so the second such tensor is past 2^62.
  const std::vector<int64_t> half = {int64_t{1} << 29, int64_t{1} << 30};
  auto lower = [&](const std::string& nodes) {
    v1::LowerRequest request;
    EXPECT_TRUE(google::protobuf::TextFormat::ParseFromString(
        "program {" + MethodText("f", nodes) + "}", &request));
    Diagnostics diagnostics;
    Program program = ImportProgram(request.program(), diagnostics);
    absl::Status counted = absl::InternalError("not set");
    EXPECT_TRUE(ValidateProgram(program, diagnostics, &counted))
        << FormatDiagnosticsText(diagnostics, "f");
    const absl::Status walked = CheckAddressable(program);
    EXPECT_EQ(counted, walked);
    absl::StatusOr<LowerResult> lowered = Lower(request);
    if (walked.ok()) {
      EXPECT_TRUE(lowered.ok() && lowered->ok);
    } else {
      EXPECT_EQ(lowered.status(), walked);
    }
    return walked;
  };

  const absl::Status past =
      lower(Input("a", half) + Call("t", "aten::sin", {"a"}, "", half) +
            Call("u", "aten::cos", {"t"}, "", half) + Output({"u"}));
  std::optional<ResourceViolation> violation = GetResourceViolation(past);
  ASSERT_TRUE(violation.has_value()) << past;
  EXPECT_EQ(violation->limit, "addressable_bytes");
  EXPECT_EQ(violation->subject, NodeSubject("f", "t"));
  EXPECT_GT(violation->bytes, kAddressableBytes);

  const std::vector<int64_t> quarter = {int64_t{1} << 28, int64_t{1} << 30};
  EXPECT_TRUE(lower(Input("a", quarter) +
                    Call("t", "aten::sin", {"a"}, "", quarter) + Output({"t"}))
                  .ok());
}

// --- LowerWire: the program read node by node from the request's bytes ----

// Every request of the conformance case table, those that lower and those
// that are refused, lowers from its bytes as from the parsed request: the
// same report, diagnostics and sources included, and the same program.
TEST(LowerWireTest, EveryConformanceCaseLowersAsFromTheParsedRequest) {
  namespace fs = std::filesystem;
  int cases = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(
           fs::path(FERRY_SOURCE_DIR) / "tests/conformance")) {
    const fs::path path = entry.path() / "request.textproto";
    if (!fs::exists(path)) continue;
    v1::LowerRequest request;
    ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
        testing_util::ReadFile(path.string()), &request))
        << path;
    const std::string bytes = Binary(request);
    EXPECT_EQ(ResultText(LowerWire(bytes)), ResultText(Lower(request))) << path;
    ++cases;
  }
  EXPECT_GE(cases, 50);
}

// Import's diagnostics, their order and their nodes' sources, are the same
// read node by node: an empty name, a repeated one, a dangling reference (with
// its "did you mean") and a read of a later node.
TEST(LowerWireTest, ImportDiagnosticsAreTheSame) {
  v1::LowerRequest request;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(R"(
program {
  methods {
    name: "f"
    nodes { name: "a" input { kind: USER_INPUT } tensor { dtype: F32 sizes: 4 }
            source { file: "m.py" line: 1 } }
    nodes { name: "" call { op: "aten::sin" args { value: "a" } }
            tensor { dtype: F32 sizes: 4 } source { file: "m.py" line: 2 } }
    nodes { name: "t" call { op: "aten::sin" args { value: "later" } }
            tensor { dtype: F32 sizes: 4 } source { file: "m.py" line: 3 } }
    nodes { name: "t" call { op: "aten::cos" args { value: "aa" } }
            tensor { dtype: F32 sizes: 4 } source { file: "m.py" line: 4 } }
    nodes { name: "later" call { op: "aten::cos" args { value: "a" } }
            tensor { dtype: F32 sizes: 4 } }
    nodes { name: "out" output { values { value: "t" } } }
  }
})",
                                                            &request));
  const absl::StatusOr<LowerResult> expected = Lower(request);
  ASSERT_TRUE(expected.ok()) << expected.status();
  ASSERT_FALSE(expected->ok);
  EXPECT_GE(expected->diagnostics.items().size(), 4u);
  EXPECT_EQ(ResultText(LowerWire(Binary(request))), ResultText(expected));
}

// Nodes whose name is not their first field, or is given twice (the last
// one counts), read node by node as protobuf reads them.
TEST(LowerWireTest, ANameWrittenLaterOrTwiceIsTheNodesName) {
  v1::LowerRequest request;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "program {" +
          MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}) +
                              Call("u", "aten::cos", {"t"}) + Output({"u"})) +
          "}",
      &request));
  const v1::Method& method = request.program().methods(0);
  for (int variant = 0; variant < 2; ++variant) {
    std::string nodes;
    for (const v1::Node& node : method.nodes()) {
      v1::Node unnamed = node;
      unnamed.clear_name();
      std::string bytes = unnamed.SerializeAsString();
      const std::string name = Field(1, node.name());
      // 0: the name after the other fields; 1: a wrong name first, then
      // the node as protobuf writes it (its name first).
      bytes = variant == 0 ? bytes + name
                           : Field(1, "wrong") + node.SerializeAsString();
      nodes += Field(2, bytes);
    }
    const std::string wire =
        Field(1, Field(1, Field(1, method.name()) + nodes));
    v1::LowerRequest parsed;
    ASSERT_TRUE(parsed.ParseFromString(wire));
    EXPECT_EQ(parsed.program().methods(0).nodes(1).name(), "t");
    const absl::StatusOr<LowerResult> expected = Lower(parsed);
    ASSERT_TRUE(expected.ok() && expected->ok) << ResultText(expected);
    EXPECT_EQ(ResultText(LowerWire(wire)), ResultText(expected)) << variant;
  }
}

// A program whose constants come before, between and after its methods (not
// as serializers write it): what is not a method is joined before it is
// parsed, and the program lowers as protobuf reads it.
TEST(LowerWireTest, ConstantsBetweenMethodsAreRead) {
  v1::LowerRequest request;
  ASSERT_TRUE(
      google::protobuf::TextFormat::ParseFromString(kPerCallCopy, &request));
  v1::Method second = request.program().methods(0);
  second.set_name("second");
  v1::Constant other;
  other.set_name("v");
  other.mutable_spec()->set_dtype(v1::F32);
  other.mutable_spec()->add_sizes(2);
  v1::Constant third = other;
  third.set_name("u");
  const std::string program =
      Field(2, other.SerializeAsString()) +
      Field(1, request.program().methods(0).SerializeAsString()) +
      Field(2, request.program().constants(0).SerializeAsString()) +
      Field(1, second.SerializeAsString()) +
      Field(2, third.SerializeAsString());
  const std::string wire =
      Field(1, program) + Field(2, request.options().SerializeAsString());
  v1::LowerRequest parsed;
  ASSERT_TRUE(parsed.ParseFromString(wire));
  ASSERT_EQ(parsed.program().methods_size(), 2);
  ASSERT_EQ(parsed.program().constants_size(), 3);
  const absl::StatusOr<LowerResult> expected = Lower(parsed);
  ASSERT_TRUE(expected.ok() && expected->ok) << ResultText(expected);
  EXPECT_EQ(ResultText(LowerWire(wire)), ResultText(expected));
}

// What the node-by-node reading leaves to protobuf gives the same result
// too: a program given in two parts (merged), a node whose name is not
// UTF-8 (not a valid request), and bytes that are no message at all.
TEST(LowerWireTest, RequestsLeftToProtobufLowerTheSame) {
  v1::LowerRequest first, second;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "program {" +
          MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                              Output({"t"})) +
          "}",
      &first));
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "options { partitioner { tag_targets { key: 'd0' value: 'cuda:0' } } } "
      "program { methods { name: 'g' nodes { name: 'x' input { kind: "
      "USER_INPUT } tensor { dtype: F32 sizes: 2 } } nodes { name: 'o' "
      "output { values { value: 'x' } } } } }",
      &second));
  const std::string parts = Binary(first) + Binary(second);
  v1::LowerRequest merged;
  ASSERT_TRUE(merged.ParseFromString(parts));
  ASSERT_EQ(merged.program().methods_size(), 2);
  const absl::StatusOr<LowerResult> lowered = Lower(merged);
  ASSERT_TRUE(lowered.ok() && lowered->ok) << ResultText(lowered);
  EXPECT_EQ(ResultText(LowerWire(parts)), ResultText(lowered));

  // "\xff" is no UTF-8: protobuf refuses the request.
  std::string bad_name = Binary(first);
  const size_t at = bad_name.find("\x01t", 0);  // the name of node "t"
  ASSERT_NE(at, std::string::npos);
  bad_name[at + 1] = '\xff';
  v1::LowerRequest unparsed;
  EXPECT_FALSE(unparsed.ParseFromString(bad_name));
  EXPECT_EQ(LowerWire(bad_name).status().code(),
            absl::StatusCode::kInvalidArgument);

  for (const std::string& garbage :
       {std::string("\xff\xff\xff"), Binary(first).substr(0, 20)}) {
    ASSERT_FALSE(unparsed.ParseFromString(garbage));
    EXPECT_EQ(LowerWire(garbage).status().code(),
              absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace
}  // namespace ferry
