// Storage roots: which values share storage.
//
// A call whose schema says result i aliases argument k (`Tensor(a)` views,
// `Tensor(a!)` in-place results) shares argument k's storage; a getitem
// shares the tuple element it reads; everything else owns fresh storage.
// Chains are followed to the end, so a view of a view of `t` has root `t`.
// Devices, versions and memory belong to roots.
#ifndef FERRY_PASSES_ALIAS_H_
#define FERRY_PASSES_ALIAS_H_

#include <concepts>
#include <span>
#include <utility>
#include <vector>

#include "passes/graph.h"
#include "passes/ir.h"

namespace ferry {

class StorageRoots {
 public:
  explicit StorageRoots(const Method& method);
  // Also numbers the method's values into `slots`, in the same walk over
  // the nodes (a walk over a large method costs a cache miss per node), and
  // calls `visit(roots, i)` for each node i once its root, written values
  // and value slots are known: `roots` then holds nodes [0, i]. A pass whose
  // own first walk goes forward over the nodes needing only what is known
  // of the nodes before makes it in this one.
  StorageRoots(const Method& method, ValueSlots& slots);
  template <typename Visit>
  StorageRoots(const Method& method, ValueSlots& slots, Visit&& visit);
  // The same visits, without numbering the values.
  template <typename Visit>
  requires std::invocable<Visit&, const StorageRoots&, int32_t> StorageRoots(
      const Method& method, Visit&& visit);

  // The root of `v` (a whole node result or a tuple element). (Inline: the
  // passes ask it for every operand, several times.)
  ValueId RootOf(ValueId v) const {
    if (v.node < 0 || v.node >= static_cast<int32_t>(node_root_.size()))
      return v;
    if (v.element >= 0) return v;  // tuple elements own their storage
    return node_root_[v.node];
  }
  // The root of node `node`'s whole (non-tuple) result.
  ValueId RootOfNode(int32_t node) const { return RootOf(ValueId{node, -1}); }
  // Whether node `node` is a call that writes one of its arguments in place,
  // and which argument values it writes (as read by the call).
  std::span<const ValueId> WrittenBy(int32_t node) const {
    return std::span<const ValueId>(written_).subspan(
        written_start_[node], written_start_[node + 1] - written_start_[node]);
  }
  // Whether node `node` is a call whose operator reads metadata only.
  bool IsMetadataOnly(int32_t node) const { return metadata_only_[node]; }

 private:
  // Room for the method's nodes, before the walk.
  explicit StorageRoots(size_t nodes);
  // Node i's root, metadata flag and written values.
  void Add(const Method& method, int32_t i);
  // All of that but where node i's written values end (Add's).
  void AddAliasing(const Node& node, int32_t i);

  std::vector<ValueId> node_root_;  // per node (whole result)
  // The values node i writes: written_[written_start_[i] ..
  // written_start_[i + 1]) (one array for all nodes, not one per node).
  std::vector<int32_t> written_start_;  // per node, plus one
  std::vector<ValueId> written_;
  std::vector<char> metadata_only_;  // per node
};

template <typename Visit>
StorageRoots::StorageRoots(const Method& method, ValueSlots& slots,
                           Visit&& visit)
    : StorageRoots(method.nodes.size()) {
  slots.Start(method.nodes.size());
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    Add(method, i);
    slots.Add(method.nodes[i]);
    visit(std::as_const(*this), i);
  }
}

template <typename Visit>
requires std::invocable<Visit&, const StorageRoots&, int32_t>
StorageRoots::StorageRoots(const Method& method, Visit&& visit)
    : StorageRoots(method.nodes.size()) {
  for (int32_t i = 0; i < static_cast<int32_t>(method.nodes.size()); ++i) {
    Add(method, i);
    visit(std::as_const(*this), i);
  }
}

// Ordering that in-place writes add to the data edges: for each node, the
// earlier nodes it must stay after although it does not read their values:
// the last writer of every storage it reads (read after write), and, for a
// writer, the readers and the writer of that storage since the previous
// write (write after read / write). Sorted, no duplicates, excluding
// the node's own operands' producers only when they coincide.
std::vector<std::vector<int32_t>> EffectDependencies(const Method& method,
                                                     const StorageRoots& roots);

}  // namespace ferry

#endif  // FERRY_PASSES_ALIAS_H_
