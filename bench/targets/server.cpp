// deepinfer bench server: a closed-loop HTTP load generator against a running `deepinfer serve`.
//   requests/s of 1-token completions at 1, 16 and 256 connections (or of /tokenize, the transport and
//   service alone), with client-side latency percentiles and errors;
//   the server's own per-streamed-update overhead (deepinfer:http_stream_overhead_seconds, from the
//   engine handing an update over to the socket taking its bytes) after a streaming run;
//   --hold N: N concurrent SSE streams kept open for --hold-seconds, with errors, the server's RSS over
//   time and KV blocks still used afterwards.
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
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"

namespace deepinfer::bench {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer bench server [--url http://127.0.0.1:8000] [--model NAME] [options]\n\n"
    "Drives a running `deepinfer serve` over loopback HTTP/1.1 keep-alive connections.\n\n"
    "  --url URL             the server (http://HOST:PORT, default http://127.0.0.1:8000)\n"
    "  --model NAME          the served model name (default: the first of /v1/models)\n"
    "  --endpoint completions|tokenize   what the requests/s runs send: 1-token completions (default) or\n"
    "                        /tokenize (transport and service without generation)\n"
    "  --connections LIST    concurrent connections per run (default 1,16,256)\n"
    "  --seconds S           length of each run (default 10)\n"
    "  --stream-tokens N     tokens per stream of the overhead run (default 64; 0 skips it)\n"
    "  --hold N              also hold N concurrent streams (default 0: skip)\n"
    "  --hold-seconds S      how long (default 600)\n";

struct Url {
  std::string host = "127.0.0.1";
  int port = 8000;
};

class Connection {
 public:
  explicit Connection(const Url& url) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(url.port));
    inet_pton(AF_INET, url.host.c_str(), &addr.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    int one = 1;
    if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  // Sends one request and reads its whole response; `on_data` sees the de-chunked body as it arrives
  // and may return false to stop reading (the connection is then unusable). Returns the status, or -1.
  template <typename OnData>
  int Exchange(const std::string& request, OnData on_data, double timeout_s = 60) {
    if (!SendAll(request)) return -1;
    std::string head;
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!Fill(timeout_s)) return -1;
    head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    const int status = std::atoi(head.c_str() + 9);
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("transfer-encoding: chunked") != std::string::npos) {
      while (true) {
        size_t line;
        while ((line = buffer_.find("\r\n")) == std::string::npos)
          if (!Fill(timeout_s)) return -1;
        const size_t size = std::strtoul(buffer_.c_str(), nullptr, 16);
        while (buffer_.size() < line + 2 + size + 2)
          if (!Fill(timeout_s)) return -1;
        if (size == 0) {
          buffer_.erase(0, line + 4);
          break;
        }
        if (!on_data(std::string_view(buffer_).substr(line + 2, size))) return status;
        buffer_.erase(0, line + 2 + size + 2);
      }
    } else {
      const size_t cl = lower.find("content-length: ");
      const size_t length = cl == std::string::npos ? 0 : std::strtoul(lower.c_str() + cl + 16, nullptr, 10);
      while (buffer_.size() < length)
        if (!Fill(timeout_s)) return -1;
      on_data(std::string_view(buffer_).substr(0, length));
      buffer_.erase(0, length);
    }
    return status;
  }

 private:
  bool SendAll(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool Fill(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}
std::string Get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n"; }

// GET on a fresh connection; the body, or "" on failure.
std::string Fetch(const Url& url, const std::string& path) {
  Connection c(url);
  std::string body;
  if (!c.ok() || c.Exchange(Get(path), [&](std::string_view d) { body.append(d); return true; }) != 200) return "";
  return body;
}

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

struct RunResult {
  int64_t ok = 0, errors = 0;
  LatencyHistogram latency;
};

void ClosedLoop(const Url& url, int connections, double seconds, const std::string& request, RunResult& result) {
  std::atomic<int64_t> ok{0}, errors{0};
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
        const int status = c.Exchange(request, [](std::string_view) { return true; });
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

int RunBenchServer(const std::vector<std::string>& args) {
  std::string url_text = "http://127.0.0.1:8000", model, endpoint = "completions";
  std::vector<int64_t> connections = {1, 16, 256};
  double seconds = 10, hold_seconds = 600;
  int64_t stream_tokens = 64, hold = 0;
  cli::Flags flags("bench server");
  flags.String("--url", &url_text);
  flags.String("--model", &model);
  flags.Choice("--endpoint", &endpoint, {{"completions", "completions"}, {"tokenize", "tokenize"}});
  flags.IntList("--connections", &connections, 1, 4096, 16);
  flags.Double("--seconds", &seconds, 0.1, 3600);
  flags.Int<int64_t>("--stream-tokens", &stream_tokens, 0, 1 << 20);
  flags.Int<int64_t>("--hold", &hold, 0, 20000);
  flags.Double("--hold-seconds", &hold_seconds, 1, 86400);
  if (int rc = flags.Parse(args)) return rc;
  Url url;
  {
    std::string rest = url_text;
    if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
    const size_t colon = rest.rfind(':');
    url.host = rest.substr(0, colon);
    if (colon != std::string::npos) url.port = std::atoi(rest.c_str() + colon + 1);
    if (url.host == "localhost") url.host = "127.0.0.1";
  }
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

  std::printf("deepinfer bench server: %s, model %s, %s, %.0f s per run\n", url_text.c_str(), model.c_str(),
              endpoint == "completions" ? "1-token completions" : "/tokenize", seconds);
  std::printf("%12s %10s %10s %10s %10s %8s\n", "connections", "req/s", "p50 ms", "p99 ms", "ok", "errors");
  const std::string request =
      endpoint == "completions"
          ? Post("/v1/completions", "{\"model\":" + name_json + ",\"prompt\":\"Hello\",\"max_tokens\":1,\"temperature\":0}")
          : Post("/tokenize", "{\"model\":" + name_json + ",\"prompt\":\"Hello, how are you today?\"}");
  for (const int64_t c : connections) {
    Stopwatch w;
    RunResult r;
    ClosedLoop(url, static_cast<int>(c), seconds, request, r);
    const double wall = w.ElapsedSeconds();
    std::printf("%12lld %10.0f %10.3f %10.3f %10lld %8lld\n", static_cast<long long>(c), r.ok / wall,
                r.latency.Percentile(0.5) * 1e3, r.latency.Percentile(0.99) * 1e3, static_cast<long long>(r.ok),
                static_cast<long long>(r.errors));
  }

  const std::string stream_body = "{\"model\":" + name_json +
                                  ",\"messages\":[{\"role\":\"user\",\"content\":\"Tell me a story.\"}],"
                                  "\"stream\":true,\"ignore_eos\":true,\"thinking\":{\"type\":\"disabled\"},\"max_tokens\":";
  if (stream_tokens > 0) {
    RunResult r;
    ClosedLoop(url, 16, seconds, Post("/v1/chat/completions", stream_body + std::to_string(stream_tokens) + "}"), r);
    const std::string metrics = Fetch(url, "/metrics");
    std::printf("\nstreaming, 16 connections, %lld tokens each: %lld streams ok, %lld errors\n",
                static_cast<long long>(stream_tokens), static_cast<long long>(r.ok), static_cast<long long>(r.errors));
    std::printf("server overhead per streamed update (engine hand-over -> socket): p50 %.1f us, p99 %.1f us over %.0f "
                "updates (goal < 50 us)\n",
                Metric(metrics, "deepinfer:http_stream_overhead_seconds{quantile=\"0.5\"}") * 1e6,
                Metric(metrics, "deepinfer:http_stream_overhead_seconds{quantile=\"0.99\"}") * 1e6,
                Metric(metrics, "deepinfer:http_stream_overhead_seconds_count"));
  }

  if (hold > 0) {
    std::printf("\nholding %lld streams for %.0f s\n", static_cast<long long>(hold), hold_seconds);
    std::atomic<int64_t> errors{0}, events{0}, open{0};
    std::atomic<bool> stop{false};
    std::vector<std::thread> threads;
    const std::string request_hold = Post("/v1/chat/completions", stream_body + "1000000}");
    for (int64_t i = 0; i < hold; ++i) {
      threads.emplace_back([&] {
        Connection c(url);
        if (!c.ok()) return (void)errors.fetch_add(1);
        open.fetch_add(1);
        const int status = c.Exchange(request_hold, [&](std::string_view) {
          events.fetch_add(1);
          return !stop.load();
        }, hold_seconds + 60);
        if (status != 200 && !stop.load()) errors.fetch_add(1);
        open.fetch_sub(1);
      });
    }
    const auto start = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < hold_seconds) {
      std::this_thread::sleep_for(std::chrono::seconds(std::min<int>(30, static_cast<int>(hold_seconds))));
      const std::string metrics = Fetch(url, "/metrics");
      std::printf("  t=%5.0f s  open %lld  events %lld  errors %lld  server RSS %.1f MiB\n",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
                  static_cast<long long>(open.load()), static_cast<long long>(events.load()),
                  static_cast<long long>(errors.load()), Metric(metrics, "process_resident_memory_bytes") / (1 << 20));
      std::fflush(stdout);
    }
    stop.store(true);
    for (auto& t : threads) t.join();
    std::this_thread::sleep_for(std::chrono::seconds(2));
    const std::string metrics = Fetch(url, "/metrics");
    std::printf("after closing: errors %lld, KV blocks used %.0f\n", static_cast<long long>(errors.load()),
                Metric(metrics, "deepinfer:kv_blocks_used{model_name=\"" + model + "\"}"));
  }
  return 0;
}

const cli::BenchRegistration kRegistration({"server", "HTTP server: req/s, per-token overhead, held streams", kUsage,
                                            RunBenchServer});

}  // namespace
}  // namespace deepinfer::bench
