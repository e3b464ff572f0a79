// Options of the output side of the recipe codec: how a model completion is parsed and which protocol
// response it becomes. Kept apart from the request side so that parsing depends on nothing but these.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/model_version.h"
#include "recipe/protocol.h"

namespace deepinfer::recipe {

// Where parsing begins in thinking mode (deepseek-recipe's ThinkingInitialStage); absent = chat mode.
enum class ThinkingStage {
  kReasoningStart,         // a new turn: reasoning first, its leading newlines dropped
  kReasoningContinuation,  // a prefix continuation inside reasoning: newlines kept
  kContentContinuation,    // a prefix continuation after `</think>`: newlines kept
};

struct OutputParserOptions {
  ModelVersion model_version = ModelVersion::kV4;
  bool parse_tool_calls = true;
  bool starts_in_tool_calls = false;  // tool_choice "required": the prompt opened the block
  bool parse_json_output = false;     // response_format json_object
  std::optional<ThinkingStage> thinking_stage;
  std::vector<std::string> stop_sequences;  // empty strings are ignored
};

// What the backend reported when generation ended.
enum class BackendFinish { kStop, kLength, kContentFilter };

struct UsageCounts {
  int64_t prompt_tokens = 0;
  int64_t prompt_cache_hit_tokens = 0;
  int64_t completion_tokens = 0;
  // Counted when the completion arrives as tokens (chunks carrying per-token data), as deepseek-recipe
  // counts them for token chunks: tokens of the reasoning before its end. Unset for text chunks.
  std::optional<int64_t> reasoning_tokens;
};

// One generated token as the engine reports it: its bytes (possibly part of a UTF-8 character), its log
// probability and the most likely alternatives at that step (the token itself usually among them).
struct TokenAlternative {
  std::string token;
  double logprob = 0;
};
struct TokenLogprob {
  std::string token;
  double logprob = 0;
  std::vector<TokenAlternative> top_logprobs;
  // An added token of the vocabulary (`</think>`, `｜DSML｜`, `<｜User｜>`, ...): decoded on its own.
  bool control = false;
};

// The JSON of one token's entry in Chat Completions `logprobs.content[]` and Responses `logprobs[]`, as
// deepseek-recipe writes it: {"token","logprob","bytes","top_logprobs":[{"token","logprob","bytes"}]}.
// Bytes that are not UTF-8 appear in "token" as \xNN; log probabilities are 32-bit floats.
std::string TokenLogprobJson(const TokenLogprob& token);

// A fresh response id in the protocol's style: "chatcmpl-", "resp_" or "msg_" and 24 random letters and
// digits, as the OpenAI and Anthropic APIs write them.
std::string RandomResponseId(Protocol protocol);

// Request settings an OpenAI Responses object repeats, as JSON values (the request side renders them;
// the defaults are those of a request that set nothing).
struct ResponsesEcho {
  std::string instructions = "null";
  std::string max_output_tokens = "null";
  std::string max_tool_calls = "null";
  std::string parallel_tool_calls = "true";
  std::string reasoning = R"({"effort":null,"summary":null})";
  std::string temperature = "1.0";
  std::string text = R"({"format":{"type":"text"},"verbosity":null})";
  std::string tool_choice = R"("auto")";
  std::string tools = "[]";
  std::string top_logprobs = "0";
  std::string top_p = "1.0";
  std::string user = "null";
  std::string metadata = "{}";
  // The stored response this one continues, as a JSON string (the server resolves it before the codec).
  std::string previous_response_id = "null";
};

// A Responses namespace member as the model calls it (`docs__lookup` for V4, `docs::lookup` for V4.1) and
// as the response reports it (`"name":"lookup","namespace":"docs"`).
struct NamespacedTool {
  std::string name;
  std::string ns;
  std::string local_name;
};

struct ResponseOptions {
  // The response id; empty: a random one in the protocol's own style (RandomResponseId).
  std::string id;
  std::string model = "deepseek";
  int64_t created = 0;  // Unix seconds
  bool thinking = true;  // the conversation's thinking mode (shapes Chat Completions deltas)
  std::optional<bool> include_usage;  // stream_options.include_usage as the request gave it
  ResponsesEcho responses_echo;
  int64_t completed_at = -1;  // Responses: Unix seconds of completion; < 0: the clock at that moment
  // Chat Completions: the choice this completion is (`"choices":[{"index":N`), for n > 1.
  int64_t choice_index = 0;
  // Whether token entries go into Chat Completions `logprobs` and Responses `output_text` `logprobs` when the
  // completion arrives as tokens (CompletionChunk::logprobs). False: the completion is still read from its
  // tokens (`</think>` only as the control token, reasoning tokens counted), but no entries are written, for
  // a request that asked for no logprobs.
  bool emit_logprobs = true;
  // Responses: the request's namespace members (a handful; looked up by the name the model wrote).
  std::vector<NamespacedTool> namespace_tools;
  // Responses: names of the request's custom tools (`apply_patch`); their calls become custom_tool_call items.
  std::vector<std::string> custom_tools;
  // Tool-call id for the call with this index; default: "call_NN_" + 24 random characters.
  std::function<std::string(int index)> tool_call_id;
  // How many tokens a text encodes to (control-token spellings as control tokens). deepseek-recipe reports
  // the reasoning tokens of a completion fed as tokens as its reasoning text re-encoded, not as the tokens
  // generated; unset, the generated tokens of the reasoning are counted instead.
  std::function<int64_t(std::string_view text)> count_tokens;
  // A completion fed as tokens that ends inside a character: deepseek-recipe drops the tokens of that last
  // run (text, count and entries); true keeps them, the character written as U+FFFD, as OpenAI and vLLM do.
  bool keep_incomplete_character = false;
};

}  // namespace deepinfer::recipe
