#include "grammar/unique_items.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

namespace deepinfer::grammar {

namespace {

void AppendString(const std::string& s, std::string* out) {
  // Length-prefixed, so no string's bytes can read as structure.
  out->push_back('"');
  out->append(std::to_string(s.size()));
  out->push_back(':');
  out->append(s);
}

void Emit(const nlohmann::json& v, std::string* out, std::vector<std::string>* strings) {
  switch (v.type()) {
    case nlohmann::json::value_t::null:
      out->push_back('n');
      return;
    case nlohmann::json::value_t::boolean:
      out->push_back(v.get<bool>() ? 't' : 'f');
      return;
    case nlohmann::json::value_t::string:
      AppendString(v.get_ref<const std::string&>(), out);
      strings->push_back(v.get<std::string>());
      return;
    case nlohmann::json::value_t::object:
      out->push_back('{');
      for (auto it = v.begin(); it != v.end(); ++it) {  // nlohmann::json keeps keys sorted
        AppendString(it.key(), out);
        strings->push_back(it.key());
        Emit(it.value(), out, strings);
      }
      out->push_back('}');
      return;
    case nlohmann::json::value_t::array:
      out->push_back('[');
      for (const auto& x : v) {
        Emit(x, out, strings);
        out->push_back(',');
      }
      out->push_back(']');
      return;
    default: {
      double d = v.get<double>();
      if (d == 0) d = 0;  // -0 equals 0
      char buf[40];
      std::snprintf(buf, sizeof buf, "0%.17g", d);
      out->append(buf);
      return;
    }
  }
}

char KindOf(char first) {
  if (first == '"' || first == '{' || first == '[' || first == 't' || first == 'f' || first == 'n') return first;
  if (first == '-' || (first >= '0' && first <= '9')) return '0';
  return 0;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | cp >> 6));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | cp >> 12));
    out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | cp >> 18));
    out->push_back(static_cast<char>(0x80 | (cp >> 12 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp >> 6 & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

int Hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads four hex digits at text[i..]; -1 when cut short or not hex.
int32_t Hex4(std::string_view text, size_t i) {
  if (i + 4 > text.size()) return -1;
  int32_t v = 0;
  for (size_t k = 0; k < 4; ++k) {
    const int h = Hex(text[i + k]);
    if (h < 0) return -1;
    v = v * 16 + h;
  }
  return v;
}

// Decodes the string literal whose opening quote is at text[*i]. Returns true when the literal closes
// (then *i is past the quote); false when the text ends first (then *out holds what was decoded before an
// unfinished escape, if any). *odd is set for an escape that cannot be decoded.
bool DecodeString(std::string_view text, size_t* i, std::string* out, bool* odd) {
  out->clear();
  size_t k = *i + 1;
  while (k < text.size()) {
    const char c = text[k];
    if (c == '"') {
      *i = k + 1;
      return true;
    }
    if (c != '\\') {
      out->push_back(c);
      ++k;
      continue;
    }
    if (k + 1 >= text.size()) break;
    const char e = text[k + 1];
    if (e != 'u') {
      static constexpr std::string_view kFrom = "\"\\/bfnrt", kTo = "\"\\/\b\f\n\r\t";
      const size_t at = kFrom.find(e);
      if (at == std::string_view::npos) {
        *odd = true;
        break;
      }
      out->push_back(kTo[at]);
      k += 2;
      continue;
    }
    const int32_t u = Hex4(text, k + 2);
    if (u < 0) {
      if (k + 6 > text.size()) break;  // cut short
      *odd = true;
      break;
    }
    if (u >= 0xD800 && u <= 0xDBFF) {
      if (k + 8 > text.size()) break;
      const int32_t low = text[k + 6] == '\\' && text[k + 7] == 'u' ? Hex4(text, k + 8) : -1;
      if (low < 0xDC00 || low > 0xDFFF) {
        if (k + 12 > text.size()) break;
        *odd = true;
        break;
      }
      AppendUtf8(0x10000 + ((static_cast<uint32_t>(u) - 0xD800) << 10) + (static_cast<uint32_t>(low) - 0xDC00), out);
      k += 12;
      continue;
    }
    if (u >= 0xDC00 && u <= 0xDFFF) {
      *odd = true;
      break;
    }
    AppendUtf8(static_cast<uint32_t>(u), out);
    k += 6;
  }
  *i = text.size();
  return false;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

}  // namespace

UniqueItem CanonicalItem(std::string_view text) {
  UniqueItem item;
  nlohmann::json v = nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (v.is_discarded()) {
    size_t a = 0, b = text.size();
    while (a < b && IsSpace(text[a])) ++a;
    while (b > a && IsSpace(text[b - 1])) --b;
    item.canonical.assign(1, '?');
    item.canonical.append(text.data() + a, b - a);
    item.kind = a < b ? KindOf(text[a]) : 0;
    return item;
  }
  Emit(v, &item.canonical, &item.strings);
  item.kind = item.canonical.empty() ? 0 : item.canonical[0];
  std::sort(item.strings.begin(), item.strings.end());
  item.strings.erase(std::unique(item.strings.begin(), item.strings.end()), item.strings.end());
  return item;
}

bool MayEqual(std::string_view prefix, const UniqueItem& item) {
  size_t i = 0;
  while (i < prefix.size() && IsSpace(prefix[i])) ++i;
  if (i == prefix.size()) return true;
  if (item.canonical[0] == '?') return true;  // a raw form: nothing to compare by
  const char kind = KindOf(prefix[i]);
  if (kind == 0) return true;
  if (kind != item.kind) return false;
  switch (kind) {
    case '0':
      return true;
    case 't':
    case 'f':
    case 'n': {
      const std::string_view word = kind == 't' ? "true" : kind == 'f' ? "false" : "null";
      const std::string_view rest = prefix.substr(i);
      return rest.size() <= word.size() && word.substr(0, rest.size()) == rest;
    }
    default:
      break;
  }
  // Strings, and the strings inside objects and arrays: each finished one must be among the item's, an
  // unfinished one the start of one of them.
  std::string s;
  while (i < prefix.size()) {
    if (prefix[i] != '"') {
      ++i;
      continue;
    }
    bool odd = false;
    const bool closed = DecodeString(prefix, &i, &s, &odd);
    if (odd) return true;
    if (closed) {
      if (!std::binary_search(item.strings.begin(), item.strings.end(), s)) return false;
      continue;
    }
    for (const std::string& x : item.strings)
      if (x.size() >= s.size() && x.compare(0, s.size(), s) == 0) return true;
    return false;
  }
  return true;
}

}  // namespace deepinfer::grammar
