#include "tokenizer/pretokenizer.h"

#include "tokenizer/unicode_classes.h"

namespace deepinfer::tokenizer {

const std::string_view kDeepSeekSplitPatterns[3] = {
    "\\p{N}{1,3}",
    "[\xE4\xB8\x80-\xE9\xBE\xA5\xE3\x81\x80-\xE3\x82\x9F\xE3\x82\xA0-\xE3\x83\xBF]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| "
    "?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
};

namespace {

using unicode_classes::ClassTable;
constexpr uint8_t kL = unicode_classes::kLetter;
constexpr uint8_t kM = unicode_classes::kMark;
constexpr uint8_t kN = unicode_classes::kNumber;
constexpr uint8_t kP = unicode_classes::kPunct;
constexpr uint8_t kS = unicode_classes::kSymbol;
constexpr uint8_t kWs = unicode_classes::kSpace;
constexpr char32_t kInvalid = 0xFFFFFFFF;

struct CodePoint {
  char32_t cp;
  uint32_t len;
  uint8_t cls;
};

// Decodes the code point at s[pos] (pos < end); invalid or truncated sequences are one byte of no class.
inline CodePoint At(const uint8_t* s, size_t end, size_t pos, const ClassTable& table) {
  uint8_t b0 = s[pos];
  if (b0 < 0x80) return {b0, 1, table.Of(b0)};
  char32_t cp;
  uint32_t len;
  char32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    cp = b0 & 0x1F;
    len = 2;
    min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    cp = b0 & 0x0F;
    len = 3;
    min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    cp = b0 & 0x07;
    len = 4;
    min = 0x10000;
  } else {
    return {kInvalid, 1, 0};
  }
  if (pos + len > end) return {kInvalid, 1, 0};
  for (uint32_t i = 1; i < len; ++i) {
    uint8_t b = s[pos + i];
    if ((b & 0xC0) != 0x80) return {kInvalid, 1, 0};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalid, 1, 0};
  return {cp, len, table.Of(cp)};
}

inline bool IsAsciiLetter(char32_t c) { return (c | 0x20) >= 'a' && (c | 0x20) <= 'z'; }
inline bool IsAsciiPunct(char32_t c) {
  return (c >= '!' && c <= '/') || (c >= ':' && c <= '@') || (c >= '[' && c <= '`') || (c >= '{' && c <= '~');
}
inline bool IsCrLf(char32_t c) { return c == '\r' || c == '\n'; }
inline bool InCjkRanges(char32_t c) { return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF); }

class Splitter {
 public:
  Splitter(std::string_view text, std::vector<size_t>* ends)
      : s_(reinterpret_cast<const uint8_t*>(text.data())), n_(text.size()), ends_(ends),
        table_(ClassTable::Get()) {}

  // R1 over the whole text. Digit chunks are final pieces: R2's ranges hold no \p{N}, and no R3
  // alternative matches inside an all-\p{N} piece, so the later Splits keep each chunk whole.
  void Run() {
    size_t pos = 0;
    size_t gap = 0;
    while (pos < n_) {
      CodePoint c = At(s_, n_, pos, table_);
      if (!(c.cls & kN)) {
        pos += c.len;
        continue;
      }
      if (gap < pos) SplitCjk(gap, pos);
      size_t q = pos + c.len;
      for (int k = 1; k < 3 && q < n_; ++k) {
        CodePoint d = At(s_, n_, q, table_);
        if (!(d.cls & kN)) break;
        q += d.len;
      }
      Emit(q);
      pos = gap = q;
    }
    if (gap < n_) SplitCjk(gap, n_);
  }

 private:
  void Emit(size_t end) { ends_->push_back(end); }

  // R2 over one R1 gap: runs of the CJK ranges and the gaps between them, each then split by R3.
  void SplitCjk(size_t begin, size_t end) {
    size_t pos = begin;
    size_t piece = begin;
    bool in_run = false;
    while (pos < end) {
      CodePoint c = At(s_, end, pos, table_);
      bool cjk = c.cp != kInvalid && InCjkRanges(c.cp);
      if (cjk != in_run && pos > piece) {
        SplitR3(piece, pos);
        piece = pos;
      }
      in_run = cjk;
      pos += c.len;
    }
    if (piece < end) SplitR3(piece, end);
  }

  // End of the run of code points from `pos` whose class has any of `bits`.
  size_t RunEnd(size_t pos, size_t end, uint8_t bits) const {
    while (pos < end) {
      CodePoint c = At(s_, end, pos, table_);
      if (!(c.cls & bits)) break;
      pos += c.len;
    }
    return pos;
  }

  // Leftmost-first matching of R3's alternatives; unmatched code points collect into gap pieces.
  void SplitR3(size_t begin, size_t end) {
    size_t pos = begin;
    size_t gap = begin;
    while (pos < end) {
      size_t match_end = MatchR3(pos, end);
      if (match_end == 0) {
        pos += At(s_, end, pos, table_).len;
        continue;
      }
      if (gap < pos) Emit(pos);
      Emit(match_end);
      pos = gap = match_end;
    }
    if (gap < end) Emit(end);
  }

  // The end of R3's match starting at pos, or 0 when no alternative matches there.
  size_t MatchR3(size_t pos, size_t end) const {
    CodePoint c0 = At(s_, end, pos, table_);
    size_t p1 = pos + c0.len;
    CodePoint c1{kInvalid, 0, 0};
    if (p1 < end) c1 = At(s_, end, p1, table_);
    // [punct][A-Za-z]+
    if (c0.cp < 0x80 && IsAsciiPunct(c0.cp) && p1 < end && c1.cp < 0x80 && IsAsciiLetter(c1.cp)) {
      size_t q = p1 + 1;
      while (q < end && s_[q] < 0x80 && IsAsciiLetter(s_[q])) ++q;
      return q;
    }
    // [^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+
    if (!IsCrLf(c0.cp) && !(c0.cls & (kL | kP | kS)) && p1 < end && (c1.cls & (kL | kM))) {
      return RunEnd(p1, end, kL | kM);
    }
    if (c0.cls & (kL | kM)) return RunEnd(pos, end, kL | kM);
    //  ?[\p{P}\p{S}]+[\r\n]*
    {
      size_t q = pos;
      CodePoint first = c0;
      if (c0.cp == ' ' && p1 < end) {
        q = p1;
        first = c1;
      }
      if (first.cls & (kP | kS)) {
        q = RunEnd(q, end, kP | kS);
        while (q < end && (s_[q] == '\r' || s_[q] == '\n')) ++q;
        return q;
      }
    }
    if (!(c0.cls & kWs)) return 0;
    // \s*[\r\n]+ : the whitespace run up to and including its last CR or LF.
    size_t run_end = pos;
    size_t last_crlf_end = 0;
    size_t last_len = 0;
    while (run_end < end) {
      CodePoint c = At(s_, end, run_end, table_);
      if (!(c.cls & kWs)) break;
      run_end += c.len;
      last_len = c.len;
      if (IsCrLf(c.cp)) last_crlf_end = run_end;
    }
    if (last_crlf_end != 0) return last_crlf_end;
    // \s+(?!\S): the whole run at the end of the piece, else all but its last code point.
    if (run_end == end) return run_end;
    if (run_end - last_len > pos) return run_end - last_len;
    // \s+
    return run_end;
  }

  const uint8_t* s_;
  size_t n_;
  std::vector<size_t>* ends_;
  const ClassTable& table_;
};

// Decodes the code point that ends just before byte p, or returns false when the bytes there are not a
// valid sequence.
bool CodePointBefore(const uint8_t* s, size_t n, size_t p, CodePoint* out) {
  const ClassTable& table = ClassTable::Get();
  for (size_t len = 1; len <= 4 && len <= p; ++len) {
    uint8_t b = s[p - len];
    if ((b & 0xC0) == 0x80) continue;
    CodePoint c = At(s, n, p - len, table);
    if (c.cp == kInvalid || c.len != len) return false;
    *out = c;
    return true;
  }
  return false;
}

}  // namespace

void PreTokenize(std::string_view text, std::vector<size_t>* piece_ends) {
  Splitter(text, piece_ends).Run();
}

// Why these cuts are safe: none of the three regexes looks behind, so matching resumes at p exactly as
// it would on text[p, n) once every Split has a piece boundary (or a match end) at p.
//  1. An ASCII letter followed by an ASCII non-letter: no \p{N}, no CJK on either side, so R1 and R2 do not
//     cut there and leave one piece across p for R3; in it the letter is always inside an R3 match
//     ([punct][A-Za-z]+ or ...[\p{L}\p{M}]+; it never starts a gap), and both alternatives end at the end of
//     the letter run, which is p.
//  2. One side in R2's CJK ranges and the other not: R2 has a piece boundary at p, and R1 has one too or
//     none is needed (R1 chunks only \p{N}, and no CJK-range code point is \p{N}).
bool IsSafeCut(std::string_view text, size_t p) {
  if (p == 0 || p >= text.size()) return false;
  const auto* s = reinterpret_cast<const uint8_t*>(text.data());
  uint8_t before = s[p - 1];
  uint8_t after = s[p];
  if (before < 0x80 && after < 0x80) return IsAsciiLetter(before) && !IsAsciiLetter(after);
  if ((after & 0xC0) == 0x80) return false;  // not a code point start
  CodePoint c = At(s, text.size(), p, ClassTable::Get());
  CodePoint d;
  if (c.cp == kInvalid || !CodePointBefore(s, text.size(), p, &d)) return false;
  return InCjkRanges(c.cp) != InCjkRanges(d.cp);
}

size_t NextSafeCut(std::string_view text, size_t from) {
  for (size_t p = from == 0 ? 1 : from; p < text.size(); ++p) {
    if (IsSafeCut(text, p)) return p;
  }
  return text.size();
}

}  // namespace deepinfer::tokenizer
