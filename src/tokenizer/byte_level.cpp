#include "tokenizer/byte_level.h"

#include "core/utf8.h"

namespace deepinfer::tokenizer::byte_level {
namespace {

struct Alphabet {
  std::array<char32_t, 256> byte_to_cp{};
  std::array<int16_t, 324> cp_to_byte{};  // every code point of the alphabet is below 324

  Alphabet() {
    cp_to_byte.fill(-1);
    // Printable Latin-1 bytes spell themselves; the others take 256, 257, ... in byte order.
    int next = 256;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(next++);
      byte_to_cp[b] = cp;
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const Alphabet& GetAlphabet() {
  static const Alphabet alphabet;
  return alphabet;
}

}  // namespace

char32_t ByteToCodePoint(uint8_t b) { return GetAlphabet().byte_to_cp[b]; }

std::optional<std::string> Decode(std::string_view text) {
  const Alphabet& a = GetAlphabet();
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    char32_t cp;
    size_t len = utf8::Decode(text, pos, &cp);
    if (len == 0 || cp >= a.cp_to_byte.size() || a.cp_to_byte[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(a.cp_to_byte[cp]));
    pos += len;
  }
  return out;
}

std::string Encode(std::string_view bytes) {
  std::string out;
  for (unsigned char b : bytes) utf8::Append(out, ByteToCodePoint(b));
  return out;
}

}  // namespace deepinfer::tokenizer::byte_level
