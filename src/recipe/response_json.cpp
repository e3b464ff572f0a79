#include "recipe/response_json.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

#include "core/json.h"
#include "core/py_json.h"
#include "core/utf8.h"
#include "recipe/output_options.h"

namespace deepinfer::recipe {
namespace {

void Append(std::string& out, const nlohmann::ordered_json& value) {
  switch (value.type()) {
    case nlohmann::ordered_json::value_t::object: {
      out += '{';
      bool first = true;
      for (auto it = value.begin(); it != value.end(); ++it) {
        if (!first) out += ',';
        first = false;
        PyJsonAppendString(out, it.key(), false);
        out += ':';
        Append(out, it.value());
      }
      out += '}';
      break;
    }
    case nlohmann::ordered_json::value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : value) {
        if (!first) out += ',';
        first = false;
        Append(out, item);
      }
      out += ']';
      break;
    }
    case nlohmann::ordered_json::value_t::string:
      PyJsonAppendString(out, value.get_ref<const std::string&>(), false);
      break;
    case nlohmann::ordered_json::value_t::boolean:
      out += value.get<bool>() ? "true" : "false";
      break;
    case nlohmann::ordered_json::value_t::number_integer:
      out += std::to_string(value.get<int64_t>());
      break;
    case nlohmann::ordered_json::value_t::number_unsigned:
      out += std::to_string(value.get<uint64_t>());
      break;
    case nlohmann::ordered_json::value_t::number_float:
      SerdeJsonAppendFloat(out, value.get<double>());
      break;
    default:
      out += "null";
      break;
  }
}

}  // namespace

// The layout of Rust's ryu crate (serde_json's float writer): shortest round-trip digits d1..dn with
// decimal exponent k (value = 0.d1..dn * 10^k): integers below 1e16 get ".0", other values with
// -5 < k <= 16 are plain decimals, everything else is d1[.d2..dn]e<k-1>, positive exponents with a '+'
// (deepseek-recipe 0.2.0 writes 1e+16 and 1e-7).
namespace {

void AppendShortest(std::string& out, std::string_view sci);

}  // namespace

void SerdeJsonAppendFloat(std::string& out, double value) {
  if (!std::isfinite(value)) {  // serde_json writes null for NaN and infinities
    out += "null";
    return;
  }
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  AppendShortest(out, std::string_view(buf, static_cast<size_t>(result.ptr - buf)));
}

void SerdeJsonAppendFloat32(std::string& out, float value) {
  if (!std::isfinite(value)) {
    out += "null";
    return;
  }
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
  AppendShortest(out, std::string_view(buf, static_cast<size_t>(result.ptr - buf)));
}

namespace {

// `sci` is the shortest round-trip form "-d.ddde+XX" of a float of either width.
void AppendShortest(std::string& out, std::string_view sci) {
  bool negative = false;
  if (!sci.empty() && sci[0] == '-') {
    negative = true;
    sci.remove_prefix(1);
  }
  const size_t e = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e)) {
    if (c != '.') digits += c;
  }
  const int exponent10 = std::atoi(std::string(sci.substr(e + 1)).c_str());
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  if (negative) out += '-';
  if (digits == "0") {
    out += "0.0";
    return;
  }
  const int n = static_cast<int>(digits.size());
  const int k = exponent10 + 1;  // position of the decimal point after the first k digits
  if (n <= k && k <= 16) {
    out += digits;
    out.append(static_cast<size_t>(k - n), '0');
    out += ".0";
  } else if (0 < k && k <= 16) {
    out += digits.substr(0, static_cast<size_t>(k));
    out += '.';
    out += digits.substr(static_cast<size_t>(k));
  } else if (-5 < k && k <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-k), '0');
    out += digits;
  } else {
    out += digits[0];
    if (n > 1) {
      out += '.';
      out += digits.substr(1);
    }
    out += 'e';
    if (k - 1 > 0) out += '+';
    out += std::to_string(k - 1);
  }
}

}  // namespace

std::string SerdeJsonDumps(const nlohmann::ordered_json& value) {
  std::string out;
  Append(out, value);
  return out;
}

namespace {

// A token's text: the token itself when it is UTF-8, else every one of its bytes as \xNN (a token that
// holds part of a character, " \xf0\x9f\x98" of an emoji, reads "\x20\xf0\x9f\x98").
void AppendTokenText(std::string& out, std::string_view bytes) {
  if (utf8::IsValid(bytes)) {
    PyJsonAppendString(out, bytes, false);
    return;
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string text;
  for (const char c : bytes) {
    const auto byte = static_cast<unsigned char>(c);
    text += "\\x";
    text += kHex[byte >> 4];
    text += kHex[byte & 15];
  }
  PyJsonAppendString(out, text, false);
}

void AppendTokenFields(std::string& out, std::string_view token, double logprob) {
  out += "{\"token\":";
  AppendTokenText(out, token);
  out += ",\"logprob\":";
  SerdeJsonAppendFloat32(out, static_cast<float>(logprob));
  out += ",\"bytes\":[";
  for (size_t i = 0; i < token.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(static_cast<unsigned char>(token[i]));
  }
  out += ']';
}

}  // namespace

std::string TokenLogprobJson(const TokenLogprob& token) {
  std::string out;
  AppendTokenFields(out, token.token, token.logprob);
  out += ",\"top_logprobs\":[";
  for (size_t i = 0; i < token.top_logprobs.size(); ++i) {
    if (i) out += ',';
    AppendTokenFields(out, token.top_logprobs[i].token, token.top_logprobs[i].logprob);
    out += '}';
  }
  out += "]}";
  return out;
}

std::optional<std::string> NegativeZeroAsFloat(std::string_view text) {
  std::optional<std::string> out;
  size_t copied = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '-' && i + 1 < text.size() && text[i + 1] == '0') {
      const char next = i + 2 < text.size() ? text[i + 2] : ' ';
      if (next == '.' || next == 'e' || next == 'E' || (next >= '0' && next <= '9')) continue;
      if (!out) out.emplace();
      out->append(text.substr(copied, i + 2 - copied)).append(".0");
      copied = i + 2;
    }
  }
  if (out) out->append(text.substr(copied));
  return out;
}

Result<nlohmann::ordered_json> ParseSerdeJson(std::string_view text) {
  const std::optional<std::string> respelled = NegativeZeroAsFloat(text);
  const std::string_view input = respelled ? std::string_view(*respelled) : text;
  return ParseOrderedJson(input, JsonLimits{input.size() + 1, kSerdeMaxDepth});
}

}  // namespace deepinfer::recipe
