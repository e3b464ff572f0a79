// deepinfer bench server: a closed-loop HTTP load generator against a running OpenAI-compatible server
// (`deepinfer serve`, or a peer such as llama.cpp's llama_cpp.server).
//   requests/s of 1-token completions at 1, 16 and 256 connections (or of /tokenize, the transport and
//   service alone), with client-side latency percentiles and errors;
//   the chat workload: 16 keep-alive connections sending streaming chat requests of --stream-tokens
//   tokens back to back (streams/s, generated tokens/s, time to first token);
//   the server's own per-streamed-update overhead (deepinfer:http_stream_overhead_seconds, from the
//   engine's step thread handing the tokens over to the socket taking their bytes) after the chat run;
//   --hold N: N concurrent SSE streams kept open for --hold-seconds, with errors, the server's RSS over
//   time, the held streams' time to first token and time between tokens (p50/p99), and KV blocks still
//   used afterwards (scripts/soak_server.sh runs 1,000 for 10 minutes).
// --json FILE writes the figures; --peer FILE reads another system's (written by --json against it, e.g.
// by tools/peers/llama_cpp_peer.py) and prints them beside ours with the ratio.
// One blocking client thread per connection: on loopback a thread per socket is the simplest client
// that cannot itself serialize the connections.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "bench/http_client.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/mapped_file.h"

namespace deepinfer::bench {
namespace {

constexpr const char* kServerUsage =
    "usage: deepinfer bench server [--url http://127.0.0.1:8000] [--model NAME] [options]\n\n"
    "Drives a running OpenAI-compatible server over loopback HTTP/1.1 keep-alive connections.\n\n"
    "  --url URL             the server (http://HOST:PORT, default http://127.0.0.1:8000)\n"
    "  --model NAME          the served model name (default: the first of /v1/models)\n"
    "  --endpoint completions|tokenize   what the requests/s runs send: 1-token completions (default) or\n"
    "                        /tokenize (transport and service without generation)\n"
    "  --connections LIST    concurrent connections per run (default 1,16,256)\n"
    "  --seconds S           length of each run (default 10)\n"
    "  --stream-tokens N     tokens per stream of the chat workload (default 64; 0 skips it)\n"
    "  --stream-connections N   connections of the chat workload (default 16)\n"
    "  --hold N              also hold N concurrent streams (default 0: skip); each connection streams\n"
    "                        chats of --hold-tokens tokens back to back, so N streams stay open throughout\n"
    "  --hold-seconds S      how long (default 600)\n"
    "  --hold-tokens N       tokens per held stream (default 256)\n"
    "  --system NAME         what --json calls the system measured (default deepinfer)\n"
    "  --json FILE           write the figures as JSON\n"
    "  --peer FILE           another system's figures (from --json) to print beside these, with the ratio\n";

// One sample of /metrics by exact name (with labels), or -1.
double Metric(const std::string& metrics, const std::string& name) {
  size_t at = 0;
  while ((at = metrics.find(name, at)) != std::string::npos) {
    if ((at == 0 || metrics[at - 1] == '\n') && metrics.size() > at + name.size() && metrics[at + name.size()] == ' ')
      return std::strtod(metrics.c_str() + at + name.size() + 1, nullptr);
    at += name.size();
  }
  return -1;
}

struct ClosedLoopResult {
  int64_t ok = 0, errors = 0;
  LatencyHistogram latency;
};

// `request(n)` is the n-th request of the run (n counts over all connections).
void ClosedLoop(const Url& url, int connections, double seconds, const std::function<std::string(int64_t)>& request,
                ClosedLoopResult& result) {
  std::atomic<int64_t> ok{0}, errors{0}, sent{0};
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::vector<std::thread> threads;
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back([&] {
      Connection c(url);
      if (!c.ok()) {
        errors.fetch_add(1);
        return;
      }
      while (std::chrono::steady_clock::now() < deadline) {
        Stopwatch w;
        const int status = c.Exchange(request(sent.fetch_add(1)), [](std::string_view) { return true; });
        if (status == 200) {
          ok.fetch_add(1);
          result.latency.Record(w.ElapsedSeconds());
        } else {
          errors.fetch_add(1);
          if (status < 0) return;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  result.ok = ok.load();
  result.errors = errors.load();
}

// The chat workload's client: streaming requests back to back on each connection; per stream the time to
// the first generated text and the tokens generated (the usage chunk's completion_tokens where the server
// sends one for stream_options.include_usage, as deepinfer does; else the events carrying text, one per
// token in llama_cpp.server).
struct ChatResult {
  int64_t streams = 0, errors = 0, tokens = 0;
  double wall = 0;
  LatencyHistogram ttft;
};

void ChatLoop(const Url& url, int connections, double seconds, const std::string& request, ChatResult& result) {
  std::mutex mu;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  Stopwatch wall;
  std::vector<std::thread> threads;
  for (int i = 0; i < connections; ++i) {
    threads.emplace_back([&] {
      Connection c(url);
      int64_t streams = 0, errors = 0, tokens = 0;
      LatencyHistogram ttft;
      if (!c.ok()) errors = 1;
      while (c.ok() && std::chrono::steady_clock::now() < deadline) {
        Stopwatch w;
        std::string body;
        double first = -1;
        int64_t text_events = 0;
        size_t scanned = 0;
        const int status = c.Exchange(request, [&](std::string_view d) {
          body.append(d);
          size_t end, next;
          while ((end = EventEnd(body, scanned, &next)) != std::string::npos) {
            if (CarriesText(std::string_view(body).substr(scanned, end - scanned))) {
              ++text_events;
              if (first < 0) first = w.ElapsedSeconds();
            }
            scanned = next;
          }
          return true;
        });
        if (status == 200 && body.find("data: [DONE]") != std::string::npos) {
          ++streams;
          const int64_t n = CompletionTokens(body);
          tokens += n >= 0 ? n : text_events;
          if (first >= 0) ttft.Record(first);
        } else {
          ++errors;
          if (status < 0) break;
        }
      }
      std::lock_guard lock(mu);
      result.streams += streams;
      result.errors += errors;
      result.tokens += tokens;
      result.ttft.Merge(ttft);
    });
  }
  for (auto& t : threads) t.join();
  result.wall = wall.ElapsedSeconds();
}

// Figures of one system, as --json writes them and --peer reads them.
struct ServerFigures {
  std::string system = "peer";
  std::map<int64_t, double> completions_rps;  // connections -> requests/s
  double chat_tokens_per_s = -1, chat_streams_per_s = -1, chat_ttft_p50_ms = -1;
};

Result<ServerFigures> LoadFigures(const std::string& path) {
  DI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto parsed = ParseJson(text);
  if (!parsed.ok()) return Status::InvalidArgument(path + ": " + parsed.status().message());
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object()) return Status::InvalidArgument(path + ": not a JSON object");
  ServerFigures f;
  if (auto it = doc.find("system"); it != doc.end() && it->is_string()) f.system = it->get<std::string>();
  if (auto it = doc.find("completions"); it != doc.end() && it->is_object()) {
    for (const auto& [k, v] : it->items()) {
      if (!v.is_object() || !v.contains("requests_per_s") || !v["requests_per_s"].is_number())
        return Status::InvalidArgument(path + ": completions." + k + ".requests_per_s must be a number");
      f.completions_rps[std::atoll(k.c_str())] = v["requests_per_s"].get<double>();
    }
  }
  if (auto it = doc.find("chat"); it != doc.end() && it->is_object()) {
    auto number = [&](const char* key, double* out) {
      if (auto v = it->find(key); v != it->end() && v->is_number()) *out = v->get<double>();
    };
    number("tokens_per_s", &f.chat_tokens_per_s);
    number("streams_per_s", &f.chat_streams_per_s);
    number("ttft_p50_ms", &f.chat_ttft_p50_ms);
  }
  return f;
}

int RunBenchServer(const std::vector<std::string>& args) {
  std::string url_text = "http://127.0.0.1:8000", model, endpoint = "completions", system = "deepinfer", json_path,
              peer_path;
  std::vector<int64_t> connections = {1, 16, 256};
  double seconds = 10, hold_seconds = 600;
  int64_t stream_tokens = 64, stream_connections = 16, hold = 0, hold_tokens = 256;
  cli::Flags flags("bench server");
  flags.String("--url", &url_text);
  flags.String("--model", &model);
  flags.Choice("--endpoint", &endpoint, {{"completions", "completions"}, {"tokenize", "tokenize"}});
  flags.IntList("--connections", &connections, 1, 4096, 16);
  flags.Double("--seconds", &seconds, 0.1, 3600);
  flags.Int<int64_t>("--stream-tokens", &stream_tokens, 0, 1 << 20);
  flags.Int<int64_t>("--stream-connections", &stream_connections, 1, 4096);
  flags.Int<int64_t>("--hold", &hold, 0, 20000);
  flags.Double("--hold-seconds", &hold_seconds, 1, 86400);
  flags.Int<int64_t>("--hold-tokens", &hold_tokens, 1, 1 << 20);
  flags.String("--system", &system);
  flags.Path("--json", &json_path);
  flags.Path("--peer", &peer_path);
  if (int rc = flags.Parse(args)) return rc;
  ServerFigures peer;
  const bool with_peer = !peer_path.empty();
  if (with_peer) {
    auto loaded = LoadFigures(peer_path);
    if (!loaded.ok()) return cli::Fail("bench server", loaded.status().message());
    peer = std::move(*loaded);
  }
  // Peer value and ratio cells; the ratio says how many times better ours is (for a figure where lower is
  // better, theirs / ours).
  auto peer_cells = [&](double theirs, double ours, bool lower_is_better = false) {
    if (!with_peer) return std::string();
    char cell[64];
    if (theirs < 0) return std::string("        n/a      n/a");
    std::snprintf(cell, sizeof cell, " %10.1f %8s", theirs,
                  (lower_is_better ? Ratio(theirs, ours) : Ratio(ours, theirs)).c_str());
    return std::string(cell);
  };
  const Url url = ParseUrl(url_text);
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
  const std::string models = Fetch(url, "/v1/models");
  if (models.empty()) return cli::Fail("bench server", "no server answers at " + url_text);
  if (model.empty()) {
    auto parsed = nlohmann::json::parse(models, nullptr, false);
    if (parsed.is_discarded() || !parsed.contains("data") || parsed["data"].empty())
      return cli::Fail("bench server", "cannot read /v1/models");
    model = parsed["data"][0].value("id", "");
  }
  const std::string name_json = nlohmann::json(model).dump();
  nlohmann::ordered_json out;
  out["system"] = system;
  out["url"] = url_text;
  out["model"] = model;
  out["seconds_per_run"] = seconds;

  std::printf("deepinfer bench server: %s (%s), model %s, %.0f s per run\n", url_text.c_str(), system.c_str(),
              model.c_str(), seconds);
  if (with_peer) std::printf("peer: %s (from %s)\n", peer.system.c_str(), peer_path.c_str());
  std::printf("\n%s\n", endpoint == "completions" ? "1-token completions (/v1/completions, max_tokens 1)" : "/tokenize");
  std::printf("%12s %10s %10s %10s %10s %8s%s\n", "connections", "req/s", "p50 ms", "p99 ms", "ok", "errors",
              with_peer && endpoint == "completions" ? "  peer req/s    ratio" : "");
  // Each completion's prompt differs from the one before it ("Hello #n"): a server that keeps the last
  // prompt's state (llama_cpp.server does, in one slot) would otherwise answer a repeat of it without running
  // the model, which no real workload of distinct requests gets.
  const auto request = [&](int64_t n) {
    return endpoint == "completions"
               ? Post("/v1/completions", "{\"model\":" + name_json + ",\"prompt\":\"Hello #" + std::to_string(n) +
                                             "\",\"max_tokens\":1,\"temperature\":0}")
               : Post("/tokenize", "{\"model\":" + name_json + ",\"prompt\":\"Hello, how are you today?\"}");
  };
  for (const int64_t c : connections) {
    Stopwatch w;
    ClosedLoopResult r;
    ClosedLoop(url, static_cast<int>(c), seconds, request, r);
    const double wall = w.ElapsedSeconds();
    const double rps = r.ok / wall;
    const auto theirs = peer.completions_rps.find(c);
    std::printf("%12lld %10.0f %10.3f %10.3f %10lld %8lld%s\n", static_cast<long long>(c), rps,
                r.latency.Percentile(0.5) * 1e3, r.latency.Percentile(0.99) * 1e3, static_cast<long long>(r.ok),
                static_cast<long long>(r.errors),
                endpoint == "completions" ? peer_cells(theirs == peer.completions_rps.end() ? -1 : theirs->second, rps).c_str() : "");
    out[endpoint][std::to_string(c)] = {{"requests_per_s", rps}, {"p50_ms", r.latency.Percentile(0.5) * 1e3},
                                        {"p99_ms", r.latency.Percentile(0.99) * 1e3}, {"ok", r.ok}, {"errors", r.errors}};
  }

  // The chat workload: the same request body for every system. Extensions a server does not know are
  // ignored by it (ignore_eos keeps deepinfer's random-weight demo from stopping early; thinking off
  // makes the tokens content).
  const std::string stream_body = "{\"model\":" + name_json +
                                  ",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                                  "\"stream\":true,\"stream_options\":{\"include_usage\":true},\"ignore_eos\":true,"
                                  "\"temperature\":0,\"thinking\":{\"type\":\"disabled\"},\"max_tokens\":";
  if (stream_tokens > 0) {
    ChatResult r;
    ChatLoop(url, static_cast<int>(stream_connections), seconds,
             Post("/v1/chat/completions", stream_body + std::to_string(stream_tokens) + "}"), r);
    const double tokens_per_s = r.tokens / r.wall, streams_per_s = r.streams / r.wall;
    std::printf("\nchat workload: %lld streaming connections, up to %lld tokens per stream: %lld streams, %lld errors\n",
                static_cast<long long>(stream_connections), static_cast<long long>(stream_tokens),
                static_cast<long long>(r.streams), static_cast<long long>(r.errors));
    std::printf("%-26s %10s%s\n", "", "ours", with_peer ? "       peer    ratio" : "");
    std::printf("%-26s %10.1f%s\n", "generated tokens/s", tokens_per_s, peer_cells(peer.chat_tokens_per_s, tokens_per_s).c_str());
    std::printf("%-26s %10.2f%s\n", "streams/s", streams_per_s, peer_cells(peer.chat_streams_per_s, streams_per_s).c_str());
    const double ttft = r.ttft.Percentile(0.5) * 1e3;
    std::printf("%-26s %10.1f%s\n", "time to first token p50 ms", ttft, peer_cells(peer.chat_ttft_p50_ms, ttft, true).c_str());
    std::printf("%-26s %10.1f\n", "time to first token p99 ms", r.ttft.Percentile(0.99) * 1e3);
    out["chat"] = {{"connections", stream_connections}, {"max_tokens", stream_tokens}, {"streams", r.streams},
                   {"errors", r.errors}, {"tokens", r.tokens}, {"tokens_per_s", tokens_per_s},
                   {"streams_per_s", streams_per_s}, {"ttft_p50_ms", ttft}, {"ttft_p99_ms", r.ttft.Percentile(0.99) * 1e3}};
    const std::string metrics = Fetch(url, "/metrics");
    // A /metrics summary in microseconds: {p50, p99}, or nothing when the server does not report it.
    const auto summary_us = [&](const std::string& name) -> std::optional<std::pair<double, double>> {
      if (Metric(metrics, name + "_count") <= 0) return std::nullopt;
      return std::make_pair(Metric(metrics, name + "{quantile=\"0.5\"}") * 1e6,
                            Metric(metrics, name + "{quantile=\"0.99\"}") * 1e6);
    };
    if (const auto overhead = summary_us("deepinfer:http_stream_overhead_seconds")) {
      const double count = Metric(metrics, "deepinfer:http_stream_overhead_seconds_count");
      std::printf("server overhead per streamed update (engine step thread -> socket, since start): p50 %.1f us, "
                  "p99 %.1f us over %.0f updates (goal < 50 us)\n", overhead->first, overhead->second, count);
      out["stream_overhead_us"] = {{"p50", overhead->first}, {"p99", overhead->second}, {"updates", count}};
      const struct {
        const char* metric;
        const char* label;
        const char* key;
      } parts[] = {
          {"deepinfer:http_stream_handoff_seconds",
           "  of which the hand-off (step thread -> update handled on the output thread)", "stream_handoff_us"},
          {"deepinfer:http_stream_delivery_seconds",
           "  the server's own work per update (its events made and sent, without the wait before it)",
           "stream_delivery_us"},
      };
      for (const auto& part : parts) {
        if (const auto us = summary_us(part.metric)) {
          std::printf("%s: p50 %.1f us, p99 %.1f us\n", part.label, us->first, us->second);
          out[part.key] = {{"p50", us->first}, {"p99", us->second}};
        }
      }
    } else {
      std::printf("server overhead per streamed update: not reported by this server\n");
    }
  }

  if (hold > 0) {
    std::printf("\nholding %lld streams for %.0f s\n", static_cast<long long>(hold), hold_seconds);
    std::atomic<int64_t> errors{0}, events{0}, open{0}, completed{0};
    std::atomic<bool> stop{false};
    std::mutex hold_mu;
    LatencyHistogram hold_ttft, hold_tbt;  // per stream: to its first text event; between its text events
    std::vector<std::thread> threads;
    const std::string request_hold = Post("/v1/chat/completions", stream_body + std::to_string(hold_tokens) + "}");
    for (int64_t i = 0; i < hold; ++i) {
      threads.emplace_back([&] {
        Connection c(url);
        if (!c.ok()) return (void)errors.fetch_add(1);
        open.fetch_add(1);
        LatencyHistogram ttft, tbt;
        // A stream that ends is replaced by the next one on the same connection: N stay open throughout.
        while (!stop.load()) {
          bool done = false;
          Stopwatch w;
          std::string body;
          size_t scanned = 0;
          double last = -1;
          const int status = c.Exchange(request_hold, [&](std::string_view d) {
            events.fetch_add(1);
            body.append(d);
            size_t end, next;
            while ((end = EventEnd(body, scanned, &next)) != std::string::npos) {
              const std::string_view event = std::string_view(body).substr(scanned, end - scanned);
              if (CarriesText(event)) {
                const double now = w.ElapsedSeconds();
                if (last < 0) {
                  ttft.Record(now);
                } else {
                  tbt.Record(now - last);
                }
                last = now;
              }
              if (event.find("data: [DONE]") != std::string_view::npos) done = true;
              scanned = next;
            }
            body.erase(0, scanned);  // only the unfinished event is kept
            scanned = 0;
            return !stop.load();
          }, hold_seconds + 60);
          if (stop.load()) break;
          if (status == 200 && done) {
            completed.fetch_add(1);
          } else {
            errors.fetch_add(1);
            if (status < 0) break;
          }
        }
        open.fetch_sub(1);
        std::lock_guard lock(hold_mu);
        hold_ttft.Merge(ttft);
        hold_tbt.Merge(tbt);
      });
    }
    nlohmann::ordered_json samples = nlohmann::ordered_json::array();
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < hold_seconds) {
      std::this_thread::sleep_for(std::chrono::seconds(std::min<int>(30, static_cast<int>(hold_seconds))));
      const std::string metrics = Fetch(url, "/metrics");
      const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const double rss = Metric(metrics, "process_resident_memory_bytes") / (1 << 20);
      const double running = Metric(metrics, "deepinfer:num_requests_running{model_name=\"" + model + "\"}");
      std::printf("  t=%5.0f s  open %lld  running %.0f  events %lld  completed %lld  errors %lld  server RSS %.1f MiB\n",
                  t, static_cast<long long>(open.load()), running, static_cast<long long>(events.load()),
                  static_cast<long long>(completed.load()), static_cast<long long>(errors.load()), rss);
      std::fflush(stdout);
      samples.push_back({{"t_s", t}, {"open", open.load()}, {"running", running}, {"events", events.load()},
                         {"completed", completed.load()}, {"errors", errors.load()}, {"rss_mib", rss}});
    }
    stop.store(true);
    for (auto& t : threads) t.join();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const std::string metrics = Fetch(url, "/metrics");
    const double used = Metric(metrics, "deepinfer:kv_blocks_used{model_name=\"" + model + "\"}");
    const double window_used = Metric(metrics, "deepinfer:window_blocks_used{model_name=\"" + model + "\"}");
    std::printf("after closing: %lld streams completed, errors %lld, KV blocks used %.0f, window blocks used %.0f\n",
                static_cast<long long>(completed.load()), static_cast<long long>(errors.load()), used, window_used);
    std::printf("held streams: time to first token p50 %.1f ms p99 %.1f ms; between tokens p50 %.1f ms p99 %.1f ms\n",
                hold_ttft.Percentile(0.5) * 1e3, hold_ttft.Percentile(0.99) * 1e3, hold_tbt.Percentile(0.5) * 1e3,
                hold_tbt.Percentile(0.99) * 1e3);
    out["hold"] = {{"streams", hold}, {"seconds", hold_seconds}, {"tokens_per_stream", hold_tokens},
                   {"completed", completed.load()}, {"errors", errors.load()}, {"kv_blocks_used_after", used},
                   {"window_blocks_used_after", window_used},
                   {"ttft_ms", {{"p50", hold_ttft.Percentile(0.5) * 1e3}, {"p99", hold_ttft.Percentile(0.99) * 1e3}}},
                   {"tbt_ms", {{"p50", hold_tbt.Percentile(0.5) * 1e3}, {"p99", hold_tbt.Percentile(0.99) * 1e3}}},
                   {"samples", samples}};
  }
  if (!json_path.empty()) {
    std::ofstream file(json_path, std::ios::trunc);
    file << out.dump(2) << "\n";
    if (!file) return cli::Fail("bench server", "cannot write " + json_path);
  }
  return 0;
}

const cli::BenchRegistration kServerRegistration(
    {"server", "HTTP server: req/s, per-token overhead, held streams", kServerUsage, RunBenchServer});

}  // namespace
}  // namespace deepinfer::bench
