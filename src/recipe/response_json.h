// JSON text as deepseek-recipe (Rust serde_json) writes it in response bodies: compact separators,
// objects in insertion order, strings escaped like serde_json (which matches Python's ensure_ascii=False
// rules), floats in shortest round-trip form laid out as deepseek-recipe 0.2.0 writes them ("3.0", "1e-7",
// "0.00001", "1e+16", "1.5e+300"; not Python's "1e-07").
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace deepinfer::recipe {

std::string SerdeJsonDumps(const nlohmann::ordered_json& value);
void SerdeJsonAppendFloat(std::string& out, double value);
// An f32 setting (temperature, top_p) in its own shortest form: 0.9f writes "0.9", not 0.8999999761581421.
void SerdeJsonAppendFloat32(std::string& out, float value);

}  // namespace deepinfer::recipe
