// The Engram compressed token map from a tokenizer.json, normalised with ICU the way Hugging Face tokenizers'
// normalizers do it (NFKC, NFD, StripAccents = drop General_Category Mark, Lowercase = each code point's full
// lowercase mapping without context, Replace, Strip = drop White_Space at both ends).
#include <unicode/normalizer2.h>
#include <unicode/uchar.h>
#include <unicode/unistr.h>
#include <unicode/ustring.h>

#include <array>
#include <optional>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "core/mapped_file.h"
#include "core/utf8.h"
#include "model/deepseek_v41/v41_engram.h"

namespace deepinfer::model {
namespace {

// GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves, the others for U+0100 + n.
const std::unordered_map<char32_t, uint8_t>& ByteLevelChars() {
  static const auto* table = [] {
    auto* t = new std::unordered_map<char32_t, uint8_t>();
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      (*t)[printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++)] = static_cast<uint8_t>(b);
    }
    return t;
  }();
  return *table;
}

// The ByteLevel decoder on one token: its bytes when every character is in the alphabet, else the token's
// own UTF-8.
std::string ByteLevelDecode(const std::string& token) {
  const auto& chars = ByteLevelChars();
  std::string bytes;
  utf8::CodePointIterator it(token);
  char32_t cp;
  size_t offset, length;
  while (it.Next(&cp, &offset, &length)) {
    auto found = chars.find(cp);
    if (found == chars.end()) return token;
    bytes.push_back(static_cast<char>(found->second));
  }
  return bytes;
}

class Normalizer {
 public:
  static Result<Normalizer> Create() {
    UErrorCode status = U_ZERO_ERROR;
    Normalizer n;
    n.nfkc_ = icu::Normalizer2::getNFKCInstance(status);
    n.nfd_ = icu::Normalizer2::getNFDInstance(status);
    if (U_FAILURE(status)) return Status::Internal(std::string("ICU normalizers unavailable: ") + u_errorName(status));
    return n;
  }

  // The normalised text of valid UTF-8 `text`, or nullopt on an ICU error.
  std::optional<std::string> Normalize(const std::string& text) const {
    UErrorCode status = U_ZERO_ERROR;
    icu::UnicodeString s = nfkc_->normalize(icu::UnicodeString::fromUTF8(text), status);
    s = nfd_->normalize(s, status);
    if (U_FAILURE(status)) return std::nullopt;
    // Accents off, then each code point lowercased alone (Rust's char::to_lowercase: no final-sigma context).
    std::u32string chars;
    for (int32_t i = 0; i < s.length();) {
      const UChar32 c = s.char32At(i);
      i += U16_LENGTH(c);
      if (U_GET_GC_MASK(c) & U_GC_M_MASK) continue;
      UChar in[2], out[8];
      int32_t in_len = 0;
      U16_APPEND_UNSAFE(in, in_len, c);
      UErrorCode lower_status = U_ZERO_ERROR;
      const int32_t out_len = u_strToLower(out, 8, in, in_len, "", &lower_status);
      if (U_FAILURE(lower_status)) return std::nullopt;
      for (int32_t j = 0; j < out_len;) {
        UChar32 lc;
        U16_NEXT(out, j, out_len, lc);
        chars.push_back(static_cast<char32_t>(lc));
      }
    }
    // Runs of space, tab, CR and LF become one space.
    std::u32string collapsed;
    bool in_run = false;
    for (char32_t c : chars) {
      const bool ws = c == ' ' || c == '\t' || c == '\r' || c == '\n';
      if (ws && in_run) continue;
      in_run = ws;
      collapsed.push_back(ws ? U' ' : c);
    }
    // A text that is exactly one space stays one space; otherwise White_Space is stripped at both ends.
    if (collapsed == U" ") return std::string(" ");
    size_t begin = 0, end = collapsed.size();
    while (begin < end && u_isUWhiteSpace(static_cast<UChar32>(collapsed[begin]))) ++begin;
    while (end > begin && u_isUWhiteSpace(static_cast<UChar32>(collapsed[end - 1]))) --end;
    std::string out;
    for (size_t i = begin; i < end; ++i) utf8::Append(out, collapsed[i]);
    return out;
  }

 private:
  const icu::Normalizer2* nfkc_ = nullptr;
  const icu::Normalizer2* nfd_ = nullptr;
};

}  // namespace

Result<std::vector<int32_t>> BuildEngramTokenMap(const std::string& tokenizer_json, int64_t vocab_size,
                                                 int64_t* classes) {
  DI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(tokenizer_json));
  return BuildEngramTokenMapFromJson(text, tokenizer_json, vocab_size, classes);
}

Result<std::vector<int32_t>> BuildEngramTokenMapFromJson(std::string_view text, const std::string& tokenizer_json,
                                                         int64_t vocab_size, int64_t* classes) {
  auto parsed = ParseJson(text);
  if (!parsed.ok()) return Status::InvalidArgument(tokenizer_json + ": " + parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return Status::InvalidArgument(tokenizer_json + ": not a JSON object");
  if (vocab_size <= 0 || vocab_size > (int64_t{1} << 24))
    return Status::InvalidArgument(tokenizer_json + ": vocabulary size out of range");
  std::vector<std::optional<std::string>> tokens(static_cast<size_t>(vocab_size));
  const auto model = j.find("model");
  if (model == j.end() || !model->is_object() || !model->contains("vocab") || !(*model)["vocab"].is_object())
    return Status::InvalidArgument(tokenizer_json + ": no model.vocab object");
  for (const auto& [token, id] : (*model)["vocab"].items()) {
    if (!id.is_number_integer()) return Status::InvalidArgument(tokenizer_json + ": model.vocab ids must be integers");
    const int64_t i = id.get<int64_t>();
    if (i >= 0 && i < vocab_size) tokens[i] = token;
  }
  if (auto at = j.find("added_tokens"); at != j.end() && at->is_array()) {
    for (const auto& t : *at) {
      if (!t.is_object() || !t.contains("id") || !t["id"].is_number_integer() || !t.contains("content") ||
          !t["content"].is_string())
        return Status::InvalidArgument(tokenizer_json + ": added_tokens entries need an integer id and a content");
      const int64_t i = t["id"].get<int64_t>();
      if (i >= 0 && i < vocab_size) {
        tokens[i] = t["content"].get<std::string>();
      }
    }
  }
  DI_ASSIGN_OR_RETURN(Normalizer normalizer, Normalizer::Create());
  std::unordered_map<std::string, int32_t> key_to_class;
  std::vector<int32_t> map(static_cast<size_t>(vocab_size));
  for (int64_t id = 0; id < vocab_size; ++id) {
    if (!tokens[id])
      return Status::InvalidArgument(tokenizer_json + ": no token has id " + std::to_string(id) + " (the Engram map needs all " +
                                     std::to_string(vocab_size) + " ids of the model's vocabulary)");
    const std::string decoded = ByteLevelDecode(*tokens[id]);
    std::string key;
    // Partial UTF-8 byte tokens decode lossily to U+FFFD: nothing to normalise, keyed by their raw form.
    if (!utf8::IsValid(decoded) || decoded.find("\xEF\xBF\xBD") != std::string::npos) {
      key = *tokens[id];
    } else {
      std::optional<std::string> normalized = normalizer.Normalize(decoded);
      if (!normalized) return Status::Internal(tokenizer_json + ": ICU failed to normalise token " + std::to_string(id));
      key = normalized->empty() ? decoded : *normalized;
    }
    auto [it, inserted] = key_to_class.try_emplace(key, static_cast<int32_t>(key_to_class.size()));
    map[id] = it->second;
  }
  *classes = static_cast<int64_t>(key_to_class.size());
  return map;
}

}  // namespace deepinfer::model
