// Range-checked reads of config.json keys, shared by every family's config reader: every size, count and
// id is bounded before anything uses it (a negative layer count must not reach a resize, a 2^40 window an
// allocation), and a value outside its range, or of the wrong type, is one error line naming the file, the
// key and what is allowed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "core/hf_config.h"
#include "core/status.h"

namespace deepinfer::model {

// "[lo, hi]".
std::string KeyRange(int64_t lo, int64_t hi);

// "<file>: key 'K' is V; allowed: A", on one line whatever the file holds (the key and value are capped and
// a control character in them cannot split the line).
Status KeyError(const HfConfig& hf, const std::string& key, const nlohmann::json& value, const std::string& allowed);

// An integer key in [lo, hi]; `fallback` when absent, or NotFound when there is none.
Result<int64_t> IntIn(const HfConfig& hf, const char* key, std::optional<int64_t> fallback, int64_t lo, int64_t hi);

}  // namespace deepinfer::model
