// deepinfer router: the OpenAI/Anthropic HTTP API in front of several serving units (src/router).
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/json.h"
#include "core/log.h"
#include "core/mapped_file.h"
#include "router/planner.h"
#include "router/router.h"
#include "server/http_server.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kRouterUsage =
    "usage: deepinfer router (--unit-dir DIR | --unit URL ...) [--host 127.0.0.1] [--port 8000] [options]\n\n"
    "Serves the same HTTP API as `deepinfer serve` in front of several units. Units register with\n"
    "`deepinfer serve --unit-dir DIR` (a lease file each, renewed while they run) or are listed with --unit;\n"
    "every one is health-checked, and one whose lease lapses or whose check fails gets no requests. Each\n"
    "request goes to the unit with the least predicted time to first token within the TBT budget (the\n"
    "units' published step-cost models and load); 429 with Retry-After when no unit can meet the SLO. A\n"
    "unit that fails before the first byte: the request goes to another. A streamed /v1/completions whose\n"
    "unit dies mid-stream continues on another unit from the tokens already sent. POST /router/cancel with\n"
    "{\"request_id\": ID} cancels the requests in flight under that x-request-id (their units abort them).\n\n"
    "  --unit-dir DIR              the lease directory the units write (re-read every --refresh-s)\n"
    "  --unit URL                  a static unit, http://HOST:PORT (repeatable)\n"
    "  --host ADDR                 address to listen on (default 127.0.0.1)\n"
    "  --port N                    port (default 8000; 0 picks a free one, printed in the ready line)\n"
    "  --served-model-name NAME    accept only units serving this name (repeatable; default: any)\n"
    "  --refresh-s S               lease re-read and health-check interval (default 0.5)\n"
    "  --health-timeout-s S        deadline of a health check (default 1)\n"
    "  --connect-timeout-s S       deadline of a connection to a unit (default 1)\n"
    "  --first-byte-timeout-s S    deadline of a unit's answer or first event (default 300)\n"
    "  --stall-timeout-s S         deadline between two streamed events (default 60)\n"
    "  --max-attempts N            units tried before the first byte (default 3)\n"
    "  --migration-limit N         mid-stream migrations per request (default 2)\n"
    "  --ttft-slo-ms MS            refuse (429) when no unit is predicted within it (default: no bound)\n"
    "  --tbt-slo-ms MS             place only where the predicted time between tokens is within it\n"
    "  --max-in-flight N           requests proxied at once; more get 503 (default 1024)\n"
    "  --max-request-bytes N       largest request body (default 33554432)\n"
    "  --shutdown-grace-s S        on SIGTERM, how long requests in flight may finish (default 30)\n"
    "  --apply-plan                apply the planner's prefill:decode split (on /metrics): ask one unit of\n"
    "                              --unit-dir at a time to drain and switch roles\n"
    "  --plan-interval-s S         at most one role switch per S seconds (default 30)\n\n"
    "deepinfer router --plan --trace FILE [--unit-dir DIR] [--units N] [--tbt-slo-ms MS]\n"
    "  prints (one JSON line) the prefill:decode split of N units (default: the live leases) that keeps both\n"
    "  pools equally busy for the mix a Mooncake-format trace replays, on the mean step-cost model of the\n"
    "  calibrated units in DIR (src/router/planner.h); nothing is drained or restarted\n";

constexpr int64_t kMaxPlanUnits = 1024;  // PlannerOptions::total_units' bound

// --plan: the planner's P:D split for a replayed mix, on the units' cost model; no server is started.
int RunPlan(const std::string& unit_dir, const std::string& trace_file, int64_t units, double tbt_ms) {
  if (trace_file.empty()) return UsageError("router", "--plan needs --trace FILE (the mix to plan for)");
  std::vector<router::UnitLease> alive;
  std::vector<std::string> lease_errors;
  if (!unit_dir.empty()) {
    auto scan = router::ScanLeases(unit_dir);
    if (!scan.ok()) return Fail("router", unit_dir + ": " + scan.status().message());
    lease_errors = std::move(scan->errors);
    const int64_t now = router::UnixMillisNow();
    for (router::UnitLease& lease : scan->leases)
      if (lease.Alive(now)) alive.push_back(std::move(lease));
  }
  auto text = ReadFileToString(trace_file, router::TraceLimits::kMaxBytes);
  if (!text.ok()) return Fail("router", trace_file + ": " + text.status().message());
  auto trace = router::ParseMooncakeTrace(*text);
  if (!trace.ok()) return Fail("router", trace_file + ": " + trace.status().message());
  const router::TraceMix mix = router::MixOfTrace(*trace);
  if (mix.duration_s <= 0) return Fail("router", trace_file + ": every request arrives at once: no rate to plan for");
  router::PlannerOptions po;
  int64_t calibrated = 0;
  po.step_cost = router::PlanningStepCost(alive, &calibrated);
  if (tbt_ms > 0) po.tbt_slo_s = tbt_ms / 1e3;
  if (units == 0) units = static_cast<int64_t>(alive.size());
  if (units > kMaxPlanUnits)
    return Fail("router", unit_dir + ": " + std::to_string(units) + " live units, more than the planner's " +
                              std::to_string(kMaxPlanUnits) + "; pass --units N");
  po.total_units = units >= 2 ? units : 0;
  auto plan = router::PlanPrefillDecode(mix.requests, mix.duration_s, po);
  if (!plan.ok()) return Fail("router", "planner: " + plan.status().message());
  nlohmann::ordered_json out = {{"prefill_units", plan->prefill_units},  {"decode_units", plan->decode_units},
                                {"prefill_load", plan->prefill_load},    {"decode_load", plan->decode_load},
                                {"decode_batch", plan->decode_batch},    {"tbt_feasible", plan->tbt_feasible},
                                {"units", units},                        {"calibrated_units", calibrated},
                                {"step_cost", po.step_cost},             {"requests", mix.requests.size()}};
  // A broken lease is skipped, as the serving router skips it; the operator still hears of it.
  constexpr size_t kShownErrors = 5;
  for (size_t i = 0; i < std::min(lease_errors.size(), kShownErrors); ++i)
    std::fprintf(stderr, "deepinfer router: warning: lease skipped: %s\n", lease_errors[i].c_str());
  if (lease_errors.size() > kShownErrors)
    std::fprintf(stderr, "deepinfer router: warning: %zu more leases skipped\n", lease_errors.size() - kShownErrors);
  std::printf("%s\n", DumpJson(out).c_str());
  return 0;
}

int RunRouter(const std::vector<std::string>& argv) {
  router::RouterOptions options;
  std::string host = "127.0.0.1";
  int64_t port = 8000, max_attempts = 3, migration_limit = 2, max_in_flight = 1024;
  int64_t max_request_bytes = 32 * 1024 * 1024;
  double ttft_ms = 0, tbt_ms = 0, grace_s = 30;
  bool plan = false;
  std::string plan_trace;
  int64_t plan_units = 0;
  Flags flags("router");
  flags.Path("--unit-dir", &options.unit_dir);
  flags.Strings("--unit", &options.static_urls);
  flags.String("--host", &host);
  flags.Int<int64_t>("--port", &port, 0, 65535);
  flags.Strings("--served-model-name", &options.models);
  flags.Double("--refresh-s", &options.refresh_interval_s, 0.01, 3600);
  flags.Double("--health-timeout-s", &options.health_timeout_s, 0.01, 3600);
  flags.Double("--connect-timeout-s", &options.connect_timeout_s, 0.01, 3600);
  flags.Double("--first-byte-timeout-s", &options.first_byte_timeout_s, 0.01, 86400);
  flags.Double("--stall-timeout-s", &options.stall_timeout_s, 0.01, 86400);
  flags.Int<int64_t>("--max-attempts", &max_attempts, 1, 64);
  flags.Int<int64_t>("--migration-limit", &migration_limit, 0, 64);
  flags.Double("--ttft-slo-ms", &ttft_ms, 0, 86400e3);
  flags.Double("--tbt-slo-ms", &tbt_ms, 0, 86400e3);
  flags.Int<int64_t>("--max-in-flight", &max_in_flight, 1, 1 << 20);
  flags.Int<int64_t>("--max-request-bytes", &max_request_bytes, 1024, int64_t{1} << 32);
  flags.Double("--shutdown-grace-s", &grace_s, 0, 86400);
  flags.Switch("--apply-plan", &options.apply_plan);
  flags.Double("--plan-interval-s", &options.plan_interval_s, 0, 86400);
  flags.Switch("--plan", &plan);
  flags.Path("--trace", &plan_trace);
  flags.Int<int64_t>("--units", &plan_units, 2, kMaxPlanUnits);
  if (int rc = flags.Parse(argv)) return rc;
  if (plan) return RunPlan(options.unit_dir, plan_trace, plan_units, tbt_ms);
  if (flags.given("--trace") || flags.given("--units"))
    return UsageError("router", "--trace and --units go with --plan");
  if (options.apply_plan && options.unit_dir.empty())
    return UsageError("router", "--apply-plan asks units to switch roles through --unit-dir DIR");
  if (options.unit_dir.empty() && options.static_urls.empty())
    return UsageError("router", "give --unit-dir DIR or at least one --unit URL");
  for (const std::string& url : options.static_urls)
    if (auto parsed = router::ParseUnitUrl(url); !parsed.ok()) return UsageError("router", "--unit " + url + ": " + parsed.status().message());
  options.max_attempts = static_cast<int>(max_attempts);
  options.migration_limit = static_cast<int>(migration_limit);
  options.max_in_flight = static_cast<int>(max_in_flight);
  options.slo.ttft_s = ttft_ms / 1e3;
  options.slo.tbt_s = tbt_ms / 1e3;
#ifdef DEEPINFER_VERSION
  options.version = DEEPINFER_VERSION;
#endif

  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  router::Router router(options);
  if (Status s = router.Start(); !s.ok()) return Fail("router", s.message());
  server::HttpServerOptions http_options;
  http_options.host = host;
  http_options.port = static_cast<int>(port);
  http_options.io_threads = 2;
  http_options.max_body_bytes = static_cast<size_t>(max_request_bytes);
  auto http = server::HttpServer::Create(http_options, &router);
  if (!http.ok()) return Fail("router", http.status().message());
  server::HttpServer& server = **http;
  server.Start();
  const std::string url = "http://" + (host.find(':') != std::string::npos ? "[" + host + "]" : host) + ":" +
                          std::to_string(server.port());
  DI_LOG(kInfo, "ready").Field("url", url).Field("units", router.healthy_units());

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  DI_LOG(kInfo, "shutting down").Field("grace_s", grace_s);
  server.StopAccepting();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(grace_s);
  const timespec poll{0, 20 * 1000 * 1000};
  while (server.counters().exchanges_active > 0 && std::chrono::steady_clock::now() < deadline)
    if (sigtimedwait(&signals, nullptr, &poll) > 0) break;
  server.CancelAll();
  router.Stop(0);
  server.Stop();
  DI_LOG(kInfo, "stopped");
  return 0;
}

const CommandRegistration kRouterRegistration(
    {"router", "HTTP router in front of several serving units", kRouterUsage, RunRouter, LogLevel::kInfo});

}  // namespace
}  // namespace deepinfer::cli
