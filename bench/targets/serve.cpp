// deepinfer bench serve: one streaming workload against one or two OpenAI-compatible servers (ours and a
// peer such as llama.cpp's llama-server), one server at a time, with the same requests:
//   cold and warm rounds at each concurrency: every client sends its own prompts of --prompt-tokens words
//   (streamed completions of --output-tokens tokens); the warm round re-sends the cold round's prompts
//   after --warm-after-s seconds;
//   --agent: sessions that each run several chat turns, each turn re-sending the shared system prompt, the
//   whole conversation so far, the last answer and a new message, with think time between turns.
// --interleave runs both servers' workloads in one span instead of one after the other, still sending requests
// to one server at a time: the rounds alternate (ours cold, the peer's cold, the pause, ours warm, the peer's
// warm), and both servers' agent sessions think at once while a turn waits for the other server's requests in
// flight to end. A run whose pauses and think times are minutes long then takes about half as long.
// Per phase: time to first token and inter-token latency percentiles and output tokens/s (all clients'
// tokens over the phase's wall time; an agent phase's over the time its requests were in flight); with --peer-url, the peer's beside ours with the ratio (how many times
// better ours is).
// Inter-token latency is counted by token where the stream says how many tokens each event carries (vLLM's
// and ours: `token_ids`, asked for with return_token_ids; llama-server's: `timings.predicted_n`, asked for
// with timings_per_token): the gap before an event of k tokens counts as k gaps of a k-th of it. A server
// holds back a token that ends inside a UTF-8 character (random weights emit many) and sends its text with
// the next one, so by event that gap would span two steps, and its share of the tokens (about 1% here) is
// where a p99 lies: by token the figure measures the steps. A stream that reports neither is counted by
// event; the output says which, and how many events carried several tokens.
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "bench/http_client.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"

namespace deepinfer::bench {
namespace {

constexpr const char* kServeUsage =
    "usage: deepinfer bench serve [--url URL] [--peer-url URL] [options]\n\n"
    "Streams the same workload through each server in turn (start one server at a time, or give two\n"
    "that do not share the machine's cores) and prints TTFT and inter-token latency percentiles and\n"
    "output tokens/s, the peer's beside ours with ratios.\n\n"
    "  --url URL              our server (default http://127.0.0.1:8000)\n"
    "  --peer-url URL         the peer's (e.g. llama-server); omitted: ours alone\n"
    "  --model NAME, --peer-model NAME   served model names (default: the first of /v1/models)\n"
    "  --name NAME, --peer-name NAME     what the table calls them (default deepinfer, peer)\n"
    "  --prompt-tokens N|MIN,MAX   words per prompt (about one token each; default 512); MIN,MAX draws each\n"
    "                         prompt's length uniformly from that range (seeded, the same for every server)\n"
    "  --output-tokens N      tokens per completion (default 128; the end of text is ignored)\n"
    "  --concurrency LIST     concurrent clients of the cold and warm rounds (default 1,4,16)\n"
    "  --requests-per-client N   prompts each client sends per round (default 2)\n"
    "  --warm-after-s S       pause between a concurrency's cold and warm rounds (default 0)\n"
    "  --no-rounds            skip the cold and warm rounds\n"
    "  --agent                the multi-turn agent workload\n"
    "  --agent-sessions N     concurrent sessions (default 8)\n"
    "  --agent-turns N        turns per session (default 6)\n"
    "  --system-tokens N      words of the system prompt every session shares (default 2048)\n"
    "  --message-tokens N     words of each new user message (default 64)\n"
    "  --think-s MIN,MAX      seconds between a session's turns, uniform (default 60,300); the agent's\n"
    "                         tokens/s are over the time its requests were in flight, thinking excluded\n"
    "  --seed N               the prompts' words (default 1)\n"
    "  --interleave           with --peer-url: both servers' workloads in one span (rounds alternate, agent\n"
    "                         sessions think at once), requests still sent to one server at a time\n"
    "  --json FILE            write every figure as JSON\n\n"
    "Inter-token latency is counted by token where the stream reports each event's tokens (token_ids,\n"
    "timings.predicted_n): an event of k tokens (text held back for an incomplete UTF-8 character) counts\n"
    "as k gaps of a k-th of its gap; otherwise by event. The output says which.\n";

// Short common English words, about one token each with their leading space in BPE vocabularies.
constexpr const char* kOneTokenWords[] = {
    "the", "cat", "sat", "on", "a", "mat", "and", "dog", "ran", "to", "it", "was", "red", "blue", "big", "old",
    "new", "day", "sun", "sky", "sea", "man", "car", "road", "tree", "book", "door", "hand", "eye", "time",
    "year", "way", "home", "water", "room", "work", "part", "city", "world", "house", "light", "night", "food",
    "story", "music", "table", "river", "stone", "green", "small", "long", "high", "open", "cold", "warm",
    "fast", "slow", "good", "bad", "first", "last", "next", "side", "end"};

std::string Words(int64_t n, std::mt19937_64& rng) {
  std::string s;
  for (int64_t i = 0; i < n; ++i) {
    if (i) s += ' ';
    s += kOneTokenWords[rng() % std::size(kOneTokenWords)];
  }
  return s;
}

struct Server {
  std::string name, url_text, model;
  Url url;
};

// One phase's figures.
struct Phase {
  LatencyHistogram ttft, itl;
  int64_t requests = 0, errors = 0, tokens = 0;
  // Completions that ended before the tokens asked for (the end of text is ignored, so a server cut them
  // off, e.g. at a slot's share of its context): the phase measured less work than the other server's.
  int64_t short_outputs = 0;
  // Text events after the first: those whose tokens the stream reported (counted by token), and those of
  // them that carried several tokens.
  int64_t gap_events = 0, counted_events = 0, multi_token_events = 0;
  std::mutex mu;  // guards the event counts, which the clients' threads add to
  double wall = 0;
  double tokens_per_s() const { return wall > 0 ? static_cast<double>(tokens) / wall : 0; }
};

struct StreamResult {
  bool ok = false;
  int64_t tokens = 0;
  std::string text;  // the generated text (the agent's next turn re-sends it)
};

// The tokens one streamed event carries, from what the server reports beside the text: the choice's
// token_ids (return_token_ids), or llama-server's running count of generated tokens (timings_per_token),
// `*generated` holding the previous event's. -1: the event does not say.
int64_t EventTokens(const nlohmann::json& event, int64_t* generated) {
  const auto choices = event.find("choices");
  if (choices != event.end() && choices->is_array() && !choices->empty()) {
    const auto ids = choices->front().find("token_ids");
    if (ids != choices->front().end() && ids->is_array()) return static_cast<int64_t>(ids->size());
  }
  const auto timings = event.find("timings");
  if (timings != event.end() && timings->is_object()) {
    const auto predicted = timings->find("predicted_n");
    if (predicted != timings->end() && predicted->is_number_integer()) {
      const int64_t n = predicted->get<int64_t>() - *generated;
      *generated = predicted->get<int64_t>();
      return n;
    }
  }
  return -1;
}

// Whether a legacy completions event carries text (a non-empty "text").
bool CarriesCompletionText(std::string_view event) {
  const size_t at = MemberValue(event, "\"text\"");
  return at != std::string_view::npos && at + 1 < event.size() && event[at] == '"' && event[at + 1] != '"';
}

// Sends one streaming request and records its TTFT and inter-token gaps into `phase` (thread-safe).
StreamResult StreamOne(Connection& c, const std::string& request, Phase& phase) {
  StreamResult r;
  Stopwatch w;
  std::string body;
  size_t scanned = 0;
  double first = -1, last = -1;
  int64_t events = 0, generated = 0, gap_events = 0, counted_events = 0, multi_token_events = 0;
  LatencyHistogram gaps;
  const int status = c.Exchange(request, [&](std::string_view d) {
    body.append(d);
    size_t end, next;
    while ((end = EventEnd(body, scanned, &next)) != std::string::npos) {
      const std::string_view event = std::string_view(body).substr(scanned, end - scanned);
      if (CarriesText(event) || CarriesCompletionText(event)) {
        const double now = w.ElapsedSeconds();
        int64_t tokens = -1;
        const size_t data = event.find('{');
        if (data != std::string_view::npos) {
          auto j = nlohmann::json::parse(event.substr(data), nullptr, false);
          if (!j.is_discarded() && j.contains("choices") && j["choices"].is_array() && !j["choices"].empty()) {
            const auto& choice = j["choices"][0];
            if (choice.contains("text") && choice["text"].is_string()) r.text += choice["text"].get<std::string>();
            if (choice.contains("delta") && choice["delta"].contains("content") && choice["delta"]["content"].is_string())
              r.text += choice["delta"]["content"].get<std::string>();
            tokens = EventTokens(j, &generated);
          }
        }
        if (first < 0) {
          first = now;
        } else {
          ++gap_events;
          if (tokens >= 1) {
            ++counted_events;
            multi_token_events += tokens > 1 ? 1 : 0;
            for (int64_t i = 0; i < tokens; ++i) gaps.Record((now - last) / static_cast<double>(tokens));
          } else {
            gaps.Record(now - last);
          }
        }
        last = now;
        ++events;
      }
      scanned = next;
    }
    return true;
  }, 1800);
  r.ok = status == 200 && body.find("data: [DONE]") != std::string::npos && first >= 0;
  if (r.ok) {
    const int64_t usage = CompletionTokens(body);
    r.tokens = usage >= 0 ? usage : events;
    phase.ttft.Record(first);
    phase.itl.Merge(gaps);
    std::lock_guard lock(phase.mu);
    phase.gap_events += gap_events;
    phase.counted_events += counted_events;
    phase.multi_token_events += multi_token_events;
  }
  return r;
}

// Both ask for each event's tokens in the two forms that servers know (EventTokens); a server ignores the
// member it does not know.
std::string CompletionRequest(const Server& s, const std::string& prompt, int64_t max_tokens) {
  nlohmann::json body = {{"model", s.model},     {"prompt", prompt},      {"max_tokens", max_tokens},
                         {"temperature", 0},     {"ignore_eos", true},    {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"return_token_ids", true},                      {"timings_per_token", true}};
  return Post("/v1/completions", body.dump());
}

std::string ChatRequest(const Server& s, const nlohmann::json& messages, int64_t max_tokens) {
  nlohmann::json body = {{"model", s.model},     {"messages", messages},  {"max_tokens", max_tokens},
                         {"temperature", 0},     {"ignore_eos", true},    {"stream", true},
                         {"stream_options", {{"include_usage", true}}},
                         {"return_token_ids", true},                      {"timings_per_token", true}};
  return Post("/v1/chat/completions", body.dump());
}

// Lets requests to one server at a time be in flight. While the other server's requests wait, new requests to
// the one in flight wait behind them; when the last one ends the other server goes next, all its waiting
// requests at once (sessions that were ready together stay concurrent), so neither starves.
class OneServerAtATime {
 public:
  void Enter(int server) {
    std::unique_lock lock(mu_);
    ++waiting_[server];
    ++arrived_[server];
    cv_.notify_all();
    cv_.wait(lock, [&] {
      if (owner_ == server && admitted_ > 0) return true;
      const bool other_waits = waiting_[1 - server] > 0;
      if (in_flight_ == 0) return !other_waits || owner_ != server;
      return owner_ == server && !other_waits;
    });
    if (owner_ == server && admitted_ > 0) {
      --admitted_;
    } else if (in_flight_ == 0) {
      owner_ = server;
      admitted_ = waiting_[server] - 1;  // the rest of this server's waiting requests go with this one
    }
    --waiting_[server];
    ++in_flight_;
    cv_.notify_all();
  }
  void Leave() {
    std::lock_guard lock(mu_);
    --in_flight_;
    cv_.notify_all();
  }
  // Waits until `n` requests to `server` have arrived (in flight, done or waiting): the first turns of one
  // server's sessions all arrive before the next server's sessions start, so that they go together.
  void AwaitArrivals(int server, int64_t n) {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return arrived_[server] >= n; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int owner_ = -1;
  int64_t in_flight_ = 0, admitted_ = 0;
  int64_t waiting_[2] = {0, 0}, arrived_[2] = {0, 0};
};

struct Options {
  int64_t prompt_tokens = 512, prompt_tokens_max = 512, output_tokens = 128, requests_per_client = 2;
  std::vector<int64_t> concurrency = {1, 4, 16};
  double warm_after_s = 0;
  bool rounds = true, agent = false;
  int64_t sessions = 8, turns = 6, system_tokens = 2048, message_tokens = 64;
  double think_min = 60, think_max = 300;
  uint64_t seed = 1;
};

// Each of `clients` threads sends its prompts one after another on its own connection.
void RunRound(const Server& s, const std::vector<std::vector<std::string>>& prompts, int64_t max_tokens, Phase& out) {
  std::mutex mu;
  Stopwatch wall;
  std::vector<std::thread> threads;
  for (const auto& mine : prompts) {
    threads.emplace_back([&, &mine = mine] {
      Connection c(s.url);
      int64_t ok = 0, errors = 0, tokens = 0, short_outputs = 0;
      for (const std::string& p : mine) {
        if (!c.ok()) {
          ++errors;
          continue;
        }
        const StreamResult r = StreamOne(c, CompletionRequest(s, p, max_tokens), out);
        r.ok ? (++ok, tokens += r.tokens) : ++errors;
        short_outputs += r.ok && r.tokens < max_tokens ? 1 : 0;
      }
      std::lock_guard lock(mu);
      out.short_outputs += short_outputs;
      out.requests += ok;
      out.errors += errors;
      out.tokens += tokens;
    });
  }
  for (auto& t : threads) t.join();
  out.wall = wall.ElapsedSeconds();
}

// The seconds during which at least one of a phase's requests is in flight: an agent phase's tokens/s is
// over these, since its sessions spend most of the run thinking.
class BusyTime {
 public:
  void Start() {
    std::lock_guard lock(mu_);
    if (in_flight_++ == 0) since_ = clock_.ElapsedSeconds();
  }
  void Stop() {
    std::lock_guard lock(mu_);
    if (--in_flight_ == 0) seconds_ += clock_.ElapsedSeconds() - since_;
  }
  double seconds() {
    std::lock_guard lock(mu_);
    return seconds_;
  }

 private:
  std::mutex mu_;
  Stopwatch clock_;
  int64_t in_flight_ = 0;
  double since_ = 0, seconds_ = 0;
};

// `gate` (null: no other server is sent requests meanwhile) holds each turn until it may go to server `index`.
void RunAgent(const Server& s, const Options& o, Phase& first_turns, Phase& later_turns, Phase& all,
              OneServerAtATime* gate = nullptr, int index = 0) {
  std::mt19937_64 shared(o.seed * 7919 + 1);
  const std::string system = "You are a helpful agent. " + Words(o.system_tokens, shared);
  std::mutex mu;
  BusyTime first_busy, later_busy, all_busy;
  std::vector<std::thread> threads;
  for (int64_t session = 0; session < o.sessions; ++session) {
    threads.emplace_back([&, session] {
      std::mt19937_64 rng(o.seed * 1'000'003 + static_cast<uint64_t>(session));
      std::uniform_real_distribution<double> think(o.think_min, o.think_max);
      nlohmann::json messages = nlohmann::json::array({{{"role", "system"}, {"content", system}}});
      for (int64_t turn = 0; turn < o.turns; ++turn) {
        if (turn > 0) std::this_thread::sleep_for(std::chrono::duration<double>(think(rng)));
        messages.push_back({{"role", "user"}, {"content", Words(o.message_tokens, rng)}});
        Phase& phase = turn == 0 ? first_turns : later_turns;
        StreamResult r;
        BusyTime& busy = turn == 0 ? first_busy : later_busy;
        if (gate) gate->Enter(index);
        busy.Start();
        all_busy.Start();
        {
          Connection c(s.url);  // a client that thought for minutes reconnects
          if (c.ok()) r = StreamOne(c, ChatRequest(s, messages, o.output_tokens), phase);
        }
        all_busy.Stop();
        busy.Stop();
        if (gate) gate->Leave();
        std::lock_guard lock(mu);
        if (!r.ok) {
          ++phase.errors;
          break;
        }
        ++phase.requests;
        phase.tokens += r.tokens;
        phase.short_outputs += r.tokens < o.output_tokens ? 1 : 0;
        messages.push_back({{"role", "assistant"}, {"content", r.text}});
      }
    });
  }
  for (auto& t : threads) t.join();
  for (Phase* p : {&first_turns, &later_turns}) {
    all.ttft.Merge(p->ttft);
    all.itl.Merge(p->itl);
    all.requests += p->requests;
    all.errors += p->errors;
    all.tokens += p->tokens;
    all.short_outputs += p->short_outputs;
    all.gap_events += p->gap_events;
    all.counted_events += p->counted_events;
    all.multi_token_events += p->multi_token_events;
  }
  first_turns.wall = first_busy.seconds();
  later_turns.wall = later_busy.seconds();
  all.wall = all_busy.seconds();
}

struct Row {
  std::string label;
  std::unique_ptr<Phase> phase = std::make_unique<Phase>();
};

// Each server's rows. Without `interleave` one server's whole workload runs, then the next's.
std::vector<std::vector<Row>> RunAll(const std::vector<Server*>& servers, const Options& o, bool interleave) {
  std::vector<std::vector<Row>> rows(servers.size());
  // The servers whose turn it is: all of them at once when interleaved, else each alone.
  std::vector<std::vector<size_t>> turns;
  if (interleave) {
    turns.emplace_back();
    for (size_t i = 0; i < servers.size(); ++i) turns.back().push_back(i);
  } else {
    for (size_t i = 0; i < servers.size(); ++i) turns.push_back({i});
  }
  for (const std::vector<size_t>& now : turns) {
    for (size_t i : now)
      std::fprintf(stderr, "bench serve: %s at %s (model %s)\n", servers[i]->name.c_str(),
                   servers[i]->url_text.c_str(), servers[i]->model.c_str());
    if (o.rounds) {
      for (int64_t clients : o.concurrency) {
        // Prompts of their own per concurrency, so that one concurrency's cold round is not warm from another.
        std::mt19937_64 rng(o.seed * 31 + static_cast<uint64_t>(clients));
        std::vector<std::vector<std::string>> prompts(static_cast<size_t>(clients));
        for (auto& mine : prompts)
          for (int64_t i = 0; i < o.requests_per_client; ++i) {
            int64_t words = o.prompt_tokens;
            if (o.prompt_tokens_max > o.prompt_tokens)
              words = std::uniform_int_distribution<int64_t>(o.prompt_tokens, o.prompt_tokens_max)(rng);
            mine.push_back(Words(words, rng));
          }
        for (int warm = 0; warm < 2; ++warm) {
          if (warm && o.warm_after_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(o.warm_after_s));
          for (size_t i : now) {
            Row row{std::string(warm ? "warm" : "cold") + " x" + std::to_string(clients)};
            RunRound(*servers[i], prompts, o.output_tokens, *row.phase);
            std::fprintf(stderr, "  %s %s: %lld ok, %lld errors\n", servers[i]->name.c_str(), row.label.c_str(),
                         static_cast<long long>(row.phase->requests), static_cast<long long>(row.phase->errors));
            rows[i].push_back(std::move(row));
          }
        }
      }
    }
    if (o.agent) {
      std::vector<Row> first(servers.size()), later(servers.size()), all(servers.size());
      OneServerAtATime gate;
      std::vector<std::thread> threads;
      for (size_t i : now) {
        first[i].label = "agent turn 1";
        later[i].label = "agent turns 2+";
        all[i].label = "agent all";
        threads.emplace_back([&, i] {
          RunAgent(*servers[i], o, *first[i].phase, *later[i].phase, *all[i].phase, now.size() > 1 ? &gate : nullptr,
                   static_cast<int>(i));
        });
        if (now.size() > 1) gate.AwaitArrivals(static_cast<int>(i), o.sessions);
      }
      for (auto& t : threads) t.join();
      for (size_t i : now) {
        std::fprintf(stderr, "  %s agent: %lld ok, %lld errors\n", servers[i]->name.c_str(),
                     static_cast<long long>(all[i].phase->requests), static_cast<long long>(all[i].phase->errors));
        rows[i].push_back(std::move(first[i]));
        rows[i].push_back(std::move(later[i]));
        rows[i].push_back(std::move(all[i]));
      }
    }
  }
  return rows;
}

// How the phase's inter-token latency was counted.
const char* ItlCounting(const Phase& p) {
  if (p.counted_events == p.gap_events) return "token";
  return p.counted_events == 0 ? "event" : "token where reported, else event";
}

nlohmann::ordered_json PhaseJson(const Phase& p) {
  return {{"requests", p.requests},
          {"errors", p.errors},
          {"short_outputs", p.short_outputs},
          {"ttft_p50_ms", p.ttft.Percentile(0.5) * 1e3},
          {"ttft_p99_ms", p.ttft.Percentile(0.99) * 1e3},
          {"itl_p50_ms", p.itl.Percentile(0.5) * 1e3},
          {"itl_p99_ms", p.itl.Percentile(0.99) * 1e3},
          {"itl_counted_by", ItlCounting(p)},
          {"itl_samples", static_cast<int64_t>(p.itl.count())},
          {"multi_token_events", p.multi_token_events},
          {"output_tokens_per_s", p.tokens_per_s()}};
}

Status Resolve(Server& s) {
  s.url = ParseUrl(s.url_text);
  const std::string models = Fetch(s.url, "/v1/models");
  if (models.empty()) return Status::Unavailable("no server answers at " + s.url_text);
  if (s.model.empty()) {
    auto parsed = nlohmann::json::parse(models, nullptr, false);
    if (parsed.is_discarded() || !parsed.contains("data") || !parsed["data"].is_array() || parsed["data"].empty() ||
        !parsed["data"][0].contains("id") || !parsed["data"][0]["id"].is_string())
      return Status::InvalidArgument("cannot read /v1/models at " + s.url_text);
    s.model = parsed["data"][0]["id"].get<std::string>();
  }
  return Status::Ok();
}

int RunBenchServe(const std::vector<std::string>& args) {
  Server ours{"deepinfer", "http://127.0.0.1:8000", "", {}}, peer{"peer", "", "", {}};
  Options o;
  std::vector<int64_t> think = {60, 300}, prompt_range = {512};
  std::string json_path;
  bool no_rounds = false, interleave = false;
  cli::Flags flags("bench serve");
  flags.String("--url", &ours.url_text);
  flags.String("--peer-url", &peer.url_text);
  flags.String("--model", &ours.model);
  flags.String("--peer-model", &peer.model);
  flags.String("--name", &ours.name);
  flags.String("--peer-name", &peer.name);
  flags.IntList("--prompt-tokens", &prompt_range, 1, 1 << 20, 2);
  flags.Int<int64_t>("--output-tokens", &o.output_tokens, 1, 1 << 20);
  flags.IntList("--concurrency", &o.concurrency, 1, 1024, 16);
  flags.Int<int64_t>("--requests-per-client", &o.requests_per_client, 1, 1 << 16);
  flags.Double("--warm-after-s", &o.warm_after_s, 0, 86400);
  flags.Switch("--no-rounds", &no_rounds);
  flags.Switch("--agent", &o.agent);
  flags.Switch("--interleave", &interleave);
  flags.Int<int64_t>("--agent-sessions", &o.sessions, 1, 1024);
  flags.Int<int64_t>("--agent-turns", &o.turns, 1, 1024);
  flags.Int<int64_t>("--system-tokens", &o.system_tokens, 0, 1 << 20);
  flags.Int<int64_t>("--message-tokens", &o.message_tokens, 1, 1 << 20);
  flags.IntList("--think-s", &think, 0, 86400, 2);
  flags.Int<uint64_t>("--seed", &o.seed, 0, UINT64_MAX);
  flags.Path("--json", &json_path);
  if (int rc = flags.Parse(args)) return rc;
  o.rounds = !no_rounds;
  o.prompt_tokens = prompt_range[0];
  o.prompt_tokens_max = prompt_range.size() > 1 ? prompt_range[1] : prompt_range[0];
  if (o.prompt_tokens_max < o.prompt_tokens)
    return cli::UsageError("bench serve", "--prompt-tokens takes N or MIN,MAX with MIN <= MAX");
  o.think_min = static_cast<double>(think[0]);
  o.think_max = static_cast<double>(think.size() > 1 ? think[1] : think[0]);
  if (o.think_max < o.think_min) return cli::UsageError("bench serve", "--think-s takes MIN,MAX with MIN <= MAX");
  if (!o.rounds && !o.agent) return cli::UsageError("bench serve", "--no-rounds without --agent runs nothing");

  std::vector<Server*> servers = {&ours};
  if (!peer.url_text.empty()) servers.push_back(&peer);
  for (Server* s : servers) {
    if (Status st = Resolve(*s); !st.ok()) return cli::Fail("bench serve", st.message());
  }
  const std::vector<std::vector<Row>> results = RunAll(servers, o, interleave);

  std::printf("bench serve: prompts of %lld-%lld words, %lld output tokens, %lld requests per client per round\n",
              static_cast<long long>(o.prompt_tokens), static_cast<long long>(o.prompt_tokens_max),
              static_cast<long long>(o.output_tokens),
              static_cast<long long>(o.requests_per_client));
  const char* metrics[] = {"TTFT p50 ms", "TTFT p99 ms", "ITL p50 ms", "ITL p99 ms", "out tok/s"};
  auto value = [](const Phase& p, int m) {
    switch (m) {
      case 0: return p.ttft.Percentile(0.5) * 1e3;
      case 1: return p.ttft.Percentile(0.99) * 1e3;
      case 2: return p.itl.Percentile(0.5) * 1e3;
      case 3: return p.itl.Percentile(0.99) * 1e3;
      default: return p.tokens_per_s();
    }
  };
  std::printf("%-16s %-12s %12s", "phase", "figure", ours.name.c_str());
  if (results.size() > 1) std::printf(" %12s %8s", peer.name.c_str(), "ratio");
  std::printf("\n");
  for (size_t r = 0; r < results[0].size(); ++r) {
    for (int m = 0; m < 5; ++m) {
      const double a = value(*results[0][r].phase, m);
      std::printf("%-16s %-12s %12.1f", m == 0 ? results[0][r].label.c_str() : "", metrics[m], a);
      if (results.size() > 1) {
        const double b = value(*results[1][r].phase, m);
        // How many times better ours is: theirs / ours for latencies, ours / theirs for tokens/s.
        std::printf(" %12.1f %8s", b, (m < 4 ? Ratio(b, a) : Ratio(a, b)).c_str());
      }
      std::printf("\n");
    }
  }
  // How each ITL figure was counted, and how many events carried the text of several tokens (held back).
  std::printf("ITL counted by token where the stream reports each event's tokens (an event of k tokens: k gaps of\n"
              "a k-th of its gap), else by event:\n");
  for (size_t i = 0; i < servers.size(); ++i) {
    for (const Row& row : results[i]) {
      const Phase& p = *row.phase;
      std::printf("  %-12s %-16s by %s; %lld of %lld events carried several tokens\n", servers[i]->name.c_str(),
                  row.label.c_str(), ItlCounting(p), static_cast<long long>(p.multi_token_events),
                  static_cast<long long>(p.gap_events));
    }
  }
  // A server that stopped completions short did less work than asked: its figures are not comparable.
  for (size_t i = 0; i < servers.size(); ++i) {
    for (const Row& row : results[i]) {
      const Phase& p = *row.phase;
      if (p.short_outputs > 0) {
        std::printf("WARNING: %s %s: %lld of %lld completions ended before the tokens asked for (cut off by the "
                    "server, e.g. at a slot's share of its context): not the same work\n",
                    servers[i]->name.c_str(), row.label.c_str(), static_cast<long long>(p.short_outputs),
                    static_cast<long long>(p.requests));
      }
    }
  }
  if (!json_path.empty()) {
    nlohmann::ordered_json out;
    for (size_t i = 0; i < servers.size(); ++i) {
      nlohmann::ordered_json& sys = out[servers[i]->name];
      sys["url"] = servers[i]->url_text;
      sys["model"] = servers[i]->model;
      for (const Row& row : results[i]) sys["phases"][row.label] = PhaseJson(*row.phase);
    }
    std::ofstream file(json_path, std::ios::trunc);
    file << out.dump(2) << "\n";
    if (!file) return cli::Fail("bench serve", "cannot write " + json_path);
  }
  return 0;
}

const cli::BenchRegistration kServeRegistration(
    {"serve", "TTFT, ITL and tokens/s of a streaming workload, beside a peer's", kServeUsage, RunBenchServe});

}  // namespace
}  // namespace deepinfer::bench
