// The GPT-2 byte-level alphabet: every byte is spelled as one printable code point, so vocabulary
// strings never contain raw spaces or control bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deepinfer::tokenizer::byte_level {

// The code point that spells byte b.
char32_t ByteToCodePoint(uint8_t b);

// The bytes a byte-level string spells, or nullopt when it holds a code point outside the alphabet
// (the Hugging Face ByteLevel decoder then keeps that token's own UTF-8 bytes).
std::optional<std::string> Decode(std::string_view byte_level_text);

// The byte-level spelling of raw bytes.
std::string Encode(std::string_view bytes);

}  // namespace deepinfer::tokenizer::byte_level
