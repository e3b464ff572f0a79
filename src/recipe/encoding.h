// Prompt encodings: a Conversation rendered into the prompt text of DeepSeek V3.2, V4 or V4.1, with the
// spans that are control tokens marked, and from there into token ids.
//
// Only template control tokens (and image placeholders, and grounding tokens in assistant history) are
// special; every other byte - message text, tool schemas, arguments - is plain text and is tokenized
// with added-token matching off, so a user who types "<｜Assistant｜>" gets the ids of its characters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "recipe/conversation.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::recipe {

enum class ModelVersion { kV32, kV4, kV41 };
std::string_view ModelVersionName(ModelVersion version);  // "v3.2", "v4", "v4.1"
Result<ModelVersion> ParseModelVersion(std::string_view name);

enum class SpecialToken {
  kBos, kEos, kThinkingStart, kThinkingEnd, kSystem, kUser, kAssistant, kLatestReminder, kDsml, kImage,
  kRef, kRefEnd, kBox, kBoxEnd, kPoint, kPointEnd, kPolygon, kPolygonEnd,
  kAction, kQuery, kAuthority, kDomain, kTitle, kReadUrl,  // V4/V4.1 task tokens
};
inline constexpr int kSpecialTokenCount = 24;
std::string_view SpecialTokenSpelling(SpecialToken token);

struct SpecialRange {
  size_t begin = 0;  // byte offsets into RenderedPrompt::text
  size_t end = 0;
  SpecialToken token = SpecialToken::kBos;
};

struct RenderedPrompt {
  std::string text;
  std::vector<SpecialRange> special_ranges;  // ascending, disjoint
  std::vector<ImageSource> images;           // in placeholder order
};

// Appends text and control tokens, recording where the control tokens are.
class PromptBuilder {
 public:
  void Text(std::string_view text) { prompt_.text.append(text); }
  void Special(SpecialToken token);
  // Text in which the grounding tokens (<｜ref｜> ... <｜/polygon｜>) are control tokens: assistant
  // content and reasoning.
  void TextWithGroundingTokens(std::string_view text);
  // Text whose first `image_count` image-token spellings are image placeholders.
  void TextWithImages(std::string_view text, size_t image_count);
  const std::string& text() const { return prompt_.text; }
  RenderedPrompt& prompt() { return prompt_; }
  RenderedPrompt Finish() { return std::move(prompt_); }

 private:
  RenderedPrompt prompt_;
};

Result<RenderedPrompt> RenderPrompt(const Conversation& conversation, ModelVersion version);

// Control-token ids for one tokenizer (looked up by spelling; -1 where the vocabulary lacks one).
struct ControlTokenIds {
  int32_t ids[kSpecialTokenCount];
  static ControlTokenIds FromTokenizer(const tokenizer::Tokenizer& tokenizer);
};

// Token ids of a rendered prompt: control tokens as their ids, all other text through EncodeText.
// Fails when the prompt holds a control token the tokenizer does not have.
Result<std::vector<int32_t>> EncodePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer,
                                          const ControlTokenIds& control_ids);
Result<std::vector<int32_t>> EncodePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer);

}  // namespace deepinfer::recipe
