// JSON text as deepseek-recipe (Rust serde_json) writes it in response bodies: compact separators,
// objects in insertion order, strings escaped like serde_json (which matches Python's ensure_ascii=False
// rules), floats in Rust's shortest form ("3.0", "1e-7", "1e16", "1.5e300"; not Python's "1e-07").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::recipe {

std::string SerdeJsonDumps(const nlohmann::ordered_json& value);
void SerdeJsonAppendFloat(std::string& out, double value);

}  // namespace deepinfer::recipe
