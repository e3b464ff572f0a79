// deepinfer parse [FILE]: a model completion (text) in; the protocol response or its SSE stream out.
#include <algorithm>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/recipe_flags.h"
#include "core/mapped_file.h"
#include "recipe/output_options.h"
#include "recipe/stream_events.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer parse [options] [FILE|-]\n\n"
    "Parses a DeepSeek model completion (the text after the prompt, read from FILE or stdin) the way the\n"
    "server does while streaming, and prints the protocol response: the non-streaming JSON body, or with\n"
    "--stream the server-sent events ending in `data: [DONE]`. The text is fed in chunks of\n"
    "--chunk-size bytes (default: all at once), each counted as one completion token.\n\n"
    "  --model-version v3.2|v4|v4.1   tool-call block spelling to accept at the end (default v4)\n"
    "  --protocol chat|responses|messages   OpenAI Chat Completions, OpenAI Responses, Anthropic Messages\n"
    "                                 (anthropic = messages)\n"
    "  --stream                       print the SSE event stream\n"
    "  --chunk-size N                 feed N bytes at a time (splits may fall inside characters)\n"
    "  --no-thinking                  the prompt ended with </think>: no reasoning part\n"
    "  --continue-reasoning           a prefix continuation inside the reasoning (newlines kept)\n"
    "  --no-tools                     the request declared no tools: DSML stays plain text\n"
    "  --tool-choice-required         the prompt opened the tool-call block\n"
    "  --json-object                  response_format json_object\n"
    "  --stop TEXT                    a stop sequence (repeatable)\n"
    "  --custom-tool NAME             Responses: the request declared this custom tool (apply_patch); its\n"
    "                                 calls become custom_tool_call items with raw input (repeatable)\n"
    "  --finish stop|length|content_filter|none   how the backend ended (default stop)\n"
    "  --model NAME  --id ID  --created SECONDS  --prompt-tokens N  --cache-hit-tokens N\n"
    "  --include-usage true|false     stream_options.include_usage as the request gave it\n";

int RunParse(const std::vector<std::string>& args) {
  recipe::OutputParserOptions parser_options;
  parser_options.thinking_stage = recipe::ThinkingStage::kReasoningStart;
  recipe::ResponseOptions response_options;
  response_options.id = "chatcmpl-deepinfer";
  response_options.model = "deepseek-v4";
  std::optional<recipe::BackendFinish> finish = recipe::BackendFinish::kStop;
  recipe::UsageCounts usage;
  bool stream = false;
  recipe::Protocol protocol = recipe::Protocol::kChatCompletions;
  size_t chunk_size = 0;
  std::vector<std::string> paths;
  bool no_thinking = false, continue_reasoning = false, no_tools = false;
  std::string finish_name = "stop";
  constexpr int64_t kMaxCount = int64_t{1} << 53;  // exact in every JSON reader
  Flags flags("parse");
  flags.Switch("--stream", &stream);
  flags.Switch("--no-thinking", &no_thinking);
  flags.Switch("--continue-reasoning", &continue_reasoning);
  flags.Switch("--no-tools", &no_tools);
  flags.Switch("--tool-choice-required", &parser_options.starts_in_tool_calls);
  flags.Switch("--json-object", &parser_options.parse_json_output);
  flags.Strings("--stop", &parser_options.stop_sequences);
  flags.Strings("--custom-tool", &response_options.custom_tools);
  AddModelVersionFlag(flags, &parser_options.model_version);
  AddProtocolFlag(flags, &protocol);
  flags.Int<size_t>("--chunk-size", &chunk_size, 1, size_t{1} << 30);
  flags.Choice<std::string>("--finish", &finish_name,
                            {{"stop", "stop"}, {"length", "length"}, {"content_filter", "content_filter"}, {"none", "none"}});
  flags.String("--model", &response_options.model);
  flags.String("--id", &response_options.id);
  flags.Int<int64_t>("--created", &response_options.created, 0, kMaxCount);
  flags.Int<int64_t>("--prompt-tokens", &usage.prompt_tokens, 0, kMaxCount);
  flags.Int<int64_t>("--cache-hit-tokens", &usage.prompt_cache_hit_tokens, 0, kMaxCount);
  flags.Custom("--include-usage", "true|false", [&](const std::string& v) {
    if (v != "true" && v != "false") return Status::InvalidArgument("takes true or false (got '" + v + "')");
    response_options.include_usage = v == "true";
    return Status::Ok();
  });
  flags.Positionals("FILE", &paths, 0, 1);
  if (int rc = flags.Parse(args)) return rc;
  const std::string path = paths.empty() ? "-" : paths[0];
  if (no_thinking) {
    parser_options.thinking_stage.reset();
    response_options.thinking = false;
  }
  if (continue_reasoning) parser_options.thinking_stage = recipe::ThinkingStage::kReasoningContinuation;
  if (no_tools) parser_options.parse_tool_calls = false;
  if (finish_name == "stop") finish = recipe::BackendFinish::kStop;
  else if (finish_name == "length") finish = recipe::BackendFinish::kLength;
  else if (finish_name == "content_filter") finish = recipe::BackendFinish::kContentFilter;
  else finish.reset();
  if (usage.prompt_cache_hit_tokens > usage.prompt_tokens) {
    return UsageError("parse", "--cache-hit-tokens exceeds --prompt-tokens");
  }

  std::string text;
  if (path.empty() || path == "-") {
    auto read_stdin = ReadStdinToString();
    if (!read_stdin.ok()) return Fail("parse", read_stdin.status().message());
    text = std::move(read_stdin).value();
  } else {
    auto loaded = ReadFileToString(path);
    if (!loaded.ok()) return Fail("parse", loaded.status().message());
    text = std::move(loaded).value();
  }

  std::vector<recipe::CompletionChunk> chunks;
  const size_t step = chunk_size == 0 ? std::max<size_t>(text.size(), 1) : chunk_size;
  for (size_t pos = 0; pos < text.size(); pos += step) chunks.push_back({text.substr(pos, step), 1});

  if (response_options.id == "chatcmpl-deepinfer") {
    if (protocol == recipe::Protocol::kMessages) response_options.id = "msg_deepinfer";
    if (protocol == recipe::Protocol::kResponses) response_options.id = "resp_deepinfer";
  }
  const recipe::StreamRunResult run =
      recipe::RunCompletion(protocol, parser_options, response_options, chunks, finish, usage);
  if (stream) {
    std::cout << recipe::FormatSse(protocol, run.events_per_step);
  } else {
    std::cout << run.response << "\n";
  }
  return 0;
}

const CommandRegistration kRegistration{
    {"parse", "parse a model completion into a protocol response or SSE stream", kUsage, RunParse}};

}  // namespace
}  // namespace deepinfer::cli
