#include "model/common/moe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/elementwise.h"
#include "model/common/row_parallel.h"

namespace deepinfer::model {

Status ShardExpertSets(ExpertExchange* exchange, int64_t experts, const std::vector<ExpertSetWeights*>& sets) {
  if (exchange == nullptr) return Status::Ok();
  DI_RETURN_IF_ERROR(CheckExpertSharding(experts, exchange));
  for (ExpertSetWeights* set : sets) set->exchange = exchange;
  return Status::Ok();
}

float RouterScore(const std::string& scoring_func, float logit) {
  if (scoring_func == "sigmoid") return 1.0f / (1.0f + std::exp(-logit));
  const float softplus = logit > 20.0f ? logit : std::log1p(std::exp(logit));
  return std::sqrt(softplus);
}

void RoutingWeights(const float* scores, const int32_t* chosen, int64_t k, bool normalise, float scale,
                    float* weights) {
  float sum = 0;
  for (int64_t j = 0; j < k; ++j) sum += scores[chosen[j]];
  for (int64_t j = 0; j < k; ++j) {
    float weight = scores[chosen[j]];
    if (normalise) weight = weight / (sum + 1e-20f);
    weights[j] = weight * scale;
  }
}

namespace {

// The rows one expert computes: their routing weights, inputs, and the FFN's intermediate and output rows.
struct ExpertWork {
  const ExpertWeights* weights = nullptr;
  std::vector<int64_t> rows;  // where each row comes from (the caller's meaning)
  std::vector<float> row_weights, input, gate, up, output;
  int64_t m() const { return static_cast<int64_t>(rows.size()); }
};

// Runs every expert of `work` over its input rows into its output rows, and the shared expert over x's n
// rows into out: every gate and up product in one hand-off of the pool, every down product in another.
void RunExpertFfns(std::vector<ExpertWork>& work, const ExpertWeights& shared_weights, const float* x, int64_t n,
                   int64_t d, const ExpertDispatch& dispatch, ThreadPool& pool, float* out) {
  const bool weight_activation = dispatch.weight_at == RoutingWeightAt::kActivation;
  ExpertWork shared;
  shared.weights = &shared_weights;
  std::vector<LinearTask> tasks;
  auto add_gate_up = [&](ExpertWork& item, const float* input, int64_t m) {
    const int64_t inter = item.weights->w1.out_features;
    item.gate.resize(static_cast<size_t>(m * inter));
    item.up.resize(static_cast<size_t>(m * inter));
    tasks.push_back({input, m, d, &item.weights->w1, item.gate.data(), inter});
    tasks.push_back({input, m, d, &item.weights->w3, item.up.data(), inter});
  };
  for (ExpertWork& item : work) add_gate_up(item, item.input.data(), item.m());
  if (n > 0) add_gate_up(shared, x, n);
  RunLinearTasks(tasks, dispatch.linear, pool);
  tasks.clear();
  auto add_down = [&](ExpertWork& item, int64_t m, float* output) {
    const int64_t inter = item.weights->w1.out_features;
    kernels::SwiGlu(item.gate.data(), item.up.data(), m * inter, dispatch.swiglu_limit, item.gate.data());
    if (weight_activation && !item.row_weights.empty()) {
      for (int64_t r = 0; r < m; ++r) {
        float* g = item.gate.data() + r * inter;
        const float weight = item.row_weights[r];
        for (int64_t t = 0; t < inter; ++t) g[t] = weight * g[t];
      }
    }
    tasks.push_back({item.gate.data(), m, inter, &item.weights->w2, output, d});
  };
  for (ExpertWork& item : work) add_down(item, item.m(), item.output.data());
  if (n > 0) add_down(shared, n, out);
  RunLinearTasks(tasks, dispatch.linear, pool);
}

// out[i] = Σ over row i's contributions in the order given (routed outputs in increasing expert order, each
// times its weight unless the weight was applied to the activation) + out[i] (the shared expert's).
void CombineRows(const std::vector<std::vector<std::pair<const float*, float>>>& contributions, int64_t n, int64_t d,
                 bool weight_activation, ThreadPool& pool, float* out) {
  ForRowRanges(pool, n, [&](int64_t begin, int64_t end) {
    std::vector<float> routed(static_cast<size_t>(d));
    for (int64_t i = begin; i < end; ++i) {
      std::fill(routed.begin(), routed.end(), 0.0f);
      for (const auto& [src, weight] : contributions[i]) {
        if (weight_activation) {
          for (int64_t t = 0; t < d; ++t) routed[t] += src[t];
        } else {
          for (int64_t t = 0; t < d; ++t) routed[t] += src[t] * weight;
        }
      }
      for (int64_t t = 0; t < d; ++t) out[i * d + t] = routed[t] + out[i * d + t];
    }
  });
}

// A routed (row, expert) pair on the wire: the expert id, the routing weight, then the row's d floats.
constexpr int64_t kPairHeaderFloats = 2;

// The dispatch of an expert-parallel member (ExpertSetWeights::exchange): counts, then the pairs to each
// expert's member, the member's experts over what it received, the outputs back, and the combine here.
void DispatchExpertsSharded(const ExpertSetWeights& w, const ExpertDispatch& dispatch, const float* x, int64_t n,
                            int64_t d, const int32_t* chosen, const float* weights, int64_t k, ThreadPool& pool,
                            ScopedPhase& phase, float* out) {
  phase.Switch(Phase::kMoeExperts);
  ExpertExchange& exchange = *w.exchange;
  const int members = exchange.size();
  const int64_t e = static_cast<int64_t>(w.experts.size());
  const bool weight_activation = dispatch.weight_at == RoutingWeightAt::kActivation;
  const int64_t pair_floats = kPairHeaderFloats + d;
  const std::span<const int32_t> routed(chosen, static_cast<size_t>(n * k));
  exchange.NoteRouting(e, routed);
  std::vector<int32_t> member_of(static_cast<size_t>(n * k));
  std::vector<uint8_t> computes;
  exchange.PlaceRoutedPairs(e, routed, member_of, &computes);

  // The pairs each member receives from here, in row order, then slot order.
  std::vector<std::vector<int64_t>> outgoing(static_cast<size_t>(members));
  for (int64_t p = 0; p < n * k; ++p) {
    const int32_t member = member_of[static_cast<size_t>(p)];
    if (member < 0 || member >= members) {
      std::fprintf(stderr, "deepinfer: expert parallelism: expert %d placed on rank %d of %d\n", chosen[p], member, members);
      std::abort();  // a placement outside the unit: nothing computed from here on can be trusted
    }
    outgoing[static_cast<size_t>(member)].push_back(p);
  }
  std::vector<int64_t> send_counts(static_cast<size_t>(members)), recv_counts(static_cast<size_t>(members));
  for (int m = 0; m < members; ++m) send_counts[m] = static_cast<int64_t>(outgoing[m].size());
  const std::vector<int64_t> count_bytes(static_cast<size_t>(members), sizeof(int64_t));
  exchange.AllToAllV(reinterpret_cast<const uint8_t*>(send_counts.data()), count_bytes,
                     reinterpret_cast<uint8_t*>(recv_counts.data()), count_bytes);

  int64_t sent = 0, received = 0;
  std::vector<int64_t> send_bytes(static_cast<size_t>(members)), recv_bytes(static_cast<size_t>(members));
  for (int m = 0; m < members; ++m) {
    sent += send_counts[m];
    received += recv_counts[m];
    send_bytes[m] = send_counts[m] * pair_floats * static_cast<int64_t>(sizeof(float));
    recv_bytes[m] = recv_counts[m] * pair_floats * static_cast<int64_t>(sizeof(float));
  }
  std::vector<float> send(static_cast<size_t>(sent * pair_floats)), recv(static_cast<size_t>(received * pair_floats));
  {
    float* at = send.data();
    for (const std::vector<int64_t>& pairs : outgoing) {
      for (int64_t p : pairs) {
        const int32_t expert = chosen[p];
        std::memcpy(at, &expert, sizeof(expert));
        at[1] = weights[p];
        std::copy(x + (p / k) * d, x + (p / k + 1) * d, at + kPairHeaderFloats);
        at += pair_floats;
      }
    }
  }
  exchange.AllToAllV(reinterpret_cast<const uint8_t*>(send.data()), send_bytes, reinterpret_cast<uint8_t*>(recv.data()),
                     recv_bytes);

  // The received pairs grouped by this member's experts, in increasing expert order, each expert's rows in
  // arrival order (sending member, then its order).
  std::vector<std::vector<int64_t>> by_expert(static_cast<size_t>(e));
  for (int64_t q = 0; q < received; ++q) {
    int32_t expert = 0;
    std::memcpy(&expert, recv.data() + q * pair_floats, sizeof(expert));
    if (expert < 0 || expert >= e || computes[static_cast<size_t>(expert)] == 0) {
      std::fprintf(stderr, "deepinfer: expert parallelism: rank %d received a row for expert %d, which it does not compute\n",
                   exchange.rank(), expert);
      std::abort();  // the members disagree about the placement: nothing they compute can be trusted
    }
    by_expert[static_cast<size_t>(expert)].push_back(q);
  }
  std::vector<ExpertWork> work;
  std::vector<std::pair<size_t, int64_t>> place(static_cast<size_t>(received));  // pair q → (work item, row)
  for (int64_t expert = 0; expert < e; ++expert) {
    const std::vector<int64_t>& pairs = by_expert[static_cast<size_t>(expert)];
    if (pairs.empty()) continue;
    ExpertWork item;
    item.weights = &w.experts[static_cast<size_t>(expert)];
    item.rows = pairs;
    item.input.resize(pairs.size() * static_cast<size_t>(d));
    for (size_t r = 0; r < pairs.size(); ++r) {
      const float* pair = recv.data() + pairs[r] * pair_floats;
      item.row_weights.push_back(pair[1]);
      std::copy(pair + kPairHeaderFloats, pair + pair_floats, item.input.data() + r * d);
      place[static_cast<size_t>(pairs[r])] = {work.size(), static_cast<int64_t>(r)};
    }
    item.output.resize(pairs.size() * static_cast<size_t>(d));
    work.push_back(std::move(item));
  }
  RunExpertFfns(work, w.shared, x, n, d, dispatch, pool, out);

  // The outputs back to the members their rows came from, in the order they arrived.
  std::vector<float> answers(static_cast<size_t>(received * d)), results(static_cast<size_t>(sent * d));
  for (int64_t q = 0; q < received; ++q) {
    const auto [item, r] = place[static_cast<size_t>(q)];
    const float* y = work[item].output.data() + r * d;
    std::copy(y, y + d, answers.data() + q * d);
  }
  for (int m = 0; m < members; ++m) {
    send_bytes[m] = recv_counts[m] * d * static_cast<int64_t>(sizeof(float));
    recv_bytes[m] = send_counts[m] * d * static_cast<int64_t>(sizeof(float));
  }
  exchange.AllToAllV(reinterpret_cast<const uint8_t*>(answers.data()), send_bytes,
                     reinterpret_cast<uint8_t*>(results.data()), recv_bytes);

  // The combine: each row's routed outputs in increasing expert order (slot order among equal experts), as
  // one process sums them.
  phase.Switch(Phase::kMoeCombine);
  std::vector<const float*> result_of(static_cast<size_t>(n * k));
  {
    const float* at = results.data();
    for (const std::vector<int64_t>& pairs : outgoing) {
      for (int64_t p : pairs) {
        result_of[static_cast<size_t>(p)] = at;
        at += d;
      }
    }
  }
  std::vector<std::vector<std::pair<const float*, float>>> contributions(static_cast<size_t>(n));
  std::vector<int64_t> slots(static_cast<size_t>(k));
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) slots[j] = j;
    std::stable_sort(slots.begin(), slots.end(), [&](int64_t a, int64_t b) { return chosen[i * k + a] < chosen[i * k + b]; });
    for (int64_t j : slots) contributions[i].push_back({result_of[static_cast<size_t>(i * k + j)], weights[i * k + j]});
  }
  CombineRows(contributions, n, d, weight_activation, pool, out);
}

}  // namespace

void DispatchExperts(const ExpertSetWeights& w, const ExpertDispatch& dispatch, const float* x, int64_t n, int64_t d,
                     const int32_t* chosen, const float* weights, int64_t k, ThreadPool& pool, ScopedPhase& phase,
                     float* out) {
  if (w.exchange != nullptr && k > 0) {
    DispatchExpertsSharded(w, dispatch, x, n, d, chosen, weights, k, pool, phase, out);
    return;
  }
  phase.Switch(Phase::kMoeExperts);
  const std::vector<ExpertWeights>& experts = w.experts;
  // Group the routed rows by expert.
  std::vector<ExpertWork> work;
  const int64_t e = static_cast<int64_t>(experts.size());
  for (int64_t ex = 0; ex < e; ++ex) {
    ExpertWork item;
    item.weights = &experts[ex];
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < k; ++j) {
        if (chosen[i * k + j] == ex) {
          item.rows.push_back(i);
          item.row_weights.push_back(weights[i * k + j]);
        }
      }
    }
    if (item.rows.empty()) continue;
    const int64_t m = item.m();
    item.input.resize(static_cast<size_t>(m * d));
    for (int64_t r = 0; r < m; ++r) std::copy(x + item.rows[r] * d, x + (item.rows[r] + 1) * d, item.input.data() + r * d);
    item.output.resize(static_cast<size_t>(m * d));
    work.push_back(std::move(item));
  }
  RunExpertFfns(work, w.shared, x, n, d, dispatch, pool, out);

  // The combine: row i's routed sum in increasing expert order, then plus the shared expert's output.
  phase.Switch(Phase::kMoeCombine);
  std::vector<std::vector<std::pair<const float*, float>>> contributions(static_cast<size_t>(n));
  for (const ExpertWork& item : work) {
    for (size_t r = 0; r < item.rows.size(); ++r)
      contributions[item.rows[r]].push_back({item.output.data() + r * d, item.row_weights[r]});
  }
  CombineRows(contributions, n, d, dispatch.weight_at == RoutingWeightAt::kActivation, pool, out);
}

}  // namespace deepinfer::model
