// Tokenizing a rendered prompt: control tokens as their ids, every other byte through the tokenizer's
// plain-text path (added-token matching off), so text a user typed never becomes a control token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/status.h"
#include "recipe/render.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::recipe {

// Control-token ids for one tokenizer (looked up by spelling; -1 where the vocabulary lacks one).
struct ControlTokenIds {
  int32_t ids[kSpecialTokenCount];
  static ControlTokenIds FromTokenizer(const tokenizer::Tokenizer& tokenizer);
};

// Token ids of a rendered prompt. Fails when the prompt holds a control token the tokenizer does not have,
// and with kOutOfRange when it has more than max_ids ids (found early: Tokenizer::EncodeWithin), so a
// prompt longer than the context costs no more than the context to reject.
Result<std::vector<int32_t>> TokenizePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer,
                                            const ControlTokenIds& control_ids, size_t max_ids = SIZE_MAX);
Result<std::vector<int32_t>> TokenizePrompt(const RenderedPrompt& prompt, const tokenizer::Tokenizer& tokenizer);

}  // namespace deepinfer::recipe
