// deepinfer bench parse: output-parser throughput and worst per-chunk latency, beside deepseek-recipe's
// StreamProcessor (its Rust parser behind Python bindings) doing the same work in the same run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>
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

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: deepinfer bench parse [--kib N] [--chunk-bytes N] [--python PATH] [--no-oracle]\n\n"
    "Parses a synthetic thinking-mode completion (reasoning, answer, a DSML tool-call block; English,\n"
    "Chinese and JSON) fed in token-sized chunks, and prints MB/s and per-chunk latency (p50, p99,\n"
    "p99.9, max) of the parser alone and of parser + Chat Completions chunk JSON, beside\n"
    "deepseek-recipe's StreamProcessor (push + to_json of every chunk) on the same chunks, and the ratio.\n\n"
    "  --kib N          completion size (default 512)\n"
    "  --chunk-bytes N  about N bytes per chunk, cut at character boundaries (default 4, a token)\n"
    "  --python PATH    Python with deepseek-recipe (default: <repo>/.venv/bin/python, $DEEPINFER_PYTHON)\n";

constexpr const char* kOracleScript = R"PY(
import json, sys, time
import deepseek_recipe as dr
chunks = json.load(open(sys.argv[1], encoding="utf-8"))
def run(serialise, clocked):
    request = dr.ChatCompletionRequest({"model": "DeepSeek-V4-Pro", "messages": [{"role": "user", "content": "q"}],
                                        "tools": [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}]})
    converted = request.convert(dr.ConversionOptions())
    options = dr.ParsingOptions(thinking_initial_stage=dr.ThinkingInitialStage.ReasoningStart)
    proc = dr.StreamProcessor(dr.ChatCompletionRequest.chunk_generator(converted, "id", "m"), options)
    proc.push(dr.InferenceChunk.ready(prompt_usage=dr.PromptUsage(prompt_tokens=1)))
    times, n = [], 0
    clock = time.perf_counter
    start = clock()
    for c in chunks:
        t = clock() if clocked else 0
        out = proc.push(dr.InferenceChunk.text(c, 1))
        if serialise:
            for o in out:
                o.to_json()
        if clocked:
            times.append(clock() - t)
        n += len(out)
    proc.push(dr.InferenceChunk.finish(dr.InferenceFinishReason.Stop))
    return clock() - start, sorted(times), n
seconds = min(run(True, False)[0] for _ in range(3))
_, times, events = run(True, True)
pick = lambda q: times[min(len(times) - 1, int(q * len(times)))]
print(json.dumps({"seconds": seconds, "p50": pick(0.5), "p99": pick(0.99), "p999": pick(0.999),
                  "worst": times[-1], "events": events}))
)PY";

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
  std::string python;
  bool oracle = true;
  cli::Flags flags("bench parse");
  flags.Int<size_t>("--kib", &kib, 1, 1 << 20);
  flags.Int<size_t>("--chunk-bytes", &chunk_bytes, 1, 1 << 20);
  flags.Path("--python", &python);
  flags.Switch("--no-oracle", &oracle, false);
  if (int rc = flags.Parse(args)) return rc;

  const std::string text = MakeCompletion(kib * 1024);
  const std::vector<std::string> chunks = ChunkAtCharacters(text, chunk_bytes);
  Measured parse_only;
  Best(chunks, false, &parse_only);
  Measured with_json;
  Best(chunks, true, &with_json);

  nlohmann::json theirs;
  std::string note;
  if (oracle) {
    if (python.empty()) {
      if (const char* env = std::getenv("DEEPINFER_PYTHON"); env != nullptr && *env) python = env;
      else python = FindUp(".venv/bin/python");
    }
    if (python.empty()) {
      note = "deepseek-recipe: skipped (no .venv/bin/python; pass --python)";
    } else {
      const fs::path tmp = fs::temp_directory_path() / ("deepinfer_bench_parse_" + std::to_string(::getpid()));
      fs::create_directories(tmp);
      std::ofstream((tmp / "oracle.py").string()) << kOracleScript;
      std::ofstream((tmp / "chunks.json").string()) << nlohmann::json(chunks).dump();
      const std::string cmd = "'" + python + "' '" + (tmp / "oracle.py").string() + "' '" +
                              (tmp / "chunks.json").string() + "' 2>&1";
      std::string output;
      if (FILE* pipe = popen(cmd.c_str(), "r"); pipe != nullptr) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
        pclose(pipe);
      }
      fs::remove_all(tmp);
      const size_t brace = output.rfind('{');
      if (brace != std::string::npos) theirs = nlohmann::json::parse(output.substr(brace), nullptr, false);
      if (!theirs.is_object()) {
        note = "deepseek-recipe: failed: " + output.substr(output.size() > 600 ? output.size() - 600 : 0);
        theirs = nlohmann::json();
      }
    }
  }

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
    const double s = theirs["seconds"].get<double>();
    row("deepseek-recipe: push + to_json (Python)", s, theirs["p50"].get<double>(), theirs["p99"].get<double>(),
        theirs["p999"].get<double>(), theirs["worst"].get<double>(), theirs["events"].get<size_t>());
    std::printf("\nratio ours (parser + JSON) vs deepseek-recipe: %.1fx throughput, %.1fx lower p99.9 latency\n",
                s / with_json.seconds, theirs["p999"].get<double>() / with_json.latency.Percentile(0.999));
  } else if (!note.empty()) {
    std::printf("\n%s\n", note.c_str());
  }
  return 0;
}

const cli::BenchRegistration kRegistration({"parse", "output parser MB/s and worst chunk latency vs deepseek-recipe",
                                       kUsage, RunBenchParse});

}  // namespace
}  // namespace deepinfer::bench
