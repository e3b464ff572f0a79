// Request bodies read as JSON objects (the server's /tokenize and /detokenize, the legacy Completions API,
// the fields the codec does not read), parsed with the bounds every untrusted JSON text gets (core/json.h:
// size and depth bounded, no recursion, no exceptions).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace deepinfer::pipeline {

inline constexpr int kMaxBodyJsonDepth = 64;

// The body as a JSON object, or the message saying why it is not one.
struct JsonBody {
  nlohmann::json value;
  std::string error;  // empty on success
  bool ok() const { return error.empty(); }
};
JsonBody ParseJsonObject(std::string_view body);

}  // namespace deepinfer::pipeline
