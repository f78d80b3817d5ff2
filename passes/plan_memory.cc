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
// (1) CollectBlocks finds the roots to plan, their sizes and lifetimes, in
// the walk that finds the roots: the Blocks; (2) AssignOffsets makes one arena
// per device and gives each block its arena and an offset with a best-fit
// FreeListAllocator (free_list.h); (3) Apply writes the arenas and the
// placements on every value, aliases included. The driver, PlanMemory, is at
// the bottom; Apply replaces an earlier plan.
#include "passes/plan_memory.h"

#include <algorithm>
#include <climits>
#include <numeric>

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
  int32_t arena = -1;  // AssignOffsets: the index of its device's arena
  int64_t size = 0;    // aligned
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
//
// Made node by node in the walk that finds the storage roots
// (StorageRoots' visit): each root becomes a block where it is defined, in
// node order (the whole result, then tuple elements), and each read of a
// storage moves its last use on. Whether a root is an output, and so its
// last use, is known once every node is visited (Finish).
class CollectBlocks {
 public:
  CollectBlocks(const Method& method, const ValueSlots& slots,
                const LowerOptions& options, Diagnostics& diagnostics)
      : method_(method),
        slots_(slots),
        options_(options),
        diagnostics_(diagnostics) {
    // Room for the values of nodes with a few results each, and a block
    // for each node (a large vector's untouched room is address space only).
    last_use_.reserve(2 * method.nodes.size());
    is_output_.reserve(2 * method.nodes.size());
    blocks_.reserve(method.nodes.size());
    found_.reserve(method.nodes.size());
  }

  // Node i, with `roots` known up to it.
  void Visit(const StorageRoots& roots, int32_t i) {
    // Node i's values, numbered by the walk: not read yet.
    slots_.Cover(last_use_, -1);
    slots_.Cover(is_output_, char{0});
    PrefetchOperands(method_.nodes, i + kOperandsAhead);
    const Node& node = method_.nodes[i];
    ForEachOperand(node, [&](const ValueId& v) {
      const int32_t slot = slots_.Of(roots.RootOf(v));
      last_use_[slot] = i;  // the nodes come in order: the latest so far
      if (node.kind == NodeKind::kOutput) is_output_[slot] = 1;
    });
    if (node.result == ResultKind::kTensor)
      Consider(roots, ValueId{i, -1}, node.tensor, node, i);
    for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
      Consider(roots, ValueId{i, e}, node.tuple[e], node, i);
  }

  // The blocks, in node order, once every node has been visited.
  std::vector<Block> Finish() && {
    const int32_t n = static_cast<int32_t>(method_.nodes.size());
    size_t kept = 0;
    for (size_t k = 0; k < blocks_.size(); ++k) {
      Block b = blocks_[k];
      const char found = found_[k];
      const int32_t slot = slots_.Of(b.root);
      if (is_output_[slot] && !options_.alloc_graph_output &&
          !(found & kMutableBuffer))
        continue;  // the caller's memory
      if (found & kUnsized) {
        diagnostics_.Error(codes::kPlanFailed,
                           absl::StrCat("cannot size the storage of '",
                                        method_.ValueName(b.root), "'"),
                           {method_.ValueName(b.root)});
        continue;
      }
      b.last = std::max(last_use_[slot], b.first);
      if (found & kWholeMethod) {
        b.first = 0;
        b.last = n;
      }
      blocks_[kept++] = b;
    }
    blocks_.resize(kept);
    return std::move(blocks_);
  }

 private:
  // What Finish needs to know of a block found at its definition.
  enum Found : char {
    kMutableBuffer = 1,
    kWholeMethod = 2,  // a mutable buffer or a load-time copy
    kUnsized = 4,
  };

  void Consider(const StorageRoots& roots, ValueId v, const TensorSpec& spec,
                const Node& node, int32_t i) {
    if (roots.RootOf(v) != v) return;     // an alias: planned through its root
    if (IsProgramDataNode(node)) return;  // program data lives in the program
    // A mutable buffer is state that outlives the call: its bytes are its
    // own for the whole method, never reused for another value (and it is
    // planned whatever alloc_graph_input says: the caller does not pass it).
    const bool mutable_buffer = node.kind == NodeKind::kInput &&
                                node.input_kind == InputKind::kMutableBuffer;
    const bool graph_input = node.kind == NodeKind::kInput && !mutable_buffer;
    if (graph_input && !options_.alloc_graph_input) return;  // caller's memory
    const std::optional<int64_t> bytes = spec.StorageBytes();
    Block b;
    b.root = v;
    b.device =
        options_.enable_non_cpu_memory_planning ? spec.device : Device::Cpu();
    b.size = bytes ? AlignUp(*bytes) : 0;
    b.first = graph_input ? 0 : i;
    blocks_.push_back(b);
    char found = bytes ? 0 : kUnsized;
    if (mutable_buffer) found |= kMutableBuffer;
    if ((node.kind == NodeKind::kCall && node.at_load) || mutable_buffer)
      found |= kWholeMethod;
    found_.push_back(found);
  }

  const Method& method_;
  const ValueSlots& slots_;
  const LowerOptions& options_;
  Diagnostics& diagnostics_;
  std::vector<int32_t> last_use_;  // per slot
  std::vector<char> is_output_;    // per slot
  std::vector<Block> blocks_;
  std::vector<char> found_;  // per block: Found bits
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

  // The arenas, with each block's arena and offset set on the block.
  absl::StatusOr<std::vector<Arena>> Run() {
    std::vector<Arena> arenas = Arenas();
    std::vector<FreeListAllocator> allocators(arenas.size());
    std::vector<int64_t> live(arenas.size(), 0);

    const int32_t count = static_cast<int32_t>(blocks_.size());
    std::vector<int32_t> by_first, by_last;
    FERRY_RET_CHECK(SortByFirstAndLast(by_first, by_last));
    // The k-th block to be defined: blocks_[k] itself when by_first is
    // left empty, the blocks being in that order already.
    auto defined = [&](int32_t k) -> Block& {
      return blocks_[by_first.empty() ? k : by_first[k]];
    };
    for (int32_t next_def = 0, next_free = 0; next_def < count;) {
      const int32_t t = defined(next_def).first;
      for (; next_def < count && defined(next_def).first == t; ++next_def) {
        Block& b = defined(next_def);
        b.offset = allocators[b.arena].Allocate(b.size);
        live[b.arena] += b.size;
        arenas[b.arena].lower_bound =
            std::max(arenas[b.arena].lower_bound, live[b.arena]);
      }
      // Free everything whose last reader runs before the next definition.
      const int32_t next_t =
          next_def < count ? defined(next_def).first : INT32_MAX;
      for (; next_free < count && blocks_[by_last[next_free]].last < next_t;
           ++next_free) {
        const Block& b = blocks_[by_last[next_free]];
        allocators[b.arena].Free(b.offset, b.size);
        live[b.arena] -= b.size;
      }
    }
    for (size_t a = 0; a < arenas.size(); ++a)
      arenas[a].size = allocators[a].peak();
    return arenas;
  }

 private:
  // One arena per device, in device order (the host first), and each
  // block's arena. A method has a few devices and many blocks: each block's
  // device is looked up among those met so far, starting from the last one
  // found, then the arenas are renumbered in order.
  std::vector<Arena> Arenas() {
    std::vector<Arena> arenas;
    std::vector<Device> met;
    int32_t last = -1;
    for (Block& b : blocks_) {
      if (last < 0 || met[last] != b.device) {
        last = static_cast<int32_t>(
            std::find(met.begin(), met.end(), b.device) - met.begin());
        if (last == static_cast<int32_t>(met.size())) met.push_back(b.device);
      }
      b.arena = last;
    }
    std::vector<int32_t> order(met.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int32_t a, int32_t b) { return met[a] < met[b]; });
    std::vector<int32_t> arena_of(met.size());
    for (size_t a = 0; a < order.size(); ++a) {
      arena_of[order[a]] = static_cast<int32_t>(a);
      arenas.push_back(Arena{met[order[a]], 0, 0});
    }
    if (!std::is_sorted(order.begin(), order.end()))
      for (Block& b : blocks_) b.arena = arena_of[b.arena];
    return arenas;
  }

  // The block indices ordered by last step, and by first step unless the
  // blocks come in that order already (then `by_first` is left empty): they
  // do unless a block live from step 0 (a graph input, a mutable buffer, a
  // load-time copy) is defined after another block. Counting sorts over the
  // steps 0..steps_, ties in block order (linear, where a comparison sort is n
  // log n). False when a step is out of range (an internal error).
  bool SortByFirstAndLast(std::vector<int32_t>& by_first,
                          std::vector<int32_t>& by_last) const {
    const size_t steps = static_cast<size_t>(steps_) + 2;
    std::vector<int32_t> at_last(steps, 0);
    bool in_first_order = true;
    int32_t previous_first = 0;
    for (const Block& b : blocks_) {
      if (b.first < 0 || b.first > steps_ || b.last < 0 || b.last > steps_)
        return false;
      ++at_last[b.last + 1];
      in_first_order &= b.first >= previous_first;
      previous_first = b.first;
    }
    by_last = OrderBy(&Block::last, std::move(at_last));
    if (!in_first_order) {
      std::vector<int32_t> at_first(steps, 0);
      for (const Block& b : blocks_) ++at_first[b.first + 1];
      by_first = OrderBy(&Block::first, std::move(at_first));
    }
    return true;
  }

  // The block indices in order of their `step`, from `start`: at t + 1, how
  // many blocks are at step t.
  std::vector<int32_t> OrderBy(int32_t Block::*step,
                               std::vector<int32_t> start) const {
    for (size_t t = 0; t + 1 < start.size(); ++t) start[t + 1] += start[t];
    std::vector<int32_t> order(blocks_.size());
    for (int32_t k = 0; k < static_cast<int32_t>(blocks_.size()); ++k)
      order[start[blocks_[k].*step]++] = k;
    return order;
  }

  std::vector<Block>& blocks_;
  const int32_t steps_;
};

// Phase 3: the plan on the method: its arenas, and a placement on every
// value, aliases (views, in-place results, getitems) through their roots;
// a value left unplanned gets none, so an earlier plan does not survive.
// One walk in node order, which meets the blocks in their order (node
// order, CollectBlocks) and every root before its aliases.
//
//   t at 0 in arena 0; v = view(t)  ==>  t.memory = v.memory = {0, 0, 64}
absl::Status Apply(Method& method, const StorageRoots& roots,
                   const std::vector<Block>& blocks,
                   std::vector<Arena> arenas) {
  size_t next = 0;  // the next block to meet
  // The placement of root `v`: its block's, if it has one.
  auto planned = [&](ValueId v) {
    if (next == blocks.size() || blocks[next].root != v)
      return MemoryPlacement{};
    const Block& b = blocks[next];
    ++next;
    return MemoryPlacement{
        .arena = b.arena, .planned = true, .offset = b.offset, .size = b.size};
  };
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    Node& node = method.nodes[i];
    node.tensor.memory = MemoryPlacement{};
    if (node.result == ResultKind::kTensor) {
      const ValueId value{i, -1};
      const ValueId root = roots.RootOf(value);
      if (root == value) {
        node.tensor.memory = planned(value);
      } else {
        FERRY_RET_CHECK(root.node >= 0 && root.node < i);  // placed already
        if (const TensorSpec* spec = method.Spec(root))
          node.tensor.memory = spec->memory;
      }
    }
    for (int32_t e = 0; e < static_cast<int32_t>(node.tuple.size()); ++e)
      node.tuple[e].memory = planned(ValueId{i, e});
  }
  FERRY_RET_CHECK(next == blocks.size());  // every block met
  method.arenas = std::move(arenas);
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
    CollectBlocks collect(method, slots, options, diagnostics);
    const StorageRoots roots(
        method, slots,
        [&](const StorageRoots& known, int32_t i) { collect.Visit(known, i); });
    std::vector<Block> blocks = std::move(collect).Finish();
    absl::StatusOr<std::vector<Arena>> arenas =
        AssignOffsets(blocks, static_cast<int32_t>(method.nodes.size())).Run();
    if (!arenas.ok()) return arenas.status();
    if (absl::Status applied = Apply(method, roots, blocks, *std::move(arenas));
        !applied.ok())
      return applied;
    planned += static_cast<int64_t>(blocks.size());
  }
  diagnostics.SetMethod("");
  stats.Add("planned_values", planned);
  return stats;
}

}  // namespace ferry
