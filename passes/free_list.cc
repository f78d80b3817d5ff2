#include "passes/free_list.h"

#include <algorithm>
#include <climits>
#include <iterator>

namespace ferry {

int64_t FreeListAllocator::Allocate(int64_t size) {
  if (size == 0) return 0;
  if (trees_ == nullptr) {
    if (Hole* best = BestFlatFit(size)) {
      const int64_t offset = best->offset;
      // What is left of the hole starts where the block ends, still between
      // the same neighbours.
      if (best->size > size) {
        best->offset += size;
        best->size -= size;
      } else {
        flat_.erase(flat_.begin() + (best - flat_.data()));
      }
      return offset;
    }
  } else if (std::optional<Hole> best = BestFit(size)) {
    Erase(*best);
    if (best->size > size) Insert(Hole{best->offset + size, best->size - size});
    return best->offset;
  }
  // No hole fits: the block goes at the end, into the free hole there.
  int64_t offset = top_;
  if (std::optional<Hole> last = LastHole();
      last && last->offset + last->size == top_) {
    Erase(*last);
    offset = last->offset;
  }
  top_ = offset + size;
  peak_ = std::max(peak_, top_);
  return offset;
}

namespace {
// The first hole of `flat` (in offset order) at or after `offset`.
template <typename Holes>
auto FirstFrom(Holes& flat, int64_t offset) {
  return std::lower_bound(
      flat.begin(), flat.end(), offset,
      [](const auto& hole, int64_t at) { return hole.offset < at; });
}
}  // namespace

void FreeListAllocator::Free(int64_t offset, int64_t size) {
  if (size == 0) return;
  if (trees_ == nullptr) {
    // One search finds both neighbours; a merge changes a hole in place.
    auto next = FirstFrom(flat_, offset + size);
    const bool joins_next =
        next != flat_.end() && next->offset == offset + size;
    const bool joins_prev =
        next != flat_.begin() &&
        std::prev(next)->offset + std::prev(next)->size == offset;
    if (joins_prev) {
      std::prev(next)->size += size + (joins_next ? next->size : 0);
      if (joins_next) flat_.erase(next);
      return;
    }
    if (joins_next) {
      next->offset = offset;
      next->size += size;
      return;
    }
    if (flat_.size() < kFlatHoles) {
      flat_.insert(next, Hole{offset, size});
      return;
    }
  }
  if (std::optional<Hole> next = HoleAt(offset + size)) {
    Erase(*next);
    size += next->size;
  }
  if (std::optional<Hole> prev = HoleBefore(offset);
      prev && prev->offset + prev->size == offset) {
    Erase(*prev);
    offset = prev->offset;
    size += prev->size;
  }
  Insert(Hole{offset, size});
}

size_t FreeListAllocator::holes() const {
  return trees_ ? trees_->by_offset.size() : flat_.size();
}

FreeListAllocator::Hole* FreeListAllocator::BestFlatFit(int64_t size) {
  // In offset order, so the first of the smallest size is the lowest.
  Hole* best = nullptr;
  for (Hole& hole : flat_)
    if (hole.size >= size && (best == nullptr || hole.size < best->size))
      best = &hole;
  return best;
}

std::optional<FreeListAllocator::Hole> FreeListAllocator::BestFit(
    int64_t size) const {
  auto best = trees_->by_size.lower_bound({size, INT64_MIN});
  if (best == trees_->by_size.end()) return std::nullopt;
  return Hole{best->second, best->first};
}

std::optional<FreeListAllocator::Hole> FreeListAllocator::HoleAt(
    int64_t offset) const {
  if (trees_) {
    auto it = trees_->by_offset.find(offset);
    if (it == trees_->by_offset.end()) return std::nullopt;
    return Hole{it->first, it->second};
  }
  auto it = FirstFrom(flat_, offset);
  if (it == flat_.end() || it->offset != offset) return std::nullopt;
  return *it;
}

std::optional<FreeListAllocator::Hole> FreeListAllocator::HoleBefore(
    int64_t offset) const {
  if (trees_) {
    auto it = trees_->by_offset.lower_bound(offset);
    if (it == trees_->by_offset.begin()) return std::nullopt;
    it = std::prev(it);
    return Hole{it->first, it->second};
  }
  auto it = FirstFrom(flat_, offset);
  if (it == flat_.begin()) return std::nullopt;
  return *std::prev(it);
}

std::optional<FreeListAllocator::Hole> FreeListAllocator::LastHole() const {
  if (trees_) {
    if (trees_->by_offset.empty()) return std::nullopt;
    auto last = std::prev(trees_->by_offset.end());
    return Hole{last->first, last->second};
  }
  if (flat_.empty()) return std::nullopt;
  return flat_.back();
}

void FreeListAllocator::Erase(const Hole& hole) {
  if (trees_) {
    trees_->by_offset.erase(hole.offset);
    trees_->by_size.erase({hole.size, hole.offset});
    return;
  }
  flat_.erase(FirstFrom(flat_, hole.offset));
}

void FreeListAllocator::Insert(const Hole& hole) {
  if (!trees_ && flat_.size() == kFlatHoles) {
    // Too many to scan: every hole moves to the trees, for good.
    trees_ = std::make_unique<Trees>();
    for (const Hole& h : flat_) {
      trees_->by_offset.emplace_hint(trees_->by_offset.end(), h.offset, h.size);
      trees_->by_size.insert({h.size, h.offset});
    }
    std::vector<Hole>().swap(flat_);
  }
  if (trees_) {
    trees_->by_offset.emplace(hole.offset, hole.size);
    trees_->by_size.insert({hole.size, hole.offset});
    return;
  }
  flat_.insert(FirstFrom(flat_, hole.offset), hole);
}

}  // namespace ferry
