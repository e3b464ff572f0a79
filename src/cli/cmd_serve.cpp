// deepinfer serve: the OpenAI- and Anthropic-compatible HTTP server (src/server) on one model directory, or
// on the embedded default (the `small` preset with random weights, created on first use in a cache
// directory). Flags are named as vLLM names them where the meaning is the same.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/recipe_flags.h"
#include "core/hf_config.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/engine.h"
#include "kvstore/kv_store_tier.h"
#include "kvstore/store.h"
#include "model/causal_lm.h"
#include "parallel/launcher.h"
#include "parallel/mpi_module.h"
#include "parallel/unit.h"
#include "parallel/unit_serving.h"
#include "pipeline/default_model.h"
#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "router/lease_writer.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/service.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kServeUsage =
    "usage: deepinfer serve [MODEL_DIR] [--host 127.0.0.1] [--port 8000] [--api-key KEY] [options]\n\n"
    "Serves MODEL_DIR over HTTP with the OpenAI (Chat Completions, Completions, Responses) and Anthropic\n"
    "(Messages) APIs. Without MODEL_DIR it serves the embedded default: the `small` DeepSeek-V4 preset with\n"
    "random weights (a demo: its text is noise), created on first use under $DEEPINFER_CACHE_DIR\n"
    "(default ~/.cache/deepinfer). SIGTERM or SIGINT stops accepting, lets requests in flight finish\n"
    "within --shutdown-grace-s, cancels the rest and exits 0.\n\n"
    "  --host ADDR                 address to listen on (default 127.0.0.1)\n"
    "  --port N                    port (default 8000; 0 picks a free one, printed in the ready line)\n"
    "  --api-key KEY               require this key (Authorization: Bearer KEY or x-api-key: KEY) on /v1/*,\n"
    "                              /tokenize and /detokenize; repeatable; default $DEEPINFER_API_KEY\n"
    "  --served-model-name NAME    the model name clients send (repeatable; default: the directory's name)\n"
    "  --max-model-len N           context length in tokens (default: the config's max_position_embeddings,\n"
    "                              at most 65536)\n"
    "  --model-version v3.2|v4|v4.1   prompt encoding (default: from config.json)\n"
    "  --tokenizer PATH|NAME       a tokenizer.json, a directory holding one, or a builtin tokenizer\n"
    "                              (deepseek-v3, deepseek-v4, deepseek-v4.1); default MODEL_DIR/tokenizer.json\n"
    "  --no-thinking               requests that say nothing about thinking get chat mode\n"
    "  --max-request-bytes N       largest request body accepted (default 33554432); larger ones get 413\n"
    "  --max-header-bytes N        largest request line + headers (default 65536); larger get 431\n"
    "  --timeout-keep-alive S      seconds an idle connection may take to send its next request's headers\n"
    "                              (default 5)\n"
    "  --request-body-timeout-s S  seconds a request body may take to arrive (default 60)\n"
    "  --write-timeout-s S         seconds a write may stall before the client counts as gone (default 30)\n"
    "  --max-connections N         open connections beyond this are answered 503 (default 4096)\n"
    "  --io-threads N              HTTP event-loop threads (default 1)\n"
    "  --output-threads N          threads that turn the engine's tokens into stream events and write them\n"
    "                              (a request's always on the same one; default 0: one per core, at most 4)\n"
    "  --latency-slice-us N        scheduler time slice the HTTP and engine output threads ask for (default\n"
    "                              100; Linux >= 6.12), so that they preempt the compute threads when a\n"
    "                              token arrives; 0 keeps the kernel's default\n"
    "  --shutdown-grace-s S        on SIGTERM/SIGINT, how long requests in flight may take to finish\n"
    "                              (default 30)\n"
    "  --request-timeout-s S       a generation request finishes (as \"length\") after S seconds (default 600;\n"
    "                              0: never)\n"
    "  --kv-cache-memory-bytes N   bytes of KV-cache blocks (default 1 GiB)\n"
    "  --max-num-seqs N            sequences running at once (default: as many as half the KV-cache bytes\n"
    "                              hold the sliding-window state of, at most 256); a KV budget that cannot\n"
    "                              hold them refuses to start\n"
    "  --max-num-batched-tokens N  tokens per engine step (default 2048)\n"
    "  --max-queued-requests N     waiting requests beyond which new ones get 429 (default 4096)\n"
    "  --tbt-target-ms MS|auto     the inter-token latency a prompt's prefill may raise the running streams'\n"
    "                              steps to: each step takes the largest prompt chunk the cost model\n"
    "                              (calibrated at start-up) predicts within it. Default auto: 1.5 x the\n"
    "                              predicted decode step of the streams running (at least of 8 streams),\n"
    "                              so decodes never wait on a long prompt; 0: fixed 512-token chunks\n"
    "  --no-enable-prefix-caching  no prefix reuse between requests\n"
    "  --precision exact|bf16      matrix-product arithmetic (default exact)\n"
    "  --window-ttl-s S            cached sliding-window state (a prefix hit's exact resume point) also\n"
    "                              expires S seconds after its last use (default 0: kept until the KV\n"
    "                              budget needs the room, least recently used first)\n"
  "  --swa-replay exact|bounded  a prefix hit without cached window state replays the whole dependency cone\n"
    "                              (exact: the same logits as a cold run; DeepSeek-V4's default) or the last\n"
    "                              block only (bounded: DeepSeek-V4.1's default, the model was built for it)\n"
    "  --speculative-config JSON   speculative decoding, e.g. '{\"method\": \"ngram\", \"num_speculative_tokens\": 3}'\n"
    "                              (ngram, suffix, synthetic, mtp, dspark; outputs equal speculation off)\n"
    "  --kv-store DIR              keep prefix KV blocks in DIR (local SSD or a shared filesystem's mount;\n"
    "                              created if missing): they outlive restarts and serve every server on DIR.\n"
    "                              Without it, or when DIR cannot be used, the prefix cache is RAM only\n"
    "  --kv-store-capacity BYTES   evict least-recently-used blocks above 90% of BYTES of blocks (default:\n"
    "                              keep DIR's filesystem below 90% used)\n"
    "  --kv-store-sweep-s S        seconds between sweeps (expiry, watermark; default 60)\n"
    "  --kv-store-timeout-s S      how long a request waits for DIR (a slow or hung filesystem) before it\n"
    "                              recomputes instead (default 2)\n"
    "  --kv-ttl-class agent|chat   the retention class of this server's requests (default chat)\n"
    "  --kv-ttl-agent-s S, --kv-ttl-chat-s S   how long a block lives after its last use (3 d / 7 d)\n"
    "  --kv-store-fsync none|data|full   durability of written blocks (default none: a block a crash damaged\n"
    "                              is refused by the checksum and recomputed; data/full survive power loss)\n"
    "  --responses-store-max-entries N   Responses kept in memory for previous_response_id and\n"
    "                              GET /v1/responses/{id} (default 4096; the oldest goes first; 0: none)\n"
    "  --responses-store-ttl-s S   how long a stored response is kept (default 3600)\n"
    "  --unit-dir DIR              register with `deepinfer router --unit-dir DIR`: a lease file there, renewed\n"
    "                              while the server runs, removed when it stops (its load: running, waiting)\n"
    "  --unit-lease-ttl-s S        the lease lapses S seconds after its last renewal (default 3)\n"
    "  --role prefill|decode|both  what the router sends here (default both): prefill units compute prompts\n"
    "                              into the --kv-store, decode units read them from it (needs --kv-store;\n"
    "                              decode units replay window state exactly unless --swa-replay says otherwise)\n"
    "  --structured-outputs-one-of-as-any-of   a JSON Schema oneOf whose branches may overlap and that cannot\n"
    "                              be made exclusive compiles as anyOf instead of a 400 (unsound: an instance\n"
    "                              meeting two branches is accepted); a request's structured_outputs.\n"
    "                              one_of_as_any_of overrides it; each use is logged and named in the\n"
    "                              response's x-deepinfer-warning header\n"
    "  --data-parallel-size N      ranks of a parallel unit under `mpirun -n N` (docs/parallel.md): rank 0\n"
    "                              serves HTTP and places each request on the least loaded rank\n"
    "  --enable-expert-parallel    shard the routed experts over the unit's ranks\n"
    "  --ep-timeout-s S            the least time a rank waits for the others before it ends the unit (default 1)\n"
    "  --enable-eplb               balance the experts' load over the ranks: every --eplb-step-interval\n"
    "                              steps (default 3000) DeepSeek's load balancer places them by their load over\n"
    "                              the last --eplb-window-size steps (default 1000), applied between steps\n"
    "  --num-redundant-experts R   extra expert copies the balancer places (implies --enable-eplb)\n"
    "  --enable-test-hooks         TESTS ONLY: a request's \"deepinfer_test_output\" field scripts the output\n"
    "  --log-level debug|info|warn|error   (default info; DEEPINFER_LOG also sets it)\n";

struct ServeArgs {
  std::string model_dir;
  std::string tokenizer_path;
  std::string host = "127.0.0.1";
  int64_t port = 8000;
  std::vector<std::string> api_keys;
  std::vector<std::string> served_names;
  int64_t max_model_len = 0;
  std::optional<recipe::ModelVersion> model_version;
  bool thinking = true;
  int64_t max_request_bytes = 32 * 1024 * 1024;
  int64_t max_header_bytes = 64 * 1024;
  double keep_alive_s = 5;
  double body_timeout_s = 60;
  double write_timeout_s = 30;
  int64_t max_connections = 4096;
  int64_t io_threads = 1;
  int64_t output_threads = 0;
  int64_t latency_slice_us = 100;
  double shutdown_grace_s = 30;
  double request_timeout_s = 600;
  bool enable_test_hooks = false;
  bool one_of_as_any_of = false;
  int64_t responses_store_max_entries = 4096;
  double responses_store_ttl_s = 3600;
  // Engine
  int64_t kv_cache_bytes = int64_t{1} << 30;
  int64_t max_num_seqs = 0;  // 0: derived from the KV budget
  int64_t max_num_batched_tokens = 2048;
  int64_t max_queued_requests = 4096;
  double tbt_target_ms = engine::kDerivedTbtTarget;
  double window_ttl_s = 0;
  bool no_prefix_caching = false;
  parallel::UnitOptions unit;
  model::ComputePrecision precision = model::ComputePrecision::kExact;
  std::optional<engine::SwaReplay> swa_replay;  // unset: the model family's (engine::DefaultSwaReplay)
  engine::SpeculativeConfig speculative;
  // KV store
  std::string kv_store_dir;
  uint64_t kv_store_capacity = 0;
  kvstore::TtlClass kv_ttl_class = kvstore::TtlClass::kChat;
  int64_t kv_ttl_agent_s = 3 * 86400;
  int64_t kv_ttl_chat_s = 7 * 86400;
  kvstore::FsyncPolicy kv_store_fsync = kvstore::FsyncPolicy::kNone;
  double kv_store_sweep_s = 60;
  double kv_store_timeout_s = 2;
  // Router registration
  std::string unit_dir;
  double unit_lease_ttl_s = 3;
  router::UnitRole role = router::UnitRole::kBoth;
};

int ParseArgs(const std::vector<std::string>& args, ServeArgs* out) {
  std::vector<std::string> positionals;
  std::string log_level;
  recipe::ModelVersion version = recipe::ModelVersion::kV4;
  bool no_thinking = false;
  Flags flags("serve");
  flags.Positionals("MODEL_DIR", &positionals, 0, 1);
  flags.String("--host", &out->host);
  flags.Int<int64_t>("--port", &out->port, 0, 65535);
  flags.Strings("--api-key", &out->api_keys);
  flags.Strings("--served-model-name", &out->served_names);
  flags.Path("--tokenizer", &out->tokenizer_path);
  AddModelVersionFlag(flags, &version);
  flags.Switch("--no-thinking", &no_thinking);
  flags.Int<int64_t>("--max-model-len", &out->max_model_len, 16, int64_t{1} << 24);
  flags.Int<int64_t>("--max-request-bytes", &out->max_request_bytes, 1024, int64_t{1} << 32);
  flags.Int<int64_t>("--max-header-bytes", &out->max_header_bytes, 1024, int64_t{1} << 24);
  flags.Double("--timeout-keep-alive", &out->keep_alive_s, 0.001, 86400);
  flags.Double("--request-body-timeout-s", &out->body_timeout_s, 0.001, 86400);
  flags.Double("--write-timeout-s", &out->write_timeout_s, 0.001, 86400);
  flags.Double("--shutdown-grace-s", &out->shutdown_grace_s, 0, 86400);
  flags.Int<int64_t>("--max-connections", &out->max_connections, 1, 1 << 20);
  flags.Int<int64_t>("--io-threads", &out->io_threads, 1, 64);
  flags.Int<int64_t>("--output-threads", &out->output_threads, 0, 64);
  flags.Int<int64_t>("--latency-slice-us", &out->latency_slice_us, 0, 100000);
  flags.Double("--request-timeout-s", &out->request_timeout_s, 0, 86400 * 7);
  flags.Switch("--enable-test-hooks", &out->enable_test_hooks);
  flags.Int<int>("--data-parallel-size", &out->unit.data_parallel_size, 1, 1 << 16);
  flags.Switch("--enable-expert-parallel", &out->unit.expert_parallel);
  flags.Double("--ep-timeout-s", &out->unit.timeouts.exchange_floor_s, 0.05, 3600);
  flags.Switch("--enable-eplb", &out->unit.eplb.enabled);
  flags.Int<int64_t>("--num-redundant-experts", &out->unit.eplb.redundant_experts, 0,
                     parallel::EplbLimits::kMaxReplicas);
  flags.Int<int64_t>("--eplb-window-size", &out->unit.eplb.window_steps, 1, parallel::EplbOptions::kMaxSteps);
  flags.Int<int64_t>("--eplb-step-interval", &out->unit.eplb.step_interval, 1, parallel::EplbOptions::kMaxSteps);
  flags.Switch("--structured-outputs-one-of-as-any-of", &out->one_of_as_any_of);
  flags.Int<int64_t>("--responses-store-max-entries", &out->responses_store_max_entries, 0, int64_t{1} << 24);
  flags.Double("--responses-store-ttl-s", &out->responses_store_ttl_s, 0.001, 86400.0 * 365);
  flags.Int<int64_t>("--kv-cache-memory-bytes", &out->kv_cache_bytes, int64_t{1} << 20, int64_t{1} << 40);
  flags.Int<int64_t>("--max-num-seqs", &out->max_num_seqs, 1, 4096);
  flags.Int<int64_t>("--max-num-batched-tokens", &out->max_num_batched_tokens, 16, 1 << 20);
  flags.Int<int64_t>("--max-queued-requests", &out->max_queued_requests, 1, 1 << 20);
  flags.Switch("--no-enable-prefix-caching", &out->no_prefix_caching);
  flags.DoubleOr("--tbt-target-ms", &out->tbt_target_ms, 0, 1e6, "auto", engine::kDerivedTbtTarget);
  flags.Double("--window-ttl-s", &out->window_ttl_s, 0, 86400.0 * 365);
  flags.Choice("--precision", &out->precision,
               {{"exact", model::ComputePrecision::kExact}, {"bf16", model::ComputePrecision::kBf16Activations}});
  engine::SwaReplay swa_replay = engine::SwaReplay::kExact;
  flags.Choice("--swa-replay", &swa_replay,
               {{"exact", engine::SwaReplay::kExact}, {"bounded", engine::SwaReplay::kBounded}});
  flags.Custom("--speculative-config", "JSON", [out](const std::string& v) {
    DI_ASSIGN_OR_RETURN(out->speculative, engine::ParseSpeculativeConfig(v));
    return Status::Ok();
  });
  flags.Path("--kv-store", &out->kv_store_dir);
  flags.Path("--unit-dir", &out->unit_dir);
  flags.Double("--unit-lease-ttl-s", &out->unit_lease_ttl_s, 0.1, 3600);
  flags.Choice("--role", &out->role,
               {{"both", router::UnitRole::kBoth}, {"prefill", router::UnitRole::kPrefill},
                {"decode", router::UnitRole::kDecode}});
  flags.Int("--kv-store-capacity", &out->kv_store_capacity, uint64_t{4096}, uint64_t{1} << 62);
  flags.Double("--kv-store-sweep-s", &out->kv_store_sweep_s, 0.01, 86400);
  flags.Double("--kv-store-timeout-s", &out->kv_store_timeout_s, 0.001, 3600);
  flags.Choice("--kv-ttl-class", &out->kv_ttl_class,
               {{"agent", kvstore::TtlClass::kAgent}, {"chat", kvstore::TtlClass::kChat}});
  flags.Int<int64_t>("--kv-ttl-agent-s", &out->kv_ttl_agent_s, 1, int64_t{3650} * 86400);
  flags.Int<int64_t>("--kv-ttl-chat-s", &out->kv_ttl_chat_s, 1, int64_t{3650} * 86400);
  flags.Choice("--kv-store-fsync", &out->kv_store_fsync,
               {{"none", kvstore::FsyncPolicy::kNone}, {"data", kvstore::FsyncPolicy::kData},
                {"full", kvstore::FsyncPolicy::kFull}});
  flags.Choice("--log-level", &log_level,
               {{"debug", "debug"}, {"info", "info"}, {"warn", "warn"}, {"error", "error"}, {"off", "off"}});
  if (int rc = flags.Parse(args)) return rc;
  for (const auto& key : out->api_keys)
    if (key.empty()) return UsageError("serve", "--api-key needs a non-empty value");
  for (const auto& name : out->served_names)
    if (name.empty()) return UsageError("serve", "--served-model-name needs a non-empty value");
  if (!positionals.empty()) out->model_dir = positionals[0];
  if (flags.given("--model-version")) out->model_version = version;
  if (flags.given("--swa-replay")) out->swa_replay = swa_replay;
  if (out->role != router::UnitRole::kBoth && out->kv_store_dir.empty())
    return UsageError("serve", "--role prefill and --role decode hand KV blocks over through --kv-store DIR");
  // A decode unit's prompt comes from the store without the window state: the exact replay recomputes it,
  // so that its tokens are a colocated unit's.
  if (out->role == router::UnitRole::kDecode && !out->swa_replay) out->swa_replay = engine::SwaReplay::kExact;
  out->thinking = !no_thinking;
  if (!log_level.empty()) {
    LogLevel level;
    ParseLogLevel(log_level, &level);
    SetLogLevel(level);
  }
  if (out->api_keys.empty())
    if (const char* env = std::getenv("DEEPINFER_API_KEY"); env && *env) out->api_keys.push_back(env);
  return 0;
}

// The KV store under the engine's prefix cache. A store that cannot be opened (a read-only or missing
// parent, another format, a directory that is not a store) is logged and the server runs on RAM alone.
std::unique_ptr<kvstore::KvStoreTier> OpenKvStore(const ServeArgs& args, const model::CausalLM& model) {
  const kvstore::StoreModel store_model{model.info().architecture, model.info().weights_fingerprint,
                                        model::ComputePrecisionName(args.precision),
                                        model::KvPrecisionName(model::KvPrecision::kF32)};
  auto layout = kvstore::StoreLayoutFor(model.cache_spec(), store_model);
  if (!layout.ok()) {
    DI_LOG(kWarn, "KV store not used").Field("dir", args.kv_store_dir).Field("reason", layout.status().message());
    return nullptr;
  }
  kvstore::StoreOptions o;
  o.dir = args.kv_store_dir;
  o.layout = std::move(*layout);
  o.fsync = args.kv_store_fsync;
  o.ttl_seconds = {args.kv_ttl_agent_s, args.kv_ttl_chat_s};
  o.sweep.capacity_bytes = args.kv_store_capacity;
  o.sweep_interval_s = args.kv_store_sweep_s;
  // Trash outlives a sweep period (readers elsewhere finish first) but not for long.
  o.sweep.trash_grace_s = std::min(30.0, std::max(1.0, 2 * args.kv_store_sweep_s));
  auto store = kvstore::Store::Open(std::move(o));
  if (!store.ok()) {
    DI_LOG(kWarn, "KV store unavailable; the prefix cache is RAM only")
        .Field("dir", args.kv_store_dir)
        .Field("reason", store.status().message());
    return nullptr;
  }
  return std::make_unique<kvstore::KvStoreTier>(std::move(*store), args.kv_ttl_class,
                                                kvstore::SnapshotWritesFor(args.role == router::UnitRole::kPrefill));
}

// The lease that registers this server with `deepinfer router --unit-dir` (router/lease_writer.h).
std::unique_ptr<router::LeaseWriter> NewUnitLease(const ServeArgs& args, const std::string& url,
                                                  const engine::Engine* engine, kvstore::KvStoreTier* kv_tier) {
  router::UnitLease lease;
  lease.pid = getpid();
  lease.unit_id = "unit-" + std::to_string(lease.pid) + "-" + url.substr(url.rfind(':') + 1);
  lease.url = url;
  lease.models = args.served_names;
  lease.version = DEEPINFER_VERSION;
  lease.ttl_ms = static_cast<int64_t>(args.unit_lease_ttl_s * 1000);
  lease.role = args.role;
  auto writer = std::make_unique<router::LeaseWriter>(args.unit_dir, std::move(lease), [engine] {
    router::UnitLoad load;
    const engine::EngineStats stats = engine->Stats();
    load.running = stats.num_requests_running;
    load.waiting = stats.num_requests_waiting;
    load.kv_usage = std::clamp(stats.kv_cache_usage, 0.0, 1.0);
    load.max_num_seqs = engine->info().max_num_seqs;
    load.queued_prefill_tokens = stats.queued_prefill_tokens;
    load.step_cost = stats.step_cost;
    load.calibrated = stats.step_cost_calibrated;
    return load;
  });
  // A role the planner asks for (router --apply-plan): prefill and decode units hand blocks over through the
  // store, and a decode unit's window state must be replayed exactly.
  const bool has_store = !args.kv_store_dir.empty();
  const bool in_unit = parallel::LauncherWorldSize() > 1;
  const bool exact_replay = args.swa_replay == engine::SwaReplay::kExact ||
                            (!args.swa_replay && engine && engine::DefaultSwaReplay(engine->info().architecture) ==
                                                               engine::SwaReplay::kExact);
  writer->EnableRoleSwitch({[engine] {
                              const engine::EngineStats s = engine->Stats();
                              return s.num_requests_running == 0 && s.num_requests_waiting == 0;
                            },
                            [has_store, exact_replay, in_unit](router::UnitRole role) {
                              if (role != router::UnitRole::kBoth && in_unit)
                                return Status::FailedPrecondition("a parallel unit serves both roles only");
                              if (role != router::UnitRole::kBoth && !has_store)
                                return Status::FailedPrecondition("prefill and decode roles need --kv-store");
                              if (role == router::UnitRole::kDecode && !exact_replay)
                                return Status::FailedPrecondition("a decode unit needs --swa-replay exact");
                              return Status::Ok();
                            },
                            [kv_tier](router::UnitRole role) {
                              const bool prefill = role == router::UnitRole::kPrefill;
                              if (kv_tier) kv_tier->SetSnapshotWrites(kvstore::SnapshotWritesFor(prefill));
                            }});
  return writer;
}

int RunServe(const std::vector<std::string>& argv) {
  ServeArgs args;
  if (int rc = ParseArgs(argv, &args)) return rc;

  // Signals are taken by sigwait on this thread alone: every thread started below inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  if (args.unit.data_parallel_size > 1 && parallel::LauncherWorldSize() == 1) {
    // Not started by mpirun: run the unit under it (parallel/launcher.h).
    auto code = parallel::RunUnderMpirun({.ranks = args.unit.data_parallel_size, .subcommand = "serve",
                                          .args = argv, .deadline_s = args.shutdown_grace_s + 30});
    if (!code.ok()) return Fail("serve", code.status().message());
    return *code;
  }
  // Each running sequence holds model state on the heap (hundreds of KiB for `small`, MiBs for real
  // models), made and freed per request. glibc raises its mmap threshold after the first such free, after
  // which those buffers come from the arenas and their pages mostly stay with the process: RSS then follows
  // the busiest moment so far, not the work in flight. A fixed threshold keeps large buffers mmapped, so
  // they go back when a request ends.
  mallopt(M_MMAP_THRESHOLD, 128 * 1024);
  // 1,000 streaming clients need more descriptors than the usual soft limit of 1,024.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  bool demo = false;
  if (args.model_dir.empty()) {
    auto dir = pipeline::DefaultModelDir();
    if (!dir.ok()) return Fail("serve", dir.status().message());
    args.model_dir = *dir;
    demo = true;
    if (args.served_names.empty()) args.served_names.push_back("deepinfer-small");
  }
  auto config = HfConfig::Load(args.model_dir);
  if (!config.ok()) return Fail("serve", config.status().message());
  if (!args.model_version) args.model_version = pipeline::ModelVersionFromConfig(*config);
  if (!args.model_version)
    return Fail("serve", "cannot tell the prompt encoding from model_type '" + config->model_type() +
                             "' (pass --model-version)");
  if (args.served_names.empty()) {
    std::error_code ec;
    args.served_names.push_back(fs::weakly_canonical(args.model_dir, ec).filename().string());
  }
  if (args.max_model_len == 0) args.max_model_len = std::min<int64_t>(config->GetInt("max_position_embeddings", 4096), 65536);

  // The model directory's tokenizer.json unless --tokenizer names another file, directory or builtin.
  auto tokenizer = tokenizer::LoadTokenizer(args.tokenizer_path.empty() ? args.model_dir : args.tokenizer_path);
  if (!tokenizer.ok()) return Fail("serve", tokenizer.status().message());

  // A parallel unit (docs/parallel.md): rank 0 serves HTTP; the other ranks run what it places on them.
  args.unit.lock_step = true;
  auto unit = parallel::Unit::Start(args.unit);
  if (!unit.ok()) return parallel::LauncherRank() == 0 ? Fail("serve", unit.status().message()) : 1;
  const bool front = (*unit)->leader();
  parallel::ExpertGroup* group = (*unit)->group();
  if (group != nullptr) {
    // (every rank runs the same model, so the ranks share one store; a prefill-only request's flush is rank 0's)
    if (args.role != router::UnitRole::kBoth)
      return front ? Fail("serve", "--role prefill and --role decode are not supported in a parallel unit") : 1;
    if (args.tbt_target_ms == engine::kDerivedTbtTarget) args.tbt_target_ms = 0;  // its calibration steps alone
  }

  server::ServiceOptions service_options;
  service_options.served_model_names = args.served_names;
  service_options.model_path = args.model_dir;
  service_options.api_keys = args.api_keys;
  service_options.model_version = *args.model_version;
  service_options.default_thinking_mode = args.thinking;
  service_options.max_model_len = args.max_model_len;
  service_options.version = DEEPINFER_VERSION;
  service_options.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  service_options.request_timeout_s = args.request_timeout_s;
  service_options.enable_test_hooks = args.enable_test_hooks;
  service_options.one_of_as_any_of = args.one_of_as_any_of;
  service_options.responses_store_max_entries = args.responses_store_max_entries;
  service_options.responses_store_ttl_s = args.responses_store_ttl_s;
  server::Service service(service_options, &*tokenizer);

  server::HttpServerOptions http_options;
  http_options.host = args.host;
  http_options.port = static_cast<int>(args.port);
  http_options.io_threads = static_cast<int>(args.io_threads);
  http_options.io_thread_slice_us = args.latency_slice_us;
  http_options.max_body_bytes = static_cast<size_t>(args.max_request_bytes);
  http_options.max_header_bytes = static_cast<size_t>(args.max_header_bytes);
  http_options.header_timeout_s = args.keep_alive_s;
  http_options.body_timeout_s = args.body_timeout_s;
  http_options.write_timeout_s = args.write_timeout_s;
  http_options.max_connections = static_cast<int>(args.max_connections);
  std::unique_ptr<server::HttpServer> http_server;
  if (front) {
    auto http = server::HttpServer::Create(http_options, &service);
    if (!http.ok()) return Fail("serve", http.status().message());
    http_server = std::move(*http);
    service.SetHttpServer(http_server.get());
  }

  // The engine, sized by its KV budget (EngineOptions::max_num_seqs 0 derives the concurrency).
  std::unique_ptr<kvstore::KvStoreTier> kv_tier;  // outlives the engine, which calls it
  std::unique_ptr<engine::Engine> engine;
  parallel::UnitFrontEngine* unit_front = nullptr;
  std::unique_ptr<parallel::UnitRankWorker> unit_worker;
  {
    model::LoadOptions load_options;
    load_options.precision = args.precision;
    load_options.progress = model::TerminalProgressBar("loading " + args.model_dir);
    load_options.drafting = args.speculative.uses_draft_layers();
    load_options.expert_exchange = (*unit)->expert_exchange();
    auto loaded = model::LoadCausalLM(args.model_dir, load_options);
    if (!loaded.ok() && load_options.drafting)
      return Fail("serve", "--speculative-config method \"" +
                               std::string(engine::DraftMethodName(args.speculative.method)) +
                               "\" needs the model's draft layers: " + loaded.status().message());
    if (!loaded.ok()) return Fail("serve", loaded.status().message());
    if (group != nullptr) {
      const std::string settings = std::string(DEEPINFER_VERSION) + " " + std::to_string(args.unit.expert_parallel) +
                                   " " + std::to_string(static_cast<int>(args.precision)) + " " +
                                   std::to_string(args.max_num_seqs) + " " + std::to_string(args.max_num_batched_tokens) +
                                   " " + std::to_string(args.kv_cache_bytes) + " " + std::to_string(args.max_model_len) +
                                   " " + parallel::EplbSettings(args.unit.eplb);
      if (Status s = group->CheckSameModel((*loaded)->info().weights_fingerprint, settings); !s.ok())
        return front ? Fail("serve", s.message()) : 1;
    }
    engine::EngineOptions engine_options;
    engine_options.tokenizer = &*tokenizer;
    engine_options.constraint_compiler = service.constraint_compiler();
    engine_options.kv_cache_bytes = args.kv_cache_bytes;
    engine_options.max_num_seqs = args.max_num_seqs;
    engine_options.max_num_batched_tokens = args.max_num_batched_tokens;
    engine_options.max_waiting = args.max_queued_requests;
    engine_options.enable_prefix_caching = !args.no_prefix_caching;
    engine_options.tbt_target_ms = args.tbt_target_ms;
    engine_options.window_ttl_s = args.window_ttl_s;
    // A long-running server holds its whole KV budget from the start: memory is flat under load.
    engine_options.prefault_kv = true;
    engine_options.output_thread_slice_us = args.latency_slice_us;
    // With many streams, a step's updates are encoded and written on every core at once; more threads
    // than cores only add wake-ups.
    engine_options.output_threads =
        args.output_threads > 0 ? static_cast<int>(args.output_threads)
                                : std::clamp(ThreadPool::Shared().size(), 1, 4);
    engine_options.compute_precision = args.precision;
    // Part of every block's name (and the store's namespace).
    engine_options.swa_replay = args.swa_replay.value_or(engine::DefaultSwaReplay((*loaded)->info().architecture));
    engine_options.speculative = args.speculative;
    if (!args.kv_store_dir.empty()) {
      kv_tier = OpenKvStore(args, **loaded);
      engine_options.lower_tier = kv_tier.get();
      engine_options.lower_tier_timeout_s = args.kv_store_timeout_s;
    }
    engine_options.step_group = (*unit)->step_group();
    std::unique_ptr<parallel::UnitFrontEngine> front_engine;
    if (group != nullptr && front) {
      front_engine = std::make_unique<parallel::UnitFrontEngine>(*group);
      group->set_mailbox(front_engine.get());
    } else if (group != nullptr) {
      unit_worker = std::make_unique<parallel::UnitRankWorker>();
      group->set_mailbox(unit_worker.get());
    }
    auto created = engine::Engine::Create(std::move(*loaded), engine_options);
    // A server that cannot generate does not start: it would report ready and answer every request 503.
    if (!created.ok()) {
      const bool sizing = created.status().code() == StatusCode::kResourceExhausted;
      return Fail("serve", created.status().message() + (sizing ? " (--kv-cache-memory-bytes, --max-num-seqs)" : ""));
    }
    engine = std::move(*created);
    if (front_engine) {
      front_engine->Attach(std::move(engine), args.max_num_batched_tokens);
      unit_front = front_engine.get();
      engine = std::move(front_engine);
      if (!kv_tier) service.SetExtraMetrics([unit_front] { return unit_front->PrometheusText(); });
    }
    if (unit_worker) unit_worker->Attach(engine.get());
    service.SetEngine(engine.get());
    if (kv_tier) {
      service.SetKvStoreFlush([tier = kv_tier.get()] { tier->Flush(); });
      service.SetExtraMetrics([tier = kv_tier.get(), eng = engine.get(), unit_front] {
        std::string text = unit_front != nullptr ? unit_front->PrometheusText() : std::string();
        tier->store().AppendPrometheus(&text);
        if (eng) server::AppendTierPrometheus(eng->Stats(), &text);
        return text;
      });
    }
  }

  if (!front) {
    // This rank runs what rank 0 places on it until rank 0 ends the unit.
    group->FinishAndWait();
    engine->Shutdown();
    return 0;
  }
  server::HttpServer& server = *http_server;
  DI_LOG(kInfo, "model").Field("dir", args.model_dir).Field("name", args.served_names.front())
      .Field("encoding", recipe::ModelVersionName(*args.model_version)).Field("max_model_len", args.max_model_len);
  if (demo)
    DI_LOG(kWarn, "serving the embedded default: a random-weight demo model (the `small` preset); its text is noise");
  server.Start();
  const std::string url = "http://" + (args.host.find(':') != std::string::npos ? "[" + args.host + "]" : args.host) +
                          ":" + std::to_string(server.port());
  DI_LOG(kInfo, "listening").Field("url", url);
  service.SetReady(true);
  DI_LOG(kInfo, "ready").Field("url", url).Field("model", args.served_names.front());
  std::unique_ptr<router::LeaseWriter> lease;
  if (!args.unit_dir.empty()) {
    lease = NewUnitLease(args, url, engine.get(), kv_tier.get());
    if (Status s = lease->Start(); !s.ok()) {
      service.StopBackgroundWork();  // before the engine goes
      return Fail("serve", "--unit-dir: " + s.message());
    }
  }

  int signal_number = 0;
  sigwait(&signals, &signal_number);
  DI_LOG(kInfo, "shutting down").Field("signal", signal_number == SIGINT ? "SIGINT" : "SIGTERM")
      .Field("grace_s", args.shutdown_grace_s);
  if (lease) lease->Stop();  // the router sends nothing more here
  service.SetDraining(true);
  server.StopAccepting();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(args.shutdown_grace_s);
  const timespec poll{0, 20 * 1000 * 1000};
  while (server.counters().exchanges_active > 0 && std::chrono::steady_clock::now() < deadline) {
    // A second signal cuts the grace short.
    if (sigtimedwait(&signals, nullptr, &poll) > 0) break;
  }
  const int64_t unfinished = server.counters().exchanges_active;
  service.StopBackgroundWork();  // what is queued there reaches the engine, and is cancelled with the rest
  server.CancelAll();
  if (engine) engine->Shutdown();
  server.Stop();
  DI_LOG(kInfo, "stopped").Field("cancelled_requests", unfinished);
  return 0;
}

const CommandRegistration kServeRegistration(
    {"serve", "OpenAI- and Anthropic-compatible HTTP server", kServeUsage, RunServe, LogLevel::kInfo});

}  // namespace
}  // namespace deepinfer::cli
