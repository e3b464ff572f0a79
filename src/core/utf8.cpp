#include "core/utf8.h"

namespace deepinfer::utf8 {
namespace {

struct LeadInfo {
  int length;               // total sequence length, 0 for a byte that cannot start one
  unsigned char second_lo;  // allowed range of the second byte (excludes overlongs and surrogates)
  unsigned char second_hi;
};

LeadInfo ClassifyLead(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// Scans the sequence starting at pos. Returns the number of bytes that belong to it: the full length when
// valid (*complete = true), otherwise the maximal valid prefix (at least 1 byte), *complete = false.
size_t Scan(std::string_view text, size_t pos, bool* complete, bool* truncated_at_end) {
  *truncated_at_end = false;
  const auto lead = static_cast<unsigned char>(text[pos]);
  const LeadInfo info = ClassifyLead(lead);
  if (info.length == 1) {
    *complete = true;
    return 1;
  }
  *complete = false;
  if (info.length == 0) return 1;
  size_t i = 1;
  for (; i < static_cast<size_t>(info.length); ++i) {
    if (pos + i >= text.size()) {
      *truncated_at_end = true;
      return i;
    }
    const auto b = static_cast<unsigned char>(text[pos + i]);
    const unsigned char lo = i == 1 ? info.second_lo : 0x80;
    const unsigned char hi = i == 1 ? info.second_hi : 0xBF;
    if (b < lo || b > hi) return i;
  }
  *complete = true;
  return i;
}

}  // namespace

size_t Decode(std::string_view text, size_t pos, char32_t* cp) {
  *cp = kReplacementChar;
  if (pos >= text.size()) return 0;
  bool complete, truncated;
  const size_t n = Scan(text, pos, &complete, &truncated);
  if (!complete) return 0;
  const auto* p = reinterpret_cast<const unsigned char*>(text.data() + pos);
  switch (n) {
    case 1: *cp = p[0]; break;
    case 2: *cp = (char32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F); break;
    case 3: *cp = (char32_t(p[0] & 0x0F) << 12) | (char32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F); break;
    default:
      *cp = (char32_t(p[0] & 0x07) << 18) | (char32_t(p[1] & 0x3F) << 12) | (char32_t(p[2] & 0x3F) << 6) |
            (p[3] & 0x3F);
  }
  return n;
}

size_t FindInvalid(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    if (static_cast<unsigned char>(text[pos]) < 0x80) {
      ++pos;
      continue;
    }
    bool complete, truncated;
    const size_t n = Scan(text, pos, &complete, &truncated);
    if (!complete) return pos;
    pos += n;
  }
  return text.size();
}

bool IsValid(std::string_view text) { return FindInvalid(text) == text.size(); }

size_t IncompleteTailLength(std::string_view text) {
  // A sequence is at most 4 bytes, so only the last 3 bytes can start an incomplete one.
  const size_t start = text.size() > 3 ? text.size() - 3 : 0;
  for (size_t pos = start; pos < text.size(); ++pos) {
    const auto b = static_cast<unsigned char>(text[pos]);
    if (b < 0xC0) continue;  // ASCII or a continuation byte cannot start a sequence
    bool complete, truncated;
    Scan(text, pos, &complete, &truncated);
    if (truncated) return text.size() - pos;
  }
  return 0;
}

void Append(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::string Encode(char32_t cp) {
  std::string out;
  Append(out, cp);
  return out;
}

size_t CountCodePoints(std::string_view text) {
  CodePointIterator it(text);
  char32_t cp;
  size_t offset, length, count = 0;
  while (it.Next(&cp, &offset, &length)) ++count;
  return count;
}

std::string OneLine(std::string_view text) {
  const std::string valid = ToValidLossy(text);
  std::string out;
  out.reserve(valid.size());
  for (const char ch : valid) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7f) {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    } else {
      out += ch;
    }
  }
  return out;
}

std::string ToValidLossy(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    bool complete, truncated;
    const size_t n = Scan(text, pos, &complete, &truncated);
    if (complete) {
      out.append(text.substr(pos, n));
    } else {
      Append(out, kReplacementChar);
    }
    pos += n;
  }
  return out;
}

bool CodePointIterator::Next(char32_t* cp, size_t* offset, size_t* length) {
  if (pos_ >= text_.size()) return false;
  *offset = pos_;
  size_t n = Decode(text_, pos_, cp);
  if (n == 0) n = 1;
  *length = n;
  pos_ += n;
  return true;
}

}  // namespace deepinfer::utf8
