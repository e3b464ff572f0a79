#include "server/json_body.h"

namespace deepinfer::server {

namespace {

// Deepest bracket nesting outside strings, stopping once past `limit`: the parser never sees a text whose
// depth could make its work or its destruction deep.
int Depth(std::string_view text, int limit) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) return deepest;
    } else if (c == ']' || c == '}') --depth;
  }
  return deepest;
}

}  // namespace

JsonBody ParseJsonObject(std::string_view body) {
  JsonBody out;
  if (Depth(body, kMaxBodyJsonDepth) > kMaxBodyJsonDepth) {
    out.error = "request body nests deeper than " + std::to_string(kMaxBodyJsonDepth) + " levels";
    return out;
  }
  out.value = nlohmann::json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (out.value.is_discarded()) {
    out.error = "We could not parse the JSON body of your request. The body must be valid JSON.";
  } else if (!out.value.is_object()) {
    out.error = "the request body must be a JSON object";
  }
  return out;
}

}  // namespace deepinfer::server
