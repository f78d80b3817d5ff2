// FreeListAllocator (plan_memory's best-fit free list), in the array and in
// the trees, against a plain model of its rules.
#include "passes/free_list.h"

#include <algorithm>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace ferry {
namespace {

// The rules of free_list.h written as plainly as possible: the holes in no
// order, every choice a full scan.
class ModelFreeList {
 public:
  int64_t Allocate(int64_t size) {
    if (size == 0) return 0;
    auto best = holes_.end();
    for (auto h = holes_.begin(); h != holes_.end(); ++h)
      if (h->size >= size &&
          (best == holes_.end() || h->size < best->size ||
           (h->size == best->size && h->offset < best->offset)))
        best = h;
    if (best != holes_.end()) {
      const Hole hole = *best;
      holes_.erase(best);
      if (hole.size > size)
        holes_.push_back(Hole{hole.offset + size, hole.size - size});
      return hole.offset;
    }
    int64_t offset = top_;
    for (auto h = holes_.begin(); h != holes_.end(); ++h)
      if (h->offset + h->size == top_) {
        offset = h->offset;
        holes_.erase(h);
        break;
      }
    top_ = offset + size;
    peak_ = std::max(peak_, top_);
    return offset;
  }

  void Free(int64_t offset, int64_t size) {
    if (size == 0) return;
    for (auto h = holes_.begin(); h != holes_.end(); ++h)
      if (h->offset == offset + size) {
        size += h->size;
        holes_.erase(h);
        break;
      }
    for (auto h = holes_.begin(); h != holes_.end(); ++h)
      if (h->offset + h->size == offset) {
        offset = h->offset;
        size += h->size;
        holes_.erase(h);
        break;
      }
    holes_.push_back(Hole{offset, size});
  }

  int64_t peak() const { return peak_; }
  size_t holes() const { return holes_.size(); }

 private:
  struct Hole {
    int64_t offset;
    int64_t size;
  };
  std::vector<Hole> holes_;
  int64_t top_ = 0;
  int64_t peak_ = 0;
};

TEST(FreeList, TheHeaderExample) {
  FreeListAllocator list;
  EXPECT_EQ(list.Allocate(64), 0);
  EXPECT_EQ(list.Allocate(32), 64);
  EXPECT_EQ(list.Allocate(64), 96);
  list.Free(0, 64);
  EXPECT_EQ(list.Allocate(16), 0);  // the best fit: [0, 64)
  list.Free(96, 64);
  EXPECT_EQ(list.Allocate(128), 96);  // the end hole grows
  EXPECT_EQ(list.peak(), 224);
  EXPECT_EQ(list.holes(), 1u);  // [16, 64)
}

TEST(FreeList, AFreedBlockMergesWithTheHolesEitherSide) {
  FreeListAllocator list;
  for (int64_t k = 0; k < 4; ++k) EXPECT_EQ(list.Allocate(64), 64 * k);
  list.Free(0, 64);
  list.Free(128, 64);
  EXPECT_EQ(list.holes(), 2u);
  list.Free(64, 64);  // joins [0, 64) and [128, 192)
  EXPECT_EQ(list.holes(), 1u);
  EXPECT_EQ(list.Allocate(192), 0);
  EXPECT_EQ(list.peak(), 256);
}

TEST(FreeList, EqualSizesTakeTheLowestOffset) {
  FreeListAllocator list;
  for (int64_t k = 0; k < 6; ++k) list.Allocate(64);
  list.Free(256, 64);
  list.Free(64, 64);
  list.Free(128 + 32, 0);  // an empty block changes nothing
  EXPECT_EQ(list.Allocate(64), 64);
  EXPECT_EQ(list.Allocate(64), 256);
}

// Random programs of allocations and frees, with enough blocks live at once
// to leave more holes than the array keeps: every offset and the peak as the
// model says, before and after the holes move to the trees.
TEST(FreeList, MatchesThePlainModelInTheArrayAndInTheTrees) {
  bool reached_trees = false;
  for (uint32_t seed = 1; seed <= 8; ++seed) {
    std::mt19937 random(seed);
    FreeListAllocator list;
    ModelFreeList model;
    struct Block {
      int64_t offset, size;
    };
    std::vector<Block> live;
    for (int step = 0; step < 4000; ++step) {
      // Mostly allocations in the first half, mostly frees in the second.
      const bool allocate =
          live.empty() || random() % 100 < (step < 2000 ? 70u : 35u);
      if (allocate) {
        const int64_t size = 64 * static_cast<int64_t>(random() % 6);
        const int64_t offset = list.Allocate(size);
        ASSERT_EQ(offset, model.Allocate(size))
            << "seed " << seed << " step " << step << " size " << size;
        live.push_back(Block{offset, size});
      } else {
        const size_t k = random() % live.size();
        list.Free(live[k].offset, live[k].size);
        model.Free(live[k].offset, live[k].size);
        live[k] = live.back();
        live.pop_back();
      }
      ASSERT_EQ(list.peak(), model.peak()) << "seed " << seed;
      ASSERT_EQ(list.holes(), model.holes()) << "seed " << seed;
    }
    reached_trees |= list.in_trees();
  }
  EXPECT_TRUE(reached_trees) << "no program left more than "
                             << FreeListAllocator::kFlatHoles << " holes";
}

}  // namespace
}  // namespace ferry
