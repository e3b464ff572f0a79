// The tokenizers built into deepinfer: data/tokenizers/<name>/ (see data/README.md), embedded into the
// binary xz-compressed at build time (builtin_data.cpp), so that no command needs a file, a Python
// environment or a developer tree to find one. A binary that never calls these carries none of the data
// (the archive member holding it is only linked when referenced).
//
// Names: "deepseek-v3", "deepseek-v4", "deepseek-v4.1". The bytes are exactly the upstream tokenizer.json
// (sha256 in each directory's README); every call checks them against a recorded XXH3-128 before returning,
// so a corrupt embedding is an error, not a silently different vocabulary.
#pragma once

#include <array>
#include <string>
#include <string_view>

#include "core/status.h"

namespace deepinfer::tokenizer {

inline constexpr std::array<std::string_view, 3> kBuiltinTokenizers = {"deepseek-v3", "deepseek-v4", "deepseek-v4.1"};

bool IsBuiltinTokenizer(std::string_view name);

// tokenizer.json and tokenizer_config.json of a builtin tokenizer. NotFound for an unknown name.
// Decompressing takes tens of milliseconds; callers that load one repeatedly keep the result.
Result<std::string> BuiltinTokenizerJson(std::string_view name);
Result<std::string> BuiltinTokenizerConfigJson(std::string_view name);

}  // namespace deepinfer::tokenizer
