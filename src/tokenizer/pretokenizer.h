// The DeepSeek pre-tokenizer: three `Split` (Isolated) regexes applied in sequence, matched by hand over
// the Unicode class table instead of by a regex engine.
//   R1: \p{N}{1,3}
//   R2: [一-龥぀-ゟ゠-ヿ]+
//   R3: [!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//       ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// Isolated keeps every match and every gap between matches as a piece; each Split applies to every piece
// the previous one produced. Bytes that are not valid UTF-8 (EncodeText accepts any bytes) count as code
// points of no class, one byte each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

// The three pattern strings exactly as a tokenizer.json stores them (after JSON unescaping).
extern const std::string_view kDeepSeekSplitPatterns[3];

// Appends the end offset of every piece of `text` to *piece_ends (the first piece starts at 0).
void PreTokenize(std::string_view text, std::vector<size_t>* piece_ends);

// True when every piece boundary of text[0, p) and text[p, n) is also one of text, and p is a boundary:
// encoding the two halves separately gives the ids of the whole. Proven cases only (see the .cpp).
bool IsSafeCut(std::string_view text, size_t p);

// The first safe cut at or after `from` (and before text.size()), or text.size() when there is none.
size_t NextSafeCut(std::string_view text, size_t from);

}  // namespace deepinfer::tokenizer
