// Parsing JSON from untrusted bytes: no exception escapes, the input's size and nesting depth are
// bounded before anything is built, and nothing recurses on the input's depth (nlohmann's SAX parser keeps
// its own stack; the builder here keeps one frame per open container, at most max_depth of them).
//
// A value parsed here nests at most limits.max_depth levels deep, so the recursive walks nlohmann does
// over a value (dump, copy, comparison, destruction) stay within a small, fixed stack depth. Use these
// instead of nlohmann::json::parse for anything that comes from outside: files, requests, JSON inside JSON
// strings (tool arguments), model output, peer results.
//
// Limits (JsonLimits): max_bytes (default 64 MiB) is checked before parsing; max_depth (default 128)
// counts open arrays and objects, so a scalar has depth 0 and `[[1]]` depth 2. Strings must be valid UTF-8
// (nlohmann's lexer checks it), numbers finite; there must be nothing but whitespace after the value.
// Duplicate object keys: the last value wins (and, in an ordered_json, keeps the first key's place), as
// Python's json.loads does.
#pragma once

#include <cstddef>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer {

struct JsonLimits {
  size_t max_bytes = size_t{64} << 20;
  int max_depth = 128;
};

// InvalidArgument on malformed, too deep or too large input, with a one-line message such as
// "invalid JSON at line 3, column 7: unexpected '}'" (no library-internal names); ResourceExhausted when
// memory runs out. Callers prefix the message with what was being read (a file name, a field).
Result<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits = {});
Result<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, const JsonLimits& limits = {});

// The nesting depth of a JSON text by a bracket scan outside strings (no parse, no allocation), stopping
// as soon as it exceeds `limit`: a cheap pre-check for text that will be parsed later, or elsewhere.
int JsonTextDepth(std::string_view text, int limit);

// value.dump() that cannot throw: invalid UTF-8 in strings (possible in values built from bytes, not in
// parsed ones) is written as U+FFFD. indent < 0: one line.
std::string DumpJson(const nlohmann::json& value, int indent = -1);
std::string DumpJson(const nlohmann::ordered_json& value, int indent = -1);

}  // namespace deepinfer
