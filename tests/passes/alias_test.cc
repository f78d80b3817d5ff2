// StorageRoots and EffectDependencies: aliasing comes from the schemas.
#include "passes/alias.h"

#include "gtest/gtest.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;

TEST(StorageRoots, ViewChainSharesTheRootStorage) {
  // The views are declared contiguous, which validation refuses (E0303):
  // only which storage they alias matters here.
  Program p = ParseProgramUnvalidated(
      MethodText("f", Input("a") + Call("t", "aten::add.Tensor", {"a", "a"}) +
                          Call("v1", "aten::transpose.int", {"t"}, "", {4, 4},
                               "args { int_value: 0 } args { int_value: 1 }") +
                          Call("v2", "aten::select.int", {"v1"}, "", {4},
                               "args { int_value: 0 } args { int_value: 1 }") +
                          Call("v3", "aten::unsqueeze", {"v2"}, "", {1, 4},
                               "args { int_value: 0 }") +
                          Call("r", "aten::relu_", {"v3"}, "", {1, 4}) +
                          Call("c", "aten::view_copy", {"v1"}, "", {16},
                               "args { ints { values: 16 } }") +
                          Output({"r", "c"})));
  const Method& m = p.methods[0];
  StorageRoots roots(m);
  const ValueId t{Find(m, "t"), -1};
  EXPECT_EQ(roots.RootOfNode(Find(m, "v1")), t);
  EXPECT_EQ(roots.RootOfNode(Find(m, "v3")), t);
  EXPECT_EQ(roots.RootOfNode(Find(m, "r")), t);  // the in-place result
  ASSERT_EQ(roots.WrittenBy(Find(m, "r")).size(), 1u);
  EXPECT_EQ(roots.WrittenBy(Find(m, "r"))[0], (ValueId{Find(m, "v3"), -1}));
  // A _copy op makes fresh storage.
  EXPECT_EQ(roots.RootOfNode(Find(m, "c")), (ValueId{Find(m, "c"), -1}));
  EXPECT_TRUE(roots.WrittenBy(Find(m, "t")).empty());
}

TEST(StorageRoots, GetItemIsItsTupleElement) {
  Program p = ParseProgram(MethodText(
      "f",
      Input("x", {2, 4}) +
          "nodes { name: \"ln\" call { op: \"aten::native_layer_norm\" args "
          "{ value: \"x\" } args { ints { values: 4 } } args { none {} } args "
          "{ none {} } args { float_value: 1e-5 } } tuple { elements { dtype: "
          "F32 sizes: 2 sizes: 4 } elements { dtype: F32 sizes: 2 sizes: 1 } "
          "elements { dtype: F32 sizes: 2 sizes: 1 } } }\n"
          "nodes { name: \"mean\" getitem { source: \"ln\" index: 1 } tensor "
          "{ dtype: F32 sizes: 2 sizes: 1 } }\n" +
          Output({"mean"})));
  const Method& m = p.methods[0];
  StorageRoots roots(m);
  EXPECT_EQ(roots.RootOfNode(Find(m, "mean")), (ValueId{Find(m, "ln"), 1}));
}

TEST(StorageRoots, MetadataOnlyComesFromTheRegistry) {
  Program p = ParseProgram(MethodText(
      "f", Input("x") +
               "nodes { name: \"n\" call { op: \"aten::sym_size.int\" args { "
               "value: \"x\" } args { int_value: 0 } } scalar: SCALAR_INT }\n" +
               Call("s", "aten::sin", {"x"}) + Output({"s", "n"})));
  StorageRoots roots(p.methods[0]);
  EXPECT_TRUE(roots.IsMetadataOnly(Find(p.methods[0], "n")));
  EXPECT_FALSE(roots.IsMetadataOnly(Find(p.methods[0], "s")));
}

TEST(EffectDependencies, ReadersAndWritersOfOneStorageKeepTheirOrder) {
  Program p = ParseProgram(MethodText(
      "f", Input("a") + Call("t", "aten::sin", {"a"}) +
               Call("r1", "aten::cos", {"t"}) +   // read before the write
               Call("w", "aten::relu_", {"t"}) +  // the write
               Call("r2", "aten::exp", {"t"}) +   // read after it
               Output({"r1", "r2"})));
  const Method& m = p.methods[0];
  std::vector<std::vector<int32_t>> deps =
      EffectDependencies(m, StorageRoots(m));
  EXPECT_EQ(deps[Find(m, "w")], std::vector<int32_t>{Find(m, "r1")});
  EXPECT_EQ(deps[Find(m, "r2")], std::vector<int32_t>{Find(m, "w")});
  EXPECT_TRUE(deps[Find(m, "r1")].empty());
}

}  // namespace
}  // namespace ferry
