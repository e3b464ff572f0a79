#include "parallel/expert_group.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "parallel/build_id.h"

namespace deepinfer::parallel {

ExpertGroup::ExpertGroup(Communicator& communicator, GroupTimeouts timeouts)
    : communicator_(communicator), timeouts_(timeouts) {
  step_deadline_s_.store(timeouts_.idle_pause_max_s + ExchangeTimeout());
  MutexLock lock(&rows_mu_);
  rows_.total.assign(static_cast<size_t>(size()), 0);
}

ExpertGroup::~ExpertGroup() {
  if (reader_.joinable()) reader_.join();
}

namespace {
double Balance(std::span<const int64_t> per_rank) {
  int64_t sum = 0, most = 0;
  for (int64_t v : per_rank) {
    sum += v;
    most = std::max(most, v);
  }
  return sum > 0 ? static_cast<double>(most) * static_cast<double>(per_rank.size()) / static_cast<double>(sum) : 0;
}
}  // namespace

void ExpertGroup::NoteUnitRows(const std::vector<int64_t>& unit_step_rows) {
  const size_t n = static_cast<size_t>(size());
  const size_t layers = unit_step_rows.size() / n;
  int64_t sum = 0;
  for (int64_t v : unit_step_rows) sum += v;
  if (sum == 0) return;
  std::vector<double> balance(layers);
  for (size_t l = 0; l < layers; ++l) balance[l] = Balance(std::span(unit_step_rows).subspan(l * n, n));
  MutexLock lock(&rows_mu_);
  for (size_t l = 0; l < layers; ++l)
    for (size_t r = 0; r < n; ++r) rows_.total[r] += unit_step_rows[l * n + r];
  if (window_sum_.size() != layers) {
    window_sum_.assign(layers, 0);
    total_sum_.assign(layers, 0);
    window_.clear();
  }
  window_.push_back(balance);
  for (size_t l = 0; l < layers; ++l) {
    window_sum_[l] += balance[l];
    total_sum_[l] += balance[l];
  }
  if (window_.size() > static_cast<size_t>(kBalanceWindowSteps)) {
    for (size_t l = 0; l < layers; ++l) window_sum_[l] -= window_.front()[l];
    window_.erase(window_.begin());
  }
  ++rows_.routed_steps;
  rows_.last_step_balance = balance;
  rows_.window_balance.resize(layers);
  rows_.total_balance.resize(layers);
  for (size_t l = 0; l < layers; ++l) {
    rows_.window_balance[l] = window_sum_[l] / static_cast<double>(window_.size());
    rows_.total_balance[l] = total_sum_[l] / static_cast<double>(rows_.routed_steps);
  }
}

ExpertGroup::ExpertRows ExpertGroup::expert_rows() const {
  MutexLock lock(&rows_mu_);
  return rows_;
}

void ExpertGroup::Fail(const std::string& what, const Status& status) {
  std::fprintf(stderr, "deepinfer: rank %d: %s: %s; ending the unit\n", rank(), what.c_str(), status.message().c_str());
  std::fflush(stderr);
  communicator_.Abort(1);
  std::abort();  // (Abort does not return)
}

double ExpertGroup::ExchangeTimeout() const {
  return std::max(timeouts_.exchange_floor_s, 4 * std::max(unit_predicted_s_, last_step_s_));
}

void ExpertGroup::AllToAllV(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                            std::span<const int64_t> recv_bytes) {
  AllToAllVWithIdleWork(send, send_bytes, recv, recv_bytes, nullptr);
}

void ExpertGroup::AllToAllVWithIdleWork(const uint8_t* send, std::span<const int64_t> send_bytes, uint8_t* recv,
                                        std::span<const int64_t> recv_bytes, std::function<void()>* idle_work) {
  const uint8_t* const received = recv;
  Exchange(
      [&](double timeout_s, std::function<void()>* work) {
        return communicator_.AllToAllVWithIdleWork(send, send_bytes, recv, recv_bytes, timeout_s, work);
      },
      send, send_bytes, &received, recv_bytes, idle_work);
}

void ExpertGroup::AllToAllVSized(const uint8_t* send, std::span<const int64_t> send_bytes,
                                 const std::function<uint8_t*(int64_t)>& receive_into, std::span<int64_t> recv_bytes,
                                 int64_t max_part_bytes, std::function<void()>* idle_work) {
  const uint8_t* received = nullptr;
  const std::function<uint8_t*(int64_t)> noted = [&](int64_t bytes) {
    uint8_t* room = receive_into(bytes);
    received = room;
    return room;
  };
  Exchange(
      [&](double timeout_s, std::function<void()>* work) {
        return communicator_.AllToAllVSized(send, send_bytes, noted, recv_bytes, max_part_bytes, timeout_s, work);
      },
      send, send_bytes, &received, recv_bytes, idle_work);
}

void ExpertGroup::Exchange(const Collective& collective, const uint8_t* send, std::span<const int64_t> send_bytes,
                           const uint8_t* const* recv, std::span<const int64_t> recv_bytes,
                           std::function<void()>* idle_work) {
  // The idle work is timed apart: the exchange's figures are its own.
  std::chrono::steady_clock::duration idle_work_time{};
  std::function<void()> timed_work;
  if (idle_work != nullptr && *idle_work) {
    timed_work = [&idle_work_time, work = idle_work] {
      const auto work_start = std::chrono::steady_clock::now();
      (*work)();
      idle_work_time = std::chrono::steady_clock::now() - work_start;
    };
  }
  const auto start = std::chrono::steady_clock::now();
  const Status s = collective(ExchangeTimeout(), timed_work ? &timed_work : nullptr);
  if (!s.ok()) Fail("expert exchange", s);
  const bool ran_idle_work = idle_work != nullptr && *idle_work && !timed_work;
  if (ran_idle_work) *idle_work = nullptr;
  const auto end = std::chrono::steady_clock::now() - idle_work_time;
  int64_t remote = 0, remote_received = 0, sent = 0, received = 0;
  for (int p = 0; p < size(); ++p) {
    if (p != rank()) remote += send_bytes[p];
    if (p != rank()) remote_received += recv_bytes[p];
    sent += send_bytes[p];
    received += recv_bytes[p];
  }
  exchanges_.fetch_add(1, std::memory_order_relaxed);
  remote_bytes_.fetch_add(remote, std::memory_order_relaxed);
  const int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(end - start).count();
  exchange_nanos_.fetch_add(nanos, std::memory_order_relaxed);
  if (work_cycle_start_ != std::chrono::steady_clock::time_point{}) {  // within a counted step
    step_exchanges_.fetch_add(1, std::memory_order_relaxed);
    step_exchange_nanos_.fetch_add(nanos, std::memory_order_relaxed);
    const int64_t layer = routed_layer_ - 1;  // (PlaceRoutedPairs counted the layer before its exchanges)
    const int kind = exchange_in_layer_;
    MutexLock lock(&breakdown_mu_);
    if (layer >= 0 && kind < kExchangeKinds) {
      const size_t at = static_cast<size_t>(layer * kExchangeKinds + kind);
      if (breakdown_.exchanges.size() <= at) breakdown_.exchanges.resize(at + 1);
      LayerExchange& e = breakdown_.exchanges[at];
      const double seconds = static_cast<double>(nanos) * 1e-9;
      e.fastest_seconds = e.count == 0 ? seconds : std::min(e.fastest_seconds, seconds);
      ++e.count;
      e.seconds += seconds;
    }
    if (ran_idle_work) {
      ++breakdown_.idle_works;
      breakdown_.idle_work_seconds += std::chrono::duration<double>(idle_work_time).count();
    }
  }
  ++exchange_in_layer_;
  const int64_t fastest = fastest_exchange_nanos_.load(std::memory_order_relaxed);
  // (one that moves nothing between members returns at once: it says nothing of the others' latency)
  if (remote + remote_received > 0 && (fastest == 0 || nanos < fastest))
    fastest_exchange_nanos_.store(nanos, std::memory_order_relaxed);
  if (measure_memcpy_) {
    // The same bytes moved by memcpy: what sending and receiving them would cost within one process.
    memcpy_scratch_.resize(static_cast<size_t>(std::max(sent, received)));
    const auto copy_start = std::chrono::steady_clock::now();
    if (sent > 0) std::memcpy(memcpy_scratch_.data(), send, static_cast<size_t>(sent));
    if (received > 0) std::memcpy(memcpy_scratch_.data(), *recv, static_cast<size_t>(received));
    memcpy_nanos_.fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - copy_start).count(),
        std::memory_order_relaxed);
  }
}

void ExpertGroup::NoteRouting(int64_t experts, std::span<const int32_t> expert_ids) {
  experts_ = experts;
  if (eplb_recorder_ != nullptr) {
    if (const Status s = eplb_recorder_->RecordRouting(routed_layer_, expert_ids); !s.ok())
      std::fprintf(stderr, "deepinfer: rank %d: expert loads not recorded: %s\n", rank(), s.message().c_str());
  }
  if (!record_loads_) return;
  if (recorder_ == nullptr) {
    first_step_.emplace_back(expert_ids.begin(), expert_ids.end());
  } else if (const Status s = recorder_->RecordRouting(routed_layer_, expert_ids); !s.ok()) {
    std::fprintf(stderr, "deepinfer: rank %d: expert loads not recorded: %s\n", rank(), s.message().c_str());
  }
}

void ExpertGroup::PlaceRoutedPairs(int64_t experts, std::span<const int32_t> expert_ids, std::span<int32_t> members,
                                   std::vector<uint8_t>* computes) {
  const int64_t layer = routed_layer_++;
  exchange_in_layer_ = 0;
  if (live_ != nullptr && layer < live_->layers && experts == live_->experts) {
    AssignPairsToRanks(*live_, layer, rank(), expert_ids, members);
    *computes = ExpertsOnRank(*live_, layer, rank());
  } else {
    model::ExpertExchange::PlaceRoutedPairs(experts, expert_ids, members, computes);
  }
  const size_t n = static_cast<size_t>(size());
  if (agreement_layers_ > 0 && layer < agreement_layers_)
    for (int32_t m : members) ++step_rows_[static_cast<size_t>(layer) * n + static_cast<size_t>(m)];
  MutexLock lock(&since_mu_);
  if (since_.layers == 0 && agreement_layers_ > 0) {
    since_ = {agreement_layers_, experts, size(), std::vector<int64_t>(static_cast<size_t>(agreement_layers_) * n, 0),
              std::vector<int64_t>(static_cast<size_t>(agreement_layers_ * experts), 0)};
  }
  if (layer < since_.layers && experts == since_.experts) {
    for (int32_t m : members) ++since_.rank_rows[static_cast<size_t>(layer) * n + static_cast<size_t>(m)];
    for (int32_t id : expert_ids)
      if (id >= 0 && id < experts) ++since_.expert_rows[static_cast<size_t>(layer * experts + id)];
  }
}

ExpertGroup::WaitBreakdown ExpertGroup::wait_breakdown() const {
  MutexLock lock(&breakdown_mu_);
  return breakdown_;
}

ExpertGroup::SinceSwap ExpertGroup::since_swap() const {
  MutexLock lock(&since_mu_);
  return since_;
}

std::vector<uint8_t> ExpertGroup::ExpertsComputedHere(const ExpertPlacement* placement, int64_t layer,
                                                      int64_t experts) const {
  if (placement != nullptr) return ExpertsOnRank(*placement, layer, rank());
  std::vector<uint8_t> on(static_cast<size_t>(experts), 0);  // the static shard
  const model::ExpertShard shard = model::ExpertShard::Of(experts, rank(), size());
  for (int64_t e = shard.first; e < shard.last; ++e) on[static_cast<size_t>(e)] = 1;
  return on;
}

void ExpertGroup::StartRebalance(double timeout_s) {
  // Every member's window of loads, summed in rank order: integer counts, so every member holds the same
  // loads and computes the same placement.
  const ExpertLoads mine = eplb_recorder_->WindowLoads();
  std::vector<uint8_t> bytes(mine.values.size() * sizeof(double)), all;
  std::memcpy(bytes.data(), mine.values.data(), bytes.size());
  if (const Status s = AllGather(bytes, timeout_s, &all); !s.ok()) Fail("expert loads for the load balancer", s);
  ExpertLoads unit(mine.layers, mine.experts);
  for (int p = 0; p < size(); ++p) {
    std::vector<double> theirs(mine.values.size());
    std::memcpy(theirs.data(), all.data() + static_cast<size_t>(p) * bytes.size(), bytes.size());
    for (size_t i = 0; i < theirs.size(); ++i) unit.values[i] += theirs[i];
  }
  EplbShape shape;
  shape.replicas = unit.experts + eplb_.redundant_experts;
  shape.ranks = size();
  auto placed = RebalanceExperts(unit, shape);
  if (!placed.ok()) Fail("expert load balancer", placed.status());
  if (live_ != nullptr) {
    if (!PlacementWorthSwapping(*live_, *placed, unit, eplb_.min_improvement)) {
      skipped_rebalances_.fetch_add(1);
      return;
    }
  } else if (auto shard = IdentityPlacement(unit.layers, unit.experts, size());
             shard.ok() && !PlacementWorthSwapping(*shard, *placed, unit, eplb_.min_improvement)) {
    skipped_rebalances_.fetch_add(1);
    return;
  }
  pending_ = std::make_unique<ExpertPlacement>(std::move(placed).value());
  pending_ready_.store(false);
  // The experts this member computes under the new placement and not now: their pages are read in while
  // the unit keeps stepping.
  std::vector<std::pair<int64_t, int64_t>> incoming;
  for (int64_t l = 0; l < pending_->layers; ++l) {
    const std::vector<uint8_t> next = ExpertsOnRank(*pending_, l, rank());
    const std::vector<uint8_t> now = ExpertsComputedHere(live_.get(), l, unit.experts);
    for (int64_t e = 0; e < unit.experts; ++e)
      if (next[static_cast<size_t>(e)] != 0 && now[static_cast<size_t>(e)] == 0) incoming.push_back({l, e});
  }
  if (reader_.joinable()) reader_.join();
  reader_ = std::thread([this, incoming = std::move(incoming), pages = pages_] {
    if (pages != nullptr)
      for (const auto& [layer, expert] : incoming) pages->ReadIn(layer, expert);
    pending_ready_.store(true);
  });
}

void ExpertGroup::SwapPlacement() {
  if (reader_.joinable()) reader_.join();
  std::unique_ptr<ExpertPlacement> old = std::move(live_);
  live_ = std::move(pending_);
  rebalances_.fetch_add(1);
  // The pages of the experts this member no longer computes go back to the kernel.
  if (pages_ != nullptr) {
    for (int64_t l = 0; l < live_->layers; ++l) {
      const std::vector<uint8_t> next = ExpertsOnRank(*live_, l, rank());
      const std::vector<uint8_t> before = ExpertsComputedHere(old.get(), l, live_->experts);
      for (int64_t e = 0; e < live_->experts; ++e)
        if (before[static_cast<size_t>(e)] != 0 && next[static_cast<size_t>(e)] == 0) pages_->GiveBack(l, e);
    }
  }
  if (old != nullptr) return;  // (the figures compare the balancer's placements, all of them, with the static shard)
  MutexLock lock(&since_mu_);
  std::fill(since_.rank_rows.begin(), since_.rank_rows.end(), 0);
  std::fill(since_.expert_rows.begin(), since_.expert_rows.end(), 0);
}

ExpertLoads ExpertGroup::RecordedLoads() const { return recorder_ ? recorder_->WindowLoads() : ExpertLoads(); }

Status ExpertGroup::AllGather(const std::vector<uint8_t>& mine, double timeout_s, std::vector<uint8_t>* all) {
  const int n = size();
  std::vector<uint8_t> send(mine.size() * static_cast<size_t>(n));
  for (int p = 0; p < n; ++p) std::copy(mine.begin(), mine.end(), send.begin() + static_cast<ptrdiff_t>(p * mine.size()));
  all->assign(send.size(), 0);
  const std::vector<int64_t> bytes(static_cast<size_t>(n), static_cast<int64_t>(mine.size()));
  return communicator_.AllToAllV(send.data(), bytes, all->data(), bytes, timeout_s);
}

bool ExpertGroup::AnyMemberHasWork(bool has_work) {
  if (finished_) {
    // The engine is about to stop: its loop turns at the idle pace, not as fast as it can.
    std::this_thread::sleep_for(std::chrono::duration<double>(timeouts_.idle_pause_max_s));
    return false;
  }
  const auto now = std::chrono::steady_clock::now();
  if (work_cycle_start_ != std::chrono::steady_clock::time_point{}) {
    // A step with work ends here: its agreement, its forward pass (exchanges included) and the engine's own work.
    step_nanos_.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(now - work_cycle_start_).count(),
                          std::memory_order_relaxed);
    steps_.fetch_add(1, std::memory_order_relaxed);
    work_cycle_start_ = {};
  }
  if (last_work_step_ != std::chrono::steady_clock::time_point{})
    last_step_s_ = std::chrono::duration<double>(now - last_work_step_).count();
  if (record_loads_ && routed_layer_ > 0) {  // the forward pass since the last agreement ends a step
    if (recorder_ == nullptr) {
      auto made = ExpertLoadRecorder::Create(routed_layer_, experts_, int64_t{1} << 16, 64);
      if (made.ok()) {
        recorder_ = std::move(made).value();
        for (size_t l = 0; l < first_step_.size(); ++l) (void)recorder_->RecordRouting(static_cast<int64_t>(l), first_step_[l]);
      } else {
        std::fprintf(stderr, "deepinfer: rank %d: expert loads not recorded: %s\n", rank(), made.status().message().c_str());
        record_loads_ = false;
      }
      first_step_.clear();
    }
    if (recorder_ != nullptr) recorder_->EndStep();
  }
  if (routed_layer_ > 0) {  // a forward pass ran since the last agreement
    if (agreement_layers_ == 0) {
      // Every member ran the same first forward pass (lock step), so all know the layer count here.
      agreement_layers_ = routed_layer_;
      step_rows_.assign(static_cast<size_t>(agreement_layers_ * size()), 0);
      if (eplb_.enabled) {
        int64_t slots = std::min<int64_t>(64, eplb_.window_steps);
        while (eplb_.window_steps % slots != 0) --slots;
        auto made = ExpertLoadRecorder::Create(agreement_layers_, experts_, eplb_.window_steps, slots);
        if (!made.ok()) Fail("expert load balancer", made.status());
        eplb_recorder_ = std::move(made).value();
      }
    } else if (eplb_recorder_ != nullptr) {
      eplb_recorder_->EndStep();
    }
    routed_layer_ = 0;
  }
  if (mailbox_ != nullptr) has_work |= mailbox_->HasWork();
  // Bit 0: this member has finished; bit 1: it has read in the pending placement's experts.
  const uint8_t done = static_cast<uint8_t>(local_done_.load()) |
                       static_cast<uint8_t>(pending_ != nullptr && pending_ready_.load() ? 2 : 0);
  bool all_ready = pending_ != nullptr;
  const bool first_agreement = !agreed_once_;
  const double timeout = agreed_once_ ? timeouts_.idle_pause_max_s + ExchangeTimeout() : timeouts_.startup_s;
  agreed_once_ = true;
  bool any_work = false, all_done = true;
  if (mailbox_ == nullptr) {
    constexpr size_t kRecord = 2 + sizeof(double);
    std::vector<uint8_t> record(kRecord), all;
    record[0] = static_cast<uint8_t>(has_work);
    record[1] = done;
    std::memcpy(record.data() + 2, &predicted_step_s_, sizeof(double));
    const Status s = AllGather(record, timeout, &all);
    if (!s.ok()) Fail("step agreement", s);
    std::fill(step_rows_.begin(), step_rows_.end(), 0);  // (rows ride only with a mailbox: a serving unit)
    unit_predicted_s_ = 0;
    for (int p = 0; p < size(); ++p) {
      const uint8_t* r = all.data() + kRecord * static_cast<size_t>(p);
      any_work |= r[0] != 0;
      all_done &= (r[1] & 1) != 0;
      all_ready &= (r[1] & 2) != 0;
      double predicted = 0;
      std::memcpy(&predicted, r + 2, sizeof(double));
      if (std::isfinite(predicted)) unit_predicted_s_ = std::max(unit_predicted_s_, predicted);
    }
  } else {
    // Each member tells each other one whether it has work, whether it has finished, and how many message
    // bytes follow for it; then the messages.
    const int n = size();
    std::vector<std::string> outgoing(static_cast<size_t>(n));
    mailbox_->TakeOutgoing(&outgoing);
    outgoing[static_cast<size_t>(rank())].clear();
    // ... and this member's routed pairs of the step by the rank owning the expert.
    const size_t rows_bytes = sizeof(int64_t) * step_rows_.size();
    // (bytes: has work, done; then the message size, the predicted step, the rows)
    const size_t kHeader = 2 + sizeof(int64_t) + sizeof(double) + rows_bytes;
    std::vector<uint8_t> send(kHeader * static_cast<size_t>(n)), recv(send.size());
    std::vector<int64_t> send_bytes(static_cast<size_t>(n)), recv_bytes(static_cast<size_t>(n));
    for (int p = 0; p < n; ++p) {
      uint8_t* h = send.data() + kHeader * static_cast<size_t>(p);
      h[0] = static_cast<uint8_t>(has_work);
      h[1] = done;
      const int64_t bytes = static_cast<int64_t>(outgoing[static_cast<size_t>(p)].size());
      std::memcpy(h + 2, &bytes, sizeof(bytes));
      std::memcpy(h + 2 + sizeof(bytes), &predicted_step_s_, sizeof(double));
      if (rows_bytes > 0) std::memcpy(h + 2 + sizeof(bytes) + sizeof(double), step_rows_.data(), rows_bytes);
      send_bytes[static_cast<size_t>(p)] = static_cast<int64_t>(kHeader);
    }
    Status s = communicator_.AllToAllV(send.data(), send_bytes, recv.data(), send_bytes, timeout);
    if (!s.ok()) Fail("step agreement", s);
    std::fill(step_rows_.begin(), step_rows_.end(), 0);
    int64_t total_in = 0;
    unit_predicted_s_ = 0;
    std::vector<int64_t> unit_step_rows(step_rows_.size(), 0), rows(step_rows_.size());
    for (int p = 0; p < n; ++p) {
      const uint8_t* h = recv.data() + kHeader * static_cast<size_t>(p);
      if (rows_bytes > 0) std::memcpy(rows.data(), h + 2 + sizeof(int64_t) + sizeof(double), rows_bytes);
      double predicted = 0;
      std::memcpy(&predicted, h + 2 + sizeof(int64_t), sizeof(double));
      if (std::isfinite(predicted)) unit_predicted_s_ = std::max(unit_predicted_s_, predicted);
      for (size_t i = 0; i < rows.size(); ++i) unit_step_rows[i] += rows[i];
      any_work |= h[0] != 0;
      all_done &= (h[1] & 1) != 0;
      all_ready &= (h[1] & 2) != 0;
      std::memcpy(&recv_bytes[static_cast<size_t>(p)], h + 2, sizeof(int64_t));
      if (recv_bytes[static_cast<size_t>(p)] < 0) Fail("step agreement", Status::DataLoss("a negative message size"));
      total_in += recv_bytes[static_cast<size_t>(p)];
    }
    NoteUnitRows(unit_step_rows);
    std::string out_all, in_all(static_cast<size_t>(total_in), '\0');
    for (int p = 0; p < n; ++p) {
      send_bytes[static_cast<size_t>(p)] = static_cast<int64_t>(outgoing[static_cast<size_t>(p)].size());
      out_all += outgoing[static_cast<size_t>(p)];
    }
    // Sizes every member agreed on above: a member with nothing to send or receive skips the pair.
    s = communicator_.AllToAllV(reinterpret_cast<const uint8_t*>(out_all.data()), send_bytes,
                                reinterpret_cast<uint8_t*>(in_all.data()), recv_bytes, timeout);
    if (!s.ok()) Fail("step messages", s);
    size_t at = 0;
    for (int p = 0; p < n; ++p) {
      const size_t bytes = static_cast<size_t>(recv_bytes[static_cast<size_t>(p)]);
      if (bytes > 0) {
        s = mailbox_->Deliver(p, std::string_view(in_all).substr(at, bytes));
        if (!s.ok()) Fail("messages from rank " + std::to_string(p), s);
      }
      at += bytes;
    }
  }
  step_deadline_s_.store(timeouts_.idle_pause_max_s + ExchangeTimeout(), std::memory_order_relaxed);
  // The load balancer, at the same agreement on every member: a placement every member has read in is
  // swapped in before the next step; a new one is computed every step_interval steps with work.
  if (all_ready) SwapPlacement();
  if (any_work) ++work_steps_;
  if (any_work && eplb_recorder_ != nullptr && pending_ == nullptr && work_steps_ % eplb_.step_interval == 0)
    StartRebalance(timeout);
  last_work_step_ = any_work ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
  if (any_work && !first_agreement) {  // (the first one waits for the slowest member's start-up)
    const int64_t nanos = std::chrono::duration_cast<std::chrono::nanoseconds>(last_work_step_ - now).count();
    agreement_nanos_.fetch_add(nanos, std::memory_order_relaxed);
    const int64_t fastest = fastest_agreement_nanos_.load(std::memory_order_relaxed);
    if (fastest == 0 || nanos < fastest) fastest_agreement_nanos_.store(nanos, std::memory_order_relaxed);
    work_cycle_start_ = now;
  }
  if (all_done && !any_work) {
    finished_ = true;  // every member saw the same answer: none makes another collective
    if (reader_.joinable()) reader_.join();  // (the model's weights must outlive their reader)
    MutexLock lock(&mu_);
    all_done_ = true;
    cv_.SignalAll();
    return false;
  }
  if (any_work) {
    idle_pause_s_ = 0;
  } else {
    idle_pause_s_ = std::min(timeouts_.idle_pause_max_s, std::max(0.001, 2 * idle_pause_s_));
    std::this_thread::sleep_for(std::chrono::duration<double>(idle_pause_s_));
  }
  return any_work;
}

void ExpertGroup::FinishAndWait() {
  local_done_.store(true);
  MutexLock lock(&mu_);
  while (!all_done_) cv_.Wait(&mu_);
}

Status ExpertGroup::CheckSameModel(const Hash128& fingerprint, const std::string& settings) {
  // Each member's record: the checkpoint's fingerprint, its build id's hash and its settings' hash.
  const std::string& build_id = ExecutableBuildId();
  const Hash128 build_hash = Hasher128().UpdateInt(build_id.size()).Update(build_id).Digest();
  const Hash128 settings_hash = Hasher128().UpdateInt(settings.size()).Update(settings).Digest();
  constexpr size_t kRecordBytes = 48;
  std::vector<uint8_t> mine(kRecordBytes);
  const Hash128* parts[] = {&fingerprint, &build_hash, &settings_hash};
  for (size_t i = 0; i < 3; ++i) {
    std::memcpy(mine.data() + 16 * i, &parts[i]->high, 8);
    std::memcpy(mine.data() + 16 * i + 8, &parts[i]->low, 8);
  }
  std::vector<uint8_t> all;
  if (Status s = AllGather(mine, timeouts_.startup_s, &all); !s.ok()) Fail("start-up", s);
  const auto differs = [&](int member, size_t part) {
    return std::memcmp(all.data() + kRecordBytes * member + 16 * part, all.data() + 16 * part, 16) != 0;
  };
  for (int p = 1; p < size(); ++p) {
    // The build first: another build may also read the same checkpoint or flags differently.
    if (differs(p, 1))
      return Status::FailedPrecondition("rank " + std::to_string(p) +
                                        " runs a different deepinfer build from rank 0's (build ids differ; rank " +
                                        std::to_string(rank()) + "'s is " + ExecutableBuildId() +
                                        "); every rank must run the same binary");
    if (differs(p, 0))
      return Status::FailedPrecondition("rank " + std::to_string(p) +
                                        " loaded a different checkpoint from rank 0's (config.json or weights "
                                        "differ); every rank must load the same model");
    if (differs(p, 2))
      return Status::FailedPrecondition("rank " + std::to_string(p) + " runs with other engine flags than rank 0");
  }
  return Status::Ok();
}

Result<std::vector<std::string>> ExpertGroup::GatherToRoot(const std::string& mine, double timeout_s) {
  const int n = size();
  const double timeout = timeout_s;
  // The sizes first (to rank 0 only), then the bytes.
  std::vector<int64_t> size_send(static_cast<size_t>(n), 0), size_recv(static_cast<size_t>(n), 0);
  std::vector<int64_t> size_bytes(static_cast<size_t>(n), 0), size_recv_bytes(static_cast<size_t>(n), 0);
  size_send[0] = static_cast<int64_t>(mine.size());
  size_bytes[0] = sizeof(int64_t);
  if (rank() == 0) std::fill(size_recv_bytes.begin(), size_recv_bytes.end(), int64_t{sizeof(int64_t)});
  // Only the first entry is sent; the all-to-all takes its parts in rank order.
  DI_RETURN_IF_ERROR(communicator_.AllToAllV(reinterpret_cast<const uint8_t*>(size_send.data()), size_bytes,
                                             reinterpret_cast<uint8_t*>(size_recv.data()), size_recv_bytes, timeout));
  std::vector<int64_t> send_bytes(static_cast<size_t>(n), 0), recv_bytes(static_cast<size_t>(n), 0);
  send_bytes[0] = static_cast<int64_t>(mine.size());
  int64_t total = 0;
  if (rank() == 0) {
    for (int p = 0; p < n; ++p) total += recv_bytes[p] = size_recv[p];
  }
  std::string all(static_cast<size_t>(total), '\0');
  DI_RETURN_IF_ERROR(communicator_.AllToAllV(reinterpret_cast<const uint8_t*>(mine.data()), send_bytes,
                                             reinterpret_cast<uint8_t*>(all.data()), recv_bytes, timeout));
  std::vector<std::string> out;
  if (rank() == 0) {
    size_t at = 0;
    for (int p = 0; p < n; ++p) {
      out.push_back(all.substr(at, static_cast<size_t>(recv_bytes[p])));
      at += static_cast<size_t>(recv_bytes[p]);
    }
  }
  return out;
}

ExpertGroup::Counters ExpertGroup::counters() const {
  const auto seconds = [](const std::atomic<int64_t>& nanos) { return static_cast<double>(nanos.load()) * 1e-9; };
  Counters c;
  c.exchanges = exchanges_.load();
  c.remote_bytes = remote_bytes_.load();
  c.exchange_seconds = seconds(exchange_nanos_);
  c.memcpy_seconds = seconds(memcpy_nanos_);
  c.fastest_exchange_seconds = seconds(fastest_exchange_nanos_);
  c.step_exchanges = step_exchanges_.load();
  c.step_exchange_seconds = seconds(step_exchange_nanos_);
  c.steps = steps_.load();
  c.step_seconds = seconds(step_nanos_);
  c.agreement_seconds = seconds(agreement_nanos_);
  c.fastest_agreement_seconds = seconds(fastest_agreement_nanos_);
  return c;
}

}  // namespace deepinfer::parallel
