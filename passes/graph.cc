#include "passes/graph.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <utility>

namespace ferry {

std::optional<std::vector<int32_t>> StableTopologicalOrder(
    std::span<const std::vector<int32_t>> dependencies,
    std::span<const int32_t> priority) {
  const int32_t n = static_cast<int32_t>(dependencies.size());
  std::vector<int32_t> pending(n, 0);
  std::vector<std::vector<int32_t>> readers(n);
  for (int32_t i = 0; i < n; ++i) {
    std::vector<int32_t> deps = dependencies[i];
    std::sort(deps.begin(), deps.end());
    deps.erase(std::unique(deps.begin(), deps.end()), deps.end());
    pending[i] = static_cast<int32_t>(deps.size());
    for (int32_t d : deps) readers[d].push_back(i);
  }
  auto key = [&](int32_t i) {
    return std::pair<int32_t, int32_t>(priority.empty() ? 0 : priority[i], i);
  };
  using Key = std::pair<int32_t, int32_t>;
  std::priority_queue<Key, std::vector<Key>, std::greater<Key>> ready;
  for (int32_t i = 0; i < n; ++i)
    if (pending[i] == 0) ready.push(key(i));
  std::vector<int32_t> order;
  order.reserve(n);
  while (!ready.empty()) {
    const int32_t i = ready.top().second;
    ready.pop();
    order.push_back(i);
    for (int32_t r : readers[i])
      if (--pending[r] == 0) ready.push(key(r));
  }
  if (static_cast<int32_t>(order.size()) != n) return std::nullopt;
  return order;
}

Components StronglyConnectedComponents(
    std::span<const std::vector<int32_t>> successors) {
  const int32_t n = static_cast<int32_t>(successors.size());
  Components result;
  result.of.assign(n, -1);
  std::vector<int32_t> index(n, -1), low(n, 0), next_edge(n, 0);
  std::vector<char> on_stack(n, 0);
  std::vector<int32_t> stack, call;  // call: ids whose edges are walked
  int32_t counter = 0;
  for (int32_t root = 0; root < n; ++root) {
    if (index[root] != -1) continue;
    call.push_back(root);
    while (!call.empty()) {
      const int32_t u = call.back();
      if (index[u] == -1) {
        index[u] = low[u] = counter++;
        stack.push_back(u);
        on_stack[u] = 1;
      }
      const std::vector<int32_t>& edges = successors[u];
      if (next_edge[u] < static_cast<int32_t>(edges.size())) {
        const int32_t w = edges[next_edge[u]++];
        if (index[w] == -1)
          call.push_back(w);
        else if (on_stack[w])
          low[u] = std::min(low[u], index[w]);
        continue;
      }
      call.pop_back();
      if (!call.empty()) low[call.back()] = std::min(low[call.back()], low[u]);
      if (low[u] == index[u]) {
        const int32_t component = static_cast<int32_t>(result.size.size());
        int32_t size = 0, w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          result.of[w] = component;
          ++size;
        } while (w != u);
        result.size.push_back(size);
      }
    }
  }
  return result;
}

std::vector<int32_t> InverseOrder(std::span<const int32_t> order, int32_t n) {
  std::vector<int32_t> new_index(n, -1);
  for (int32_t k = 0; k < static_cast<int32_t>(order.size()); ++k)
    new_index[order[k]] = k;
  return new_index;
}

void RenumberOperands(std::span<Node> nodes,
                      std::span<const int32_t> new_index) {
  for (Node& node : nodes)
    ForEachOperandMutable(node,
                          [&](ValueId& v) { v.node = new_index[v.node]; });
}

ValueSlots::ValueSlots(const Method& method) {
  base_.reserve(method.nodes.size() + 1);
  for (const Node& node : method.nodes) Add(node);
}

}  // namespace ferry
