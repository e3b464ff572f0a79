// Prompt rendering: a Conversation rendered into the prompt text of DeepSeek V3.2, V4 or V4.1 (the
// "encodings" of deepseek-recipe and of DeepSeek's encoding_dsv*.py), with the spans that are control
// tokens marked. prompt_tokens.h turns the result into token ids.
//
// Only template control tokens (and image placeholders, and grounding tokens in assistant history) are
// special; every other byte - message text, tool schemas, arguments - is plain text, so a user who types
// "<｜Assistant｜>" gets the ids of its characters.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "recipe/conversation.h"
#include "recipe/model_version.h"

namespace deepinfer::recipe {

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
  // `text` with an image token at each of `image_offsets` (ascending; each spells kImageToken there).
  void TextWithImages(std::string_view text, const std::vector<size_t>& image_offsets);
  const std::string& text() const { return prompt_.text; }
  RenderedPrompt& prompt() { return prompt_; }
  RenderedPrompt Finish() { return std::move(prompt_); }

 private:
  RenderedPrompt prompt_;
};

Result<RenderedPrompt> RenderPrompt(const Conversation& conversation, ModelVersion version);

}  // namespace deepinfer::recipe
