// Rendered prompt → token ids: control-token spans become their ids, the text between them is tokenized
// as plain text (added-token matching off).
#include "recipe/prompt_tokens.h"

#include "tokenizer/tokenizer.h"

namespace deepinfer::recipe {

ControlTokenIds ControlTokenIds::FromTokenizer(const tokenizer::Tokenizer& tokenizer) {
  ControlTokenIds ids;
  for (int i = 0; i < kSpecialTokenCount; ++i) {
    const auto id = tokenizer.TokenToId(SpecialTokenSpelling(static_cast<SpecialToken>(i)));
    ids.ids[i] = id ? *id : -1;
  }
  // The prompt spells an image placeholder <｜image｜> (deepseek-recipe's default); V4.1's vocabulary has
  // no such token and reads images as <｜deepseek_image｜> (129264, the config's image_token_id).
  int32_t& image = ids.ids[static_cast<int>(SpecialToken::kImage)];
  if (image < 0) {
    const auto id = tokenizer.TokenToId("<\xEF\xBD\x9C" "deepseek_image\xEF\xBD\x9C>");
    image = id ? *id : -1;
  }
  return ids;
}

Result<std::vector<int32_t>> TokenizePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer,
                                            const ControlTokenIds& control_ids, size_t max_ids) {
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
  if (max_ids == SIZE_MAX) return tokenizer.Encode(pieces);
  return tokenizer.EncodeWithin(pieces, max_ids);
}

Result<std::vector<int32_t>> TokenizePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer) {
  return TokenizePrompt(prompt, tokenizer, ControlTokenIds::FromTokenizer(tokenizer));
}

}  // namespace deepinfer::recipe
