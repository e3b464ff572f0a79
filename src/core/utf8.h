// UTF-8 utilities: validation, code point iteration, and the length of an incomplete trailing sequence
// (what a streaming detokenizer must hold back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace deepinfer::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;

// Decodes one code point at text[pos]. On success stores it in *cp and returns its byte length (1-4).
// On an invalid or truncated sequence returns 0 (and *cp = kReplacementChar). Overlong forms, surrogates
// (U+D800..U+DFFF) and values past U+10FFFF are invalid, as in the Unicode standard.
size_t Decode(std::string_view text, size_t pos, char32_t* cp);

// True when the whole text is well-formed UTF-8.
bool IsValid(std::string_view text);

// Offset of the first invalid byte, or text.size() when valid.
size_t FindInvalid(std::string_view text);

// Number of bytes at the end of `text` that form the beginning of a valid multi-byte sequence that is
// not yet complete (0..3). Bytes that can never become valid are not counted: they are already errors.
size_t IncompleteTailLength(std::string_view text);

// Appends the UTF-8 encoding of cp (cp must be a valid scalar value).
void Append(std::string& out, char32_t cp);
std::string Encode(char32_t cp);

// Number of code points, counting each invalid byte as one.
size_t CountCodePoints(std::string_view text);

// Replaces every maximal invalid subsequence with U+FFFD, the way Python's bytes.decode("utf-8",
// errors="replace") and Rust's String::from_utf8_lossy do.
std::string ToValidLossy(std::string_view text);

// For a one-line message that quotes input: ASCII control characters become \n, \t, \r or \xHH, and
// invalid UTF-8 becomes U+FFFD.
std::string OneLine(std::string_view text);

// Iterates code points; invalid bytes come out as kReplacementChar with length 1.
class CodePointIterator {
 public:
  explicit CodePointIterator(std::string_view text) : text_(text) {}
  bool Next(char32_t* cp, size_t* offset, size_t* length);

 private:
  std::string_view text_;
  size_t pos_ = 0;
};

}  // namespace deepinfer::utf8
