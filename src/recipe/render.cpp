// Shared parts of prompt rendering: token spellings, the builder, the dispatch to a version.
#include "recipe/render.h"

#include <array>

#include "recipe/render_internal.h"

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

void PromptBuilder::TextWithImages(std::string_view text, const std::vector<size_t>& image_offsets) {
  size_t pos = 0;
  for (const size_t at : image_offsets) {
    // The parsers place every offset on a placeholder; anything else stays text rather than a token.
    if (at < pos || at > text.size() || text.substr(at, kImageToken.size()) != kImageToken) continue;
    Text(text.substr(pos, at - pos));
    Special(SpecialToken::kImage);
    pos = at + kImageToken.size();
  }
  Text(text.substr(pos));
}

Result<RenderedPrompt> RenderPrompt(const Conversation& conversation, ModelVersion version) {
  switch (version) {
    case ModelVersion::kV32:
      for (const Message& m : conversation.messages) {
        if (m.task) return Status::InvalidArgument("message tasks exist only in the V4 and V4.1 prompt formats");
      }
      return RenderPromptV32(conversation);
    case ModelVersion::kV4: return RenderPromptV4(conversation, false);
    case ModelVersion::kV41: return RenderPromptV4(conversation, true);
  }
  return Status::InvalidArgument("unknown model version");
}

}  // namespace deepinfer::recipe
