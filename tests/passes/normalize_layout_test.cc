// normalize_layout on its own.
#include "passes/normalize_layout.h"

#include <cstring>

#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "tests/passes/test_programs.h"

namespace ferry {
namespace {

using namespace testing_util;

std::string Floats(std::initializer_list<float> values) {
  std::string out(values.size() * 4, '\0');
  size_t i = 0;
  for (float v : values) std::memcpy(&out[4 * i++], &v, 4);
  return out;
}

const char kTransposed[] =
    "nodes { name: \"w\" input { kind: PARAMETER target: \"w\" } tensor { "
    "dtype: F32 sizes: 2 sizes: 3 strides: 1 strides: 2 } }\n"
    "nodes { name: \"wt\" call { op: \"aten::t\" args { value: \"w\" } } "
    "tensor { dtype: F32 sizes: 3 sizes: 2 strides: 2 strides: 1 } }\n"
    "nodes { name: \"s\" call { op: \"aten::sin\" args { value: \"wt\" } } "
    "tensor { dtype: F32 sizes: 3 sizes: 2 } }\n"
    "nodes { name: \"output\" output { values { value: \"s\" } } }\n";

TEST(NormalizeLayout, TransposedParameterBecomesContiguousWithItsData) {
  // Stored column-major: logical w = [[1,2,3],[4,5,6]].
  Program p = ParseProgram(MethodText("f", kTransposed) +
                           "constants { name: \"w\" spec { dtype: F32 sizes: "
                           "2 sizes: 3 strides: 1 strides: 2 } }");
  p.constants[0].data = Floats({1, 4, 2, 5, 3, 6});
  Diagnostics d;
  ASSERT_TRUE(NormalizeLayout(p, LowerOptions{}, d).ok());
  ASSERT_EQ(d.items().size(), 1u);
  EXPECT_EQ(d.items()[0].code, codes::kLayoutNormalized);
  EXPECT_EQ(d.items()[0].nodes[0], "w");
  EXPECT_EQ(*p.constants[0].data, Floats({1, 2, 3, 4, 5, 6}));
  EXPECT_TRUE(p.constants[0].spec.IsContiguous());
  const Method& m = p.methods[0];
  EXPECT_EQ(m.nodes[Find(m, "w")].tensor.Strides(),
            (std::vector<int64_t>{3, 1}));
  // The view of w follows the new layout.
  EXPECT_EQ(m.nodes[Find(m, "wt")].tensor.Strides(),
            (std::vector<int64_t>{1, 3}));
  // A second run has nothing to do.
  Diagnostics again;
  ASSERT_TRUE(NormalizeLayout(p, LowerOptions{}, again).ok());
  EXPECT_TRUE(again.empty());
}

TEST(NormalizeLayout, ChannelsLastAndContiguousAreUntouched) {
  Program p = ParseProgram(
      MethodText("f",
                 "nodes { name: \"w\" input { kind: BUFFER target: \"w\" } "
                 "tensor { dtype: F32 sizes: 1 sizes: 2 sizes: 3 sizes: 4 "
                 "strides: 24 strides: 1 strides: 8 strides: 2 } }\n" +
                     Output({"w"})) +
      "constants { name: \"w\" spec { dtype: F32 sizes: 1 sizes: 2 sizes: 3 "
      "sizes: 4 strides: 24 strides: 1 strides: 8 strides: 2 } }");
  Diagnostics d;
  ASSERT_TRUE(NormalizeLayout(p, LowerOptions{}, d).ok());
  EXPECT_TRUE(d.empty());
  EXPECT_EQ(p.constants[0].spec.strides, (std::vector<int64_t>{24, 1, 8, 2}));
}

}  // namespace
}  // namespace ferry
