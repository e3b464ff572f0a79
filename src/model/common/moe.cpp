#include "model/common/moe.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

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

// Experts that each multiply one row (batch-1 decode) are GEMVs: nothing but streaming their weights, at
// a few hundred KiB per product. They run in one hand-off of the pool, as units of whole weight rows of
// about kOneRowUnitBytes that the threads take in list order: an expert's gate and up rows (and SwiGLU and
// the activation weight over those rows right after), then, once every such unit of that expert is done,
// its down rows. Each expert's down units are listed after the next expert's gate/up units, so a thread
// seldom finds them not ready; it waits for them if it does (units are taken in increasing order, and
// gate/up units never wait, so the wait always ends). Every output is computed by kernels::Linear over its
// own weight row, which does not depend on how the rows are split, and SwiGLU and the weight are
// elementwise: the results are bit-identical to RunExpertFfns.
// Units are large because Linear streams a product's rows as four separate runs (linear_kernels.h,
// DecodeStretch), and each run must stay long for the hardware prefetcher: about as long as the runs of
// RunLinearTasks' slices.
constexpr int64_t kOneRowUnitBytes = int64_t{1024} * 1024;
// The most rows of x (the shared expert's) for which the dispatch takes this path: the products stay on
// Linear's decode-sized kernels.
constexpr int64_t kOneRowMaxSharedRows = 4;

// Weight rows per unit of `w` (FP8: whole scale blocks), so that a unit streams about `bytes` of it.
int64_t UnitRows(const kernels::WeightView& w, int64_t bytes) {
  const int64_t row_bytes = std::max<int64_t>(1, kernels::WeightBytes(w) / std::max<int64_t>(1, w.out_features));
  const int64_t granule = w.format == kernels::WeightFormat::kFP8Block ? w.block_out : 16;
  const int64_t rows = std::max<int64_t>(1, bytes / row_bytes);
  return std::min(w.out_features, (rows + granule - 1) / granule * granule);
}

void RunOneRowExperts(std::vector<ExpertWork>& work, const ExpertWeights& shared_weights, const float* x, int64_t n,
                      int64_t d, const ExpertDispatch& dispatch, ThreadPool& pool, float* out) {
  struct Expert {
    const ExpertWeights* weights;
    const float* input;
    int64_t m;
    float* output;
    const float* row_weights;  // null: the activation is not weighted
    float* gate;
    float* up;
  };
  const bool weight_activation = dispatch.weight_at == RoutingWeightAt::kActivation;
  ExpertWork shared;
  std::vector<Expert> experts;
  if (n > 0) {
    const int64_t inter = shared_weights.w1.out_features;
    shared.gate.resize(static_cast<size_t>(n * inter));
    shared.up.resize(static_cast<size_t>(n * inter));
    experts.push_back({&shared_weights, x, n, out, nullptr, shared.gate.data(), shared.up.data()});
  }
  for (ExpertWork& item : work) {
    const int64_t inter = item.weights->w1.out_features;
    item.gate.resize(static_cast<size_t>(item.m() * inter));
    item.up.resize(static_cast<size_t>(item.m() * inter));
    experts.push_back({item.weights, item.input.data(), item.m(), item.output.data(),
                       weight_activation ? item.row_weights.data() : nullptr, item.gate.data(), item.up.data()});
  }
  struct Unit {
    int32_t expert;
    bool down;
    int64_t first_row, rows;
  };
  std::vector<Unit> units;
  const auto pending = std::make_unique<std::atomic<int64_t>[]>(experts.size());
  auto add_units = [&](size_t e, bool down) {
    const ExpertWeights& w = *experts[e].weights;
    const int64_t total = down ? w.w2.out_features : w.w1.out_features;
    const int64_t rows = down ? UnitRows(w.w2, kOneRowUnitBytes) : UnitRows(w.w1, kOneRowUnitBytes / 2);
    int64_t count = 0;
    for (int64_t first = 0; first < total; first += rows, ++count)
      units.push_back({static_cast<int32_t>(e), down, first, std::min(rows, total - first)});
    if (!down) pending[e].store(count, std::memory_order_relaxed);
  };
  for (size_t e = 0; e < experts.size(); ++e) {
    add_units(e, false);
    if (e > 0) add_units(e - 1, true);
  }
  if (!experts.empty()) add_units(experts.size() - 1, true);

  auto slice = [](const kernels::WeightView& w, const Unit& u) {
    auto view = kernels::SliceRows(w, u.first_row, u.rows);
    if (!view.ok()) {  // not expected: units start on multiples of the FP8 block rows
      std::fprintf(stderr, "deepinfer: expert unit: %s\n", view.status().ToString().c_str());
      std::abort();
    }
    return *view;
  };
  auto run = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const Unit& u = units[static_cast<size_t>(i)];
      const Expert& e = experts[static_cast<size_t>(u.expert)];
      const ExpertWeights& w = *e.weights;
      const int64_t inter = w.w1.out_features;
      if (!u.down) {
        kernels::Linear(e.input, e.m, d, slice(w.w1, u), e.gate + u.first_row, inter, dispatch.linear, nullptr);
        kernels::Linear(e.input, e.m, d, slice(w.w3, u), e.up + u.first_row, inter, dispatch.linear, nullptr);
        for (int64_t r = 0; r < e.m; ++r) {
          float* g = e.gate + r * inter + u.first_row;
          kernels::SwiGlu(g, e.up + r * inter + u.first_row, u.rows, dispatch.swiglu_limit, g);
          if (e.row_weights != nullptr) {
            const float weight = e.row_weights[r];
            for (int64_t t = 0; t < u.rows; ++t) g[t] = weight * g[t];
          }
        }
        pending[static_cast<size_t>(u.expert)].fetch_sub(1, std::memory_order_release);
        continue;
      }
      for (int spins = 0; pending[static_cast<size_t>(u.expert)].load(std::memory_order_acquire) != 0; ++spins) {
        if (spins > 64) std::this_thread::yield();
      }
      kernels::Linear(e.gate, e.m, inter, slice(w.w2, u), e.output + u.first_row, d, dispatch.linear, nullptr);
    }
  };
  pool.ParallelFor(static_cast<int64_t>(units.size()), run, 1);
}

// The experts of `work` and the shared expert over x's n rows: decode-sized work (each routed expert one row,
// the shared expert or a dense MLP a few) by RunOneRowExperts, the rest by RunExpertFfns.
void RunExperts(std::vector<ExpertWork>& work, const ExpertWeights& shared_weights, const float* x, int64_t n,
                int64_t d, const ExpertDispatch& dispatch, ThreadPool& pool, float* out) {
  if (n <= kOneRowMaxSharedRows &&
      std::all_of(work.begin(), work.end(), [](const ExpertWork& item) { return item.m() == 1; })) {
    RunOneRowExperts(work, shared_weights, x, n, d, dispatch, pool, out);
  } else {
    RunExpertFfns(work, shared_weights, x, n, d, dispatch, pool, out);
  }
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
// The most rows a member routes in one forward pass: the engine's cap on a step's tokens. A member's part of
// the dispatch is at most that many rows' k pairs, which bounds the size a peer announces.
constexpr int64_t kMaxRowsPerMember = int64_t{1} << 20;

// The dispatch of an expert-parallel member (ExpertSetWeights::exchange): the pairs to each expert's member
// (their counts travelling with them), the member's experts over what it received, the outputs back, and the
// combine here.
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
  // The shared expert over this member's rows needs nothing from the others: it runs where this member
  // would first wait for them in the exchanges below (a peer still in its attention or its experts), else
  // with the routed experts here. Its products are the same whichever hand-off runs them.
  std::vector<ExpertWork> no_routed_work;
  std::function<void()> shared_expert;
  if (n > 0) shared_expert = [&] { RunExperts(no_routed_work, w.shared, x, n, d, dispatch, pool, out); };

  // The pairs, their counts travelling with them (one rendezvous where the transport allows it).
  const int64_t pair_bytes = pair_floats * static_cast<int64_t>(sizeof(float));
  int64_t sent = 0;
  std::vector<int64_t> send_bytes(static_cast<size_t>(members)), recv_bytes(static_cast<size_t>(members));
  for (int m = 0; m < members; ++m) {
    sent += send_counts[m];
    send_bytes[m] = send_counts[m] * pair_bytes;
  }
  std::vector<float> send(static_cast<size_t>(sent * pair_floats)), recv;
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
  const auto receive_into = [&](int64_t bytes) {
    // (rounded up: a part of other than whole pairs is refused below, after it has landed)
    constexpr int64_t kFloat = sizeof(float);
    recv.resize(static_cast<size_t>((bytes + kFloat - 1) / kFloat));
    return reinterpret_cast<uint8_t*>(recv.data());
  };
  exchange.AllToAllVSized(reinterpret_cast<const uint8_t*>(send.data()), send_bytes, receive_into, recv_bytes,
                          kMaxRowsPerMember * k * pair_bytes, &shared_expert);
  int64_t received = 0;
  for (int m = 0; m < members; ++m) {
    if (recv_bytes[m] % pair_bytes != 0) {
      std::fprintf(stderr, "deepinfer: expert parallelism: rank %d sent %lld bytes, not whole pairs of %lld\n", m,
                   static_cast<long long>(recv_bytes[m]), static_cast<long long>(pair_bytes));
      std::abort();  // the members disagree about the model's shape: nothing they compute can be trusted
    }
    recv_counts[m] = recv_bytes[m] / pair_bytes;
    received += recv_counts[m];
  }

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
  RunExperts(work, w.shared, nullptr, 0, d, dispatch, pool, out);  // (the routed experts alone)

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
  exchange.AllToAllVWithIdleWork(reinterpret_cast<const uint8_t*>(answers.data()), send_bytes,
                                 reinterpret_cast<uint8_t*>(results.data()), recv_bytes, &shared_expert);
  if (shared_expert) shared_expert();  // (this member never waited)

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
  RunExperts(work, w.shared, x, n, d, dispatch, pool, out);

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
