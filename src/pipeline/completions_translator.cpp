// The legacy Completions API's `text_completion` objects: the engine's text (its stop strings already
// applied) per choice, with OpenAI's per-token logprobs arrays.
#include <nlohmann/json.hpp>

#include "core/json.h"
#include "pipeline/sse.h"
#include "pipeline/update_translator.h"
#include "recipe/response_chat.h"

namespace deepinfer::pipeline {

namespace {

using Json = nlohmann::json;

class CompletionsTranslator : public UpdateTranslator {
 public:
  CompletionsTranslator(CompletionsShape shape, ResponseContext context)
      : shape_(std::move(shape)), context_(std::move(context)) {
    stream_ = shape_.stream;
    if (shape_.prompt_texts.empty()) shape_.prompt_texts.emplace_back();
    choices_.resize(shape_.prompt_texts.size() * static_cast<size_t>(shape_.n));
    prompt_usage_.resize(shape_.prompt_texts.size());
    prompt_logprobs_.resize(shape_.prompt_texts.size());
    // text_offset counts bytes of the returned text, which starts with the echoed prompt.
    if (shape_.echo) {
      for (size_t i = 0; i < choices_.size(); ++i) choices_[i].offset = shape_.prompt_texts[i / shape_.n].size();
    }
  }

  TranslatedUpdate Translate(const engine::RequestUpdate& update) override {
    TranslatedUpdate out;
    // A prompt's logprobs come with its first output's first token (so with a delta of that prompt).
    if (!update.prompt_logprobs.empty() && !update.sequences.empty()) {
      const size_t prompt = static_cast<size_t>(update.sequences.front().index / shape_.n);
      if (prompt < prompt_logprobs_.size()) prompt_logprobs_[prompt] = update.prompt_logprobs;
    }
    for (const engine::SequenceDelta& delta : update.sequences) {
      if (delta.index < 0 || delta.index >= static_cast<int>(choices_.size())) continue;
      const size_t prompt = static_cast<size_t>(delta.index / shape_.n);
      // Each prompt's own request reports its prompt; the usage adds them up.
      prompt_usage_[prompt] = {update.prompt_tokens, update.prompt_cache_hit_tokens};
      Choice& c = choices_[static_cast<size_t>(delta.index)];
      Json logprobs = Json::object();
      std::string text = delta.text;
      if (shape_.echo && !c.echoed) {
        text = shape_.prompt_texts[prompt] + text;
        c.echoed = true;
        if (shape_.logprobs >= 0) EchoPromptLogprobs(c, prompt, &logprobs);
      }
      for (const engine::GeneratedToken& token : delta.tokens) {
        if (delta.finish && token.id == delta.stop_token && *delta.finish == engine::FinishReason::kStop) continue;
        ++usage_.completion_tokens;
        if (shape_.logprobs >= 0) AddLogprob(c, token, &logprobs);
        if (shape_.return_token_ids) c.unsent_ids.push_back(token.id);
      }
      c.text += text;
      if (delta.finish) {
        c.finish = *delta.finish == engine::FinishReason::kLength || *delta.finish == engine::FinishReason::kDeadline
                       ? "length"
                       : "stop";
        NoteFailure(update, delta);
      }
      if (shape_.stream && (!text.empty() || delta.finish)) {
        Json choice = {{"index", delta.index}, {"text", text},
                       {"logprobs", shape_.logprobs >= 0 ? logprobs : Json(nullptr)},
                       {"finish_reason", delta.finish ? Json(c.finish) : Json(nullptr)}};
        if (shape_.return_token_ids) {
          if (!c.sent_prompt_ids && prompt < shape_.prompt_ids.size()) choice["prompt_token_ids"] = shape_.prompt_ids[prompt];
          c.sent_prompt_ids = true;
          choice["token_ids"] = std::move(c.unsent_ids);
          c.unsent_ids.clear();
        }
        out.events.push_back({"", Envelope(Json::array({choice}), false)});
      }
    }
    return out;
  }

  // The replayed tokens' ids and the prompt's went out with the interrupted run's chunks.
  void Replay(const engine::RequestUpdate& update) override {
    Translate(update);
    for (Choice& c : choices_) {
      c.unsent_ids.clear();
      c.sent_prompt_ids = true;
    }
  }

  std::vector<recipe::StreamEvent> StreamEnd() override {
    std::vector<recipe::StreamEvent> events;
    if (shape_.include_usage) events.push_back({"", Envelope(Json::array(), true)});
    events.push_back(kSseDone);
    return events;
  }

  std::string Body() override {
    Json choices = Json::array();
    for (size_t i = 0; i < choices_.size(); ++i) {
      const Choice& c = choices_[i];
      Json logprobs = nullptr;
      if (shape_.logprobs >= 0)
        logprobs = {{"tokens", c.tokens}, {"token_logprobs", c.token_logprobs}, {"top_logprobs", c.top_logprobs},
                    {"text_offset", c.text_offset}};
      choices.push_back({{"index", i}, {"text", c.text}, {"logprobs", logprobs}, {"finish_reason", c.finish}});
    }
    return Envelope(choices, true);
  }

 private:
  struct Choice {
    std::string text;
    std::string finish = "stop";
    bool echoed = false;
    bool sent_prompt_ids = false;
    std::vector<int32_t> unsent_ids;  // return_token_ids: generated, not yet in a streamed chunk
    Json tokens = Json::array(), token_logprobs = Json::array(), top_logprobs = Json::array(), text_offset = Json::array();
    size_t offset = 0;
  };

  // The echoed prompt's tokens before the completion's: the first has no logprob (null) and no
  // alternatives, as OpenAI and vLLM write it; offsets count from the start of the echoed prompt.
  void EchoPromptLogprobs(Choice& c, size_t prompt, Json* delta_logprobs) {
    const std::vector<engine::GeneratedToken>& tokens = prompt_logprobs_[prompt];
    c.offset = 0;
    for (size_t i = 0; i < tokens.size(); ++i) AddLogprob(c, tokens[i], delta_logprobs, /*first_of_prompt=*/i == 0);
    c.offset = shape_.prompt_texts[prompt].size();
  }

  void AddLogprob(Choice& c, const engine::GeneratedToken& token, Json* delta_logprobs, bool first_of_prompt = false) {
    Json top = first_of_prompt ? Json(nullptr) : Json::object();
    for (const auto& alt : token.top_logprobs) top[alt.bytes] = alt.logprob;
    const Json logprob = first_of_prompt ? Json(nullptr) : Json(token.logprob);
    c.tokens.push_back(token.bytes);
    c.token_logprobs.push_back(logprob);
    c.top_logprobs.push_back(top);
    c.text_offset.push_back(c.offset);
    if (shape_.stream) {
      if (delta_logprobs->empty())
        *delta_logprobs = {{"tokens", Json::array()}, {"token_logprobs", Json::array()}, {"top_logprobs", Json::array()},
                           {"text_offset", Json::array()}};
      (*delta_logprobs)["tokens"].push_back(token.bytes);
      (*delta_logprobs)["token_logprobs"].push_back(logprob);
      (*delta_logprobs)["top_logprobs"].push_back(top);
      (*delta_logprobs)["text_offset"].push_back(c.offset);
    }
    c.offset += token.bytes.size();
  }

  std::string Envelope(const Json& choices, bool with_usage) const {
    Json body = {{"id", context_.id}, {"object", "text_completion"}, {"created", context_.created},
                 {"model", context_.model}, {"choices", choices}};
    std::string text = DumpJson(body);
    if (with_usage) {
      recipe::UsageCounts usage = usage_;
      for (const auto& [prompt_tokens, hit_tokens] : prompt_usage_) {
        usage.prompt_tokens += prompt_tokens;
        usage.prompt_cache_hit_tokens += hit_tokens;
      }
      text.pop_back();
      text += ",\"usage\":" + recipe::ChatUsageJson(usage) + "}";
    } else if (shape_.stream && shape_.include_usage) {
      text.pop_back();
      text += ",\"usage\":null}";
    }
    return text;
  }

  CompletionsShape shape_;
  ResponseContext context_;
  std::vector<Choice> choices_;
  recipe::UsageCounts usage_;  // the completion tokens of all choices
  std::vector<std::pair<int64_t, int64_t>> prompt_usage_;
  std::vector<std::vector<engine::GeneratedToken>> prompt_logprobs_;  // per prompt, when echo asked for them  // per prompt: its tokens, those from the prefix cache
};

}  // namespace

std::unique_ptr<UpdateTranslator> NewCompletionsTranslator(CompletionsShape shape, ResponseContext context) {
  return std::make_unique<CompletionsTranslator>(std::move(shape), std::move(context));
}

}  // namespace deepinfer::pipeline
