// normalize_layout on its own.
#include "passes/normalize_layout.h"

#include <cstring>

#include "gtest/gtest.h"
#include "passes/diagnostic_codes.h"
#include "passes/resource_limits.h"
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

// A 4-byte parameter declared f32[n,n] with strides [0,0] (a broadcast).
Program BroadcastParameter(int64_t n) {
  std::string spec = "dtype: F32 sizes: " + std::to_string(n) +
                     " sizes: " + std::to_string(n) + " strides: 0 strides: 0";
  Program p = ParseProgram(
      MethodText("f",
                 "nodes { name: \"w\" input { kind: PARAMETER target: \"w\" } "
                 "tensor { " +
                     spec + " } }\n" + Output({"w"})) +
      "constants { name: \"w\" spec { " + spec + " } }");
  p.constants[0].data = Floats({1});
  return p;
}

TEST(NormalizeLayout, ContiguousCopyOverMaxTensorBytesIsRefusedBeforeItIsMade) {
  // 40 GB once contiguous: std::bad_alloc used to escape from here.
  Program p = BroadcastParameter(100000);
  Diagnostics d;
  absl::StatusOr<PassStats> stats = NormalizeLayout(p, LowerOptions{}, d);
  ASSERT_EQ(stats.status().code(), absl::StatusCode::kResourceExhausted)
      << stats.status();
  std::optional<ResourceViolation> violation =
      GetResourceViolation(stats.status());
  ASSERT_TRUE(violation.has_value());
  EXPECT_EQ(violation->limit, "max_tensor_bytes");
  EXPECT_EQ(violation->subject, "program.constants['w']");
  EXPECT_EQ(violation->bytes, int64_t{40'000'000'000});
  EXPECT_EQ(p.constants[0].data->size(), 4u);  // nothing was copied
}

TEST(NormalizeLayout, ContiguousCopiesAreBoundedByMaxExpansion) {
  // 256 MB from a request of a few dozen bytes.
  Program p = BroadcastParameter(8000);
  LowerOptions options;
  options.request_bytes = 81;
  Diagnostics d;
  absl::StatusOr<PassStats> stats = NormalizeLayout(p, options, d);
  std::optional<ResourceViolation> violation =
      GetResourceViolation(stats.status());
  ASSERT_TRUE(violation.has_value()) << stats.status();
  EXPECT_EQ(violation->limit, "max_expansion");
  EXPECT_EQ(violation->allowed, 16 * kExpansionFloorBytes);
  EXPECT_EQ(p.constants[0].data->size(), 4u);

  // A small broadcast is within the allowance: it is made contiguous.
  Program small = BroadcastParameter(64);
  ASSERT_TRUE(NormalizeLayout(small, options, d).ok());
  EXPECT_EQ(small.constants[0].data->size(), 64u * 64u * 4u);
}

}  // namespace
}  // namespace ferry
