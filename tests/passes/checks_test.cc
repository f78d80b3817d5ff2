// The checkers (checks.h): each accepts what its pass makes and catches a
// hand-broken program. The conformance and random-program tests run them
// after every pass of every program; these pin that they are not
// tautologies.
#include "passes/checks.h"

#include "ferry/v1/program.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/text_format.h"
#include "gtest/gtest.h"
#include "passes/lower.h"
#include "passes/normalize_layout.h"
#include "passes/partition.h"
#include "passes/pipeline.h"
#include "passes/place_and_copy.h"
#include "passes/plan_memory.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;
using ::testing::HasSubstr;

// a, b -> t = add [d0, cuda:0] -> s = sin (host) -> u = mul(s, a) [d1,
// cuda:0]: copies both ways, a value shared by two delegates.
std::string TwoDelegates() {
  return MethodText("forward",
                    Input("a") + Input("b") +
                        Call("t", "aten::add.Tensor", {"a", "b"}, "d0") +
                        Call("s", "aten::sin", {"t"}) +
                        Call("u", "aten::mul.Tensor", {"s", "a"}, "d1") +
                        Output({"u"}));
}
constexpr char kTwoDevices[] =
    "partitioner { tag_targets { key: \"d0\" value: \"cuda:0\" } "
    "tag_targets { key: \"d1\" value: \"cuda:0\" } }";

// A parameter stored transposed, read by a host matmul.
constexpr char kTransposedParameter[] =
    "methods { name: \"forward\"\n"
    "  nodes { name: \"x\" input { kind: USER_INPUT } "
    "tensor { dtype: F32 sizes: 4 sizes: 4 } }\n"
    "  nodes { name: \"w\" input { kind: PARAMETER target: \"w\" } "
    "tensor { dtype: F32 sizes: 4 sizes: 3 strides: 1 strides: 4 } }\n"
    "  nodes { name: \"y\" call { op: \"aten::mm\" args { value: \"x\" } "
    "args { value: \"w\" } } tensor { dtype: F32 sizes: 4 sizes: 3 } }\n"
    "  nodes { name: \"output\" output { values { value: \"y\" } } }\n"
    "}\n"
    "constants { name: \"w\" "
    "spec { dtype: F32 sizes: 4 sizes: 3 strides: 1 strides: 4 } }\n";

struct Passed {
  Program program;
  LowerOptions options;
};

// Runs the pipeline's passes in order, the first `count` of them, each
// followed by its checker (which must accept it).
Passed RunPasses(const std::string& text, const std::string& options_text,
                 int count) {
  static constexpr std::pair<const char*, PassFn> kPasses[] = {
      {"normalize_layout", &NormalizeLayout},
      {"partition", &Partition},
      {"lower", &LowerPartitions},
      {"place_and_copy", &PlaceAndCopy},
      {"plan_memory", &PlanMemory},
  };
  Passed out;
  out.program = ParseProgram(text);
  out.options = ParseOptions(options_text, out.program);
  Diagnostics diagnostics;
  for (int k = 0; k < count; ++k) {
    const auto& [name, pass] = kPasses[k];
    EXPECT_TRUE(pass(out.program, out.options, diagnostics).ok()) << name;
    EXPECT_FALSE(diagnostics.HasErrors())
        << FormatDiagnosticsText(diagnostics, name);
    const absl::Status checked =
        CheckEstablished(name, out.program, out.options);
    EXPECT_TRUE(checked.ok()) << name << ": " << checked;
  }
  return out;
}

Node& NodeNamed(Program& program, const std::string& name) {
  Method& method = program.methods[0];
  const int32_t index = Find(method, name);
  EXPECT_GE(index, 0) << name;
  return method.nodes[index];
}

TEST(CheckLayoutNormalized, CatchesAConstantLeftTransposed) {
  // Without normalize_layout, w keeps its transposed strides.
  Passed p = RunPasses(kTransposedParameter, "", 0);
  const absl::Status status = CheckLayoutNormalized(p.program, p.options);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(status.message(), HasSubstr("constant 'w'"));
}

TEST(CheckLayoutNormalized, CatchesANodeReadingTheOldLayout) {
  Passed p = RunPasses(kTransposedParameter, "", 1);
  NodeNamed(p.program, "w").tensor.strides = {1, 4};
  EXPECT_THAT(CheckLayoutNormalized(p.program, p.options).message(),
              HasSubstr("'w' reads constant 'w'"));
}

TEST(CheckPartitioned, CatchesAGroupThatLeavesAndReenters) {
  // t and u in one group, with the host sin between them.
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 2);
  NodeNamed(p.program, "u").delegation_tag = "d0";
  EXPECT_THAT(CheckPartitioned(p.program, p.options).message(),
              HasSubstr("partition 'd0' is not convex"));
}

TEST(CheckPartitioned, CatchesATaggedOutput) {
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 2);
  NodeNamed(p.program, "output").delegation_tag = "d1";
  EXPECT_THAT(CheckPartitioned(p.program, p.options).message(),
              HasSubstr("'output' (output) carries tag 'd1'"));
}

TEST(CheckLowered, CatchesADelegateWithAMissingArgument) {
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 3);
  NodeNamed(p.program, "delegate_d0").args.pop_back();
  EXPECT_THAT(CheckLowered(p.program, p.options).message(),
              HasSubstr("passes 1 arguments to module 'forward.d0', which "
                        "has 2 user inputs"));
}

TEST(CheckLowered, CatchesALeftoverTag) {
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 3);
  NodeNamed(p.program, "s").delegation_tag = "d0";
  EXPECT_THAT(CheckLowered(p.program, p.options).message(),
              HasSubstr("'s' still carries tag 'd0'"));
}

TEST(CheckPlaced, CatchesADelegateReadingAHostValue) {
  // delegate_d1 reads s on the host instead of its H2D copy.
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 4);
  Method& m = p.program.methods[0];
  Node& delegate = NodeNamed(p.program, "delegate_d1");
  for (Argument& arg : delegate.args)
    if (m.ValueName(arg.value) == "s_to_cuda0") arg.value.node = Find(m, "s");
  // The copy then has no reader: the first violation in node order.
  EXPECT_THAT(CheckPlaced(p.program, p.options).message(),
              HasSubstr("copy 's_to_cuda0' has no reader"));
  // Without that copy, the delegate's read itself is the violation.
  const int32_t copy = Find(m, "s_to_cuda0");
  m.nodes.erase(m.nodes.begin() + copy);
  for (Node& node : m.nodes)
    ForEachOperandMutable(node, [&](ValueId& v) {
      if (v.node > copy) --v.node;
    });
  EXPECT_THAT(CheckPlaced(p.program, p.options).message(),
              HasSubstr("'delegate_d1' needs 's' on cuda:0 but it is on cpu"));
}

TEST(CheckPlaced, CatchesACopyToTheWrongDevice) {
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 4);
  NodeNamed(p.program, "a_to_cuda0").tensor.SetDevice(Device::Cuda(1));
  EXPECT_THAT(CheckPlaced(p.program, p.options).message(),
              HasSubstr("'delegate_d0', which does not run on cuda:1"));
}

TEST(CheckPlaced, CatchesTwoCopiesOfOneVersion) {
  // s_to_cuda0 made to copy a, which a_to_cuda0 already copies to cuda:0.
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 4);
  NodeNamed(p.program, "s_to_cuda0").args[0].value =
      ValueId{Find(p.program.methods[0], "a"), -1};
  EXPECT_THAT(CheckPlaced(p.program, p.options).message(),
              HasSubstr("a second H2D copy of 'a' to cuda:0"));
}

TEST(CheckPlaced, CatchesACopyAwayFromItsReader) {
  // The host sin moved between a's copy and its reader delegate_d0.
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 4);
  Method& m = p.program.methods[0];
  EXPECT_EQ(NodeNames(m).rfind("a b a_to_cuda0 b_to_cuda0 delegate_d0", 0), 0u)
      << NodeNames(m);
  // Swap b_to_cuda0 (index 3) with a new host node that reads a.
  Node host = m.nodes[Find(m, "s")];
  host.name = "extra";
  host.args[0].value = ValueId{Find(m, "a"), -1};
  m.nodes.insert(m.nodes.begin() + 3, std::move(host));
  for (size_t i = 4; i < m.nodes.size(); ++i)
    ForEachOperandMutable(m.nodes[i], [&](ValueId& v) {
      if (v.node >= 3) ++v.node;
    });
  EXPECT_THAT(CheckPlaced(p.program, p.options).message(),
              HasSubstr("'extra' sits between copy 'a_to_cuda0' and its first "
                        "reader"));
}

TEST(CheckPlanned, CatchesTwoLiveValuesSharingBytes) {
  // a and b are both live until delegate_d0 reads their copies.
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 5);
  NodeNamed(p.program, "b").tensor.memory.offset =
      NodeNamed(p.program, "a").tensor.memory.offset;
  EXPECT_THAT(CheckPlanned(p.program, p.options).message(),
              HasSubstr("'a' and 'b' are live at the same time"));
}

TEST(CheckPlanned, CatchesAValueOutsideItsArena) {
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 5);
  MemoryPlacement& memory = NodeNamed(p.program, "s").tensor.memory;
  memory.offset = p.program.methods[0].arenas[memory.arena].size;
  EXPECT_THAT(CheckPlanned(p.program, p.options).message(),
              HasSubstr("'s' at offset"));
}

TEST(CheckPlanned, CatchesAnUnplannedResult) {
  Passed p = RunPasses(TwoDelegates(), kTwoDevices, 5);
  NodeNamed(p.program, "s").tensor.memory = MemoryPlacement{};
  EXPECT_THAT(CheckPlanned(p.program, p.options).message(),
              HasSubstr("'s' is not planned but should be"));
}

TEST(AfterPass, RunsAfterEachPassAndItsErrorStopsThePipeline) {
  v1::LowerRequest request;
  ASSERT_TRUE(google::protobuf::TextFormat::ParseFromString(
      "program { " + TwoDelegates() + " } options { " + kTwoDevices + " }",
      &request));
  std::vector<std::string> seen;
  absl::StatusOr<LowerResult> result =
      Lower(request, {}, {}, {}, {},
            [&](std::string_view pass, const Program& program,
                const LowerOptions& options) {
              seen.emplace_back(pass);
              if (pass == "lower") return absl::InternalError("stop here");
              return CheckEstablished(pass, program, options);
            });
  EXPECT_EQ(result.status(), absl::InternalError("stop here"));
  EXPECT_EQ(seen, (std::vector<std::string>{"normalize_layout", "partition",
                                            "lower"}));
}

}  // namespace
}  // namespace ferry
