// A JSON writer that reproduces Python's json.dumps byte for byte: the DeepSeek prompt formats embed
// json.dumps(obj, ensure_ascii=False) output (tool schemas, tool-call arguments), so the prompt encoder
// must write exactly what Python writes. Objects keep insertion order (nlohmann::ordered_json), as a
// Python dict does.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deepinfer {

struct PyJsonOptions {
  bool ensure_ascii = false;
  bool sort_keys = false;
  int indent = -1;  // < 0: single line (Python's indent=None)
  // Python's defaults: ", " and ": " without indent; "," and ": " with an indent.
  std::string item_separator = ", ";
  std::string key_separator = ": ";

  static PyJsonOptions Default() { return {}; }
  static PyJsonOptions Compact() { return {false, false, -1, ",", ":"}; }
  static PyJsonOptions Indented(int n) { return {false, false, n, ",", ": "}; }
};

// json.dumps(value, ensure_ascii=..., indent=..., separators=..., sort_keys=...).
std::string PyJsonDumps(const nlohmann::ordered_json& value, const PyJsonOptions& options = {});

// The JSON string literal Python writes for `text` (with the quotes). Bytes of `text` are UTF-8.
void PyJsonAppendString(std::string& out, std::string_view text, bool ensure_ascii = false);
std::string PyJsonString(std::string_view text, bool ensure_ascii = false);

// Python's repr(float): shortest round-trip digits, fixed notation for 1e-4 <= |x| < 1e16, else
// "1e+16"-style exponent with at least two digits; integral values keep ".0". json.dumps writes
// NaN, Infinity and -Infinity for the non-finite values.
std::string PyFloatRepr(double value);

}  // namespace deepinfer
