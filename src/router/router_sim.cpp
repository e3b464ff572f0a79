#include "router/router_sim.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <list>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace deepinfer::router {

std::string_view PolicyName(RoutingPolicy policy) {
  switch (policy) {
    case RoutingPolicy::kRoundRobin: return "round-robin";
    case RoutingPolicy::kLeastLoad: return "least-load";
    case RoutingPolicy::kCacheAware: return "cache-aware";
    case RoutingPolicy::kCost: return "cost";
    case RoutingPolicy::kPredictedTtft: return "predicted-ttft";
  }
  return "?";
}

double ShapeSeconds(const std::array<double, kStepCostTerms>& c, const engine::StepShape& s) {
  return c[0] + c[1] * s.tokens + c[2] * s.logit_rows + c[3] * s.context + c[4] * s.chunks;
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double rank = std::ceil(q * static_cast<double>(values.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(values.size()))) - 1;
  return values[i];
}

namespace {

// A set of block ids that forgets the least recently used beyond its capacity.
class BlockLru {
 public:
  explicit BlockLru(int64_t capacity) : capacity_(static_cast<size_t>(capacity)) {}
  bool contains(int64_t id) const { return index_.contains(id); }
  size_t size() const { return index_.size(); }
  void Touch(int64_t id) {
    auto it = index_.find(id);
    if (it != index_.end()) {
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.push_front(id);
    index_.emplace(id, order_.begin());
    if (index_.size() > capacity_) {
      index_.erase(order_.back());
      order_.pop_back();
    }
  }

 private:
  size_t capacity_;
  std::list<int64_t> order_;  // most recent first
  std::unordered_map<int64_t, std::list<int64_t>::iterator> index_;
};

enum class Role { kColocated, kPrefill, kDecode };

struct Seq {
  int request = 0;
  int64_t prompt = 0;
  int64_t prefilled = 0;           // prompt tokens computed or hit
  int64_t expected_uncached = 0;   // while waiting: what the router expected it to compute
  int64_t step_chunk = 0;          // prompt tokens in the step in flight
  bool step_decode = false;        // a token in the step in flight
};

struct Unit {
  Unit(Role r, int64_t cache_blocks) : role(r), cache(cache_blocks), tree(cache_blocks) {}
  Role role;
  std::deque<Seq> waiting;
  std::vector<Seq> running;
  bool busy = false;
  double busy_s = 0;
  BlockLru cache;  // the unit's RAM prefix cache
  BlockLru tree;   // cache-aware routing's approximate tree of what was routed here
};

struct RequestState {
  int64_t generated = 0;
  double last_token_s = 0;
  double tbt_sum_s = 0;
};

enum class EventKind { kStepEnd = 0, kHandoff = 1, kArrival = 2 };

struct Event {
  double time;
  EventKind kind;
  uint64_t order;  // insertion order: ties resolve the same way on every run
  int index;       // the unit (step end) or the request
  bool operator>(const Event& o) const {
    if (time != o.time) return time > o.time;
    if (kind != o.kind) return kind > o.kind;
    return order > o.order;
  }
};

class Simulator {
 public:
  Simulator(const Trace& trace, RoutingPolicy policy, const SimulationOptions& o)
      : trace_(trace), policy_(policy), o_(o), state_(trace.requests.size()) {
    const bool disaggregated = o.prefill_units > 0 && o.decode_units > 0;
    const int64_t front = disaggregated ? o.prefill_units : o.units;
    for (int64_t i = 0; i < front; ++i) {
      front_.push_back(static_cast<int>(units_.size()));
      units_.emplace_back(disaggregated ? Role::kPrefill : Role::kColocated, o.unit_cache_blocks);
    }
    if (disaggregated) {
      for (int64_t i = 0; i < o.decode_units; ++i) {
        decode_.push_back(static_cast<int>(units_.size()));
        units_.emplace_back(Role::kDecode, o.unit_cache_blocks);
      }
    }
    result_.requests.resize(trace.requests.size());
  }

  SimulationResult Run() {
    for (size_t i = 0; i < trace_.requests.size(); ++i)
      Push(trace_.requests[i].arrival_s, EventKind::kArrival, static_cast<int>(i));
    while (!events_.empty()) {
      const Event e = events_.top();
      events_.pop();
      switch (e.kind) {
        case EventKind::kArrival: {
          const int u = PickFront(e.index);
          Enqueue(u, e.index, e.time);
          break;
        }
        case EventKind::kHandoff: {
          const int u = PickDecode();
          result_.requests[static_cast<size_t>(e.index)].decode_unit = u;
          Seq s;
          s.request = e.index;
          s.prompt = s.prefilled = trace_.requests[static_cast<size_t>(e.index)].input_tokens;
          units_[static_cast<size_t>(u)].waiting.push_back(s);
          if (!units_[static_cast<size_t>(u)].busy) StartStep(u, e.time);
          break;
        }
        case EventKind::kStepEnd:
          FinishStep(e.index, e.time);
          StartStep(e.index, e.time);
          break;
      }
    }
    return Summarize();
  }

 private:
  Unit& U(int u) { return units_[static_cast<size_t>(u)]; }
  const TraceRequest& R(int r) const { return trace_.requests[static_cast<size_t>(r)]; }

  void Push(double time, EventKind kind, int index) { events_.push({time, kind, next_order_++, index}); }

  // Leading blocks of request r present in `unit`'s cache or (with the store) in the store, as tokens,
  // capped so that the last prompt token is always computed.
  int64_t HitTokens(const Unit& unit, int r, bool with_store) const {
    const TraceRequest& req = R(r);
    int64_t matched = 0;
    for (int64_t id : req.blocks) {
      if (!unit.cache.contains(id) && !(with_store && store_.contains(id))) break;
      ++matched;
    }
    return std::min(matched * trace_.block_tokens, req.input_tokens - 1);
  }

  static int64_t InFlight(const Unit& u) { return static_cast<int64_t>(u.waiting.size() + u.running.size()); }

  static int64_t QueuedPrefill(const Unit& u) {
    int64_t n = 0;
    for (const Seq& s : u.waiting) n += s.expected_uncached;
    for (const Seq& s : u.running) n += s.prompt - s.prefilled;
    return n;
  }

  int64_t ActiveBlocks(const Unit& u) const {
    int64_t tokens = 0;
    for (const Seq& s : u.running) tokens += s.prefilled + state_[static_cast<size_t>(s.request)].generated;
    return (tokens + trace_.block_tokens - 1) / trace_.block_tokens;
  }

  PlacementLoad LoadOf(const Unit& u) const {
    PlacementLoad l;
    l.published.running = static_cast<int64_t>(u.running.size());
    l.published.waiting = static_cast<int64_t>(u.waiting.size());
    l.published.queued_prefill_tokens = QueuedPrefill(u);
    l.published.max_num_seqs = o_.max_num_seqs;
    l.published.step_cost = o_.step_cost;
    l.published.calibrated = true;
    return l;
  }

  int LeastInFlight(const std::vector<int>& pool) const {
    int best = pool[0];
    for (int u : pool) {
      const Unit& a = units_[static_cast<size_t>(u)];
      const Unit& b = units_[static_cast<size_t>(best)];
      if (InFlight(a) < InFlight(b) || (InFlight(a) == InFlight(b) && QueuedPrefill(a) < QueuedPrefill(b))) best = u;
    }
    return best;
  }

  int PickFront(int r) {
    const std::vector<int>& pool = front_;
    switch (policy_) {
      case RoutingPolicy::kRoundRobin: return pool[front_turn_++ % pool.size()];
      case RoutingPolicy::kLeastLoad: return LeastInFlight(pool);
      case RoutingPolicy::kCacheAware: return PickCacheAware(r);
      case RoutingPolicy::kCost: {
        int best = pool[0];
        double best_cost = 0;
        for (size_t i = 0; i < pool.size(); ++i) {
          const Unit& u = U(pool[i]);
          const double uncached = static_cast<double>(R(r).input_tokens - HitTokens(u, r, false));
          const double bt = static_cast<double>(trace_.block_tokens);
          const double cost = o_.cost_overlap_weight * (static_cast<double>(QueuedPrefill(u)) + uncached) / bt +
                              static_cast<double>(ActiveBlocks(u));
          if (i == 0 || cost < best_cost) best = pool[i], best_cost = cost;
        }
        return best;
      }
      case RoutingPolicy::kPredictedTtft: {
        int best = -1;
        Prediction best_p;
        bool best_meets = false;
        for (int u : pool) {
          const Unit& unit = U(u);
          const Prediction p = Predict(LoadOf(unit), R(r).input_tokens - HitTokens(unit, r, o_.shared_store));
          const bool meets = p.ttft_s <= o_.ttft_slo_s && p.tbt_s <= o_.tbt_slo_s;
          const bool better = best < 0 || (meets != best_meets ? meets
                                                                : p.ttft_s < best_p.ttft_s ||
                                                                      (p.ttft_s == best_p.ttft_s &&
                                                                       InFlight(unit) < InFlight(U(best))));
          if (better) best = u, best_p = p, best_meets = meets;
        }
        return best;
      }
    }
    return pool[0];
  }

  int PickCacheAware(int r) {
    const std::vector<int>& pool = front_;
    const CacheAwareOptions& c = o_.cache_aware;
    int64_t max_load = 0, min_load = INT64_MAX;
    for (int u : pool) max_load = std::max(max_load, InFlight(U(u))), min_load = std::min(min_load, InFlight(U(u)));
    int chosen = -1;
    const bool imbalanced = max_load - min_load > c.balance_abs &&
                            static_cast<double>(max_load) > c.balance_rel * static_cast<double>(min_load);
    if (imbalanced) {
      chosen = LeastInFlight(pool);
    } else {
      const TraceRequest& req = R(r);
      int best = pool[0], smallest = pool[0];
      double best_rate = -1;
      for (int u : pool) {
        int64_t matched = 0;
        for (int64_t id : req.blocks) {
          if (!U(u).tree.contains(id)) break;
          ++matched;
        }
        const double rate = static_cast<double>(matched) / static_cast<double>(req.blocks.size());
        if (rate > best_rate) best = u, best_rate = rate;
        if (U(u).tree.size() < U(smallest).tree.size()) smallest = u;
      }
      chosen = best_rate > c.cache_threshold ? best : smallest;
    }
    for (int64_t id : R(r).blocks) U(chosen).tree.Touch(id);
    return chosen;
  }

  int PickDecode() {
    switch (policy_) {
      case RoutingPolicy::kRoundRobin: return decode_[decode_turn_++ % decode_.size()];
      case RoutingPolicy::kPredictedTtft: {
        int best = decode_[0];
        double best_tbt = 0;
        for (size_t i = 0; i < decode_.size(); ++i) {
          const double tbt = Predict(LoadOf(U(decode_[i])), 1).tbt_s;
          if (i == 0 || tbt < best_tbt) best = decode_[i], best_tbt = tbt;
        }
        return best;
      }
      default: return LeastInFlight(decode_);
    }
  }

  void Enqueue(int u, int r, double now) {
    result_.requests[static_cast<size_t>(r)].prefill_unit = u;
    Seq s;
    s.request = r;
    s.prompt = R(r).input_tokens;
    s.expected_uncached = s.prompt - HitTokens(U(u), r, o_.shared_store);
    U(u).waiting.push_back(s);
    if (!U(u).busy) StartStep(u, now);
  }

  void StartStep(int index, double now) {
    Unit& u = U(index);
    while (!u.waiting.empty() && static_cast<int64_t>(u.running.size()) < o_.max_num_seqs) {
      Seq s = u.waiting.front();
      u.waiting.pop_front();
      if (u.role != Role::kDecode) {
        s.prefilled = HitTokens(u, s.request, o_.shared_store);
        result_.requests[static_cast<size_t>(s.request)].hit_tokens = s.prefilled;
        const int64_t hit_blocks = s.prefilled / trace_.block_tokens;
        for (int64_t b = 0; b < hit_blocks; ++b) u.cache.Touch(R(s.request).blocks[static_cast<size_t>(b)]);
      }
      u.running.push_back(s);
    }
    engine::StepShape shape;
    for (Seq& s : u.running) {
      const RequestState& st = state_[static_cast<size_t>(s.request)];
      if (s.prefilled == s.prompt && st.generated >= 1 && st.generated < R(s.request).output_tokens) {
        shape.AddChunk(s.prompt + st.generated - 1, 1, true);
        s.step_decode = true;
      }
    }
    int64_t budget = o_.chunk_tokens;
    for (Seq& s : u.running) {
      if (budget == 0) break;
      if (s.prefilled == s.prompt) continue;
      const int64_t n = std::min(budget, s.prompt - s.prefilled);
      shape.AddChunk(s.prefilled, n, s.prefilled + n == s.prompt);
      s.step_chunk = n;
      budget -= n;
    }
    if (shape.chunks == 0) {
      u.busy = false;
      return;
    }
    const double seconds = ShapeSeconds(o_.step_cost, shape);
    u.busy = true;
    u.busy_s += seconds;
    Push(now + seconds, EventKind::kStepEnd, index);
  }

  void FinishStep(int index, double now) {
    Unit& u = U(index);
    std::vector<Seq> kept;
    kept.reserve(u.running.size());
    for (Seq& s : u.running) {
      RequestState& st = state_[static_cast<size_t>(s.request)];
      const TraceRequest& req = R(s.request);
      bool leaves = false;
      if (s.step_decode) {
        s.step_decode = false;
        ++st.generated;
        st.tbt_sum_s += now - st.last_token_s;
        intervals_.push_back(now - st.last_token_s);
        st.last_token_s = now;
        if (st.generated == req.output_tokens) leaves = true;
      }
      if (s.step_chunk > 0) {
        s.prefilled += s.step_chunk;
        s.step_chunk = 0;
        if (s.prefilled == s.prompt) {
          for (int64_t id : req.blocks) {
            u.cache.Touch(id);
            if (o_.shared_store) store_.insert(id);
          }
          st.generated = 1;
          st.last_token_s = now;
          result_.requests[static_cast<size_t>(s.request)].ttft_s = now - req.arrival_s;
          if (req.output_tokens == 1) {
            leaves = true;
          } else if (u.role == Role::kPrefill) {
            leaves = true;
            Push(now + o_.handoff_s_per_token * static_cast<double>(s.prompt), EventKind::kHandoff, s.request);
          }
        }
      }
      if (leaves && st.generated == req.output_tokens) Complete(s.request, now);
      if (!leaves) kept.push_back(s);
    }
    u.running = std::move(kept);
  }

  void Complete(int r, double now) {
    RequestOutcome& out = result_.requests[static_cast<size_t>(r)];
    const TraceRequest& req = R(r);
    const RequestState& st = state_[static_cast<size_t>(r)];
    out.mean_tbt_s = req.output_tokens > 1 ? st.tbt_sum_s / static_cast<double>(req.output_tokens - 1) : 0;
    out.slo_met = out.ttft_s <= o_.ttft_slo_s && out.mean_tbt_s <= o_.tbt_slo_s;
    makespan_s_ = std::max(makespan_s_, now);
  }

  SimulationResult Summarize() {
    std::vector<double> ttft;
    double hit = 0, total = 0, met = 0;
    for (size_t i = 0; i < result_.requests.size(); ++i) {
      const RequestOutcome& out = result_.requests[i];
      ttft.push_back(out.ttft_s);
      hit += static_cast<double>(out.hit_tokens);
      total += static_cast<double>(trace_.requests[i].input_tokens);
      met += out.slo_met ? 1 : 0;
    }
    result_.ttft_p50_s = Percentile(ttft, 0.5);
    result_.ttft_p99_s = Percentile(ttft, 0.99);
    result_.tbt_p50_s = Percentile(intervals_, 0.5);
    result_.tbt_p99_s = Percentile(intervals_, 0.99);
    result_.hit_rate = total > 0 ? hit / total : 0;
    result_.slo_attainment = met / static_cast<double>(result_.requests.size());
    result_.makespan_s = makespan_s_;
    auto busy = [&](const std::vector<int>& pool) {
      if (pool.empty() || makespan_s_ <= 0) return 0.0;
      double s = 0;
      for (int u : pool) s += U(u).busy_s;
      return s / (static_cast<double>(pool.size()) * makespan_s_);
    };
    result_.prefill_busy = busy(front_);
    result_.decode_busy = busy(decode_);
    return std::move(result_);
  }

  const Trace& trace_;
  RoutingPolicy policy_;
  const SimulationOptions& o_;
  std::vector<Unit> units_;
  std::vector<int> front_;   // the units arrivals are routed to: colocated or prefill
  std::vector<int> decode_;  // disaggregated decode units
  std::vector<RequestState> state_;
  std::unordered_set<int64_t> store_;
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> events_;
  uint64_t next_order_ = 0;
  size_t front_turn_ = 0, decode_turn_ = 0;
  std::vector<double> intervals_;
  double makespan_s_ = 0;
  SimulationResult result_;
};

Status Validate(const Trace& trace, const SimulationOptions& o) {
  if (trace.requests.empty()) return Status::InvalidArgument("empty trace");
  if (trace.block_tokens < 1 || trace.block_tokens > TraceLimits::kMaxBlockTokens)
    return Status::InvalidArgument("block size out of range");
  double previous = 0;
  for (size_t i = 0; i < trace.requests.size(); ++i) {
    const TraceRequest& r = trace.requests[i];
    const std::string which = "request " + std::to_string(i) + ": ";
    if (!(r.arrival_s >= previous && r.arrival_s <= TraceLimits::kMaxTimestampMs / 1000))
      return Status::InvalidArgument(which + "arrivals must be ordered, from 0");
    previous = r.arrival_s;
    if (r.input_tokens < 1 || r.input_tokens > TraceLimits::kMaxInputTokens || r.output_tokens < 1 ||
        r.output_tokens > TraceLimits::kMaxOutputTokens)
      return Status::InvalidArgument(which + "lengths out of range");
    if (static_cast<int64_t>(r.blocks.size()) != (r.input_tokens + trace.block_tokens - 1) / trace.block_tokens)
      return Status::InvalidArgument(which + "one block id per block of the prompt");
  }
  const bool disaggregated = o.prefill_units > 0 || o.decode_units > 0;
  if (disaggregated && (o.prefill_units < 1 || o.decode_units < 1))
    return Status::InvalidArgument("disaggregation needs both prefill and decode units");
  for (int64_t n : {o.units, o.prefill_units, o.decode_units})
    if (n > SimulationLimits::kMaxUnits) return Status::InvalidArgument("more than 1024 units");
  if (!disaggregated && o.units < 1) return Status::InvalidArgument("need at least one unit");
  if (o.chunk_tokens < 1 || o.chunk_tokens > TraceLimits::kMaxInputTokens)
    return Status::InvalidArgument("chunk tokens out of range");
  if (o.max_num_seqs < 1 || o.max_num_seqs > SimulationLimits::kMaxNumSeqs)
    return Status::InvalidArgument("max_num_seqs out of range");
  if (o.unit_cache_blocks < 1 || o.unit_cache_blocks > SimulationLimits::kMaxCacheBlocks)
    return Status::InvalidArgument("unit cache blocks out of range");
  for (double c : o.step_cost)
    if (!(c >= 0 && c < 1e3)) return Status::InvalidArgument("step cost coefficients must be in [0, 1000)");
  if (o.step_cost[0] + o.step_cost[1] <= 0)
    return Status::InvalidArgument("a step must cost something (intercept or per-token term > 0)");
  if (!(o.handoff_s_per_token >= 0 && o.handoff_s_per_token < 1))
    return Status::InvalidArgument("handoff time out of range");
  return Status::Ok();
}

}  // namespace

Result<SimulationResult> Simulate(const Trace& trace, RoutingPolicy policy, const SimulationOptions& options) {
  DI_RETURN_IF_ERROR(Validate(trace, options));
  Simulator sim(trace, policy, options);
  return sim.Run();
}

}  // namespace deepinfer::router
