// Internal: the embedded bytes of data/tokenizers/ (builtin_data.cpp). Use builtin.h.
#pragma once

#include <string_view>

namespace deepinfer::tokenizer::internal {

struct BuiltinFiles {
  std::string_view tokenizer_json_xz;     // empty for a delta-built tokenizer
  std::string_view tokenizer_json_delta;  // JSON edits against another builtin (data/tokenizers/<name>/README.md)
  std::string_view tokenizer_config_json;
};

// The files of a builtin tokenizer; all views empty for an unknown name.
BuiltinFiles EmbeddedFiles(std::string_view name);

}  // namespace deepinfer::tokenizer::internal
