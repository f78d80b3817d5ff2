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
// Phases, each a unit with one entry, state handed on explicitly:
// (1) CollectBlocks finds the roots to plan, their sizes and lifetimes: the
// Blocks; (2) AssignOffsets makes one arena per device and gives each block
// an offset with a best-fit FreeListAllocator (free_list.h): the ArenaPlan; (3)
// Apply writes the arenas and the placements on every value, aliases included.
// The driver, PlanMemory, is at the bottom; Apply replaces an earlier plan.
#include "passes/plan_memory.h"

#include <algorithm>
#include <climits>
#include <map>

#include "absl/strings/str_cat.h"
#include "passes/alias.h"
#include "passes/diagnostic_codes.h"
#include "passes/free_list.h"
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

// Phase 1: the storage roots to plan, each with its size and lifetime.
// Program data is skipped (it lives in the program), and so are graph
// inputs and outputs the options leave to the caller; a root that cannot be
// sized is an error (FERRY-E0901).
//
//   a = input; t = D0(a)[0]; s = sin(t); output(s)
//   ==> a: [0, 1]  D0[0]: [1, 3]  s: [3, 4]   (definition, last use of
//                                              the root or an alias)
class CollectBlocks {
 public:
  CollectBlocks(const Method& method, const StorageRoots& roots,
                const ValueSlots& slots, const LowerOptions& options,
                Diagnostics& diagnostics)
      : method_(method),
        roots_(roots),
        slots_(slots),
        options_(options),
        diagnostics_(diagnostics) {}

  // One walk from the last node back: when node i is reached, every reader
  // of its results (all later) has been seen, so its blocks' lifetimes are
  // known. Blocks are collected last to first and reversed at the end, so
  // they come in node order (the whole result, then tuple elements).
  std::vector<Block> Run() {
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    last_use_.assign(slots_.size(), -1);
    is_output_.assign(slots_.size(), 0);
    for (int32_t i = n - 1; i >= 0; --i) {
      const Node& node = method_.nodes[i];
      for (int32_t e = static_cast<int32_t>(node.tuple.size()) - 1; e >= 0; --e)
        Consider(ValueId{i, e}, node.tuple[e], node, i);
      if (node.result == ResultKind::kTensor)
        Consider(ValueId{i, -1}, node.tensor, node, i);
      ForEachOperand(node, [&](const ValueId& v) {
        const int32_t slot = slots_.Of(roots_.RootOf(v));
        last_use_[slot] = std::max(last_use_[slot], i);
        if (node.kind == NodeKind::kOutput) is_output_[slot] = 1;
      });
    }
    std::reverse(blocks_.begin(), blocks_.end());
    return std::move(blocks_);
  }

 private:
  void Consider(ValueId v, const TensorSpec& spec, const Node& node,
                int32_t i) {
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    if (roots_.RootOf(v) != v) return;    // an alias: planned through its root
    if (IsProgramDataNode(node)) return;  // program data lives in the program
    // A mutable buffer is state that outlives the call: its bytes are its
    // own for the whole method, never reused for another value (and it is
    // planned whatever alloc_graph_input says: the caller does not pass it).
    const bool mutable_buffer = node.kind == NodeKind::kInput &&
                                node.input_kind == InputKind::kMutableBuffer;
    const bool graph_input = node.kind == NodeKind::kInput && !mutable_buffer;
    const bool graph_output = is_output_[slots_.Of(v)] != 0;
    if (graph_input && !options_.alloc_graph_input) return;  // caller's memory
    if (graph_output && !options_.alloc_graph_output && !mutable_buffer)
      return;  // the caller's memory
    std::optional<int64_t> bytes = spec.StorageBytes();
    if (!bytes) {
      diagnostics_.Error(codes::kPlanFailed,
                         absl::StrCat("cannot size the storage of '",
                                      method_.ValueName(v), "'"),
                         {method_.ValueName(v)});
      return;
    }
    Block b;
    b.root = v;
    b.device =
        options_.enable_non_cpu_memory_planning ? spec.device : Device::Cpu();
    b.size = AlignUp(*bytes);
    b.first = graph_input ? 0 : i;
    b.last = std::max(last_use_[slots_.Of(v)], b.first);
    if ((node.kind == NodeKind::kCall && node.at_load) || mutable_buffer) {
      b.first = 0;
      b.last = n;
    }
    blocks_.push_back(b);
  }

  const Method& method_;
  const StorageRoots& roots_;
  const ValueSlots& slots_;
  const LowerOptions& options_;
  Diagnostics& diagnostics_;
  std::vector<int32_t> last_use_;  // per slot
  std::vector<char> is_output_;    // per slot
  std::vector<Block> blocks_;
};

// What phase 2 hands to phase 3: the method's arenas (sizes and lower
// bounds) and each block's arena; the blocks carry their offsets.
struct ArenaPlan {
  std::vector<Arena> arenas;
  std::vector<int32_t> block_arena;  // per block
};

// Phase 2: one arena per device (host first), and offsets by walking the
// steps: at each definition step, place the blocks defined there, then free
// every block whose last reader runs before the next definition.
//
//   t: [2, 3] 64 B, s: [3, 4] 64 B, u: [5, 6] 64 B
//   ==> t at 0, s at 64, u at 0; arena 128 B, lower bound 128 B
class AssignOffsets {
 public:
  // `steps`: the method's node count; every block's first and last step is
  // at most that.
  AssignOffsets(std::vector<Block>& blocks, int32_t steps)
      : blocks_(blocks), steps_(steps) {}

  absl::StatusOr<ArenaPlan> Run() {
    ArenaPlan plan;
    std::map<Device, int32_t> arena_of;
    for (const Block& b : blocks_) arena_of.try_emplace(b.device, 0);
    int32_t next_arena = 0;
    for (auto& [device, index] : arena_of) {
      index = next_arena++;
      plan.arenas.push_back(Arena{device, 0, 0});
    }
    // Dense arena index per block (a std::map lookup per block is slow).
    plan.block_arena.resize(blocks_.size());
    for (size_t k = 0; k < blocks_.size(); ++k) {
      if (k > 0 && blocks_[k].device == blocks_[k - 1].device) {
        plan.block_arena[k] = plan.block_arena[k - 1];
        continue;
      }
      auto arena = arena_of.find(blocks_[k].device);
      FERRY_RET_CHECK(arena != arena_of.end());  // every device has one
      plan.block_arena[k] = arena->second;
    }
    std::vector<FreeListAllocator> allocators(arena_of.size());
    std::vector<int64_t> live(arena_of.size(), 0);

    const int32_t count = static_cast<int32_t>(blocks_.size());
    const std::vector<int32_t> by_first =
        SortedBy([](const Block& b) { return b.first; });
    const std::vector<int32_t> by_last =
        SortedBy([](const Block& b) { return b.last; });
    FERRY_RET_CHECK(static_cast<int32_t>(by_first.size()) == count &&
                    static_cast<int32_t>(by_last.size()) == count);
    for (int32_t next_def = 0, next_free = 0; next_def < count;) {
      const int32_t t = blocks_[by_first[next_def]].first;
      for (; next_def < count && blocks_[by_first[next_def]].first == t;
           ++next_def) {
        Block& b = blocks_[by_first[next_def]];
        const int32_t a = plan.block_arena[by_first[next_def]];
        b.offset = allocators[a].Allocate(b.size);
        live[a] += b.size;
        plan.arenas[a].lower_bound =
            std::max(plan.arenas[a].lower_bound, live[a]);
      }
      // Free everything whose last reader runs before the next definition.
      const int32_t next_t =
          next_def < count ? blocks_[by_first[next_def]].first : INT32_MAX;
      for (; next_free < count && blocks_[by_last[next_free]].last < next_t;
           ++next_free) {
        const Block& b = blocks_[by_last[next_free]];
        const int32_t a = plan.block_arena[by_last[next_free]];
        allocators[a].Free(b.offset, b.size);
        live[a] -= b.size;
      }
    }
    for (size_t a = 0; a < allocators.size(); ++a)
      plan.arenas[a].size = allocators[a].peak();
    return plan;
  }

 private:
  // The block indices ordered by step(block), ties in block order: a
  // counting sort over the steps 0..steps_ (linear, where a comparison sort
  // is n log n). Empty when a step is out of range (an internal error).
  template <typename StepFn>
  std::vector<int32_t> SortedBy(StepFn step) const {
    std::vector<int32_t> start(static_cast<size_t>(steps_) + 2, 0);
    for (const Block& b : blocks_) {
      const int32_t t = step(b);
      if (t < 0 || t > steps_) return {};
      ++start[t + 1];
    }
    for (int32_t t = 0; t <= steps_; ++t) start[t + 1] += start[t];
    std::vector<int32_t> order(blocks_.size());
    for (int32_t k = 0; k < static_cast<int32_t>(blocks_.size()); ++k)
      order[start[step(blocks_[k])]++] = k;
    return order;
  }

  std::vector<Block>& blocks_;
  const int32_t steps_;
};

// Phase 3: the plan on the method: its arenas, and a placement on every
// value, aliases (views, in-place results, getitems) through their roots;
// a value left unplanned gets none, so an earlier plan does not survive.
//
//   t at 0 in arena 0; v = view(t)  ==>  t.memory = v.memory = {0, 0, 64}
absl::Status Apply(Method& method, const StorageRoots& roots,
                   const ValueSlots& slots, const std::vector<Block>& blocks,
                   ArenaPlan plan) {
  FERRY_RET_CHECK(plan.block_arena.size() == blocks.size());
  std::vector<MemoryPlacement> placement(slots.size());
  for (size_t k = 0; k < blocks.size(); ++k) {
    const int32_t slot = slots.Of(blocks[k].root);
    FERRY_RET_CHECK(slot >= 0 && slot < slots.size());
    placement[slot] = MemoryPlacement{.arena = plan.block_arena[k],
                                      .planned = true,
                                      .offset = blocks[k].offset,
                                      .size = blocks[k].size};
  }
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    Node& node = method.nodes[i];
    node.tensor.memory = node.result == ResultKind::kTensor
                             ? placement[slots.Of(roots.RootOf(ValueId{i, -1}))]
                             : MemoryPlacement{};
    for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
      node.tuple[e].memory = placement[slots.Of(ValueId{i, e})];
  }
  method.arenas = std::move(plan.arenas);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PassStats> PlanMemory(Program& program,
                                     const LowerOptions& options,
                                     Diagnostics& diagnostics) {
  PassStats stats;
  int64_t planned = 0;
  for (Method& method : program.methods) {
    diagnostics.SetMethod(method.name);
    // An earlier plan is replaced whole by Apply (every value's placement
    // and the arenas), so running the pass on its output changes nothing.
    ValueSlots slots;
    const StorageRoots roots(method, slots);
    std::vector<Block> blocks =
        CollectBlocks(method, roots, slots, options, diagnostics).Run();
    absl::StatusOr<ArenaPlan> plan =
        AssignOffsets(blocks, static_cast<int32_t>(method.nodes.size())).Run();
    if (!plan.ok()) return plan.status();
    if (absl::Status applied =
            Apply(method, roots, slots, blocks, *std::move(plan));
        !applied.ok())
      return applied;
    planned += static_cast<int64_t>(blocks.size());
  }
  diagnostics.SetMethod("");
  stats.Add("planned_values", planned);
  return stats;
}

}  // namespace ferry
