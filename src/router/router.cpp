#include "router/router.h"

#include <chrono>
#include <set>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/sched.h"
#include "router/router_internal.h"
#include "server/api_errors.h"

namespace deepinfer::router {

using server::HttpRequest;
using server::HttpResponse;
using server::ResponseChannel;

Router::Router(RouterOptions options) : options_(std::move(options)) {}

Router::~Router() { Stop(0); }

Status Router::Start() {
  for (const std::string& url : options_.static_urls) DI_RETURN_IF_ERROR(ParseUnitUrl(url).status());
  Refresh();
  refresh_ = std::thread([this] { RefreshLoop(); });
  return Status::Ok();
}

void Router::Stop(double grace_s) {
  {
    MutexLock lock(&stop_mu_);
    stopping_ = true;
  }
  stop_cv_.SignalAll();
  if (refresh_.joinable()) refresh_.join();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s + 5);
  MutexLock lock(&workers_mu_);
  // Workers end within their deadlines once their channels are cancelled (HttpServer::CancelAll).
  while (workers_ > 0 && std::chrono::steady_clock::now() < deadline) workers_cv_.WaitUntil(&workers_mu_, deadline);
}

void Router::RefreshLoop() {
  while (true) {
    {
      MutexLock lock(&stop_mu_);
      const auto next = std::chrono::steady_clock::now() + std::chrono::duration<double>(options_.refresh_interval_s);
      while (!stopping_ && std::chrono::steady_clock::now() < next) stop_cv_.WaitUntil(&stop_mu_, next);
      if (stopping_) return;
    }
    Refresh();
  }
}

std::vector<std::shared_ptr<Router::Unit>> Router::Snapshot() const {
  MutexLock lock(&mu_);
  return units_;
}

bool Router::HasPrefillUnit() const {
  const int64_t now_ms = UnixMillisNow();
  for (const auto& unit : Snapshot())
    if (unit->Role() == UnitRole::kPrefill && unit->Usable(now_ms)) return true;
  return false;
}

int Router::healthy_units() const {
  int n = 0;
  for (const auto& u : Snapshot()) n += u->Usable(UnixMillisNow()) ? 1 : 0;
  return n;
}

void Router::Refresh() {
  // The units this refresh finds: leases first, then the static list. Existing Unit objects are kept
  // (their in-flight counters live on); ones no longer listed are dropped from the table (requests in
  // flight hold their own reference).
  std::vector<UnitLease> found;
  if (!options_.unit_dir.empty()) {
    auto scan = ScanLeases(options_.unit_dir);
    if (!scan.ok()) {
      DI_LOG(kWarn, "unit directory unreadable").Field("dir", options_.unit_dir).Field("reason", scan.status().message());
    } else {
      for (const std::string& e : scan->errors) {
        counters_.lease_errors.fetch_add(1);
        DI_LOG(kWarn, "lease ignored").Field("reason", e);
      }
      for (UnitLease& lease : scan->leases) {
        const bool model_ok = options_.models.empty() ||
                              std::any_of(lease.models.begin(), lease.models.end(), [&](const std::string& m) {
                                return std::find(options_.models.begin(), options_.models.end(), m) != options_.models.end();
                              });
        if (!model_ok || (!options_.version.empty() && lease.version != options_.version)) {
          counters_.units_ignored.fetch_add(1);
          DI_LOG(kWarn, "unit ignored: another model or version").Field("unit", lease.unit_id)
              .Field("version", lease.version).Field("model", lease.models.front());
          continue;
        }
        found.push_back(std::move(lease));
      }
    }
  }
  for (const std::string& url : options_.static_urls) {
    UnitLease lease;
    lease.unit_id = url;
    lease.url = url;
    lease.ttl_ms = -1;  // static: alive while healthy
    found.push_back(std::move(lease));
  }
  std::vector<std::shared_ptr<Unit>> next;
  const std::vector<std::shared_ptr<Unit>> before = Snapshot();
  for (UnitLease& lease : found) {
    std::shared_ptr<Unit> unit;
    for (const auto& u : before)
      if (u->id == lease.unit_id && u->url == lease.url) unit = u;
    if (!unit) {
      auto addr = ParseUnitUrl(lease.url);
      if (!addr.ok()) continue;
      unit = std::make_shared<Unit>();
      unit->id = lease.unit_id;
      unit->url = lease.url;
      unit->addr = *addr;
      unit->health = std::make_unique<KeptAliveGetter>(addr->host, addr->port);
      DI_LOG(kInfo, "unit found").Field("unit", unit->id).Field("url", unit->url);
    }
    unit->SetLease(lease);
    next.push_back(std::move(unit));
  }
  // Health checks, each with its own deadline: a hung unit costs one timeout, not the router. Each unit's
  // go over one kept-alive connection.
  const int64_t now_ms = UnixMillisNow();
  for (const auto& unit : next) {
    if (!unit->LeaseAlive(now_ms)) continue;
    auto health = unit->health->Get("/health", options_.health_timeout_s, 64 * 1024);
    const bool ok = health.ok() && health->status == 200;
    if (!ok) counters_.health_failures.fetch_add(1);
    if (ok != unit->healthy.load()) {
      ::deepinfer::LogRecord(ok ? LogLevel::kInfo : LogLevel::kWarn, ok ? "unit healthy" : "unit unhealthy")
          .Field("unit", unit->id)
          .Field("reason", health.ok() ? "status " + std::to_string(health->status) : health.status().message());
    }
    unit->healthy.store(ok);
    if (ok) unit->failed_at_ms.store(0);
  }
  if (options_.apply_plan && !options_.unit_dir.empty()) ApplyPlan(next);
  MutexLock lock(&mu_);
  units_ = std::move(next);
}

void Router::Handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel) {
  if (request.method == "GET" && request.path == "/health") {
    const int n = healthy_units();
    HttpResponse r;
    r.status = n > 0 ? 200 : 503;
    r.body = "{\"status\":\"" + std::string(n > 0 ? "ok" : "no healthy unit") + "\",\"units\":" + std::to_string(n) + "}";
    if (n == 0) r.headers.push_back({"retry-after", "1"});
    channel->Respond(std::move(r));
    return;
  }
  if (request.method == "GET" && request.path == "/metrics") {
    HttpResponse r;
    r.content_type = "text/plain; version=0.0.4; charset=utf-8";
    r.body = Metrics();
    channel->Respond(std::move(r));
    return;
  }
  if (request.method == "POST" && request.path == "/router/cancel") {
    HandleCancel(request, *channel);
    return;
  }
  if (request.method != "GET" && request.method != "POST") {
    pipeline::ApiError e;
    e.status = 405;
    e.message = "method " + request.method + " is not allowed";
    channel->Respond(server::ErrorResponse(server::FamilyForPath(request.path), e));
    return;
  }
  {
    MutexLock lock(&workers_mu_);
    if (workers_ >= options_.max_in_flight) {
      pipeline::ApiError e;
      e.status = 503;
      e.message = "the router has too many requests in flight";
      e.retry_after_s = 1;
      channel->Respond(server::ErrorResponse(server::FamilyForPath(request.path), e));
      return;
    }
    ++workers_;
  }
  counters_.in_flight.fetch_add(1);
  std::thread([this, request = std::move(request), channel = std::move(channel)]() mutable {
    // Best effort: a kernel that refuses keeps the default slice, which only delays tokens.
    if (options_.relay_thread_slice_us > 0) (void)SetThreadLatencySlice(options_.relay_thread_slice_us);
    Proxy(std::move(request), channel);
    channel.reset();
    counters_.in_flight.fetch_sub(1);
    MutexLock lock(&workers_mu_);
    --workers_;
    workers_cv_.SignalAll();
  }).detach();
}

std::optional<Router::LivePlan> Router::CurrentPlan(const std::vector<std::shared_ptr<Unit>>& units,
                                                    size_t* requests) const {
  const int64_t now_ms = UnixMillisNow();
  const TraceMix mix = recent_.Mix(now_ms);
  *requests = mix.requests.size();
  std::vector<UnitLease> live;
  for (const auto& u : units)
    if (u->healthy.load() && u->LeaseAlive(now_ms)) live.push_back(u->Lease());
  if (mix.requests.empty() || live.empty()) return std::nullopt;
  PlannerOptions o;
  LivePlan out;
  out.requests = mix.requests.size();
  o.step_cost = PlanningStepCost(live, &out.calibrated);
  int64_t max_num_seqs = 0;
  for (const UnitLease& l : live) max_num_seqs = std::max(max_num_seqs, l.load.max_num_seqs);
  if (max_num_seqs > 0) o.max_num_seqs = std::min<int64_t>(max_num_seqs, 1 << 16);
  if (options_.slo.tbt_s > 0) o.tbt_slo_s = options_.slo.tbt_s;
  o.total_units = live.size() >= 2 ? static_cast<int64_t>(std::min<size_t>(live.size(), 1024)) : 0;
  auto plan = PlanPrefillDecode(mix.requests, mix.duration_s, o);
  if (!plan.ok()) return std::nullopt;
  out.plan = *plan;
  return out;
}

void Router::AppendPlan(const std::vector<std::shared_ptr<Unit>>& units, std::string* out) const {
  auto gauge = [&](const char* name, const char* help, double v) {
    *out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " gauge\n" + name + " " +
            std::to_string(v) + "\n";
  };
  size_t requests = 0;
  const std::optional<LivePlan> live = CurrentPlan(units, &requests);
  gauge("deepinfer_router:planner_requests", "Generations of the last minutes the planner plans for.",
        static_cast<double>(requests));
  if (!live) return;
  gauge("deepinfer_router:planner_calibrated_units", "Healthy units whose calibrated step cost the planner uses.",
        static_cast<double>(live->calibrated));
  gauge("deepinfer_router:planner_prefill_load", "Prefill units the recent mix keeps busy.", live->plan.prefill_load);
  gauge("deepinfer_router:planner_decode_load", "Decode units the recent mix keeps busy.", live->plan.decode_load);
  gauge("deepinfer_router:planner_prefill_units", "Recommended prefill units among the healthy ones.",
        static_cast<double>(live->plan.prefill_units));
  gauge("deepinfer_router:planner_decode_units", "Recommended decode units among the healthy ones.",
        static_cast<double>(live->plan.decode_units));
}

void Router::ApplyPlan(const std::vector<std::shared_ptr<Unit>>& units) {
  const int64_t now_ms = UnixMillisNow();
  if (now_ms - last_role_switch_ms_ < static_cast<int64_t>(options_.plan_interval_s * 1000)) return;
  size_t requests = 0;
  const std::optional<LivePlan> live = CurrentPlan(units, &requests);
  if (!live) return;
  // The units the plan counted, in the same order; only lease units can be asked to switch.
  std::vector<std::shared_ptr<Unit>> counted;
  std::vector<UnitRoleState> states;
  for (const auto& u : units) {
    if (!u->healthy.load() || !u->LeaseAlive(now_ms)) continue;
    const UnitLease lease = u->Lease();
    if (lease.ttl_ms < 0) return;  // a static unit: no lease directory to ask it through
    // A request the unit has not acted on yet (it reads it at its next renewal): one switch at a time.
    if (ReadRoleRequest(options_.unit_dir, lease.unit_id).status().code() != StatusCode::kNotFound) return;
    counted.push_back(u);
    states.push_back({lease.role, lease.draining, u->placed_streams.load()});
  }
  const std::optional<RoleSwitch> next = NextRoleSwitch(states, live->plan);
  if (!next) return;
  const auto& unit = counted[next->unit];
  if (Status s = WriteRoleRequest(options_.unit_dir, unit->id, next->to); !s.ok()) {
    DI_LOG(kWarn, "role request not written").Field("unit", unit->id).Field("reason", s.message());
    return;
  }
  last_role_switch_ms_ = now_ms;
  counters_.role_switches.fetch_add(1);
  DI_LOG(kInfo, "asked a unit to switch roles").Field("unit", unit->id).Field("to", UnitRoleName(next->to))
      .Field("prefill_units", live->plan.prefill_units).Field("decode_units", live->plan.decode_units);
}

std::shared_ptr<std::atomic<bool>> Router::RegisterInFlight(const std::string& request_id) {
  auto flag = std::make_shared<std::atomic<bool>>(false);
  MutexLock lock(&in_flight_mu_);
  in_flight_.emplace(request_id, flag);
  return flag;
}

void Router::UnregisterInFlight(const std::string& request_id, const std::shared_ptr<std::atomic<bool>>& flag) {
  MutexLock lock(&in_flight_mu_);
  auto [from, to] = in_flight_.equal_range(request_id);
  for (auto it = from; it != to; ++it) {
    if (it->second == flag) {
      in_flight_.erase(it);
      return;
    }
  }
}

void Router::HandleCancel(const HttpRequest& request, ResponseChannel& channel) {
  const server::ApiFamily family = server::FamilyForPath(request.path);
  auto refuse = [&](int status, std::string message) {
    pipeline::ApiError e;
    e.status = status;
    e.message = std::move(message);
    channel.Respond(server::ErrorResponse(family, e));
  };
  const nlohmann::json body = nlohmann::json::parse(request.body, nullptr, /*allow_exceptions=*/false);
  if (!body.is_object() || !body.contains("request_id") || !body["request_id"].is_string() ||
      body["request_id"].get_ref<const std::string&>().empty() ||
      body["request_id"].get_ref<const std::string&>().size() > kMaxRequestIdBytes)
    return refuse(400, "give {\"request_id\": ID}: the x-request-id of the request to cancel (1 to " +
                           std::to_string(kMaxRequestIdBytes) + " bytes)");
  const std::string& id = body["request_id"].get_ref<const std::string&>();
  int64_t n = 0;
  {
    MutexLock lock(&in_flight_mu_);
    auto [from, to] = in_flight_.equal_range(id);
    for (auto it = from; it != to; ++it) n += it->second->exchange(true) ? 0 : 1;
  }
  if (n == 0) return refuse(404, "no request in flight has the id " + id);
  DI_LOG(kInfo, "request cancelled").Field("id", id).Field("requests", n);
  HttpResponse r;
  r.body = nlohmann::json{{"request_id", id}, {"cancelled", n}}.dump();
  channel.Respond(std::move(r));
}

HttpResponse Router::TransportError(int status, std::string_view path, std::string_view message) {
  pipeline::ApiError e;
  e.status = status;
  e.message = std::string(message);
  return server::ErrorResponse(server::FamilyForPath(path), e);
}

std::string Router::Metrics() const {
  std::string out;
  auto counter = [&](const char* name, const char* help, int64_t v, const char* type = "counter") {
    out += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" + name + " " +
           std::to_string(v) + "\n";
  };
  counter("deepinfer_router:requests_total", "Requests proxied.", counters_.requests.load());
  counter("deepinfer_router:retries_total", "Attempts on another unit before the first byte.", counters_.retries.load());
  counter("deepinfer_router:migrations_total", "Streams continued on another unit after theirs failed.",
          counters_.migrations.load());
  counter("deepinfer_router:prefills_total", "Prompts computed on a prefill unit and handed to a decode unit.",
          counters_.prefills.load());
  counter("deepinfer_router:first_tokens_handed_total",
          "Hand-offs that carried the output's first token, which the decode unit resumes after.",
          counters_.first_tokens_handed.load());
  counter("deepinfer_router:prefill_fallbacks_total",
          "Hand-offs that failed (the prefill unit died, hung or refused): the decode unit computed the prompt.",
          counters_.prefill_fallbacks.load());
  counter("deepinfer_router:failed_total", "Requests ended with an error the router made.", counters_.failed.load());
  counter("deepinfer_router:rejected_slo_total", "Requests refused (429): no unit predicted within the SLO.",
          counters_.rejected_slo.load());
  counter("deepinfer_router:lease_errors_total", "Lease files skipped as malformed.", counters_.lease_errors.load());
  counter("deepinfer_router:units_ignored_total", "Leases of another model or version skipped.",
          counters_.units_ignored.load());
  counter("deepinfer_router:health_check_failures_total", "Unit health checks failed.", counters_.health_failures.load());
  counter("deepinfer_router:cancelled_total", "Requests cancelled at the router (POST /router/cancel).",
          counters_.cancelled.load());
  counter("deepinfer_router:role_switches_total", "Units asked to switch roles to apply the planner's split.",
          counters_.role_switches.load());
  counter("deepinfer_router:requests_in_flight", "Requests being proxied.", counters_.in_flight.load(), "gauge");
  const auto units = Snapshot();
  counter("deepinfer_router:units_known", "Units listed (leases and static).", static_cast<int64_t>(units.size()), "gauge");
  counter("deepinfer_router:units_healthy", "Units requests may go to.", healthy_units(), "gauge");
  AppendPlan(units, &out);
  out += "# HELP deepinfer_router:unit_streams Requests the router has in flight on each unit.\n"
         "# TYPE deepinfer_router:unit_streams gauge\n";
  for (const auto& u : units)
    out += "deepinfer_router:unit_streams{unit=\"" + u->id + "\"} " + std::to_string(u->placed_streams.load()) + "\n";
  return out;
}

}  // namespace deepinfer::router
