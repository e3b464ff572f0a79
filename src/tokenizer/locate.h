// Naming a tokenizer: a path to a tokenizer.json, a directory holding one, or the name of a builtin
// tokenizer (builtin.h: deepseek-v3, deepseek-v4, deepseek-v4.1). An existing path wins over a builtin name.
// Nothing else is searched: an empty name means $DEEPINFER_TOKENIZER when it is set, else the caller's
// default builtin — never a developer tree, a Python environment or the working directory.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::tokenizer {

struct TokenizerSource {
  std::string path;     // a tokenizer.json file; empty for a builtin
  std::string builtin;  // a builtin tokenizer's name; empty for a file
  // The file's path, or "builtin deepseek-v4": for messages and reports.
  std::string ToString() const;
};

// NotFound when the name is neither an existing path nor a builtin (the message lists the builtins).
Result<TokenizerSource> ResolveTokenizer(std::string_view name, std::string_view default_builtin = "deepseek-v4");

// The tokenizer.json bytes, and the tokenizer loaded from them.
Result<std::string> ReadTokenizerJson(const TokenizerSource& source);
Result<Tokenizer> LoadTokenizer(const TokenizerSource& source);
// ResolveTokenizer + LoadTokenizer.
Result<Tokenizer> LoadTokenizer(std::string_view name, std::string_view default_builtin = "deepseek-v4");

// Writes DIR/tokenizer.json and, when there is one (a builtin's, or a tokenizer_config.json beside the
// file), DIR/tokenizer_config.json: what a Hugging Face model directory holds.
Status WriteTokenizerFiles(const TokenizerSource& source, const std::string& dir);

}  // namespace deepinfer::tokenizer
