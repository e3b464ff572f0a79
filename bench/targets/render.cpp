// deepinfer bench render: request JSON → conversation → V4 prompt → token ids for a long multi-turn
// conversation with tools (about 77,000 tokens), beside deepseek-recipe doing the same work in the same run.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::bench {
namespace {

using cli::Fail;

using Json = nlohmann::ordered_json;

constexpr const char* kRenderUsage =
    "usage: deepinfer bench render [--tokenizer T] [--turns N] [--iterations N] [--peer FILE] [--write-inputs DIR]\n\n"
    "Times parse + render + tokenize of one long Chat Completions request (multi-turn, tools, tool results;\n"
    "about 77,000 prompt tokens with the default 160 turns) for DeepSeek V4; with --peer, beside the same work\n"
    "done by the deepseek-recipe Python package (its median, the ratio, and whether the token ids match).\n\n"
    "  --tokenizer T     a V4 tokenizer.json or a builtin tokenizer name (default deepseek-v4)\n"
    "  --peer FILE       deepseek-recipe's figures for the same request (refused if its inputs differ):\n"
    "                      .venv/bin/python tools/recipe/bench_render.py --deepinfer BIN --out recipe.json\n"
    "  --write-inputs DIR  write the request and tokenizer (what the peer script reads) into DIR and exit\n";

constexpr const char* kParagraphs[] = {
    "Please review the following function and explain what it does, then suggest improvements for "
    "readability and performance. Consider edge cases such as empty input, very large input and Unicode.\n",
    "def merge_intervals(intervals):\n    intervals.sort(key=lambda x: x[0])\n    merged = []\n    for start, end "
    "in intervals:\n        if merged and start <= merged[-1][1]:\n            merged[-1][1] = max(merged[-1][1], "
    "end)\n        else:\n            merged.append([start, end])\n    return merged\n",
    "\xE8\xAF\xB7\xE7\x94\xA8\xE4\xB8\xAD\xE6\x96\x87\xE6\x80\xBB\xE7\xBB\x93\xE4\xB8\x8A\xE9\x9D\xA2\xE7\x9A\x84"
    "\xE8\xAE\xA8\xE8\xAE\xBA\xEF\xBC\x8C\xE5\xB9\xB6\xE5\x88\x97\xE5\x87\xBA\xE4\xB8\x89\xE4\xB8\xAA\xE8\xA6\x81"
    "\xE7\x82\xB9\xE3\x80\x82 Then compare it with the approach from the previous answer (O(n log n) vs O(n^2)).\n",
    "The weather service returned: temperature 21.5\xC2\xB0" "C, humidity 63%, wind 12 km/h from the north-west, "
    "and a 20% chance of rain after 18:00. Forecast for tomorrow: sunny, high of 24\xC2\xB0" "C.\n",
};

// A deterministic request: system prompt, 8 tools, and `turns` rounds of user → assistant tool call →
// tool result → assistant answer.
std::string BuildRequest(int turns) {
  Json req;
  req["model"] = "DeepSeek-V4-Pro";
  Json messages = Json::array();
  messages.push_back({{"role", "system"}, {"content", "You are a careful senior engineer. Answer precisely."}});
  Json tools = Json::array();
  const char* names[] = {"get_weather", "search_web", "run_python", "read_file", "write_file", "list_dir",
                         "calculator", "translate"};
  for (const char* name : names) {
    Json params = {{"type", "object"},
                   {"properties",
                    {{"query", {{"type", "string"}, {"description", "What to look up or run."}}},
                     {"limit", {{"type", "integer"}, {"description", "Maximum number of results."}}},
                     {"options", {{"type", "object"}, {"properties", {{"verbose", {{"type", "boolean"}}}}}}}}},
                   {"required", {"query"}}};
    tools.push_back({{"type", "function"},
                     {"function", {{"name", name}, {"description", std::string("Tool ") + name + " for the agent."},
                                   {"parameters", params}}}});
  }
  for (int t = 0; t < turns; ++t) {
    std::string user;
    for (int k = 0; k < 3; ++k) user += kParagraphs[(t + k) % 4];
    messages.push_back({{"role", "user"}, {"content", user}});
    const std::string id = "call_" + std::to_string(t);
    Json args = {{"query", std::string(kParagraphs[t % 4]).substr(0, 60)}, {"limit", t % 7}, {"options", {{"verbose", t % 2 == 0}}}};
    messages.push_back({{"role", "assistant"},
                        {"content", "Let me check that."},
                        {"reasoning_content", std::string("I should call a tool first. ") + kParagraphs[(t + 1) % 4]},
                        {"tool_calls", {{{"id", id}, {"type", "function"},
                                         {"function", {{"name", names[t % 8]}, {"arguments", args.dump()}}}}}}});
    messages.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", kParagraphs[(t + 3) % 4]}});
    messages.push_back({{"role", "assistant"},
                        {"content", std::string(kParagraphs[(t + 2) % 4]) + kParagraphs[t % 4]},
                        {"reasoning_content", "Summarize the tool output for the user."}});
  }
  messages.push_back({{"role", "user"}, {"content", "Thanks. Now write the final report."}});
  req["messages"] = std::move(messages);
  req["tools"] = std::move(tools);
  return req.dump();
}


int RunBenchRender(const std::vector<std::string>& args) {
  std::string tokenizer_name, peer_path, inputs_dir;
  int turns = 160, iterations = 20;
  cli::Flags flags("bench render");
  flags.Path("--tokenizer", &tokenizer_name);
  flags.Path("--peer", &peer_path);
  flags.Path("--write-inputs", &inputs_dir);
  flags.Int("--turns", &turns, 1, 100000);
  flags.Int("--iterations", &iterations, 1, 100000);
  if (int rc = flags.Parse(args)) return rc;
  auto source = tokenizer::ResolveTokenizer(tokenizer_name, "deepseek-v4");
  if (!source.ok()) return Fail("bench render", source.status().message());
  auto tokenizer = tokenizer::LoadTokenizer(*source);
  if (!tokenizer.ok()) return Fail("bench render", tokenizer.status().message());

  const std::string body = BuildRequest(turns);
  auto tokenizer_json = tokenizer::ReadTokenizerJson(*source);
  if (!tokenizer_json.ok()) return Fail("bench render", tokenizer_json.status().message());
  BenchInputs inputs;
  inputs.files = {{"request.json", body}, {"tokenizer.json", *tokenizer_json}};
  if (!inputs_dir.empty()) {
    if (Status st = WriteBenchInputs(inputs_dir, "render", inputs); !st.ok()) return Fail("bench render", st.message());
    std::printf("wrote the inputs of bench render to %s (inputs_id %s)\n", inputs_dir.c_str(), inputs.Id().c_str());
    return 0;
  }
  nlohmann::json peer;
  if (!peer_path.empty()) {
    auto read = ReadPeer(peer_path, "render", inputs);
    if (!read.ok()) return Fail("bench render", read.status().message());
    peer = std::move(read).value();
  }
  const recipe::ControlTokenIds control = recipe::ControlTokenIds::FromTokenizer(*tokenizer);
  recipe::RequestOptions options;
  std::vector<double> parse_ms, render_ms, total_ms;
  std::vector<int32_t> ids;
  size_t prompt_bytes = 0;
  for (int it = 0; it < iterations + 1; ++it) {  // the first run warms caches and is not counted
    Stopwatch total;
    auto parsed = recipe::ParseChatCompletionsRequest(body, options);
    if (!parsed.ok()) return Fail("bench render", parsed.error.message);
    const double t_parse = total.ElapsedMillis();
    auto prompt = recipe::RenderPrompt(parsed.request->conversation, recipe::ModelVersion::kV4);
    if (!prompt.ok()) return Fail("bench render", prompt.status().message());
    const double t_render = total.ElapsedMillis();
    auto encoded = recipe::TokenizePrompt(*prompt, *tokenizer, control);
    if (!encoded.ok()) return Fail("bench render", encoded.status().message());
    const double t_total = total.ElapsedMillis();
    if (it == 0) continue;
    parse_ms.push_back(t_parse);
    render_ms.push_back(t_render - t_parse);
    total_ms.push_back(t_total);
    ids = std::move(encoded).value();
    prompt_bytes = prompt->text.size();
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::printf("request: %zu bytes, %d turns; prompt: %zu bytes, %zu tokens (V4)\n", body.size(), turns, prompt_bytes,
              ids.size());
  std::printf("deepinfer:       parse %.3f ms + render %.3f ms + tokenize %.3f ms = %.3f ms (median of %d; best %.3f ms)\n",
              median(parse_ms), median(render_ms), median(total_ms) - median(parse_ms) - median(render_ms),
              median(total_ms), iterations, *std::min_element(total_ms.begin(), total_ms.end()));
  if (peer.is_null()) {
    std::printf("peer: none (see --help: tools/recipe/bench_render.py, then --peer FILE)\n");
    return 0;
  }
  std::printf("%s\n", PeerLine(peer, peer_path).c_str());
  int64_t sum = 0;
  for (int32_t id : ids) sum += id;
  // The peer's ids must be ours: the same token count, sum and first 64 ids.
  bool same = PeerNumber(peer, "tokens") == static_cast<double>(ids.size()) && PeerNumber(peer, "ids_sum") == static_cast<double>(sum) &&
              peer.contains("ids_head") && peer["ids_head"].is_array();
  for (size_t i = 0; same && i < peer["ids_head"].size() && i < ids.size(); ++i) {
    same = peer["ids_head"][i].is_number_integer() && peer["ids_head"][i].get<int64_t>() == ids[i];
  }
  const double peer_ms = PeerNumber(peer, "ms");
  std::printf("deepseek-recipe: convert + encode %.3f ms (median of %.0f), %.0f tokens\n", peer_ms,
              PeerNumber(peer, "iterations"), PeerNumber(peer, "tokens"));
  std::printf("ratio: deepinfer is %.1fx faster; token ids %s\n", peer_ms / median(total_ms),
              same ? "match" : "DIFFER");
  return same ? 0 : 1;
}

const cli::BenchRegistration kRenderRegistration(
    {"render",
     "request → prompt → token ids for a 77k-token conversation, vs deepseek-recipe",
     kRenderUsage, RunBenchRender});

}  // namespace
}  // namespace deepinfer::bench
