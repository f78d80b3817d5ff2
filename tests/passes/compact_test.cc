// RareString, RareVector and TargetString (passes/compact.h): one pointer,
// values like the std::string and std::vector they stand for. Shared: one
// pointer, shared like a std::shared_ptr, lasting values never freed.
#include "passes/compact.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "passes/ir.h"
#include "passes/schema.h"

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

TEST(TargetStringTest, PointsAtALastingNameAndOwnsAnyOtherText) {
  EXPECT_EQ(sizeof(TargetString), sizeof(void*));
  TargetString empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_FALSE(empty.lasting());
  EXPECT_EQ(empty.str(), "");

  // A lasting name is read where it lives, by the target and its copies.
  static const std::string* const name = new std::string("aten::add.Tensor");
  TargetString target = TargetString::Lasting(*name);
  EXPECT_TRUE(target.lasting());
  EXPECT_EQ(&target.str(), name);
  TargetString copy = target;
  EXPECT_TRUE(copy.lasting());
  EXPECT_EQ(&copy.str(), name);
  EXPECT_EQ(copy, "aten::add.Tensor");
  EXPECT_TRUE(TargetString::Lasting(std::string()).empty());

  // Other text is the target's own: a copy has its own, an assignment
  // replaces a lasting name without touching it.
  TargetString owned = std::string("my::op");
  EXPECT_FALSE(owned.lasting());
  TargetString owned_copy = owned;
  EXPECT_NE(&owned_copy.str(), &owned.str());
  owned = "my::other";
  EXPECT_EQ(owned_copy, "my::op");
  target = owned;
  EXPECT_FALSE(target.lasting());
  EXPECT_EQ(target, "my::other");
  EXPECT_EQ(*name, "aten::add.Tensor");
  copy = "";
  EXPECT_TRUE(copy.empty());

  // A move hands over either kind and leaves the source empty.
  TargetString lasting = TargetString::Lasting(*name);
  TargetString moved = std::move(lasting);
  EXPECT_EQ(&moved.str(), name);
  EXPECT_TRUE(lasting.empty());  // NOLINT: read after move, as specified
  moved = std::move(owned_copy);
  EXPECT_EQ(moved, "my::op");
  EXPECT_FALSE(moved.lasting());
  const std::string& read = moved;
  EXPECT_EQ(read, "my::op");
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

// Counts the copies of it that are alive, so a test sees when the last
// handle frees the value.
struct Counted {
  explicit Counted(int* alive, int value) : alive(alive), value(value) {
    ++*alive;
  }
  Counted(const Counted& other) : alive(other.alive), value(other.value) {
    ++*alive;
  }
  ~Counted() { --*alive; }
  int* alive;
  int value;
};

TEST(SharedTest, HandlesShareOneValueFreedWithTheLastOfThem) {
  EXPECT_EQ(sizeof(Shared<Counted>), sizeof(void*));
  int alive = 0;
  {
    Shared<const Counted> none;
    EXPECT_FALSE(none);
    EXPECT_TRUE(none == nullptr);
    EXPECT_EQ(none.get(), nullptr);

    Shared<const Counted> first = Shared<const Counted>::Make(&alive, 7);
    EXPECT_EQ(alive, 1);
    EXPECT_TRUE(first != nullptr);
    Shared<const Counted> second = first;  // shared, not copied
    EXPECT_EQ(alive, 1);
    EXPECT_EQ(second.get(), first.get());
    EXPECT_TRUE(second == first);
    EXPECT_EQ(second->value, 7);
    first.reset();
    EXPECT_EQ(alive, 1);  // `second` still holds it
    Shared<const Counted> third = std::move(second);
    EXPECT_FALSE(second);  // NOLINT: moved from, and empty
    EXPECT_EQ((*third).value, 7);
    third = Shared<const Counted>::Make(&alive, 8);  // the first goes
    EXPECT_EQ(alive, 1);
    EXPECT_EQ(third->value, 8);
  }
  EXPECT_EQ(alive, 0);
}

TEST(SharedTest, ALastingValueIsNeverFreed) {
  // Made for the process's life, as the registry's schemas are: what it
  // points at stays reachable from here (no leak to report).
  static int alive = 0;
  static const Counted* value = nullptr;
  {
    Shared<const Counted> lasting = Shared<const Counted>::Lasting(&alive, 1);
    value = lasting.get();
    std::vector<Shared<const Counted>> copies(100, lasting);
    EXPECT_EQ(copies.back().get(), value);
  }
  EXPECT_EQ(alive, 1);
  EXPECT_EQ(value->value, 1);
}

// The registry's schemas are lasting: a node that calls a registered operator
// shares its schema without counting it.
TEST(SharedTest, TheRegistrysSchemasAreShared) {
  const OpInfo* relu = LookupOp("aten::relu");
  ASSERT_NE(relu, nullptr);
  Node call;
  call.schema = relu->schema;
  EXPECT_EQ(call.schema.get(), relu->schema.get());
  EXPECT_EQ(call.schema->registered, relu);
}

// What the compact fields are for: the IR's per-node records stay small
// (docs/performance.md, "Memory per node").
TEST(RareFieldsTest, TheIrRecordsKeepTheirSize) {
  EXPECT_LE(sizeof(Argument), 64u);
  EXPECT_LE(sizeof(Node), 208u);
  EXPECT_LE(sizeof(TensorSpec), 88u);
  EXPECT_LE(sizeof(Device), 4u);
  EXPECT_LE(sizeof(MemoryPlacement), 24u);
}

}  // namespace
}  // namespace ferry
