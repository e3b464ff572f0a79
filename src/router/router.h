// `deepinfer router`: the OpenAI/Anthropic HTTP API in front of several serving units. It keeps no state a
// restart loses: the units come from lease files (unit_lease.h) re-read every refresh interval, or from a
// static list, and each is health-checked; placement is the cost model's (placement.h) on the units'
// published load plus what the router itself has in flight.
//
// A request is proxied as bytes (the unit validates it and answers errors in the protocol's shape), on a
// worker thread of its own whose every wait has a deadline. A unit that fails before the first byte
// reaches the client (refused connection, reset, 503, a deadline) is left for the next unit in the
// placement order. A streamed legacy Completion whose unit dies mid-stream is migrated: the router asks
// units for the token ids of every chunk (`return_token_ids`), so it can send the request again with the
// tokens its client already has as a continuation (server/stream_resume.h) to another unit (same seed:
// the router fixes one when the client gave none), and keep streaming. Chat Completions, Messages and
// Responses streams migrate the same way through the units' resume information (chat_stream_tracker.h).
//
// /metrics carries the planner's recommended prefill:decode split (planner.h) for the healthy units, from
// their calibrated step costs and the generations of the last minutes (RecentMix).
//
// Every request carries an x-request-id to its units (the client's, or one the router makes and returns).
// `POST /router/cancel` with {"request_id": ID} cancels the requests in flight under that id: the router
// closes their connections to the units, which abort them and free their KV blocks (a unit aborts a request
// whose connection closes, prefill and decode units alike), and the client's response ends with the
// protocol's error. A client that disconnects has its requests' connections to the units closed the same way.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/mutex.h"
#include "router/placement.h"
#include "router/planner.h"
#include "router/recent_mix.h"
#include "router/unit_lease.h"
#include "server/http_server.h"

namespace deepinfer::router {

struct RouterOptions {
  std::string unit_dir;                  // lease files; empty: static units only
  std::vector<std::string> static_urls;  // http://HOST:PORT
  std::vector<std::string> models;       // accepted model names; empty: whatever the units serve
  std::string version;                   // units of another deepinfer version are ignored; empty: any
  double refresh_interval_s = 0.5;       // lease directory re-read and health checks
  double health_timeout_s = 1;
  double connect_timeout_s = 1;
  double first_byte_timeout_s = 300;  // a unit's answer (or first streamed event) after the request
  double stall_timeout_s = 60;        // between two streamed events
  int max_attempts = 3;               // units tried before the first byte
  int migration_limit = 2;            // mid-stream migrations per request
  int max_in_flight = 1024;           // requests proxied at once; more: 503
  size_t max_response_bytes = 64 * 1024 * 1024;
  // Scheduler time slice each request's relay thread asks for (core/sched.h; 0: the kernel's default).
  // Short, so that a relay woken by a unit's token preempts a compute thread sharing its core instead of
  // waiting for that thread's slice to end.
  int64_t relay_thread_slice_us = 0;
  PlacementSlo slo;
  // Apply the planner's split: ask one unit at a time to switch roles (a role request in unit_dir), at most
  // once per plan_interval_s.
  bool apply_plan = false;
  double plan_interval_s = 30;
};

struct RouterCounters {
  std::atomic<int64_t> requests{0};
  std::atomic<int64_t> retries{0};          // attempts on another unit before the first byte
  std::atomic<int64_t> migrations{0};       // mid-stream continuations on another unit
  std::atomic<int64_t> prefills{0};         // prompts computed on a prefill unit and handed over
  std::atomic<int64_t> prefill_fallbacks{0};  // hand-offs that failed: the decode unit computed the prompt
  std::atomic<int64_t> first_tokens_handed{0};  // hand-offs that carried the output's first token
  std::atomic<int64_t> failed{0};           // requests that ended with an error the router made
  std::atomic<int64_t> rejected_slo{0};     // 429: no unit predicted within the SLO
  std::atomic<int64_t> lease_errors{0};     // lease files skipped as malformed
  std::atomic<int64_t> health_failures{0};  // health checks failed
  std::atomic<int64_t> units_ignored{0};    // leases of another model or version
  std::atomic<int64_t> in_flight{0};
  std::atomic<int64_t> cancelled{0};        // requests cancelled at the router
  std::atomic<int64_t> role_switches{0};    // role requests written to apply the planner's split
};

// The longest x-request-id the router keeps (a longer one is replaced by one it makes).
inline constexpr size_t kMaxRequestIdBytes = 128;

class Router : public server::HttpHandler {
 public:
  explicit Router(RouterOptions options);
  ~Router() override;

  // Reads the units once (so the first requests find them) and starts the refresh thread.
  Status Start();
  // Stops the refresh thread and waits (up to `grace_s`) for the requests in flight.
  void Stop(double grace_s);

  void Handle(server::HttpRequest request, std::shared_ptr<server::ResponseChannel> channel) override;
  server::HttpResponse TransportError(int status, std::string_view path, std::string_view message) override;

  int healthy_units() const;
  const RouterCounters& counters() const { return counters_; }

  struct Unit;  // router.cpp
  struct Exchange;

 private:
  void RefreshLoop();
  void Refresh();
  void Proxy(server::HttpRequest request, std::shared_ptr<server::ResponseChannel> channel);
  void ProxyGet(const server::HttpRequest& request, server::ResponseChannel& channel);
  std::string Metrics() const;
  std::vector<std::shared_ptr<Unit>> Snapshot() const;
  // The requests in flight by x-request-id, each with the flag a cancel sets.
  std::shared_ptr<std::atomic<bool>> RegisterInFlight(const std::string& request_id);
  void UnregisterInFlight(const std::string& request_id, const std::shared_ptr<std::atomic<bool>>& flag);
  // The planner's split for the usable units and the recent mix; nullopt without requests or units.
  struct LivePlan {
    PdPlan plan;
    int64_t calibrated = 0;
    size_t requests = 0;
  };
  std::optional<LivePlan> CurrentPlan(const std::vector<std::shared_ptr<Unit>>& units, size_t* requests) const;
  void AppendPlan(const std::vector<std::shared_ptr<Unit>>& units, std::string* out) const;
  void ApplyPlan(const std::vector<std::shared_ptr<Unit>>& units);
  void HandleCancel(const server::HttpRequest& request, server::ResponseChannel& channel);
  bool HasPrefillUnit() const;

  RouterOptions options_;
  RouterCounters counters_;
  mutable Mutex mu_;
  std::vector<std::shared_ptr<Unit>> units_ GUARDED_BY(mu_);
  Mutex in_flight_mu_;
  std::multimap<std::string, std::shared_ptr<std::atomic<bool>>> in_flight_ GUARDED_BY(in_flight_mu_);
  RecentMix recent_{4096, 10 * 60 * 1000};  // the generations the planner on /metrics plans for
  int64_t last_role_switch_ms_ = 0;          // the refresh thread's
  Mutex stop_mu_;
  CondVar stop_cv_;
  bool stopping_ GUARDED_BY(stop_mu_) = false;
  std::thread refresh_;
  Mutex workers_mu_;
  CondVar workers_cv_;
  int workers_ GUARDED_BY(workers_mu_) = 0;
};

}  // namespace deepinfer::router
