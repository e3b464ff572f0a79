// Shared parts of the prompt encodings: token spellings, the builder, and prompt → token ids.
#include "recipe/encoding.h"

#include <array>

#include "recipe/encoding_internal.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::recipe {
namespace {

// U+FF5C FULLWIDTH VERTICAL LINE and U+2581 LOWER ONE EIGHTH BLOCK, the glyphs of DeepSeek's token names.
#define DI_BAR "\xEF\xBD\x9C"
#define DI_SP "\xE2\x96\x81"

constexpr std::array<std::string_view, kSpecialTokenCount> kSpellings = {
    "<" DI_BAR "begin" DI_SP "of" DI_SP "sentence" DI_BAR ">",
    "<" DI_BAR "end" DI_SP "of" DI_SP "sentence" DI_BAR ">",
    "<think>",
    "</think>",
    "<" DI_BAR "System" DI_BAR ">",
    "<" DI_BAR "User" DI_BAR ">",
    "<" DI_BAR "Assistant" DI_BAR ">",
    "<" DI_BAR "latest_reminder" DI_BAR ">",
    DI_BAR "DSML" DI_BAR,
    "<" DI_BAR "image" DI_BAR ">",
    "<" DI_BAR "ref" DI_BAR ">",
    "<" DI_BAR "/ref" DI_BAR ">",
    "<" DI_BAR "box" DI_BAR ">",
    "<" DI_BAR "/box" DI_BAR ">",
    "<" DI_BAR "point" DI_BAR ">",
    "<" DI_BAR "/point" DI_BAR ">",
    "<" DI_BAR "polygon" DI_BAR ">",
    "<" DI_BAR "/polygon" DI_BAR ">",
    "<" DI_BAR "action" DI_BAR ">",
    "<" DI_BAR "query" DI_BAR ">",
    "<" DI_BAR "authority" DI_BAR ">",
    "<" DI_BAR "domain" DI_BAR ">",
    "<" DI_BAR "title" DI_BAR ">",
    "<" DI_BAR "read_url" DI_BAR ">",
};

#undef DI_BAR
#undef DI_SP

constexpr SpecialToken kGroundingTokens[] = {
    SpecialToken::kRef,   SpecialToken::kRefEnd,   SpecialToken::kBox,     SpecialToken::kBoxEnd,
    SpecialToken::kPoint, SpecialToken::kPointEnd, SpecialToken::kPolygon, SpecialToken::kPolygonEnd,
};

}  // namespace

std::string_view SpecialTokenSpelling(SpecialToken token) { return kSpellings[static_cast<int>(token)]; }

std::string_view ModelVersionName(ModelVersion version) {
  switch (version) {
    case ModelVersion::kV32: return "v3.2";
    case ModelVersion::kV4: return "v4";
    case ModelVersion::kV41: return "v4.1";
  }
  return "?";
}

Result<ModelVersion> ParseModelVersion(std::string_view name) {
  if (name == "v3.2" || name == "V3.2") return ModelVersion::kV32;
  if (name == "v4" || name == "V4") return ModelVersion::kV4;
  if (name == "v4.1" || name == "V4.1") return ModelVersion::kV41;
  return Status::InvalidArgument("unknown model version '" + std::string(name) + "' (expected v3.2, v4 or v4.1)");
}

void PromptBuilder::Special(SpecialToken token) {
  const size_t begin = prompt_.text.size();
  prompt_.text.append(SpecialTokenSpelling(token));
  prompt_.special_ranges.push_back({begin, prompt_.text.size(), token});
}

void PromptBuilder::TextWithGroundingTokens(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t lt = text.find('<', pos);
    if (lt == std::string_view::npos) break;
    bool matched = false;
    for (SpecialToken token : kGroundingTokens) {
      const std::string_view spelling = SpecialTokenSpelling(token);
      if (text.substr(lt, spelling.size()) == spelling) {
        Text(text.substr(pos, lt - pos));
        Special(token);
        pos = lt + spelling.size();
        matched = true;
        break;
      }
    }
    if (!matched) {
      Text(text.substr(pos, lt + 1 - pos));
      pos = lt + 1;
    }
  }
  Text(text.substr(pos));
}

void PromptBuilder::TextWithImages(std::string_view text, size_t image_count) {
  size_t pos = 0;
  while (image_count > 0) {
    const size_t at = text.find(kImageToken, pos);
    if (at == std::string_view::npos) break;
    Text(text.substr(pos, at - pos));
    Special(SpecialToken::kImage);
    pos = at + kImageToken.size();
    --image_count;
  }
  Text(text.substr(pos));
}

ControlTokenIds ControlTokenIds::FromTokenizer(const tokenizer::Tokenizer& tokenizer) {
  ControlTokenIds ids;
  for (int i = 0; i < kSpecialTokenCount; ++i) {
    const auto id = tokenizer.TokenToId(kSpellings[i]);
    ids.ids[i] = id ? *id : -1;
  }
  return ids;
}

Result<std::vector<int32_t>> EncodePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer,
                                          const ControlTokenIds& control_ids) {
  std::vector<tokenizer::EncodePiece> pieces;
  pieces.reserve(prompt.special_ranges.size() * 2 + 1);
  size_t pos = 0;
  const std::string_view text = prompt.text;
  for (const SpecialRange& range : prompt.special_ranges) {
    if (range.begin > pos) pieces.push_back({-1, text.substr(pos, range.begin - pos)});
    const int32_t id = control_ids.ids[static_cast<int>(range.token)];
    if (id < 0) {
      return Status::NotFound("the tokenizer has no id for the control token " +
                              std::string(SpecialTokenSpelling(range.token)));
    }
    pieces.push_back({id, {}});
    pos = range.end;
  }
  if (pos < text.size()) pieces.push_back({-1, text.substr(pos)});
  return tokenizer.Encode(pieces);
}

Result<std::vector<int32_t>> EncodePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer) {
  return EncodePrompt(prompt, tokenizer, ControlTokenIds::FromTokenizer(tokenizer));
}

Result<RenderedPrompt> RenderPrompt(const Conversation& conversation, ModelVersion version) {
  switch (version) {
    case ModelVersion::kV32:
      for (const Message& m : conversation.messages) {
        if (m.task) return Status::InvalidArgument("message tasks exist only in the V4 and V4.1 encodings");
      }
      return RenderPromptV32(conversation);
    case ModelVersion::kV4: return RenderPromptV4(conversation, false);
    case ModelVersion::kV41: return RenderPromptV4(conversation, true);
  }
  return Status::InvalidArgument("unknown model version");
}

}  // namespace deepinfer::recipe
