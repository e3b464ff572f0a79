// JSON text as deepseek-recipe (Rust serde_json) writes it in response bodies: compact separators,
// objects in insertion order, strings escaped like serde_json (which matches Python's ensure_ascii=False
// rules), floats in shortest round-trip form laid out as deepseek-recipe 0.2.0 writes them ("3.0", "1e-7",
// "0.00001", "1e+16", "1.5e+300"; not Python's "1e-07").
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "core/status.h"

namespace deepinfer::recipe {

std::string SerdeJsonDumps(const nlohmann::ordered_json& value);
void SerdeJsonAppendFloat(std::string& out, double value);
// An f32 setting (temperature, top_p) in its own shortest form: 0.9f writes "0.9", not 0.8999999761581421.
void SerdeJsonAppendFloat32(std::string& out, float value);

// JSON text as deepseek-recipe (serde_json) reads it: nesting at most 128 deep (serde's recursion limit),
// duplicate keys keep their first place and their last value, and the number token `-0` is the float -0.0
// (nlohmann would read the integer 0 and lose the sign). Parsed by core's bounded, non-recursive parser.
// Used for request bodies, tool-call arguments and the JSON of model-generated tool parameters.
inline constexpr int kSerdeMaxDepth = 128;
Result<nlohmann::ordered_json> ParseSerdeJson(std::string_view text);

// The text with every `-0` number token spelled `-0.0` (nothing else changes), or nullopt when it has none.
std::optional<std::string> NegativeZeroAsFloat(std::string_view json_text);

}  // namespace deepinfer::recipe
