// place_and_copy on its own, on programs whose delegates were made by the
// partition and lower passes.
#include "passes/place_and_copy.h"

#include "absl/strings/str_cat.h"
#include "ferry/v1/program.pb.h"
#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "passes/lower.h"
#include "passes/partition.h"
#include "passes/proto_io.h"
#include "passes/schema.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;

std::string Targets(const std::vector<std::pair<std::string, std::string>>& t) {
  std::string s = "partitioner {";
  for (const auto& [tag, dev] : t)
    absl::StrAppend(&s, " tag_targets { key: \"", tag, "\" value: \"", dev,
                    "\" }");
  return s + " }";
}

struct Placed {
  Program program;
  Diagnostics diagnostics;
};

// `validated`: false for a program whose declared specs validation refuses
// but the pass does not look at.
Placed Place(const std::string& text, const std::string& options_text,
             bool validated = true) {
  Placed out;
  out.program = validated ? ParseProgram(text) : ParseProgramUnvalidated(text);
  LowerOptions options = ParseOptions(options_text, out.program);
  EXPECT_TRUE(Partition(out.program, options, out.diagnostics).ok());
  EXPECT_TRUE(LowerPartitions(out.program, options, out.diagnostics).ok());
  EXPECT_TRUE(PlaceAndCopy(out.program, options, out.diagnostics).ok());
  return out;
}

std::string Text(const Program& p) {
  v1::Program proto;
  ExportProgram(p, &proto);
  return ToText(proto);
}

TEST(PlaceAndCopy, WriteThroughAViewChainInvalidatesTheDeviceCopy) {
  // x is copied to cuda:0 for D0; a host relu_ writes x through
  // transpose -> select; D1 must get a fresh copy placed after the write.
  // The views are declared contiguous, which validation refuses (E0303):
  // only which storage they alias matters here.
  Placed r = Place(
      MethodText("f", Input("a") + Call("x", "aten::sin", {"a"}) +
                          Call("u", "aten::exp", {"x"}, "d0") +
                          Call("v1", "aten::transpose.int", {"x"}, "", {4, 4},
                               "args { int_value: 0 } args { int_value: 1 }") +
                          Call("v2", "aten::select.int", {"v1"}, "", {4},
                               "args { int_value: 0 } args { int_value: 2 }") +
                          Call("w", "aten::relu_", {"v2"}, "", {4}) +
                          Call("z", "aten::cos", {"x"}, "d1") +
                          Output({"u", "z"})),
      Targets({{"d0", "cuda:0"}, {"d1", "cuda:0"}}), /*validated=*/false);
  const Method& m = r.program.methods[0];
  EXPECT_EQ(NodeNames(m),
            "a x x_to_cuda0 delegate_d0 u u_to_cpu v1 v2 w x_to_cuda0_v1 "
            "delegate_d1 z z_to_cpu output");
  EXPECT_EQ(ArgsOf(m, "delegate_d1"), "x_to_cuda0_v1");
  EXPECT_EQ(ArgsOf(m, "x_to_cuda0_v1"), "x");
}

TEST(PlaceAndCopy, ACopyNameTakenByANodeOrAnEarlierCopyGetsTheNextSuffix) {
  // The program already has nodes named x_to_cuda0 and x_to_cuda0_1 (host
  // results), so x's copy for D0 is x_to_cuda0_2; u's D2H, u_to_cpu, is
  // free.
  Placed r =
      Place(MethodText("f", Input("a") + Call("x", "aten::sin", {"a"}) +
                                Call("x_to_cuda0", "aten::cos", {"a"}) +
                                Call("x_to_cuda0_1", "aten::exp", {"a"}) +
                                Call("u", "aten::exp", {"x"}, "d0") +
                                Output({"u", "x_to_cuda0", "x_to_cuda0_1"})),
            Targets({{"d0", "cuda:0"}}));
  const Method& m = r.program.methods[0];
  EXPECT_EQ(NodeNames(m),
            "a x x_to_cuda0 x_to_cuda0_1 x_to_cuda0_2 delegate_d0 u u_to_cpu "
            "output");
  EXPECT_EQ(ArgsOf(m, "delegate_d0"), "x_to_cuda0_2");
}

// A lowered module `id` on `device` whose one 4x4 input x gives sin(x), and
// cos(x) when `results` is 2; `tuple`: it returns a tuple.
std::string ModuleText(const std::string& id, const std::string& device,
                       int results, bool tuple) {
  const std::string tensor = "tensor { dtype: F32 sizes: [4, 4] }";
  return absl::StrCat(
      "modules { id: \"", id, "\" backend: \"FerryCudaBackend\" ",
      "compile_specs { key: \"target_device\" value: \"", device, "\" } ",
      "graph { name: \"", id, "\" ",
      "nodes { name: \"x\" input { kind: USER_INPUT } ", tensor, " } ",
      "nodes { name: \"s\" call { op: \"aten::sin\" args { value: \"x\" } } ",
      tensor, " } ",
      "nodes { name: \"c\" call { op: \"aten::cos\" args { value: \"x\" } } ",
      tensor, " } ", "nodes { name: \"out\" output { values { value: \"s\" } ",
      results == 2 ? "values { value: \"c\" } " : "", "} } } ",
      "input_layouts { dtype: F32 sizes: [4, 4] } ",
      "returns_tuple: ", tuple ? "true" : "false", " }");
}

// A tuple element read without a getitem is named "node_e" in its copy's
// name, and that name can equal another node's copy name: the later copy
// takes the next suffix.
TEST(PlaceAndCopy, AnElementsCopyIsNamedAfterNodeAndIndex) {
  const std::string tensor = "tensor { dtype: F32 sizes: [4, 4] }";
  const std::string element = "elements { dtype: F32 sizes: [4, 4] }";
  const std::string text = absl::StrCat(
      "methods { name: \"f\" ",
      "nodes { name: \"a\" input { kind: USER_INPUT } ", tensor, " } ",
      // d returns two tensors on cuda:0; d_1 one.
      "nodes { name: \"d\" delegate { module: \"m0\" args { value: \"a\" ",
      "} } tuple { ", element, " ", element, " } } ",
      "nodes { name: \"d_1\" delegate { module: \"m1\" args { value: ",
      "\"a\" } } ", tensor, " } ",
      // Host readers of d's element 1 (no getitem) and of d_1.
      "nodes { name: \"h\" call { op: \"aten::exp\" args { element { ",
      "node: \"d\" index: 1 } } } ", tensor, " } ",
      "nodes { name: \"k\" call { op: \"aten::exp\" args { value: ",
      "\"d_1\" } } ", tensor, " } ",
      "nodes { name: \"output\" output { values { value: \"h\" } ",
      "values { value: \"k\" } } } } ",
      ModuleText("m0", "cuda:0", /*results=*/2, /*tuple=*/true),
      ModuleText("m1", "cuda:0", /*results=*/1, /*tuple=*/false));
  Placed r = Place(text, "");
  ASSERT_FALSE(r.diagnostics.HasErrors());
  const Method& m = r.program.methods[0];
  EXPECT_EQ(NodeNames(m),
            "a a_to_cuda0 d d_1_to_cpu d_1 d_1_to_cpu_1 h k output");
  EXPECT_EQ(ArgsOf(m, "d_1_to_cpu"), "d[1]");
  EXPECT_EQ(ArgsOf(m, "d_1_to_cpu_1"), "d_1");
  EXPECT_EQ(ArgsOf(m, "h"), "d_1_to_cpu");
  EXPECT_EQ(ArgsOf(m, "k"), "d_1_to_cpu_1");
}

// A getitem read with a layout of its own is copied as a view, named after
// the getitem; the getitem also names its whole storage, whose copy to the
// same device would have the same name: the later copy takes the next suffix.
TEST(PlaceAndCopy, AGetitemsViewAndItsStorageHaveCopiesOfTheirOwn) {
  const std::string tensor = "tensor { dtype: F32 sizes: [4, 4] }";
  auto delegate = [&](const std::string& name, const std::string& id,
                      const std::string& arg) {
    return absl::StrCat("nodes { name: \"", name, "\" delegate { module: \"",
                        id, "\" args { value: \"", arg,
                        "\" } } tuple { elements { dtype: F32 sizes: [4, 4] } "
                        "} } ");
  };
  const std::string text = absl::StrCat(
      "methods { name: \"f\" ",
      "nodes { name: \"a\" input { kind: USER_INPUT } ", tensor, " } ",
      delegate("d", "m0", "a"),
      // g names d's result (it comes first) with strides of its own; g2 with
      // its layout.
      "nodes { name: \"g\" getitem { source: \"d\" } tensor { dtype: F32 ",
      "sizes: [4, 4] strides: [1, 4] } } ",
      "nodes { name: \"g2\" getitem { source: \"d\" } ", tensor, " } ",
      // On cuda:1, e1 reads the storage whole, e2 the view.
      delegate("e1", "m1", "g2"), delegate("e2", "m1", "g"),
      "nodes { name: \"y1\" getitem { source: \"e1\" } ", tensor, " } ",
      "nodes { name: \"y2\" getitem { source: \"e2\" } ", tensor, " } ",
      "nodes { name: \"output\" output { values { value: \"y1\" } ",
      "values { value: \"y2\" } } } } ",
      ModuleText("m0", "cuda:0", /*results=*/1, /*tuple=*/true),
      ModuleText("m1", "cuda:1", /*results=*/1, /*tuple=*/true));
  Placed r = Place(text, "", /*validated=*/false);
  ASSERT_FALSE(r.diagnostics.HasErrors());
  const Method& m = r.program.methods[0];
  EXPECT_EQ(NodeNames(m),
            "a a_to_cuda0 d g g2 g2_to_cpu g_to_cuda1 e1 g_to_cuda1_1 e2 y1 "
            "y1_to_cpu y2 y2_to_cpu output");
  EXPECT_EQ(ArgsOf(m, "e1"), "g_to_cuda1");
  EXPECT_EQ(ArgsOf(m, "g_to_cuda1"), "g2_to_cpu");
  EXPECT_EQ(ArgsOf(m, "e2"), "g_to_cuda1_1");
  EXPECT_EQ(ArgsOf(m, "g_to_cuda1_1"), "g");
}

// A copy node's target is the registry's name of its copy operator, shared
// rather than spelt out again for every copy.
TEST(PlaceAndCopy, ACopysTargetIsTheRegistrysName) {
  Placed r =
      Place(MethodText("f", Input("a") + Call("u", "aten::exp", {"a"}, "d0") +
                                Output({"u"})),
            Targets({{"d0", "cuda:0"}}));
  int copies = 0;
  for (const Node& node : r.program.methods[0].nodes) {
    if (!IsH2DCopy(node) && !IsD2HCopy(node)) continue;
    ++copies;
    EXPECT_TRUE(node.target.lasting()) << node.name;
    EXPECT_EQ(&node.target.str(), &LookupOp(node.target)->name) << node.name;
  }
  EXPECT_EQ(copies, 2);  // a to the device, u back
}

TEST(PlaceAndCopy, InPlaceWriteOfOneTupleElement) {
  // D0 returns (t0, t1); the host writes t1 only. D1 on the same device
  // reads t0 in place and t1 through D2H -> add_ -> H2D.
  Placed r = Place(
      MethodText("f", Input("a") + Call("t0", "aten::sin", {"a"}, "d0") +
                          Call("t1", "aten::cos", {"a"}, "d0") +
                          Call("w", "aten::add_.Scalar", {"t1"}, "", {4, 4},
                               "args { float_value: 1 }") +
                          Call("u", "aten::mul.Tensor", {"t0", "t1"}, "d1") +
                          Output({"u"})),
      Targets({{"d0", "cuda:0"}, {"d1", "cuda:0"}}));
  const Method& m = r.program.methods[0];
  EXPECT_EQ(ArgsOf(m, "delegate_d1"), "t0 t1_to_cuda0_v1");
  EXPECT_EQ(ArgsOf(m, "w"), "t1_to_cpu");
  EXPECT_EQ(CountOp(m, std::string(kH2DCopyOp)), 2);  // a, t1 after the write
  EXPECT_EQ(CountOp(m, std::string(kD2HCopyOp)), 2);  // t1, u
  EXPECT_LT(Find(m, "w"), Find(m, "t1_to_cuda0_v1"));
}

TEST(PlaceAndCopy, SkipOptionsApplyPerMethod) {
  const std::string body = Input("a") + Input("b") +
                           Call("t", "aten::add.Tensor", {"a", "b"}, "d0") +
                           Output({"t"});
  Placed r = Place(MethodText("skips", body) + MethodText("copies", body),
                   Targets({{"d0", "cuda:0"}}) +
                       " skip_h2d_for_method_inputs { per_method { key: "
                       "\"skips\" value: true } }");
  EXPECT_EQ(CountOp(r.program.methods[0], std::string(kH2DCopyOp)), 0);
  EXPECT_EQ(CountOp(r.program.methods[1], std::string(kH2DCopyOp)), 2);
  const Method& skips = r.program.methods[0];
  EXPECT_EQ(skips.nodes[Find(skips, "a")].tensor.device, Device::Cuda(0));
  const Method& copies = r.program.methods[1];
  EXPECT_TRUE(copies.nodes[Find(copies, "a")].tensor.device.is_host());
}

TEST(PlaceAndCopy, DelegatesOnThreeDevicesShareOneHostCopy) {
  Placed r =
      Place(MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                                Call("u", "aten::cos", {"t"}, "d1") +
                                Call("w", "aten::exp", {"t"}, "d2") +
                                Output({"u", "w"})),
            Targets({{"d0", "cuda:0"}, {"d1", "cuda:1"}, {"d2", "cuda:2"}}));
  const Method& m = r.program.methods[0];
  EXPECT_EQ(ArgsOf(m, "delegate_d1"), "t_to_cuda1");
  EXPECT_EQ(ArgsOf(m, "delegate_d2"), "t_to_cuda2");
  EXPECT_EQ(ArgsOf(m, "t_to_cuda1"), "t_to_cpu");
  EXPECT_EQ(ArgsOf(m, "t_to_cuda2"), "t_to_cpu");
  EXPECT_EQ(m.nodes[Find(m, "t_to_cuda2")].tensor.device, Device::Cuda(2));
  EXPECT_EQ(m.nodes[Find(m, "u")].tensor.device, Device::Cuda(1));
  EXPECT_EQ(CountOp(m, std::string(kD2HCopyOp)), 3);  // t once, u, w
}

TEST(PlaceAndCopy, HostReadersShareOneD2HPlacedAfterTheValue) {
  Placed r = Place(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                          Call("x", "aten::cos", {"a"}) +
                          Call("s", "aten::relu", {"t"}) +
                          Call("e", "aten::exp", {"t"}) + Output({"s", "e"})),
      Targets({{"d0", "cuda:0"}}));
  const Method& m = r.program.methods[0];
  EXPECT_EQ(ArgsOf(m, "s"), "t_to_cpu");
  EXPECT_EQ(ArgsOf(m, "e"), "t_to_cpu");
  EXPECT_EQ(Find(m, "t_to_cpu"), Find(m, "t") + 1);
  EXPECT_EQ(CountOp(m, std::string(kD2HCopyOp)), 1);
}

TEST(PlaceAndCopy, SameAndOtherDeviceReadersAtSeveralVersions) {
  Placed r = Place(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                          Call("u", "aten::cos", {"t"}, "d1") +   // cuda:0
                          Call("w", "aten::exp", {"t"}, "d2") +   // cuda:1
                          Call("k", "aten::relu_", {"t"}) +       // host write
                          Call("p", "aten::neg", {"t"}, "d3") +   // cuda:0
                          Call("q", "aten::tanh", {"t"}, "d4") +  // cuda:1
                          Output({"u", "w", "p", "q"})),
      Targets({{"d0", "cuda:0"},
               {"d1", "cuda:0"},
               {"d2", "cuda:1"},
               {"d3", "cuda:0"},
               {"d4", "cuda:1"}}));
  const Method& m = r.program.methods[0];
  EXPECT_EQ(ArgsOf(m, "delegate_d1"), "t");
  EXPECT_EQ(ArgsOf(m, "delegate_d2"), "t_to_cuda1");
  EXPECT_EQ(ArgsOf(m, "k"), "t_to_cpu");
  EXPECT_EQ(ArgsOf(m, "delegate_d3"), "t_to_cuda0_v1");
  EXPECT_EQ(ArgsOf(m, "delegate_d4"), "t_to_cuda1_v1");
  EXPECT_EQ(ArgsOf(m, "t_to_cuda1_v1"), "t_to_cpu");
}

TEST(PlaceAndCopy, MetadataOnlyReaderIsNeverCopied) {
  Placed r = Place(
      MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                          "nodes { name: \"n\" call { op: "
                          "\"aten::sym_size.int\" args { value: \"t\" } args { "
                          "int_value: 0 } } scalar: SCALAR_INT }\n" +
                          Output({"n"})),
      Targets({{"d0", "cuda:0"}}));
  const Method& m = r.program.methods[0];
  EXPECT_EQ(ArgsOf(m, "n"), "t");
  EXPECT_EQ(CountOp(m, std::string(kD2HCopyOp)), 0);
}

TEST(PlaceAndCopy, CpuTargetIsTheHost) {
  Placed r =
      Place(MethodText("f", Input("a") + Call("t", "aten::sin", {"a"}, "d0") +
                                Call("s", "aten::cos", {"t"}) + Output({"s"})),
            Targets({{"d0", "CPU"}}));
  const Method& m = r.program.methods[0];
  EXPECT_EQ(
      CountOp(m, std::string(kH2DCopyOp)) + CountOp(m, std::string(kD2HCopyOp)),
      0);
  for (const Node& n : m.nodes) {
    if (const TensorSpec* s = n.Spec()) {
      EXPECT_TRUE(s->device.is_host()) << n.name;
    }
  }
}

TEST(PlaceAndCopy, RunningTwiceChangesNothing) {
  Placed r = Place(
      MethodText("f", Input("a") + Input("b") +
                          Call("t", "aten::add.Tensor", {"a", "b"}, "d0") +
                          Call("k", "aten::relu_", {"t"}) +
                          Call("u", "aten::mul.Tensor", {"t", "b"}, "d1") +
                          Output({"u", "t"})),
      Targets({{"d0", "cuda:0"}, {"d1", "cuda:1"}}) +
          " skip_d2h_for_method_outputs { default_value: true }");
  const std::string once = Text(r.program);
  LowerOptions options =
      ParseOptions(Targets({{"d0", "cuda:0"}, {"d1", "cuda:1"}}) +
                       " skip_d2h_for_method_outputs { default_value: true }",
                   r.program);
  Diagnostics diagnostics;
  ASSERT_TRUE(PlaceAndCopy(r.program, options, diagnostics).ok());
  EXPECT_EQ(Text(r.program), once);
}

TEST(PlaceAndCopy, ConstantCopyWarnsOnceAndAtLoadIsMarked) {
  const std::string text =
      MethodText("f",
                 Input("x") +
                     "nodes { name: \"w\" input { kind: PARAMETER target: "
                     "\"w\" } tensor { dtype: F32 sizes: 4 sizes: 4 } }\n" +
                     Call("t", "aten::add.Tensor", {"x", "w"}, "d0") +
                     Call("u", "aten::mul.Tensor", {"t", "w"}, "d1") +
                     Output({"u"})) +
      "constants { name: \"w\" spec { dtype: F32 sizes: 4 sizes: 4 } }";
  Placed per_call = Place(text, Targets({{"d0", "cuda:0"}, {"d1", "cuda:0"}}));
  ASSERT_EQ(per_call.diagnostics.items().size(), 1u);
  EXPECT_EQ(per_call.diagnostics.items()[0].code, codes::kPerCallConstantCopy);
  EXPECT_EQ(per_call.diagnostics.items()[0].nodes[0], "w");
  Placed at_load = Place(text, Targets({{"d0", "cuda:0"}, {"d1", "cuda:0"}}) +
                                   " constant_staging: AT_LOAD");
  EXPECT_TRUE(at_load.diagnostics.empty());
  const Method& m = at_load.program.methods[0];
  EXPECT_TRUE(m.nodes[Find(m, "w_to_cuda0")].at_load);
  EXPECT_FALSE(m.nodes[Find(m, "x_to_cuda0")].at_load);
}

}  // namespace
}  // namespace ferry
