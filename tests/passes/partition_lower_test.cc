// partition and lower on their own.
#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "passes/lower.h"
#include "passes/partition.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;

TEST(Partition, CapabilityGroupsNeverFormACycle) {
  // mm -> custom host op -> mm(reads both): one group would be a cycle, so
  // the capability partitioner makes two.
  Program p = ParseProgram(MethodText(
      "f", Input("a") + Call("t", "aten::mm", {"a", "a"}) +
               "nodes { name: \"h\" call { op: \"custom::scale\" args { value: "
               "\"t\" } schema: \"custom::scale(Tensor self) -> Tensor\" } "
               "tensor { dtype: F32 sizes: 4 sizes: 4 } }\n" +
               Call("u", "aten::mm", {"h", "t"}) + Output({"u"})));
  LowerOptions options = ParseOptions("partitioner { kind: BY_CAPABILITY }", p);
  Diagnostics d;
  ASSERT_TRUE(Partition(p, options, d).ok());
  EXPECT_FALSE(d.HasErrors());
  const Method& m = p.methods[0];
  EXPECT_EQ(m.nodes[Find(m, "t")].delegation_tag, "partition_0");
  EXPECT_EQ(m.nodes[Find(m, "h")].delegation_tag, "");
  EXPECT_EQ(m.nodes[Find(m, "u")].delegation_tag, "partition_1");
  ASSERT_TRUE(LowerPartitions(p, options, d).ok());
  EXPECT_EQ(p.modules.size(), 2u);
}

TEST(Partition, TaggedGroupThatLeavesAndReentersIsAnError) {
  Program p = ParseProgram(MethodText(
      "f", Input("a") + Call("t", "aten::sin", {"a"}, "g") +
               Call("h", "aten::cos", {"t"}) +
               Call("u", "aten::mul.Tensor", {"h", "t"}, "g") + Output({"u"})));
  Diagnostics d;
  ASSERT_TRUE(Partition(p, ParseOptions("", p), d).ok());
  ASSERT_TRUE(d.HasErrors());
  EXPECT_EQ(d.items()[0].code, codes::kPartitionCycle);
  EXPECT_EQ(d.items()[0].nodes[0], "u");
}

TEST(Partition, TwoGroupsThatNeedEachOtherAreACycle) {
  // g1 -> g2 -> g1: each group alone is convex, but neither delegate can run
  // first.
  Program p = ParseProgram(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "g1") +
                          Call("u", "aten::cos", {"t"}, "g2") +
                          Call("v", "aten::exp", {"u"}, "g1") + Output({"v"})));
  Diagnostics d;
  ASSERT_TRUE(Partition(p, ParseOptions("", p), d).ok());
  ASSERT_TRUE(d.HasErrors());
  EXPECT_EQ(d.items()[0].code, codes::kPartitionCycle);
  EXPECT_EQ(d.items()[0].nodes[0], "u");
}

TEST(Partition, HostWriteBetweenGroupMembersIsACycle) {
  // u reads t after the host relu_ wrote it: lowering t and u together
  // would read t before the write.
  Program p = ParseProgram(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "g") +
                          Call("w", "aten::relu_", {"t"}) +
                          Call("u", "aten::cos", {"t"}, "g") + Output({"u"})));
  Diagnostics d;
  ASSERT_TRUE(Partition(p, ParseOptions("", p), d).ok());
  ASSERT_TRUE(d.HasErrors());
  EXPECT_EQ(d.items()[0].code, codes::kPartitionCycle);
}

TEST(Lower, NodesBetweenMembersThatReadTheGroupMoveAfterTheDelegate) {
  Program p = ParseProgram(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "g") +
                          Call("s", "aten::exp", {"t"}) +  // reads the group
                          Call("k", "aten::neg", {"a"}) +  // does not
                          Call("u", "aten::mul.Tensor", {"t", "a"}, "g") +
                          Call("r", "aten::cos", {"s"}) + Output({"u", "r"})));
  Diagnostics d;
  LowerOptions options = ParseOptions("", p);
  ASSERT_TRUE(Partition(p, options, d).ok());
  ASSERT_TRUE(LowerPartitions(p, options, d).ok());
  EXPECT_EQ(NodeNames(p.methods[0]), "a k delegate_g t s u r output");
  ASSERT_EQ(p.modules.size(), 1u);
  const LoweredModule& module = p.modules[0];
  EXPECT_EQ(module.id, "f.g");
  EXPECT_EQ(module.TargetDeviceText(), "cuda:0");
  EXPECT_EQ(NodeNames(module.graph), "a t u output");
  EXPECT_EQ(module.input_layouts.size(), 1u);
  EXPECT_TRUE(module.returns_tuple);
}

TEST(Lower, ProgramDataIsTakenInOnlyWhenEveryReaderIsInside) {
  const std::string params =
      "nodes { name: \"w\" input { kind: PARAMETER target: \"w\" } tensor { "
      "dtype: F32 sizes: 4 sizes: 4 } delegation_tag: \"g\" }\n"
      "nodes { name: \"v\" input { kind: PARAMETER target: \"v\" } tensor { "
      "dtype: F32 sizes: 4 sizes: 4 } delegation_tag: \"g\" }\n";
  Program p = ParseProgram(
      MethodText("f", Input("a") + params +
                          Call("t", "aten::mm", {"a", "w"}, "g") +
                          Call("u", "aten::mul.Tensor", {"t", "v"}, "g") +
                          Call("h", "aten::sin", {"v"}) + Output({"u", "h"})) +
      "constants { name: \"w\" spec { dtype: F32 sizes: 4 sizes: 4 } } "
      "constants { name: \"v\" spec { dtype: F32 sizes: 4 sizes: 4 } }");
  Diagnostics d;
  LowerOptions options = ParseOptions("", p);
  ASSERT_TRUE(Partition(p, options, d).ok());
  ASSERT_TRUE(LowerPartitions(p, options, d).ok());
  const Method& m = p.methods[0];
  EXPECT_EQ(Find(m, "w"), -1);  // owned by the module
  EXPECT_NE(Find(m, "v"), -1);  // also read by the host sin
  const Method& graph = p.modules[0].graph;
  EXPECT_EQ(graph.nodes[Find(graph, "w")].kind, NodeKind::kConstant);
  EXPECT_EQ(graph.nodes[Find(graph, "v")].kind, NodeKind::kInput);
}

}  // namespace
}  // namespace ferry
