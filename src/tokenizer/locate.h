// Where to find a tokenizer.json when the user names none.
#pragma once

#include <string>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

// The places searched, in order: $DEEPINFER_TOKENIZER, ./tokenizer.json, then
// <ancestor>/shared/data/tokenizers/deepseek-v3/tokenizer.json for each ancestor directory of the running
// executable (the repository's shared data when run from a build tree).
std::vector<std::string> DefaultTokenizerCandidates();

// `hint` may name a tokenizer.json or a directory holding one; empty means "search the defaults".
Result<std::string> LocateTokenizerJson(const std::string& hint);

}  // namespace deepinfer::tokenizer
