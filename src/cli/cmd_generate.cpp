// deepinfer generate: one request through the whole pipeline, without a server: parse the API request,
// render the DeepSeek prompt, tokenize, run the model (prefill, then greedy decode), detokenize as a stream,
// parse the output and print the protocol's response or its SSE stream.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/recipe_flags.h"
#include "core/mapped_file.h"
#include "model/causal_lm.h"
#include "model/sequential_blocks.h"
#include "recipe/completion_options.h"
#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "recipe/stream_events.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kUsage =
    "usage: deepinfer generate --model DIR (--prompt TEXT | --request FILE|-) [options]\n\n"
    "Runs one request through the whole pipeline without a server: parses the API request, renders the\n"
    "DeepSeek prompt, tokenizes it, runs the model (chunked prefill, then greedy decoding), detokenizes as\n"
    "a stream and prints the protocol's response body, or its SSE event stream with --stream.\n"
    "Decoding is greedy (argmax, lowest id on ties) whatever the request's temperature says.\n\n"
    "  --model DIR                    Hugging Face checkpoint directory (config.json, safetensors, tokenizer.json)\n"
    "  --prompt TEXT                  a single user message (Chat Completions request)\n"
    "  --request FILE|-               the request body as JSON\n"
    "  --protocol chat|responses|messages    the request's API (default chat; anthropic = messages)\n"
    "  --model-version v3.2|v4|v4.1   prompt encoding (default v4)\n"
    "  --max-tokens N                 generation limit when the request sets none (default 64)\n"
    "  --no-thinking                  with --prompt: chat mode instead of thinking mode\n"
    "  --stream                       print the SSE event stream as tokens are generated\n"
    "  --tokenizer PATH               tokenizer.json (default: DIR/tokenizer.json)\n"
    "  --prefill-chunk N              prompt tokens per forward call (default 512)\n"
    "  --precision exact|bf16         matrix-product arithmetic (default exact; bf16 rounds activations)\n";

struct GenerateArgs {
  std::string model_dir;
  std::string prompt;
  std::string request_path;
  std::string tokenizer_path;
  recipe::Protocol protocol = recipe::Protocol::kChatCompletions;
  recipe::ModelVersion version = recipe::ModelVersion::kV4;
  int64_t max_tokens = 64;
  int64_t prefill_chunk = 512;
  model::ComputePrecision precision = model::ComputePrecision::kExact;
  bool thinking = true;
  bool stream = false;
};

// Returns 0 on success, else the exit code of a usage error already printed.
int ParseArgs(const std::vector<std::string>& args, GenerateArgs* out) {
  Flags flags("generate");
  flags.Path("--model", &out->model_dir).Required();
  flags.String("--prompt", &out->prompt);
  flags.Path("--request", &out->request_path);
  flags.Path("--tokenizer", &out->tokenizer_path);
  flags.Switch("--stream", &out->stream);
  flags.Switch("--no-thinking", &out->thinking, false);
  flags.Choice("--precision", &out->precision,
               {{"exact", model::ComputePrecision::kExact}, {"bf16", model::ComputePrecision::kBf16Activations}});
  AddProtocolFlag(flags, &out->protocol);
  AddModelVersionFlag(flags, &out->version);
  flags.Int<int64_t>("--max-tokens", &out->max_tokens, 1, 1 << 20);
  flags.Int<int64_t>("--prefill-chunk", &out->prefill_chunk, 1, 1 << 20);
  if (int rc = flags.Parse(args)) return rc;
  if (out->prompt.empty() == out->request_path.empty())
    return UsageError("generate", "give exactly one of --prompt and --request");
  if (!out->prompt.empty() && out->protocol != recipe::Protocol::kChatCompletions)
    return UsageError("generate", "--prompt builds a Chat Completions request; use --request for other protocols");
  return 0;
}

Result<std::string> RequestBody(const GenerateArgs& args) {
  if (!args.prompt.empty()) {
    nlohmann::ordered_json body = {{"model", "deepinfer"},
                                   {"messages", {{{"role", "user"}, {"content", args.prompt}}}},
                                   {"thinking", {{"type", args.thinking ? "enabled" : "disabled"}}}};
    if (args.stream) body["stream"] = true;
    return body.dump();
  }
  if (args.request_path == "-") {
    std::ostringstream text;
    text << std::cin.rdbuf();
    return text.str();
  }
  return ReadFileToString(args.request_path);
}

int32_t Argmax(const float* logits, int64_t n) {
  int32_t best = 0;
  for (int64_t i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  return best;
}

void PrintEvents(recipe::Protocol protocol, const std::vector<recipe::StreamEvent>& events) {
  std::string text = recipe::FormatSse(protocol, {events});
  // FormatSse closes Chat Completions streams with [DONE]; the caller writes it once, at the very end.
  if (protocol == recipe::Protocol::kChatCompletions) text.resize(text.size() - std::string("data: [DONE]\n\n").size());
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

int RunGenerate(const std::vector<std::string>& argv) {
  GenerateArgs args;
  if (int rc = ParseArgs(argv, &args)) return rc;

  auto body = RequestBody(args);
  if (!body.ok()) return Fail("generate", body.status().message());
  recipe::RequestOptions request_options;
  request_options.model_version = args.version;
  recipe::ParseOutcome parsed = recipe::ParseRequest(args.protocol, *body, request_options);
  if (!parsed.ok()) {
    std::cerr << recipe::ErrorBody(args.protocol, parsed.error) << "\n";
    return 1;
  }
  const recipe::ParsedRequest& request = *parsed.request;

  const std::string tokenizer_path = args.tokenizer_path.empty()
                                         ? (std::filesystem::path(args.model_dir) / "tokenizer.json").string()
                                         : args.tokenizer_path;
  auto tokenizer = tokenizer::Tokenizer::FromFile(tokenizer_path);
  if (!tokenizer.ok()) return Fail("generate", tokenizer.status().message());
  auto rendered = recipe::RenderPrompt(request.conversation, args.version);
  if (!rendered.ok()) return Fail("generate", rendered.status().message());
  auto prompt_ids = recipe::TokenizePrompt(*rendered, *tokenizer);
  if (!prompt_ids.ok()) return Fail("generate", prompt_ids.status().message());

  model::LoadOptions load_options;
  load_options.precision = args.precision;
  load_options.progress = model::TerminalProgressBar("loading " + args.model_dir);
  auto loaded = model::LoadCausalLM(args.model_dir, load_options);
  if (!loaded.ok()) return Fail("generate", loaded.status().message());
  model::CausalLM& lm = **loaded;
  if (lm.info().vocab_size < static_cast<int64_t>(tokenizer->vocab_size()))
    return Fail("generate", "the model's vocabulary (" + std::to_string(lm.info().vocab_size) +
                                ") is smaller than the tokenizer's (" + std::to_string(tokenizer->vocab_size()) + ")");

  const int64_t max_new = request.inference.max_tokens.value_or(args.max_tokens);
  const int64_t total = static_cast<int64_t>(prompt_ids->size()) + max_new;
  auto pools = model::KvPools::Create(lm.cache_spec(), model::BlocksFor(total));
  if (!pools.ok()) return Fail("generate", pools.status().message());
  model::KvPools& pool = *pools;
  model::SequentialBlocks blocks(lm.cache_spec(), pool);
  std::unique_ptr<model::SequenceState> state = lm.NewSequence();

  const recipe::Protocol protocol = request.protocol;
  recipe::ResponseOptions response_options = recipe::ResponseOptionsFor(request);
  response_options.created =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  recipe::UsageCounts usage;
  usage.prompt_tokens = static_cast<int64_t>(prompt_ids->size());
  recipe::CompletionStream completion(protocol, recipe::OutputParserOptionsFor(request, args.version),
                                      response_options, usage);
  const bool stream = args.stream || request.inference.stream;
  auto emit = [&](const std::vector<recipe::StreamEvent>& events) {
    if (stream) PrintEvents(protocol, events);
  };
  emit(completion.Start());

  // Prefill in chunks; only the last chunk asks for logits.
  model::ForwardOutput out;
  const std::vector<int32_t>& ids = *prompt_ids;
  for (size_t begin = 0; begin < ids.size(); begin += static_cast<size_t>(args.prefill_chunk)) {
    const size_t end = std::min(ids.size(), begin + static_cast<size_t>(args.prefill_chunk));
    model::SequenceChunk chunk{state.get(), std::span<const int32_t>(ids.data() + begin, end - begin),
                               end == ids.size() ? model::LogitsWanted::kLast : model::LogitsWanted::kNone};
    Status status = blocks.Reserve(*state, static_cast<int64_t>(end - begin));
    if (status.ok()) status = lm.Forward({&chunk, 1}, pool, &out);
    if (!status.ok()) return Fail("generate", status.message());
  }

  // End of sequence: the ids config.json names (the model's own control tokens).
  const std::vector<int32_t>& eos_ids = lm.info().eos_token_ids;
  tokenizer::StreamingDetokenizer detokenizer(*tokenizer, /*skip_special=*/true);
  recipe::BackendFinish finish = recipe::BackendFinish::kLength;
  for (int64_t step = 0; step < max_new && !completion.done(); ++step) {
    const int32_t next = Argmax(out.row(0), out.vocab_size);
    if (std::find(eos_ids.begin(), eos_ids.end(), next) != eos_ids.end()) {
      finish = recipe::BackendFinish::kStop;
      break;
    }
    emit(completion.Feed({detokenizer.Add(next), 1}));
    if (step + 1 == max_new) break;
    model::SequenceChunk chunk{state.get(), std::span<const int32_t>(&next, 1), model::LogitsWanted::kLast};
    Status status = blocks.Reserve(*state, 1);
    if (status.ok()) status = lm.Forward({&chunk, 1}, pool, &out);
    if (!status.ok()) return Fail("generate", status.message());
  }
  if (!completion.done()) {
    const std::string tail = detokenizer.Finish();
    if (!tail.empty()) emit(completion.Feed({tail, 0}));
  }
  emit(completion.Finish(finish));
  if (stream) {
    if (protocol == recipe::Protocol::kChatCompletions) std::fputs("data: [DONE]\n\n", stdout);
  } else {
    std::cout << completion.Response() << "\n";
  }
  std::fflush(stdout);
  return 0;
}

const CommandRegistration kRegistration({"generate", "one request through the whole pipeline (greedy), no server",
                                         kUsage, RunGenerate});

}  // namespace
}  // namespace deepinfer::cli
