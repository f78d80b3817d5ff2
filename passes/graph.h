// Graph utilities for the passes: a stable topological order, strongly
// connected components, renumbering a method's nodes, and a dense numbering
// of its values.
//
// Graphs are over ids 0..n-1 (nodes of a method, or units a pass contracts
// nodes into), given as adjacency lists. Every result is a function of the
// input alone (ties break by id, never by a container's order), so passes
// built on these stay deterministic.
#ifndef FERRY_PASSES_GRAPH_H_
#define FERRY_PASSES_GRAPH_H_

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "passes/ir.h"

namespace ferry {

// Kahn's algorithm: an order of 0..n-1 (n = dependencies.size()) in which
// every id comes after each of its `dependencies[i]` (repeats allowed).
// Stable: of the ids that are ready, the one with the smallest
// (priority[i], i) comes first, so with an empty `priority` an order that
// already satisfies the dependencies is kept as it is. nullopt when the
// dependencies have a cycle.
std::optional<std::vector<int32_t>> StableTopologicalOrder(
    std::span<const std::vector<int32_t>> dependencies,
    std::span<const int32_t> priority = {});

// Strongly connected components of the graph with edges u -> successors[u]
// (Tarjan's algorithm, iterative: no recursion however deep the graph).
// Components are numbered in the order they complete: every edge between
// two components goes from a higher number to a lower one (the numbering
// is a reverse topological order of the condensation), and roots are
// visited in id order.
struct Components {
  std::vector<int32_t> of;    // per id: its component
  std::vector<int32_t> size;  // per component: how many ids it has
};
Components StronglyConnectedComponents(
    std::span<const std::vector<int32_t>> successors);

// Old -> new index for `order` (new -> old), a permutation or a selection
// of 0..n-1; ids not in `order` map to -1.
std::vector<int32_t> InverseOrder(std::span<const int32_t> order, int32_t n);

// Points every operand of `nodes` (ForEachOperandMutable) at
// new_index[old node]: what a pass does after it reorders, inserts or drops
// nodes. The operands must not refer to dropped (-1) nodes.
void RenumberOperands(std::span<Node> nodes,
                      std::span<const int32_t> new_index);

// Dense numbering of the values of a method, for per-value arrays: slot
// 0 of a node is its whole result, slot 1 + e its tuple element e. Maps
// keyed by ValueId use its hash (ir.h) instead.
class ValueSlots {
 public:
  explicit ValueSlots(const Method& method);
  // No values yet: StorageRoots(method, slots) numbers them.
  ValueSlots() = default;
  int32_t Of(ValueId v) const { return base_[v.node] + 1 + v.element; }
  int32_t size() const { return base_.back(); }
  // Extends `per_value`, an array indexed by slot, with `fill` for the
  // values numbered since it was last extended (a walk that numbers values
  // as it goes: StorageRoots' visit). One value at a time, as they come, so
  // that the call inlines.
  template <typename T>
  void Cover(std::vector<T>& per_value, const T& fill) const {
    while (static_cast<int32_t>(per_value.size()) < size())
      per_value.push_back(fill);
  }

 private:
  friend class StorageRoots;  // numbers the values in its own walk
  // No values yet, with room for a method of `nodes` nodes.
  void Start(size_t nodes) {
    base_.assign(1, 0);
    base_.reserve(nodes + 1);
  }
  // Numbers the values of `node`, the next node of the method.
  void Add(const Node& node) {
    base_.push_back(base_.back() + 1 + static_cast<int32_t>(node.tuple.size()));
  }
  std::vector<int32_t> base_ = {0};
};

}  // namespace ferry

#endif  // FERRY_PASSES_GRAPH_H_
