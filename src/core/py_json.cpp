#include "core/py_json.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "core/utf8.h"

namespace deepinfer {
namespace {

void AppendHex4(std::string& out, unsigned value) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\u%04x", value & 0xFFFF);
  out += buf;
}

void AppendFloat(std::string& out, double value) {
  if (std::isnan(value)) {
    out += "NaN";
  } else if (std::isinf(value)) {
    out += value > 0 ? "Infinity" : "-Infinity";
  } else {
    out += PyFloatRepr(value);
  }
}

void AppendNewlineIndent(std::string& out, const PyJsonOptions& options, int level) {
  out += '\n';
  out.append(static_cast<size_t>(options.indent) * static_cast<size_t>(level), ' ');
}

void AppendValue(std::string& out, const nlohmann::ordered_json& value, const PyJsonOptions& options, int level) {
  using Type = nlohmann::ordered_json::value_t;
  switch (value.type()) {
    case Type::null: out += "null"; return;
    case Type::boolean: out += value.get<bool>() ? "true" : "false"; return;
    case Type::number_integer: out += std::to_string(value.get<int64_t>()); return;
    case Type::number_unsigned: out += std::to_string(value.get<uint64_t>()); return;
    case Type::number_float: AppendFloat(out, value.get<double>()); return;
    case Type::string:
      PyJsonAppendString(out, value.get_ref<const std::string&>(), options.ensure_ascii);
      return;
    case Type::array: {
      if (value.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& item : value) {
        if (!first) out += options.item_separator;
        first = false;
        if (options.indent >= 0) AppendNewlineIndent(out, options, level + 1);
        AppendValue(out, item, options, level + 1);
      }
      if (options.indent >= 0) AppendNewlineIndent(out, options, level);
      out += ']';
      return;
    }
    case Type::object: {
      if (value.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::string*> keys;
      std::vector<const nlohmann::ordered_json*> values;
      for (auto it = value.begin(); it != value.end(); ++it) {
        keys.push_back(&it.key());
        values.push_back(&it.value());
      }
      std::vector<size_t> order(keys.size());
      for (size_t i = 0; i < order.size(); ++i) order[i] = i;
      if (options.sort_keys) {
        // Python sorts str keys by code point, which for valid UTF-8 is byte order.
        std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return *keys[a] < *keys[b]; });
      }
      out += '{';
      bool first = true;
      for (size_t i : order) {
        if (!first) out += options.item_separator;
        first = false;
        if (options.indent >= 0) AppendNewlineIndent(out, options, level + 1);
        PyJsonAppendString(out, *keys[i], options.ensure_ascii);
        out += options.key_separator;
        AppendValue(out, *values[i], options, level + 1);
      }
      if (options.indent >= 0) AppendNewlineIndent(out, options, level);
      out += '}';
      return;
    }
    case Type::binary:
    case Type::discarded:
      out += "null";
      return;
  }
}

}  // namespace

void PyJsonAppendString(std::string& out, std::string_view text, bool ensure_ascii) {
  out += '"';
  size_t pos = 0;
  while (pos < text.size()) {
    const auto byte = static_cast<unsigned char>(text[pos]);
    if (byte < 0x80) {
      switch (byte) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        case '\b': out += "\\b"; break;
        case '\f': out += "\\f"; break;
        default:
          if (byte < 0x20 || (ensure_ascii && byte == 0x7F)) {
            AppendHex4(out, byte);
          } else {
            out += static_cast<char>(byte);
          }
      }
      ++pos;
      continue;
    }
    char32_t cp;
    size_t n = utf8::Decode(text, pos, &cp);
    if (n == 0) {
      // Not valid UTF-8: carry the byte through, as there is no Python str it could have come from.
      if (ensure_ascii) AppendHex4(out, 0xFFFD);
      else out += static_cast<char>(byte);
      ++pos;
      continue;
    }
    if (!ensure_ascii) {
      out.append(text.substr(pos, n));
    } else if (cp >= 0x10000) {
      const char32_t v = cp - 0x10000;
      AppendHex4(out, 0xD800 | (v >> 10));
      AppendHex4(out, 0xDC00 | (v & 0x3FF));
    } else {
      AppendHex4(out, cp);
    }
    pos += n;
  }
  out += '"';
}

std::string PyJsonString(std::string_view text, bool ensure_ascii) {
  std::string out;
  PyJsonAppendString(out, text, ensure_ascii);
  return out;
}

std::string PyFloatRepr(double value) {
  if (std::isnan(value)) return "nan";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  if (value == 0) return std::signbit(value) ? "-0.0" : "0.0";
  // Shortest round-trip digits in scientific form, e.g. "-1.2345e-05".
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  (void)ec;
  std::string_view sci(buf, static_cast<size_t>(end - buf));
  std::string out;
  size_t p = 0;
  if (sci[p] == '-') {
    out += '-';
    ++p;
  }
  std::string digits;
  size_t e_pos = sci.find('e');
  for (size_t i = p; i < e_pos; ++i)
    if (sci[i] != '.') digits += sci[i];
  const int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  const int decpt = exponent + 1;  // value = 0.DIGITS * 10^decpt
  const int ndigits = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (ndigits > 1) {
      out += '.';
      out.append(digits, 1, std::string::npos);
    }
    char exp_buf[16];
    std::snprintf(exp_buf, sizeof exp_buf, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += exp_buf;
  } else if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= ndigits) {
    out += digits;
    out.append(static_cast<size_t>(decpt - ndigits), '0');
    out += ".0";
  } else {
    out.append(digits, 0, static_cast<size_t>(decpt));
    out += '.';
    out.append(digits, static_cast<size_t>(decpt), std::string::npos);
  }
  return out;
}

std::string PyJsonDumps(const nlohmann::ordered_json& value, const PyJsonOptions& options) {
  std::string out;
  AppendValue(out, value, options, 0);
  return out;
}

}  // namespace deepinfer
