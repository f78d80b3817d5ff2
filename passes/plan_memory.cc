// plan_memory
//
// Model. Each storage root is a block that is live from the node defining it
// (0 for graph inputs and load-time copies) to the last node reading it or
// any alias of it (a view, an in-place result, a getitem). Blocks of one
// device share an arena. Walking the nodes in order, the blocks whose last
// reader ran are freed (merged with free neighbours) and the blocks defined
// here take the smallest free hole that fits, or the end of the arena.
//
//   t = D0(a, b)     t: [2, 4]          offset 0
//   s = sin(t)       s: [3, 5]          offset 64
//   u = cos(s)       u: [5, 6]          offset 0   (t's bytes are free again)
//
// A mutable buffer (and a load-time copy) is live for the whole method, so
// no other value of the call ever takes its bytes: state kept there survives
// from one call to the next.
//
// Phases: (1) CollectBlocks finds the roots to plan and their lifetimes;
// (2) FreeListAllocator assigns offsets per arena; (3) Apply writes
// placements on every value, aliases included.
#include "passes/plan_memory.h"

#include <algorithm>
#include <climits>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/diagnostic_codes.h"
#include "passes/graph.h"
#include "passes/schema.h"

namespace ferry {
namespace {

int64_t AlignUp(int64_t bytes) {
  return (bytes + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
}

struct Block {
  ValueId root;
  Device device;
  int64_t size = 0;  // aligned
  int32_t first = 0;
  int32_t last = 0;
  int64_t offset = -1;
};

// Phase 1.
std::vector<Block> CollectBlocks(const Method& method,
                                 const StorageRoots& roots,
                                 const ValueSlots& slots,
                                 const LowerOptions& options,
                                 Diagnostics& diagnostics) {
  const int32_t n = static_cast<int32_t>(method.nodes.size());
  std::vector<int32_t> last_use(slots.size(), -1);
  std::vector<char> is_output(slots.size(), 0);
  for (int32_t i = 0; i < n; ++i) {
    const Node& node = method.nodes[i];
    ForEachOperand(node, [&](const ValueId& v) {
      const int32_t slot = slots.Of(roots.RootOf(v));
      last_use[slot] = std::max(last_use[slot], i);
      if (node.kind == NodeKind::kOutput) is_output[slot] = 1;
    });
  }
  std::vector<Block> blocks;
  auto consider = [&](ValueId v, const TensorSpec& spec, const Node& node,
                      int32_t i) {
    if (roots.RootOf(v) != v) return;  // an alias: planned through its root
    if (node.kind == NodeKind::kConstant ||
        (node.kind == NodeKind::kInput && IsProgramData(node.input_kind)))
      return;  // program data lives in the program
    // A mutable buffer is state that outlives the call: its bytes are its
    // own for the whole method, never reused for another value (and it is
    // planned whatever alloc_graph_input says: the caller does not pass it).
    const bool mutable_buffer = node.kind == NodeKind::kInput &&
                                node.input_kind == InputKind::kMutableBuffer;
    const bool graph_input = node.kind == NodeKind::kInput && !mutable_buffer;
    const bool graph_output = is_output[slots.Of(v)] != 0;
    if (graph_input && !options.alloc_graph_input) return;
    if (graph_output && !options.alloc_graph_output && !mutable_buffer) return;
    std::optional<int64_t> bytes = spec.StorageBytes();
    if (!bytes) {
      diagnostics.Error(codes::kPlanFailed,
                        absl::StrCat("cannot size the storage of '",
                                     method.ValueName(v), "'"),
                        {method.ValueName(v)});
      return;
    }
    Block b;
    b.root = v;
    b.device =
        options.enable_non_cpu_memory_planning ? spec.device : Device::Cpu();
    b.size = AlignUp(*bytes);
    b.first = graph_input ? 0 : i;
    b.last = std::max(last_use[slots.Of(v)], b.first);
    if ((node.kind == NodeKind::kCall && node.at_load) || mutable_buffer) {
      b.first = 0;
      b.last = n;
    }
    blocks.push_back(b);
  };
  for (int32_t i = 0; i < n; ++i) {
    const Node& node = method.nodes[i];
    if (node.result == ResultKind::kTensor)
      consider(ValueId{i, -1}, node.tensor, node, i);
    for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
      consider(ValueId{i, e}, node.tuple[e], node, i);
  }
  return blocks;
}

// Phase 2: best-fit free list over one arena.
class FreeListAllocator {
 public:
  int64_t Allocate(int64_t size) {
    if (size == 0) return 0;
    // Smallest free hole that fits.
    auto best = by_size_.lower_bound({size, INT64_MIN});
    if (best != by_size_.end()) {
      auto [hole_size, offset] = *best;
      RemoveHole(offset, hole_size);
      if (hole_size > size) AddHole(offset + size, hole_size - size);
      return offset;
    }
    // A free hole at the end grows into the new space.
    if (!by_offset_.empty()) {
      auto last = std::prev(by_offset_.end());
      if (last->first + last->second == top_) {
        int64_t offset = last->first;
        RemoveHole(last->first, last->second);
        top_ = offset + size;
        peak_ = std::max(peak_, top_);
        return offset;
      }
    }
    int64_t offset = top_;
    top_ += size;
    peak_ = std::max(peak_, top_);
    return offset;
  }

  void Free(int64_t offset, int64_t size) {
    if (size == 0) return;
    // Merge with neighbours.
    auto next = by_offset_.lower_bound(offset);
    if (next != by_offset_.end() && next->first == offset + size) {
      size += next->second;
      RemoveHole(next->first, next->second);
    }
    auto after = by_offset_.lower_bound(offset);
    if (after != by_offset_.begin()) {
      auto prev = std::prev(after);
      if (prev->first + prev->second == offset) {
        offset = prev->first;
        size += prev->second;
        RemoveHole(prev->first, prev->second);
      }
    }
    AddHole(offset, size);
  }

  int64_t peak() const { return peak_; }

 private:
  void AddHole(int64_t offset, int64_t size) {
    by_offset_[offset] = size;
    by_size_.insert({size, offset});
  }
  void RemoveHole(int64_t offset, int64_t size) {
    by_offset_.erase(offset);
    by_size_.erase({size, offset});
  }

  std::map<int64_t, int64_t> by_offset_;
  std::set<std::pair<int64_t, int64_t>> by_size_;
  int64_t top_ = 0;
  int64_t peak_ = 0;
};

}  // namespace

absl::StatusOr<PassStats> PlanMemory(Program& program,
                                     const LowerOptions& options,
                                     Diagnostics& diagnostics) {
  PassStats stats;
  int64_t planned = 0;
  for (Method& method : program.methods) {
    diagnostics.SetMethod(method.name);
    method.arenas.clear();
    for (Node& node : method.nodes) {
      node.tensor.memory = MemoryPlacement{};
      for (TensorSpec& s : node.tuple) s.memory = MemoryPlacement{};
    }
    StorageRoots roots(method);
    ValueSlots slots(method);
    std::vector<Block> blocks =
        CollectBlocks(method, roots, slots, options, diagnostics);

    // One arena per device, host first.
    std::map<Device, int32_t> arena_of;
    for (const Block& b : blocks) arena_of.emplace(b.device, 0);
    // Dense arena index per block (a std::map lookup per block is slow).
    int32_t next_arena = 0;
    for (auto& [device, index] : arena_of) {
      index = next_arena++;
      method.arenas.push_back(Arena{device, 0, 0});
    }
    std::vector<int32_t> block_arena(blocks.size());
    for (size_t k = 0; k < blocks.size(); ++k) {
      if (k > 0 && blocks[k].device == blocks[k - 1].device)
        block_arena[k] = block_arena[k - 1];
      else
        block_arena[k] = arena_of[blocks[k].device];
    }
    std::vector<FreeListAllocator> allocators(arena_of.size());
    std::vector<int64_t> live(arena_of.size(), 0);

    // Walk the steps: free the blocks whose last reader ran, then place the
    // blocks defined here.
    const int32_t count = static_cast<int32_t>(blocks.size());
    std::vector<int32_t> by_first(count), by_last(count);
    for (int32_t k = 0; k < count; ++k) by_first[k] = by_last[k] = k;
    std::stable_sort(by_first.begin(), by_first.end(),
                     [&](int32_t x, int32_t y) {
                       return blocks[x].first < blocks[y].first;
                     });
    std::stable_sort(by_last.begin(), by_last.end(), [&](int32_t x, int32_t y) {
      return blocks[x].last < blocks[y].last;
    });
    for (int32_t next_def = 0, next_free = 0; next_def < count;) {
      const int32_t t = blocks[by_first[next_def]].first;
      for (; next_def < count && blocks[by_first[next_def]].first == t;
           ++next_def) {
        Block& b = blocks[by_first[next_def]];
        const int32_t a = block_arena[by_first[next_def]];
        b.offset = allocators[a].Allocate(b.size);
        live[a] += b.size;
        method.arenas[a].lower_bound =
            std::max(method.arenas[a].lower_bound, live[a]);
      }
      // Free everything whose last reader runs before the next definition.
      const int32_t next_t =
          next_def < count ? blocks[by_first[next_def]].first : INT32_MAX;
      for (; next_free < count && blocks[by_last[next_free]].last < next_t;
           ++next_free) {
        const Block& b = blocks[by_last[next_free]];
        const int32_t a = block_arena[by_last[next_free]];
        allocators[a].Free(b.offset, b.size);
        live[a] -= b.size;
      }
    }
    for (size_t a = 0; a < allocators.size(); ++a)
      method.arenas[a].size = allocators[a].peak();

    // Phase 3: placements, aliases through their roots.
    std::vector<MemoryPlacement> placement(slots.size());
    for (size_t k = 0; k < blocks.size(); ++k)
      placement[slots.Of(blocks[k].root)] = MemoryPlacement{
          block_arena[k], blocks[k].offset, blocks[k].size, true};
    for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
      Node& node = method.nodes[i];
      if (node.result == ResultKind::kTensor)
        node.tensor.memory = placement[slots.Of(roots.RootOf(ValueId{i, -1}))];
      for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
        node.tuple[e].memory = placement[slots.Of(ValueId{i, e})];
    }
    planned += static_cast<int64_t>(blocks.size());
  }
  diagnostics.SetMethod("");
  stats.Add("planned_values", planned);
  return stats;
}

}  // namespace ferry
