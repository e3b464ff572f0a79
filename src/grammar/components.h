// Strongly connected components of the directed graphs the grammar compiler walks (rules calling rules,
// automaton states reading units). Tarjan's algorithm, iteratively: the graphs come from input grammars, so
// their depth is not bounded by anything a call stack could hold.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

namespace deepinfer::grammar {

// The component of every node 0..n-1, numbered in the order the algorithm completes them: a reverse
// topological order of the component graph (a component's successors have smaller numbers). Node v's
// successors are successor(v, k) for k < degree(v). `*count`, when given, receives the number of components.
template <typename Degree, typename Successor>
std::vector<int32_t> StronglyConnectedComponents(uint32_t n, Degree degree, Successor successor,
                                                 int32_t* count = nullptr) {
  std::vector<int32_t> index(n, -1), low(n, 0), component(n, -1);
  std::vector<uint8_t> on_stack(n, 0);
  std::vector<uint32_t> stack;
  std::vector<std::pair<uint32_t, size_t>> dfs;
  int32_t visited = 0, components = 0;
  for (uint32_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    dfs.assign(1, {start, 0});
    index[start] = low[start] = visited++;
    stack.push_back(start);
    on_stack[start] = 1;
    while (!dfs.empty()) {
      auto& [v, k] = dfs.back();
      if (k < static_cast<size_t>(degree(v))) {
        const uint32_t w = successor(v, k++);
        if (index[w] < 0) {
          index[w] = low[w] = visited++;
          stack.push_back(w);
          on_stack[w] = 1;
          dfs.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      const uint32_t done = v;
      dfs.pop_back();
      if (!dfs.empty()) low[dfs.back().first] = std::min(low[dfs.back().first], low[done]);
      if (low[done] == index[done]) {
        uint32_t w;
        do {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          component[w] = components;
        } while (w != done);
        ++components;
      }
    }
  }
  if (count) *count = components;
  return component;
}

}  // namespace deepinfer::grammar
