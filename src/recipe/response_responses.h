// OpenAI Responses output: the streamed events (response.created / in_progress, output_item.added /
// done for reasoning, message and function_call items, content parts, text and argument deltas, and
// response.completed or response.incomplete) and the final response object, byte for byte as
// deepseek-recipe 0.2 writes them.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/output_options.h"
#include "recipe/output_parser.h"

namespace deepinfer::recipe {

struct ResponsesEvent {
  std::string name;  // the SSE event name (= the JSON's "type")
  std::string json;
};

class ResponsesStream {
 public:
  explicit ResponsesStream(ResponseOptions options);

  void Start(std::vector<ResponsesEvent>* events);
  // `logprobs`: as for ChatCompletionStream::AppendChunks; output text carries them, reasoning does not.
  void AppendEvents(const std::vector<OutputDelta>& deltas, std::vector<ResponsesEvent>* events,
                    const std::vector<std::string>* logprobs = nullptr);
  // `finish` absent or kStop: completed; kLength / kContentFilter: incomplete.
  void Finish(std::optional<BackendFinish> finish, const UsageCounts& usage, std::vector<ResponsesEvent>* events);
  // The final response object (after Finish).
  const std::string& Response() const { return final_response_; }

 private:
  enum class ItemType { kReasoning, kMessage, kFunctionCall, kCustomToolCall };
  // How a custom tool call's argument fragments become its raw input (deepseek-recipe's rule): while the
  // arguments so far are a prefix of `{"input": "`, they are held; once they begin with it, the string
  // value is decoded as it arrives (an escape or a character split between fragments waits for its rest)
  // and everything after its closing quote is dropped; once they diverge, the held text and every later
  // fragment go out as they are. The value is the same whether the parameter came as string="true" (the
  // parser quotes it) or as a JSON string with string="false", and whatever the chunking.
  enum class CustomInput { kHolding, kRawValue, kRawDone, kVerbatim };
  struct Item {
    ItemType type;
    std::string id;
    std::string text;  // reasoning text, message text, or arguments
    std::string call_id;
    std::string name;
    std::string status = "in_progress";
    std::string phase = "final_answer";
    CustomInput custom_input = CustomInput::kHolding;
    std::string held;  // custom tool calls: argument text held while kHolding, an unfinished escape in kRawValue
    std::string logprobs;  // messages: the comma-joined token entries of the text
  };
  void AppendCustomInput(const std::string& fragment, std::vector<ResponsesEvent>* events);
  void PushCustomDelta(const std::string& text, std::vector<ResponsesEvent>* events);
  std::string ItemJson(const Item& item) const;
  std::string PartJson(const Item& item, bool with_text) const;
  std::string ResponseObject(std::string_view status, int64_t completed_at, std::string_view incomplete_details,
                             const std::string& usage) const;
  std::string Sequence();
  void OpenItem(ItemType type, std::vector<ResponsesEvent>* events, std::string call_id = "", std::string name = "");
  void CloseItem(std::string_view status, std::vector<ResponsesEvent>* events);
  void Push(std::string_view name, std::string json, std::vector<ResponsesEvent>* events);

  ResponseOptions options_;
  std::vector<Item> items_;
  bool item_open_ = false;
  int64_t sequence_ = 0;
  std::string final_response_;
};

}  // namespace deepinfer::recipe
