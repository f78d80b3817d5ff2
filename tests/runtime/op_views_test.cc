// The network families' views through the executor (they compute nothing:
// the result is the argument's storage read through the node's spec):
// _reshape_alias, detach and split.Tensor; and hardtanh_ writing in place.
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/executor.h"
#include "tests/runtime/test_util.h"

namespace ferry::testing {
namespace {

std::vector<std::vector<double>> RunText(const std::string& text,
                                         ExecutionMode mode,
                                         const std::vector<double>& x) {
  Program program = ParseProgram(text);
  absl::StatusOr<std::unique_ptr<Executor>> executor =
      Executor::Load(program, mode);
  EXPECT_TRUE(executor.ok()) << executor.status();
  if (!executor.ok()) return {};
  const std::vector<HostTensor> inputs = {Dense(DType::kF32, {2, 3}, x)};
  absl::StatusOr<std::vector<HostTensor>> out =
      (*executor)->Run("forward", inputs);
  EXPECT_TRUE(out.ok()) << out.status();
  if (!out.ok()) return {};
  std::vector<std::vector<double>> values;
  for (const HostTensor& t : *out) values.push_back(Values(t));
  return values;
}

const std::vector<double> kX = {0, 1, 2, 3, 4, 5};  // x: f32[2,3]

constexpr char kHead[] =
    "methods { name: \"forward\"\n"
    "  nodes { name: \"x\" input { kind: USER_INPUT } tensor { dtype: F32 "
    "sizes: [2, 3] } }\n";

TEST(OpViewsTest, ReshapeAliasReadsThroughItsSizesAndStrides) {
  // _reshape_alias(x, [3, 2], [1, 3]): x's storage read transposed.
  const std::string text = absl::StrCat(
      kHead,
      "  nodes { name: \"v\" call { op: \"aten::_reshape_alias\" args { value: "
      "\"x\" } args { ints { values: [3, 2] } } args { ints { values: [1, 3] } "
      "} } tensor { dtype: F32 sizes: [3, 2] strides: [1, 3] } }\n"
      "  nodes { name: \"c\" call { op: \"aten::clone\" args { value: \"v\" } "
      "} tensor { dtype: F32 sizes: [3, 2] } }\n"
      "  nodes { name: \"output\" output { values { value: \"c\" } } }\n}\n");
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kSim}) {
    auto out = RunText(text, mode, kX);
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0], (std::vector<double>{0, 3, 1, 4, 2, 5}));
  }
}

TEST(OpViewsTest, DetachAliasesAndAnInPlaceHardtanhWritesTheRoot) {
  // d = detach(x); hardtanh_(d, 1, 4); return clone(x).
  const std::string text = absl::StrCat(
      kHead,
      "  nodes { name: \"d\" call { op: \"aten::detach\" args { value: \"x\" } "
      "} tensor { dtype: F32 sizes: [2, 3] } }\n"
      "  nodes { name: \"h\" call { op: \"aten::hardtanh_\" args { value: "
      "\"d\" } args { float_value: 1 } args { float_value: 4 } } tensor { "
      "dtype: F32 sizes: [2, 3] } }\n"
      "  nodes { name: \"c\" call { op: \"aten::clone\" args { value: \"x\" } "
      "} tensor { dtype: F32 sizes: [2, 3] } }\n"
      "  nodes { name: \"output\" output { values { value: \"c\" } } }\n}\n");
  auto out = RunText(text, ExecutionMode::kEager, kX);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0], (std::vector<double>{1, 1, 2, 3, 4, 4}));
}

TEST(OpViewsTest, SplitGivesViewsOfEachChunk) {
  // split(x, 2, dim=1) -> [x[:, 0:2], x[:, 2:3]].
  const std::string text = absl::StrCat(
      kHead,
      "  nodes { name: \"s\" call { op: \"aten::split.Tensor\" args { value: "
      "\"x\" } args { int_value: 2 } args { int_value: 1 } } tuple { "
      "elements { dtype: F32 sizes: [2, 2] strides: [3, 1] } elements { "
      "dtype: F32 sizes: [2, 1] strides: [3, 1] storage_offset: 2 } } }\n"
      "  nodes { name: \"a\" getitem { source: \"s\" index: 0 } tensor { "
      "dtype: F32 sizes: [2, 2] strides: [3, 1] } }\n"
      "  nodes { name: \"b\" getitem { source: \"s\" index: 1 } tensor { "
      "dtype: F32 sizes: [2, 1] strides: [3, 1] storage_offset: 2 } }\n"
      "  nodes { name: \"ca\" call { op: \"aten::clone\" args { value: \"a\" } "
      "} tensor { dtype: F32 sizes: [2, 2] } }\n"
      "  nodes { name: \"cb\" call { op: \"aten::clone\" args { value: \"b\" } "
      "} tensor { dtype: F32 sizes: [2, 1] } }\n"
      "  nodes { name: \"output\" output { values { value: \"ca\" } values { "
      "value: \"cb\" } } }\n}\n");
  for (ExecutionMode mode : {ExecutionMode::kEager, ExecutionMode::kSim}) {
    auto out = RunText(text, mode, kX);
    ASSERT_EQ(out.size(), 2u);
    EXPECT_EQ(out[0], (std::vector<double>{0, 1, 3, 4}));
    EXPECT_EQ(out[1], (std::vector<double>{2, 5}));
  }
}

}  // namespace
}  // namespace ferry::testing
