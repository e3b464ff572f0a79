// deepinfer bench parse: output-parser throughput and worst per-chunk latency, beside deepseek-recipe's
// StreamProcessor (its Rust parser behind Python bindings) doing the same work in the same run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "recipe/output_parser.h"
#include "recipe/response_chat.h"

namespace deepinfer::bench {
namespace {


constexpr const char* kParseUsage =
    "usage: deepinfer bench parse [--kib N] [--chunk-bytes N] [--peer FILE] [--write-inputs DIR]\n\n"
    "Parses a synthetic thinking-mode completion (reasoning, answer, a DSML tool-call block; English,\n"
    "Chinese and JSON) fed in token-sized chunks, and prints MB/s and per-chunk latency (p50, p99,\n"
    "p99.9, max) of the parser alone and of parser + Chat Completions chunk JSON, beside\n"
    "deepseek-recipe's StreamProcessor (push + to_json of every chunk) on the same chunks (--peer), and the ratio.\n\n"
    "  --kib N          completion size (default 512)\n"
    "  --chunk-bytes N  about N bytes per chunk, cut at character boundaries (default 4, a token)\n"
    "  --peer FILE      deepseek-recipe's figures for the same chunks (refused if its inputs differ):\n"
    "                     .venv/bin/python tools/recipe/bench_parse.py --deepinfer BIN --out recipe.json\n"
    "  --write-inputs DIR  write the chunks (what the peer script reads) into DIR and exit\n";


// A deterministic thinking-mode completion of about `bytes` bytes.
std::string MakeCompletion(size_t bytes) {
  static const char* kWords[] = {"the", "model", "should", "check", "whether", "weather", "in", "Paris", "is",
                                 "sunny", "so", "I", "will", "call", "tool", "with", "city", "argument", "then",
                                 "answer", "日本", "東京", "天气", "怎么样", "推理", "模型", "😀", "données", "42"};
  std::mt19937_64 rng(4);
  auto words = [&](size_t target) {
    std::string out;
    while (out.size() < target) {
      out += kWords[rng() % std::size(kWords)];
      out += (rng() % 12 == 0) ? "\n\n" : " ";
    }
    return out;
  };
  std::string text = words(bytes * 55 / 100) + "\n\n</think>\n\n" + words(bytes * 25 / 100) +
                     "\n\n<｜DSML｜tool_calls>\n";
  int call = 0;
  while (text.size() < bytes) {
    text += "<｜DSML｜invoke name=\"get_weather_" + std::to_string(call++) + "\">\n";
    text += "<｜DSML｜parameter name=\"city\" string=\"true\">" + words(300) + "\"quoted\"</｜DSML｜parameter>\n";
    text += "<｜DSML｜parameter name=\"options\" string=\"false\">{\"days\": [1, 2, 3], \"unit\": \"celsius\", "
            "\"detail\": {\"hourly\": true}}</｜DSML｜parameter>\n</｜DSML｜invoke>\n";
  }
  return text + "</｜DSML｜tool_calls>";
}

std::vector<std::string> ChunkAtCharacters(const std::string& text, size_t target) {
  std::vector<std::string> chunks;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = std::min(text.size(), pos + target);
    while (end < text.size() && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) ++end;
    chunks.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return chunks;
}

struct Measured {
  double seconds = 0;  // whole run, no per-chunk clock reads (they would dominate: ~50 ns each here)
  LatencyHistogram latency;  // per-chunk times from a separate, clocked run
  size_t events = 0;
};

void RunOurs(const std::vector<std::string>& chunks, bool with_json, Measured* m, bool clocked) {
  recipe::OutputParserOptions options;
  options.thinking_stage = recipe::ThinkingStage::kReasoningStart;
  recipe::OutputParser parser(options);
  recipe::ResponseOptions response_options;
  recipe::ChatCompletionStream stream(response_options);
  std::vector<recipe::OutputDelta> deltas;
  std::vector<std::string> json;
  size_t events = 0;
  Stopwatch total;
  for (const std::string& chunk : chunks) {
    Stopwatch one;
    deltas.clear();
    parser.Feed(chunk, &deltas);
    if (with_json) {
      json.clear();
      stream.AppendChunks(deltas, &json);
      events += json.size();
    } else {
      events += deltas.size();
    }
    if (clocked) m->latency.Record(one.ElapsedSeconds());
  }
  deltas.clear();
  parser.Finish(&deltas);
  if (!clocked) {
    const double seconds = total.ElapsedSeconds();
    if (m->seconds == 0 || seconds < m->seconds) m->seconds = seconds;
  }
  m->events = events;
}

void Best(const std::vector<std::string>& chunks, bool with_json, Measured* m) {
  for (int i = 0; i < 5; ++i) RunOurs(chunks, with_json, m, false);
  RunOurs(chunks, with_json, m, true);
}

int RunBenchParse(const std::vector<std::string>& args) {
  size_t kib = 512;
  size_t chunk_bytes = 4;
  std::string peer_path, inputs_dir;
  cli::Flags flags("bench parse");
  flags.Int<size_t>("--kib", &kib, 1, 1 << 20);
  flags.Int<size_t>("--chunk-bytes", &chunk_bytes, 1, 1 << 20);
  flags.Path("--peer", &peer_path);
  flags.Path("--write-inputs", &inputs_dir);
  if (int rc = flags.Parse(args)) return rc;

  const std::string text = MakeCompletion(kib * 1024);
  const std::vector<std::string> chunks = ChunkAtCharacters(text, chunk_bytes);
  BenchInputs inputs;
  inputs.files = {{"chunks.json", nlohmann::json(chunks).dump()}};
  if (!inputs_dir.empty()) {
    if (Status st = WriteBenchInputs(inputs_dir, "parse", inputs); !st.ok()) return cli::Fail("bench parse", st.message());
    std::printf("wrote the inputs of bench parse to %s (inputs_id %s)\n", inputs_dir.c_str(), inputs.Id().c_str());
    return 0;
  }
  nlohmann::json theirs;
  if (!peer_path.empty()) {
    auto peer = ReadPeer(peer_path, "parse", inputs);
    if (!peer.ok()) return cli::Fail("bench parse", peer.status().message());
    theirs = std::move(peer).value();
  }
  Measured parse_only;
  Best(chunks, false, &parse_only);
  Measured with_json;
  Best(chunks, true, &with_json);

  const double mb = static_cast<double>(text.size()) / 1e6;
  std::printf("completion: %zu bytes in %zu chunks (%.1f bytes each): reasoning, answer, DSML tool calls\n"
              "per-chunk latency comes from a separate clocked run; its maximum mostly measures preemption\n"
              "by other processes on this 2-core machine, so p99.9 is shown as well\n\n",
              text.size(), chunks.size(), static_cast<double>(text.size()) / static_cast<double>(chunks.size()));
  std::printf("%-42s %8s %9s %9s %10s %10s %8s\n", "", "MB/s", "p50 us", "p99 us", "p99.9 us", "max us", "events");
  auto row = [&](const char* name, double seconds, double p50, double p99, double p999, double worst, size_t events) {
    std::printf("%-42s %8.1f %9.3f %9.3f %10.3f %10.1f %8zu\n", name, mb / seconds, p50 * 1e6, p99 * 1e6,
                p999 * 1e6, worst * 1e6, events);
  };
  row("ours: parser", parse_only.seconds, parse_only.latency.Percentile(0.5), parse_only.latency.Percentile(0.99),
      parse_only.latency.Percentile(0.999), parse_only.latency.max(), parse_only.events);
  row("ours: parser + chat chunk JSON", with_json.seconds, with_json.latency.Percentile(0.5),
      with_json.latency.Percentile(0.99), with_json.latency.Percentile(0.999), with_json.latency.max(),
      with_json.events);
  if (theirs.is_object()) {
    const double s = PeerNumber(theirs, "seconds");
    row("deepseek-recipe: push + to_json (Python)", s, PeerNumber(theirs, "p50"), PeerNumber(theirs, "p99"),
        PeerNumber(theirs, "p999"), PeerNumber(theirs, "worst"), static_cast<size_t>(PeerNumber(theirs, "events")));
    std::printf("\n%s\nratio ours (parser + JSON) vs deepseek-recipe: %.1fx throughput, %.1fx lower p99.9 latency\n",
                PeerLine(theirs, peer_path).c_str(), s / with_json.seconds,
                PeerNumber(theirs, "p999") / with_json.latency.Percentile(0.999));
  } else {
    std::printf("\npeer: none (see --help: tools/recipe/bench_parse.py, then --peer FILE)\n");
  }
  return 0;
}

const cli::BenchRegistration kParseRegistration(
    {"parse", "output parser MB/s and worst chunk latency vs deepseek-recipe", kParseUsage, RunBenchParse});

}  // namespace
}  // namespace deepinfer::bench
