// deepinfer parse [FILE]: a model completion (text) in; the protocol response or its SSE stream out.
#include <algorithm>
#include <iostream>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
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
    "  --protocol chat|messages|responses   OpenAI Chat Completions, Anthropic Messages, OpenAI Responses\n"
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
  std::string path;

  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string* out) {
      if (i + 1 >= args.size()) return false;
      *out = args[++i];
      return true;
    };
    auto number = [&](int64_t* out) {
      std::string v;
      if (!value(&v)) return false;
      try {
        size_t used = 0;
        *out = std::stoll(v, &used);
        return used == v.size() && *out >= 0;
      } catch (...) {
        return false;
      }
    };
    std::string v;
    int64_t n = 0;
    if (a == "--stream") {
      stream = true;
    } else if (a == "--no-thinking") {
      parser_options.thinking_stage.reset();
      response_options.thinking = false;
    } else if (a == "--continue-reasoning") {
      parser_options.thinking_stage = recipe::ThinkingStage::kReasoningContinuation;
    } else if (a == "--no-tools") {
      parser_options.parse_tool_calls = false;
    } else if (a == "--tool-choice-required") {
      parser_options.starts_in_tool_calls = true;
    } else if (a == "--json-object") {
      parser_options.parse_json_output = true;
    } else if (a == "--stop") {
      if (!value(&v)) return UsageError("parse", "--stop needs a value");
      parser_options.stop_sequences.push_back(v);
    } else if (a == "--custom-tool") {
      if (!value(&v)) return UsageError("parse", "--custom-tool needs a value");
      response_options.custom_tools.push_back(v);
    } else if (a == "--model-version") {
      if (!value(&v)) return UsageError("parse", "--model-version needs a value");
      if (v == "v3.2") parser_options.model_version = recipe::ModelVersion::kV32;
      else if (v == "v4") parser_options.model_version = recipe::ModelVersion::kV4;
      else if (v == "v4.1") parser_options.model_version = recipe::ModelVersion::kV41;
      else return UsageError("parse", "unknown --model-version '" + v + "' (v3.2, v4 or v4.1)");
    } else if (a == "--protocol") {
      if (!value(&v)) return UsageError("parse", "--protocol needs a value");
      if (v == "responses") protocol = recipe::Protocol::kResponses;
      else if (v == "chat") protocol = recipe::Protocol::kChatCompletions;
      else if (v == "messages") protocol = recipe::Protocol::kMessages;
      else return UsageError("parse", "unknown --protocol '" + v + "' (chat, messages, responses)");
    } else if (a == "--chunk-size") {
      if (!number(&n) || n == 0) return UsageError("parse", "--chunk-size needs a positive integer");
      chunk_size = static_cast<size_t>(n);
    } else if (a == "--finish") {
      if (!value(&v)) return UsageError("parse", "--finish needs a value");
      if (v == "stop") finish = recipe::BackendFinish::kStop;
      else if (v == "length") finish = recipe::BackendFinish::kLength;
      else if (v == "content_filter") finish = recipe::BackendFinish::kContentFilter;
      else if (v == "none") finish.reset();
      else return UsageError("parse", "unknown --finish '" + v + "'");
    } else if (a == "--model") {
      if (!value(&response_options.model)) return UsageError("parse", "--model needs a value");
    } else if (a == "--id") {
      if (!value(&response_options.id)) return UsageError("parse", "--id needs a value");
    } else if (a == "--created") {
      if (!number(&response_options.created)) return UsageError("parse", "--created needs a number");
    } else if (a == "--prompt-tokens") {
      if (!number(&usage.prompt_tokens)) return UsageError("parse", "--prompt-tokens needs a number");
    } else if (a == "--cache-hit-tokens") {
      if (!number(&usage.prompt_cache_hit_tokens)) return UsageError("parse", "--cache-hit-tokens needs a number");
    } else if (a == "--include-usage") {
      if (!value(&v) || (v != "true" && v != "false")) return UsageError("parse", "--include-usage needs true or false");
      response_options.include_usage = v == "true";
    } else if (a == "-" || a.empty() || a[0] != '-') {
      if (!path.empty()) return UsageError("parse", "more than one input file given");
      path = a;
    } else {
      return UsageError("parse", "unknown option '" + a + "'");
    }
  }
  if (usage.prompt_cache_hit_tokens > usage.prompt_tokens) {
    return UsageError("parse", "--cache-hit-tokens exceeds --prompt-tokens");
  }

  std::string text;
  if (path.empty() || path == "-") {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
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
