#include "model/common/config_keys.h"

#include "core/json.h"
#include "core/utf8.h"

namespace deepinfer::model {

std::string KeyRange(int64_t lo, int64_t hi) {
  std::string out = "[";
  out += std::to_string(lo);
  out += ", ";
  out += std::to_string(hi);
  out += "]";
  return out;
}

// Built with appends: GCC 12 reports a false -Wrestrict on long chains of +.
Status KeyError(const HfConfig& hf, const std::string& key, const nlohmann::json& value, const std::string& allowed) {
  std::string m = hf.source();
  m += ": key '";
  m += utf8::OneLine(key.substr(0, 64));
  m += "' is ";
  m += DumpJson(value).substr(0, 40);
  m += "; allowed: ";
  m += allowed;
  return Status::InvalidArgument(std::move(m));
}

Result<int64_t> IntIn(const HfConfig& hf, const char* key, std::optional<int64_t> fallback, int64_t lo, int64_t hi) {
  auto it = hf.raw().find(key);
  if (it == hf.raw().end()) {
    if (!fallback)
      return Status::NotFound(hf.source() + ": missing key '" + key + "' (an integer in " + KeyRange(lo, hi) + ")");
    return *fallback;
  }
  // Unsigned values past int64 would wrap in get<int64_t>(): they are out of range anyway.
  if (!it->is_number_integer() || (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(hi)) ||
      it->get<int64_t>() < lo || it->get<int64_t>() > hi) {
    return KeyError(hf, key, *it, "an integer in " + KeyRange(lo, hi));
  }
  return it->get<int64_t>();
}

}  // namespace deepinfer::model
