// StableTopologicalOrder, StronglyConnectedComponents, renumbering and
// ValueSlots (passes/graph.h; also as StorageRoots numbers them), and the
// ValueId hash (passes/ir.h).
#include "passes/graph.h"

#include <optional>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "passes/alias.h"

namespace ferry {
namespace {

using Graph = std::vector<std::vector<int32_t>>;

TEST(StableTopologicalOrder, KeepsAnOrderThatAlreadySatisfiesTheDependencies) {
  // 1 and 2 read 0; 3 reads both: 0 1 2 3 is already an order.
  const Graph deps = {{}, {0}, {0}, {1, 2}};
  EXPECT_EQ(*StableTopologicalOrder(deps), (std::vector<int32_t>{0, 1, 2, 3}));
}

TEST(StableTopologicalOrder, TheSmallestReadyIdComesFirst) {
  // 0 reads 2 and 3 reads 1: 0 waits for 2, so 1 and 2 (ready, in id order)
  // come first; 3 is ready after 1 but 0 has the smaller id.
  const Graph deps = {{2}, {}, {}, {1}};
  EXPECT_EQ(*StableTopologicalOrder(deps), (std::vector<int32_t>{1, 2, 0, 3}));
}

TEST(StableTopologicalOrder, RepeatedDependenciesCountOnce) {
  const Graph deps = {{}, {0, 0, 0}};
  EXPECT_EQ(*StableTopologicalOrder(deps), (std::vector<int32_t>{0, 1}));
}

TEST(StableTopologicalOrder, PriorityFirstThenId) {
  // No dependencies: ready ids come out by (priority, id).
  const Graph deps = {{}, {}, {}, {}};
  const std::vector<int32_t> priority = {5, 1, 5, 1};
  EXPECT_EQ(*StableTopologicalOrder(deps, priority),
            (std::vector<int32_t>{1, 3, 0, 2}));
}

TEST(StableTopologicalOrder, PriorityNeverBreaksADependency) {
  // 0 has the smallest priority but reads 1.
  const Graph deps = {{1}, {}};
  const std::vector<int32_t> priority = {0, 9};
  EXPECT_EQ(*StableTopologicalOrder(deps, priority),
            (std::vector<int32_t>{1, 0}));
}

TEST(StableTopologicalOrder, ACycleHasNoOrder) {
  const Graph deps = {{}, {2}, {1}, {0}};
  EXPECT_EQ(StableTopologicalOrder(deps), std::nullopt);
  const Graph self = {{0}};
  EXPECT_EQ(StableTopologicalOrder(self), std::nullopt);
}

TEST(StableTopologicalOrder, Empty) {
  EXPECT_EQ(*StableTopologicalOrder(Graph{}), (std::vector<int32_t>{}));
}

TEST(StronglyConnectedComponents,
     AcyclicGraphHasSingletonsInReverseTopologicalOrder) {
  // 0 -> 1 -> 2: sinks complete first.
  const Graph successors = {{1}, {2}, {}};
  Components c = StronglyConnectedComponents(successors);
  EXPECT_EQ(c.of, (std::vector<int32_t>{2, 1, 0}));
  EXPECT_EQ(c.size, (std::vector<int32_t>{1, 1, 1}));
}

TEST(StronglyConnectedComponents, FindsCyclesAndOrdersComponents) {
  // 0 -> {1 <-> 2} -> 3, and 4 on its own with a self loop.
  const Graph successors = {{1}, {2}, {1, 3}, {}, {4}};
  Components c = StronglyConnectedComponents(successors);
  EXPECT_EQ(c.of[1], c.of[2]);
  EXPECT_NE(c.of[0], c.of[1]);
  EXPECT_NE(c.of[3], c.of[1]);
  EXPECT_EQ(c.size[c.of[1]], 2);
  EXPECT_EQ(c.size[c.of[0]], 1);
  EXPECT_EQ(c.size[c.of[4]], 1);  // a self loop is still a component of one
  // Every edge between components goes from a higher number to a lower one.
  for (int32_t u = 0; u < static_cast<int32_t>(successors.size()); ++u)
    for (int32_t w : successors[u]) {
      if (c.of[u] == c.of[w]) continue;
      EXPECT_GT(c.of[u], c.of[w]) << u << "->" << w;
    }
  // Exactly the numbering Tarjan's algorithm gives from root 0, then 4.
  EXPECT_EQ(c.of, (std::vector<int32_t>{2, 1, 1, 0, 3}));
}

TEST(StronglyConnectedComponents, DeepChainDoesNotRecurse) {
  const int32_t n = 200000;
  Graph successors(n);
  for (int32_t i = 0; i + 1 < n; ++i) successors[i].push_back(i + 1);
  successors[n - 1].push_back(0);  // one big cycle
  Components c = StronglyConnectedComponents(successors);
  EXPECT_EQ(c.size, (std::vector<int32_t>{n}));
}

Node CallReading(std::vector<ValueId> operands) {
  Node node;
  node.kind = NodeKind::kCall;
  for (const ValueId& v : operands) node.args.push_back(Argument::Value(v));
  return node;
}

TEST(Renumbering, InverseOrderAndRenumberOperands) {
  // Old nodes 0, 1, 2 placed as 2, 0, 1; node "1" dropped from a selection.
  EXPECT_EQ(InverseOrder(std::vector<int32_t>{2, 0, 1}, 3),
            (std::vector<int32_t>{1, 2, 0}));
  EXPECT_EQ(InverseOrder(std::vector<int32_t>{2, 0}, 3),
            (std::vector<int32_t>{1, -1, 0}));

  std::vector<Node> nodes = {CallReading({ValueId{0, -1}, ValueId{2, 1}})};
  Node getitem;
  getitem.kind = NodeKind::kGetItem;
  getitem.getitem_source = 2;
  nodes.push_back(getitem);
  RenumberOperands(nodes, std::vector<int32_t>{1, 2, 0});
  EXPECT_EQ(nodes[0].args[0].value, (ValueId{1, -1}));
  EXPECT_EQ(nodes[0].args[1].value, (ValueId{0, 1}));  // element kept
  EXPECT_EQ(nodes[1].getitem_source, 0);
}

TEST(ValueSlots, DenseSlotsPerResultAndTupleElement) {
  Method method;
  method.nodes.resize(3);
  method.nodes[1].result = ResultKind::kTuple;
  method.nodes[1].tuple.resize(2);
  ValueSlots slots(method);
  EXPECT_EQ(slots.size(), 5);
  EXPECT_EQ(slots.Of(ValueId{0, -1}), 0);
  EXPECT_EQ(slots.Of(ValueId{1, -1}), 1);
  EXPECT_EQ(slots.Of(ValueId{1, 0}), 2);
  EXPECT_EQ(slots.Of(ValueId{1, 1}), 3);
  EXPECT_EQ(slots.Of(ValueId{2, -1}), 4);
}

TEST(ValueSlots, StorageRootsNumbersThemInItsOwnWalk) {
  Method method;
  method.nodes.resize(4);
  method.nodes[1].result = ResultKind::kTuple;
  method.nodes[1].tuple.resize(2);
  method.nodes[3].result = ResultKind::kTuple;
  method.nodes[3].tuple.resize(3);
  const ValueSlots alone(method);
  ValueSlots slots;
  EXPECT_EQ(slots.size(), 0);
  const StorageRoots roots(method, slots);
  ASSERT_EQ(slots.size(), alone.size());
  EXPECT_EQ(slots.size(), 9);
  for (int32_t i = 0; i < 4; ++i)
    for (int32_t e = -1; e < static_cast<int32_t>(method.nodes[i].tuple.size());
         ++e)
      EXPECT_EQ(slots.Of(ValueId{i, e}), alone.Of(ValueId{i, e}));
}

TEST(ValueIdHash, DistinguishesNodeAndElement) {
  // Keys the old (node << 20) + element + 1 numbering made collide.
  absl::flat_hash_set<ValueId> set = {ValueId{0, (1 << 20) - 1}, ValueId{1, -1},
                                      ValueId{1, 0}, ValueId{0, -1}};
  EXPECT_EQ(set.size(), 4u);
  EXPECT_TRUE(set.contains(ValueId{1, 0}));
  EXPECT_FALSE(set.contains(ValueId{2, -1}));
}

}  // namespace
}  // namespace ferry
