// Request bodies of the server's own endpoints (/tokenize, /detokenize, /v1/completions), parsed with the
// bounds every untrusted JSON text gets (core/json.h: size and depth bounded, no recursion, no exceptions).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deepinfer::server {

inline constexpr int kMaxBodyJsonDepth = 64;

// The body as a JSON object, or the message saying why it is not one.
struct JsonBody {
  nlohmann::json value;
  std::string error;  // empty on success
  bool ok() const { return error.empty(); }
};
JsonBody ParseJsonObject(std::string_view body);

}  // namespace deepinfer::server
