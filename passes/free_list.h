// A best-fit free list over one arena: plan_memory's allocator.
//
// Allocate takes the smallest free hole that fits (the lowest offset among
// holes of one size) and leaves the rest of the hole free; when no hole
// fits, the block goes at the end of the arena, starting in the free hole
// there if there is one. Free merges a block with the free holes either
// side of it.
//
//   Allocate(64) = 0; Allocate(32) = 64; Allocate(64) = 96
//   Free(0, 64)                   holes [0, 64)
//   Allocate(16) = 0              holes [16, 64)   (the best fit)
//   Free(96, 64); Allocate(128)   = 96: the end hole grows (top 224)
//
// Storage. A method's free holes are usually few (a chain of operators
// leaves one or two), and a scan of a few holes costs less than any tree:
// the holes are kept in an array in offset order. A program can leave many,
// so once more than kFlatHoles are free they move to two B-trees (by offset;
// by size, then offset) and stay there, where every step is logarithmic.
// Both give the same offsets (free_list_test.cc checks them against a plain
// model of the rules above).
#ifndef FERRY_PASSES_FREE_LIST_H_
#define FERRY_PASSES_FREE_LIST_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"

namespace ferry {

class FreeListAllocator {
 public:
  // The most holes kept in the array before they move to the trees.
  static constexpr size_t kFlatHoles = 32;

  // The offset of a new block of `size` bytes (0 for an empty block).
  int64_t Allocate(int64_t size);
  // Frees the block at `offset` of `size` bytes (as allocated).
  void Free(int64_t offset, int64_t size);

  // The highest end of any block so far: the arena's size.
  int64_t peak() const { return peak_; }
  // How many free holes there are, and whether they are in the trees.
  size_t holes() const;
  bool in_trees() const { return trees_ != nullptr; }

 private:
  struct Hole {
    int64_t offset = 0;
    int64_t size = 0;
  };
  struct Trees {
    absl::btree_map<int64_t, int64_t> by_offset;           // offset -> size
    absl::btree_set<std::pair<int64_t, int64_t>> by_size;  // (size, offset)
  };

  // The smallest hole of at least `size` bytes, the lowest offset first:
  // in the array (null when none fits), and in the trees.
  Hole* BestFlatFit(int64_t size);
  std::optional<Hole> BestFit(int64_t size) const;
  // The hole starting at `offset`.
  std::optional<Hole> HoleAt(int64_t offset) const;
  // The last hole starting before `offset`.
  std::optional<Hole> HoleBefore(int64_t offset) const;
  std::optional<Hole> LastHole() const;
  void Erase(const Hole& hole);
  void Insert(const Hole& hole);

  std::vector<Hole> flat_;        // in offset order, while trees_ is null
  std::unique_ptr<Trees> trees_;  // once the holes outgrew flat_
  int64_t top_ = 0;
  int64_t peak_ = 0;
};

}  // namespace ferry

#endif  // FERRY_PASSES_FREE_LIST_H_
