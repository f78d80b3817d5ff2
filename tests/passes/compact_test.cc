// RareString and RareVector (passes/compact.h): one pointer when empty,
// values like the std::string and std::vector they stand for.
#include "passes/compact.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "passes/ir.h"

namespace ferry {
namespace {

TEST(RareStringTest, ReadsAsAStringAndCopiesItsText) {
  RareString empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.str(), "");
  EXPECT_EQ(sizeof(RareString), sizeof(void*));

  RareString tag = "d0";
  RareString copy = tag;
  tag = std::string("d1");
  EXPECT_EQ(copy, "d0");  // the copy has its own text
  EXPECT_EQ(tag, std::string("d1"));
  EXPECT_EQ(tag.size(), 2u);
  const std::string& read = tag;
  EXPECT_EQ(read, "d1");

  tag = "";  // an empty string holds nothing
  EXPECT_TRUE(tag.empty());
  EXPECT_EQ(tag, RareString());
  RareString moved = std::move(copy);
  EXPECT_EQ(moved, "d0");
}

TEST(RareVectorTest, ReadsAsAVectorAndCopiesItsItems) {
  RareVector<int64_t> ints;
  EXPECT_TRUE(ints.empty());
  EXPECT_EQ(ints.begin(), ints.end());
  EXPECT_EQ(sizeof(RareVector<int64_t>), sizeof(void*));

  ints = {1, 2};
  ints.push_back(3);
  RareVector<int64_t> copy = ints;
  ints[0] = 7;
  EXPECT_EQ(copy, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ints, (std::vector<int64_t>{7, 2, 3}));
  int64_t sum = 0;
  for (int64_t& v : ints) sum += v;
  EXPECT_EQ(sum, 12);
  const std::vector<int64_t>& read = ints;
  EXPECT_EQ(read.size(), 3u);

  ints.resize(0);
  EXPECT_TRUE(ints.empty());
  ints = std::vector<int64_t>{};
  EXPECT_EQ(ints, RareVector<int64_t>());
}

// What the compact fields are for: the IR's per-node records stay small
// (docs/performance.md, "Memory per node").
TEST(RareFieldsTest, TheIrRecordsKeepTheirSize) {
  EXPECT_LE(sizeof(Argument), 64u);
  EXPECT_LE(sizeof(Node), 288u);
  EXPECT_LE(sizeof(MemoryPlacement), 24u);
}

}  // namespace
}  // namespace ferry
