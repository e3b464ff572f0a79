// deepinfer parse [FILE]: a model completion in (text, explicit chunks, or token ids); the protocol response
// or its SSE stream out. With --jsonl, many completions in one process.
#include <algorithm>
#include <functional>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/recipe_flags.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "recipe/completion_options.h"
#include "recipe/output_options.h"
#include "recipe/request.h"
#include "pipeline/sse.h"
#include "recipe/stream_events.h"
#include "tokenizer/locate.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kParseUsage =
    "usage: deepinfer parse [options] [FILE|-]\n\n"
    "Parses a DeepSeek model completion (what the model wrote after the prompt, read from FILE or stdin) the\n"
    "way the server does while streaming, and prints the protocol response: the non-streaming JSON body,\n"
    "or with --stream the server-sent events (Chat Completions' end in `data: [DONE]`).\n\n"
    "Input (default: the text, fed in chunks of --chunk-size bytes, each counted as one token):\n"
    "  --chunks                       the input is a JSON array of strings: the chunks, as the engine would\n"
    "                                 deliver them (splits may fall inside characters and delimiters)\n"
    "  --token-ids                    the input is a JSON array of token ids, or an array of such arrays (one\n"
    "                                 chunk each); they are read as the server reads engine tokens (added\n"
    "                                 tokens such as </think> as control tokens, reasoning tokens counted)\n"
    "  --tokenizer NAME|PATH          the vocabulary of --token-ids (default: the builtin of --model-version)\n"
    "  --logprobs                     token input: write the tokens' logprob entries (Chat, Responses)\n"
    "  --jsonl                        stdin holds one completion per line: a JSON string (the text) or an\n"
    "                                 object {\"text\"} | {\"chunks\": [...]} | {\"token_ids\": [...]} |\n"
    "                                 {\"tokens\": [{\"token\", \"logprob\", \"control\", \"top_logprobs\"}, ...]},\n"
    "                                 optionally with \"finish\"; prints one JSON line per completion:\n"
    "                                 {\"response\": BODY, \"events\": [{\"event\", \"data\"}, ...]} or {\"error\": MESSAGE}\n"
    "  --chunk-size N                 feed N bytes at a time (splits may fall inside characters)\n\n"
    "What the prompt set up:\n"
    "  --model-version v3.2|v4|v4.1   tool-call block spelling to accept at the end (default v4)\n"
    "  --protocol chat|responses|messages   OpenAI Chat Completions, OpenAI Responses, Anthropic Messages\n"
    "                                 (anthropic = messages)\n"
    "  --no-thinking                  the prompt ended with </think>: no reasoning part\n"
    "  --continue-reasoning           a prefix continuation inside the reasoning (newlines kept)\n"
    "  --after-think                  a prefix continuation after </think>: parsing starts in the answer\n"
    "  --no-tools                     the request declared no tools: DSML stays plain text\n"
    "  --tool-choice-required         the prompt opened the tool-call block\n"
    "  --json-object                  response_format json_object\n"
    "  --stop TEXT                    a stop sequence (repeatable)\n"
    "  --function NAME                Responses: the request declared this function tool (repeatable)\n"
    "  --namespace NS:NAME            Responses: ... and this member of namespace NS (repeatable); its calls\n"
    "                                 report name and namespace apart\n"
    "  --custom-tool NAME             Responses: the request declared this custom tool (apply_patch); its\n"
    "                                 calls become custom_tool_call items with raw input (repeatable)\n\n"
    "Output:\n"
    "  --stream                       print the SSE event stream\n"
    "  --finish stop|length|content_filter|none   how the backend ended (default stop)\n"
    "  --model NAME  --id ID  --created SECONDS  --prompt-tokens N  --cache-hit-tokens N\n"
    "  --include-usage true|false     stream_options.include_usage as the request gave it\n";

constexpr size_t kMaxChunks = size_t{1} << 24;

struct ParseCommandArgs {
  recipe::OutputParserOptions parser_options;
  recipe::ResponseOptions response_options;
  std::optional<recipe::BackendFinish> finish = recipe::BackendFinish::kStop;
  recipe::UsageCounts usage;
  recipe::Protocol protocol = recipe::Protocol::kChatCompletions;
  bool stream = false;
  size_t chunk_size = 0;
};

Result<std::optional<recipe::BackendFinish>> ParseFinish(const std::string& name) {
  if (name == "stop") return std::optional<recipe::BackendFinish>(recipe::BackendFinish::kStop);
  if (name == "length") return std::optional<recipe::BackendFinish>(recipe::BackendFinish::kLength);
  if (name == "content_filter") return std::optional<recipe::BackendFinish>(recipe::BackendFinish::kContentFilter);
  if (name == "none") return std::optional<recipe::BackendFinish>();
  return Status::InvalidArgument("finish takes stop, length, content_filter or none (got '" + name + "')");
}

std::vector<recipe::CompletionChunk> TextChunks(const std::string& text, size_t chunk_size) {
  std::vector<recipe::CompletionChunk> chunks;
  const size_t step = chunk_size == 0 ? std::max<size_t>(text.size(), 1) : chunk_size;
  for (size_t pos = 0; pos < text.size(); pos += step) chunks.push_back({text.substr(pos, step), 1});
  return chunks;
}

// ["a", "b"]: one chunk per string.
Result<std::vector<recipe::CompletionChunk>> ChunksFromJson(const nlohmann::json& value) {
  if (!value.is_array()) return Status::InvalidArgument("chunks must be a JSON array of strings");
  if (value.size() > kMaxChunks) return Status::InvalidArgument("too many chunks");
  std::vector<recipe::CompletionChunk> chunks;
  for (const nlohmann::json& c : value) {
    if (!c.is_string()) return Status::InvalidArgument("chunks must be a JSON array of strings");
    chunks.push_back({c.get<std::string>(), 1});
  }
  return chunks;
}

recipe::TokenLogprob TokenFromId(const tokenizer::Tokenizer& tok, int32_t id) {
  recipe::TokenLogprob t;
  t.token = std::string(tok.TokenBytes(id));
  t.control = tok.IsAddedToken(id);
  return t;
}

// [1, 2, 3] (one token per chunk) or [[1, 2], [3]] (a chunk per array), read with the vocabulary.
Result<std::vector<recipe::CompletionChunk>> ChunksFromTokenIds(const nlohmann::json& value,
                                                                const tokenizer::Tokenizer& tok) {
  if (!value.is_array()) return Status::InvalidArgument("token ids must be a JSON array");
  if (value.size() > kMaxChunks) return Status::InvalidArgument("too many token ids");
  std::vector<recipe::CompletionChunk> chunks;
  auto token = [&](const nlohmann::json& id) -> Result<recipe::TokenLogprob> {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= (int64_t{1} << 31) ||
        tok.TokenBytes(static_cast<int32_t>(id.get<int64_t>())).empty()) {
      return Status::InvalidArgument("not a token id of the vocabulary: " + DumpJson(id));
    }
    return TokenFromId(tok, static_cast<int32_t>(id.get<int64_t>()));
  };
  for (const nlohmann::json& item : value) {
    recipe::CompletionChunk chunk;
    if (item.is_array()) {
      if (item.size() > kMaxChunks) return Status::InvalidArgument("too many token ids");
      for (const nlohmann::json& id : item) {
        DI_ASSIGN_OR_RETURN(recipe::TokenLogprob t, token(id));
        chunk.logprobs.push_back(std::move(t));
      }
    } else {
      DI_ASSIGN_OR_RETURN(recipe::TokenLogprob t, token(item));
      chunk.logprobs.push_back(std::move(t));
    }
    for (const recipe::TokenLogprob& t : chunk.logprobs) chunk.text += t.token;
    chunk.token_count = static_cast<int64_t>(chunk.logprobs.size());
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

// [{"token": "Hel", "logprob": -0.1, "control": false, "top_logprobs": [{"token", "logprob"}]}, ...]: one
// token per chunk, with the log probabilities the engine would report.
Result<std::vector<recipe::CompletionChunk>> ChunksFromTokens(const nlohmann::json& value) {
  if (!value.is_array()) return Status::InvalidArgument("tokens must be a JSON array of objects");
  if (value.size() > kMaxChunks) return Status::InvalidArgument("too many tokens");
  std::vector<recipe::CompletionChunk> chunks;
  for (const nlohmann::json& t : value) {
    if (!t.is_object() || !t.contains("token") || !t["token"].is_string()) {
      return Status::InvalidArgument("each token must be an object with a string \"token\"");
    }
    recipe::TokenLogprob token;
    token.token = t["token"].get<std::string>();
    token.logprob = t.value("logprob", 0.0);
    token.control = t.value("control", false);
    if (const auto top = t.find("top_logprobs"); top != t.end() && top->is_array()) {
      for (const nlohmann::json& alt : *top) {
        if (alt.is_object() && alt.contains("token") && alt["token"].is_string()) {
          token.top_logprobs.push_back({alt["token"].get<std::string>(), alt.value("logprob", 0.0)});
        }
      }
    }
    recipe::CompletionChunk chunk;
    chunk.text = token.token;
    chunk.logprobs.push_back(std::move(token));
    chunks.push_back(std::move(chunk));
  }
  return chunks;
}

// The Responses tools a completion answers, declared by --function/--namespace/--custom-tool: parsed as a
// request would be, so the response's echoed tools, custom tools and namespace members are the server's.
Status DeclareResponsesTools(const std::vector<std::string>& functions, const std::vector<std::string>& members,
                             const std::vector<std::string>& custom, recipe::ModelVersion version,
                             recipe::ResponseOptions* options) {
  if (functions.empty() && members.empty()) return Status::Ok();
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  for (const std::string& name : custom) tools.push_back({{"type", "custom"}, {"name", name}});
  for (const std::string& name : functions) tools.push_back({{"type", "function"}, {"name", name}});
  for (const std::string& member : members) {
    const size_t colon = member.find(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == member.size()) {
      return Status::InvalidArgument("--namespace takes NS:NAME (got '" + member + "')");
    }
    nlohmann::ordered_json fn = {{"type", "function"}, {"name", member.substr(colon + 1)}};
    tools.push_back({{"type", "namespace"}, {"name", member.substr(0, colon)}, {"tools", {fn}}});
  }
  nlohmann::ordered_json body = {{"model", "m"}, {"input", "x"}, {"tools", tools}};
  recipe::RequestOptions request_options;
  request_options.model_version = version;
  const recipe::ParseOutcome parsed = recipe::ParseResponsesRequest(DumpJson(body), request_options);
  if (!parsed.ok()) return Status::InvalidArgument(parsed.error.message);
  const recipe::ResponseOptions declared = recipe::ResponseOptionsFor(*parsed.request);
  options->responses_echo.tools = declared.responses_echo.tools;
  options->custom_tools = declared.custom_tools;
  options->namespace_tools = declared.namespace_tools;
  return Status::Ok();
}

nlohmann::ordered_json EventsJson(const recipe::StreamRunResult& run) {
  nlohmann::ordered_json events = nlohmann::ordered_json::array();
  for (const auto& step : run.events_per_step) {
    for (const recipe::StreamEvent& e : step) {
      nlohmann::ordered_json data = nlohmann::ordered_json::parse(e.json, nullptr, /*allow_exceptions=*/false);
      events.push_back({{"event", e.name.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(e.name)},
                        {"data", std::move(data)}});
    }
  }
  return events;
}

// One --jsonl line: the chunks of the completion it holds, and its finish.
Status LineChunks(const std::string& line, const ParseCommandArgs& args,
                  const std::function<Result<const tokenizer::Tokenizer*>()>& vocabulary,
                  std::vector<recipe::CompletionChunk>* chunks, std::optional<recipe::BackendFinish>* finish) {
  DI_ASSIGN_OR_RETURN(nlohmann::json value, ParseJson(line));
  *finish = args.finish;
  if (value.is_string()) {
    *chunks = TextChunks(value.get<std::string>(), args.chunk_size);
    return Status::Ok();
  }
  if (!value.is_object()) return Status::InvalidArgument("a line must be a JSON string or object");
  if (const auto f = value.find("finish"); f != value.end()) {
    if (!f->is_string()) return Status::InvalidArgument("\"finish\" must be a string");
    DI_ASSIGN_OR_RETURN(*finish, ParseFinish(f->get<std::string>()));
  }
  if (const auto t = value.find("text"); t != value.end()) {
    if (!t->is_string()) return Status::InvalidArgument("\"text\" must be a string");
    *chunks = TextChunks(t->get<std::string>(), args.chunk_size);
  } else if (const auto c = value.find("chunks"); c != value.end()) {
    DI_ASSIGN_OR_RETURN(*chunks, ChunksFromJson(*c));
  } else if (const auto ids = value.find("token_ids"); ids != value.end()) {
    DI_ASSIGN_OR_RETURN(const tokenizer::Tokenizer* tok, vocabulary());
    DI_ASSIGN_OR_RETURN(*chunks, ChunksFromTokenIds(*ids, *tok));
  } else if (const auto tokens = value.find("tokens"); tokens != value.end()) {
    DI_ASSIGN_OR_RETURN(*chunks, ChunksFromTokens(*tokens));
  } else {
    return Status::InvalidArgument("a line needs \"text\", \"chunks\", \"token_ids\" or \"tokens\"");
  }
  return Status::Ok();
}

std::string_view DefaultTokenizer(recipe::ModelVersion version) {
  switch (version) {
    case recipe::ModelVersion::kV32: return "deepseek-v3";
    case recipe::ModelVersion::kV4: return "deepseek-v4";
    case recipe::ModelVersion::kV41: return "deepseek-v4.1";
  }
  return "deepseek-v4";
}

int RunParse(const std::vector<std::string>& argv) {
  ParseCommandArgs args;
  recipe::OutputParserOptions& parser_options = args.parser_options;
  recipe::ResponseOptions& response_options = args.response_options;
  parser_options.thinking_stage = recipe::ThinkingStage::kReasoningStart;
  response_options.model = "deepseek-v4";
  response_options.emit_logprobs = false;
  std::vector<std::string> paths, functions, members;
  bool no_thinking = false, continue_reasoning = false, after_think = false, no_tools = false;
  bool jsonl = false, chunks_input = false, token_ids = false;
  std::string finish_name = "stop", tokenizer_name;
  constexpr int64_t kMaxCount = int64_t{1} << 53;  // exact in every JSON reader
  Flags flags("parse");
  flags.Switch("--stream", &args.stream);
  flags.Switch("--jsonl", &jsonl);
  flags.Switch("--chunks", &chunks_input);
  flags.Switch("--token-ids", &token_ids);
  flags.String("--tokenizer", &tokenizer_name);
  flags.Switch("--logprobs", &response_options.emit_logprobs);
  flags.Switch("--no-thinking", &no_thinking);
  flags.Switch("--continue-reasoning", &continue_reasoning);
  flags.Switch("--after-think", &after_think);
  flags.Switch("--no-tools", &no_tools);
  flags.Switch("--tool-choice-required", &parser_options.starts_in_tool_calls);
  flags.Switch("--json-object", &parser_options.parse_json_output);
  flags.Strings("--stop", &parser_options.stop_sequences);
  flags.Strings("--function", &functions);
  flags.Strings("--namespace", &members);
  flags.Strings("--custom-tool", &response_options.custom_tools);
  AddModelVersionFlag(flags, &parser_options.model_version);
  AddProtocolFlag(flags, &args.protocol);
  flags.Int<size_t>("--chunk-size", &args.chunk_size, 1, size_t{1} << 30);
  flags.Choice<std::string>("--finish", &finish_name,
                            {{"stop", "stop"}, {"length", "length"}, {"content_filter", "content_filter"}, {"none", "none"}});
  flags.String("--model", &response_options.model);
  flags.String("--id", &response_options.id);
  flags.Int<int64_t>("--created", &response_options.created, 0, kMaxCount);
  flags.Int<int64_t>("--prompt-tokens", &args.usage.prompt_tokens, 0, kMaxCount);
  flags.Int<int64_t>("--cache-hit-tokens", &args.usage.prompt_cache_hit_tokens, 0, kMaxCount);
  flags.Custom("--include-usage", "true|false", [&](const std::string& v) {
    if (v != "true" && v != "false") return Status::InvalidArgument("takes true or false (got '" + v + "')");
    response_options.include_usage = v == "true";
    return Status::Ok();
  });
  flags.Positionals("FILE", &paths, 0, 1);
  if (int rc = flags.Parse(argv)) return rc;
  if (no_thinking + continue_reasoning + after_think > 1) {
    return UsageError("parse", "--no-thinking, --continue-reasoning and --after-think exclude each other");
  }
  if (chunks_input + token_ids + jsonl > 1) return UsageError("parse", "--chunks, --token-ids and --jsonl exclude each other");
  if (no_thinking) {
    parser_options.thinking_stage.reset();
    response_options.thinking = false;
  }
  if (continue_reasoning) parser_options.thinking_stage = recipe::ThinkingStage::kReasoningContinuation;
  if (after_think) parser_options.thinking_stage = recipe::ThinkingStage::kContentContinuation;
  if (no_tools) parser_options.parse_tool_calls = false;
  args.finish = *ParseFinish(finish_name);
  if (args.usage.prompt_cache_hit_tokens > args.usage.prompt_tokens) {
    return UsageError("parse", "--cache-hit-tokens exceeds --prompt-tokens");
  }
  if ((!functions.empty() || !members.empty()) && args.protocol != recipe::Protocol::kResponses) {
    return UsageError("parse", "--function and --namespace declare Responses tools (use --protocol responses)");
  }
  if (Status s = DeclareResponsesTools(functions, members, response_options.custom_tools, parser_options.model_version,
                                       &response_options);
      !s.ok()) {
    return UsageError("parse", s.message());
  }
  // A fixed id unless one was given, in the protocol's style, so that output is reproducible.
  if (!flags.given("--id")) {
    response_options.id = args.protocol == recipe::Protocol::kMessages    ? "msg_deepinfer"
                          : args.protocol == recipe::Protocol::kResponses ? "resp_deepinfer"
                                                                          : "chatcmpl-deepinfer";
  }
  // The vocabulary of token ids, loaded when first needed (a builtin takes tens of milliseconds).
  std::optional<tokenizer::Tokenizer> tok;
  auto vocabulary = [&]() -> Result<const tokenizer::Tokenizer*> {
    if (!tok) {
      DI_ASSIGN_OR_RETURN(tokenizer::Tokenizer loaded,
                          tokenizer::LoadTokenizer(tokenizer_name, DefaultTokenizer(parser_options.model_version)));
      tok.emplace(std::move(loaded));
    }
    return &*tok;
  };

  auto run = [&](const std::vector<recipe::CompletionChunk>& chunks, std::optional<recipe::BackendFinish> finish) {
    return recipe::RunCompletion(args.protocol, parser_options, response_options, chunks, finish, args.usage);
  };

  if (jsonl) {
    std::string line;
    while (std::getline(std::cin, line)) {
      nlohmann::ordered_json result;
      std::vector<recipe::CompletionChunk> chunks;
      std::optional<recipe::BackendFinish> finish;
      if (Status s = LineChunks(line, args, vocabulary, &chunks, &finish); !s.ok()) {
        result["error"] = s.message();
      } else {
        const recipe::StreamRunResult r = run(chunks, finish);
        result["response"] = nlohmann::ordered_json::parse(r.response, nullptr, /*allow_exceptions=*/false);
        if (args.stream) result["events"] = EventsJson(r);
      }
      std::cout << DumpJson(result) << "\n";
    }
    return 0;
  }

  const std::string path = paths.empty() ? "-" : paths[0];
  Result<std::string> input = path == "-" ? ReadStdinToString() : ReadFileToString(path);
  if (!input.ok()) return Fail("parse", input.status().message());
  std::vector<recipe::CompletionChunk> chunks;
  if (chunks_input || token_ids) {
    Result<nlohmann::json> value = ParseJson(*input);
    if (!value.ok()) return Fail("parse", value.status().message());
    Result<std::vector<recipe::CompletionChunk>> read = Status::InvalidArgument("");
    if (chunks_input) {
      read = ChunksFromJson(*value);
    } else {
      Result<const tokenizer::Tokenizer*> vocab = vocabulary();
      if (!vocab.ok()) return Fail("parse", vocab.status().message());
      read = ChunksFromTokenIds(*value, **vocab);
    }
    if (!read.ok()) return Fail("parse", read.status().message());
    chunks = std::move(read).value();
  } else {
    chunks = TextChunks(*input, args.chunk_size);
  }
  const recipe::StreamRunResult r = run(chunks, args.finish);
  if (args.stream) {
    for (const auto& step : r.events_per_step) std::cout << pipeline::FormatSse(step);
    if (args.protocol == recipe::Protocol::kChatCompletions) std::cout << pipeline::FormatSse({&pipeline::kSseDone, 1});
  } else {
    std::cout << r.response << "\n";
  }
  return 0;
}

const CommandRegistration kParseRegistration{
    {"parse", "parse a model completion into a protocol response or SSE stream", kParseUsage, RunParse}};

}  // namespace
}  // namespace deepinfer::cli
