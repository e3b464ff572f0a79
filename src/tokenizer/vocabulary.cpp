#include "tokenizer/vocabulary.h"

#include <atomic>

#include <nlohmann/json.hpp>

#include "tokenizer/byte_level.h"
#include "tokenizer/json_scan.h"
#include "tokenizer/pretokenizer.h"

namespace deepinfer::tokenizer {
namespace {

using Json = nlohmann::json;

Status Unsupported(const std::string& what) {
  return Status::Unimplemented("tokenizer.json: unsupported " + what +
                               " (this tokenizer implements the DeepSeek byte-level BPE family only)");
}

std::string TypeOf(const Json& j) {
  if (j.is_object() && j.contains("type") && j["type"].is_string()) return j["type"].get<std::string>();
  return j.dump(-1, ' ', false, Json::error_handler_t::replace).substr(0, 80);
}

bool IsNullOrEmptyString(const Json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return true;
  return j[key].is_string() && j[key].get<std::string>().empty();
}

bool IsFalseOrAbsent(const Json& j, const char* key) {
  return !j.contains(key) || j[key].is_null() || (j[key].is_boolean() && !j[key].get<bool>());
}

Status CheckNormalizer(const Json& j) {
  if (!j.contains("normalizer") || j["normalizer"].is_null()) return Status::Ok();
  const Json& n = j["normalizer"];
  if (TypeOf(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array() &&
      n["normalizers"].empty()) {
    return Status::Ok();
  }
  if (TypeOf(n) == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    return Unsupported("normalizer " + TypeOf(n["normalizers"][0]));
  }
  return Unsupported("normalizer " + TypeOf(n));
}

Status CheckSplit(const Json& split, int index) {
  if (TypeOf(split) != "Split") return Unsupported("pre_tokenizer " + TypeOf(split) + " at position " + std::to_string(index));
  if (!split.contains("pattern") || !split["pattern"].is_object() || !split["pattern"].contains("Regex") ||
      !split["pattern"]["Regex"].is_string()) {
    return Unsupported("Split pattern " + (split.contains("pattern") ? split["pattern"].dump(-1, ' ', false, Json::error_handler_t::replace) : "(none)") +
                       " (only Regex patterns)");
  }
  std::string pattern = split["pattern"]["Regex"].get<std::string>();
  if (pattern != kDeepSeekSplitPatterns[index]) {
    return Unsupported("Split regex '" + pattern + "' at position " + std::to_string(index) +
                       " (the pre-tokenizer is hand-written for the DeepSeek V3 patterns)");
  }
  if (!split.contains("behavior") || split["behavior"] != "Isolated") {
    return Unsupported("Split behavior " + (split.contains("behavior") ? split["behavior"].dump(-1, ' ', false, Json::error_handler_t::replace) : "(none)"));
  }
  if (!IsFalseOrAbsent(split, "invert")) return Unsupported("Split invert: true");
  return Status::Ok();
}

Status CheckPreTokenizer(const Json& j) {
  if (!j.contains("pre_tokenizer") || !j["pre_tokenizer"].is_object()) return Unsupported("pre_tokenizer (missing)");
  const Json& p = j["pre_tokenizer"];
  if (TypeOf(p) != "Sequence") return Unsupported("pre_tokenizer " + TypeOf(p));
  if (!p.contains("pretokenizers") || !p["pretokenizers"].is_array()) return Unsupported("pre_tokenizer Sequence shape");
  const Json& seq = p["pretokenizers"];
  if (seq.size() != 4) {
    return Unsupported("pre_tokenizer Sequence of " + std::to_string(seq.size()) + " steps (expected 3 Split + ByteLevel)");
  }
  for (int i = 0; i < 3; ++i) DI_RETURN_IF_ERROR(CheckSplit(seq[i], i));
  const Json& bl = seq[3];
  if (TypeOf(bl) != "ByteLevel") return Unsupported("pre_tokenizer " + TypeOf(bl) + " at position 3");
  if (!IsFalseOrAbsent(bl, "add_prefix_space")) return Unsupported("ByteLevel add_prefix_space: true");
  if (!IsFalseOrAbsent(bl, "use_regex")) return Unsupported("ByteLevel use_regex: true");
  return Status::Ok();
}

Status CheckModelOptions(const Json& m) {
  if (TypeOf(m) != "BPE") return Unsupported("model " + TypeOf(m));
  if (m.contains("dropout") && !m["dropout"].is_null()) return Unsupported("BPE dropout");
  if (m.contains("unk_token") && !m["unk_token"].is_null()) return Unsupported("BPE unk_token");
  if (!IsNullOrEmptyString(m, "continuing_subword_prefix")) return Unsupported("BPE continuing_subword_prefix");
  if (!IsNullOrEmptyString(m, "end_of_word_suffix")) return Unsupported("BPE end_of_word_suffix");
  if (!IsFalseOrAbsent(m, "byte_fallback")) return Unsupported("BPE byte_fallback: true");
  if (!IsFalseOrAbsent(m, "ignore_merges")) return Unsupported("BPE ignore_merges: true");
  if (!m.contains("vocab") || !m["vocab"].is_object()) return Unsupported("BPE vocab (missing or not an object)");
  if (!m.contains("merges") || !m["merges"].is_array()) return Unsupported("BPE merges (missing or not an array)");
  return Status::Ok();
}

std::atomic<uint64_t> next_serial{1};

// Parses everything but model.vocab and model.merges into a DOM; returns those two as raw text.
Status ParseOutline(std::string_view json_text, Json* top, std::string_view* vocab, std::string_view* merges) {
  JsonScanner scanner(json_text);
  scanner.SkipSpace();
  if (scanner.AtEnd() || json_text[scanner.pos()] != '{') {
    return Status::InvalidArgument("tokenizer.json: top level is not an object");
  }
  std::vector<std::pair<std::string, std::string_view>> members;
  DI_RETURN_IF_ERROR(scanner.ObjectMembers(&members));
  if (!scanner.AtEnd()) return scanner.Error("trailing characters");
  auto parse = [](std::string_view text, const std::string& key, Json* out) -> Status {
    *out = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
    if (out->is_discarded()) return Status::InvalidArgument("tokenizer.json: malformed value of '" + key + "'");
    return Status::Ok();
  };
  *top = Json::object();
  for (const auto& [key, value] : members) {
    if (key != "model" || value.empty() || value[0] != '{') {
      DI_RETURN_IF_ERROR(parse(value, key, &(*top)[key]));
      continue;
    }
    JsonScanner model_scanner(value);
    std::vector<std::pair<std::string, std::string_view>> model_members;
    DI_RETURN_IF_ERROR(model_scanner.ObjectMembers(&model_members));
    Json& m = (*top)["model"] = Json::object();
    for (const auto& [mkey, mvalue] : model_members) {
      if (mkey == "vocab" && mvalue[0] == '{') {
        *vocab = mvalue;
        m[mkey] = Json::object();  // stands for the raw text in *vocab
      } else if (mkey == "merges" && mvalue[0] == '[') {
        *merges = mvalue;
        m[mkey] = Json::array();  // stands for the raw text in *merges
      } else {
        DI_RETURN_IF_ERROR(parse(mvalue, "model." + mkey, &m[mkey]));
      }
    }
  }
  return Status::Ok();
}

}  // namespace

int32_t Vocabulary::Find(std::string_view spelling) const {
  std::string key(spelling);
  if (auto it = added_by_content_.find(key); it != added_by_content_.end()) return it->second;
  if (auto it = vocab_.find(key); it != vocab_.end()) return it->second;
  return -1;
}

Result<Vocabulary> Vocabulary::FromJson(std::string_view json_text) {
  Json j;
  std::string_view vocab_text, merges_text;
  DI_RETURN_IF_ERROR(ParseOutline(json_text, &j, &vocab_text, &merges_text));
  if (j.contains("truncation") && !j["truncation"].is_null()) return Unsupported("truncation");
  if (j.contains("padding") && !j["padding"].is_null()) return Unsupported("padding");
  DI_RETURN_IF_ERROR(CheckNormalizer(j));
  DI_RETURN_IF_ERROR(CheckPreTokenizer(j));
  // The post-processor only acts when special tokens are added implicitly, which this tokenizer never does.
  if (!j.contains("decoder") || TypeOf(j["decoder"]) != "ByteLevel") {
    return Unsupported("decoder " + (j.contains("decoder") ? TypeOf(j["decoder"]) : std::string("(missing)")));
  }
  if (!j.contains("model") || !j["model"].is_object()) return Status::InvalidArgument("tokenizer.json: no model");
  const Json& m = j["model"];
  DI_RETURN_IF_ERROR(CheckModelOptions(m));

  Vocabulary model;
  model.serial_ = next_serial.fetch_add(1);
  constexpr int64_t kMaxId = BpeMerges::kMaxId;  // far above any real vocabulary; bounds memory on bad input
  int64_t limit = 0;
  {
    JsonScanner scanner(vocab_text);
    DI_RETURN_IF_ERROR(scanner.Expect('{'));
    model.vocab_.reserve(vocab_text.size() / 16);
    std::string token;
    bool first = true;
    while (!scanner.Consume('}')) {
      if (!first) DI_RETURN_IF_ERROR(scanner.Expect(','));
      first = false;
      DI_RETURN_IF_ERROR(scanner.String(&token));
      DI_RETURN_IF_ERROR(scanner.Expect(':'));
      int64_t id;
      Status s = scanner.Integer(&id);
      if (!s.ok()) return Status::InvalidArgument("tokenizer.json: vocab id of '" + token + "' is not an integer");
      if (id < 0 || id >= kMaxId) return Status::OutOfRange("tokenizer.json: vocab id " + std::to_string(id) + " out of range");
      model.vocab_[token] = static_cast<int32_t>(id);
      limit = std::max(limit, id + 1);
    }
  }
  if (j.contains("added_tokens") && !j["added_tokens"].is_array()) {
    return Status::InvalidArgument("tokenizer.json: added_tokens is not an array");
  }
  const Json empty = Json::array();
  const Json& added = j.contains("added_tokens") ? j["added_tokens"] : empty;
  for (const Json& a : added) {
    if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
        !a["content"].is_string()) {
      return Status::InvalidArgument("tokenizer.json: malformed added token " + a.dump(-1, ' ', false, Json::error_handler_t::replace).substr(0, 80));
    }
    for (const char* flag : {"single_word", "lstrip", "rstrip"}) {
      if (!IsFalseOrAbsent(a, flag)) {
        return Unsupported(std::string("added token flag ") + flag + " on " + a["content"].get<std::string>());
      }
    }
    int64_t id = a["id"].get<int64_t>();
    if (id < 0 || id >= kMaxId) return Status::OutOfRange("tokenizer.json: added token id " + std::to_string(id) + " out of range");
    AddedToken t;
    t.id = static_cast<int32_t>(id);
    t.content = a["content"].get<std::string>();
    if (t.content.empty()) return Status::InvalidArgument("tokenizer.json: empty added token");
    t.special = a.contains("special") && a["special"].is_boolean() && a["special"].get<bool>();
    t.normalized = a.contains("normalized") && a["normalized"].is_boolean() && a["normalized"].get<bool>();
    model.added_by_content_[t.content] = t.id;
    model.added_tokens_.push_back(std::move(t));
    limit = std::max(limit, id + 1);
  }

  model.spelling_.assign(limit, std::string());
  model.bytes_.assign(limit, std::string());
  model.flags_.assign(limit, 0);
  for (const auto& [token, id] : model.vocab_) {
    model.spelling_[id] = token;
    model.flags_[id] |= kKnown;
  }
  for (const AddedToken& t : model.added_tokens_) {
    model.spelling_[t.id] = t.content;
    model.flags_[t.id] |= kKnown | kAdded | (t.special ? kSpecial : 0);
  }
  for (int64_t id = 0; id < limit; ++id) {
    if (!(model.flags_[id] & kKnown)) continue;
    std::optional<std::string> bytes = byte_level::Decode(model.spelling_[id]);
    model.bytes_[id] = bytes ? std::move(*bytes) : model.spelling_[id];
  }

  for (int b = 0; b < 256; ++b) {
    std::string spelling = byte_level::Encode(std::string(1, static_cast<char>(b)));
    auto it = model.vocab_.find(spelling);
    if (it == model.vocab_.end()) {
      return Status::InvalidArgument("tokenizer.json: vocab has no token for byte " + std::to_string(b) +
                                     " (byte-level BPE needs all 256)");
    }
    model.byte_ids_[b] = it->second;
  }

  JsonScanner scanner(merges_text);
  DI_RETURN_IF_ERROR(scanner.Expect('['));
  model.merges_.Reserve(merges_text.size() / 12);
  std::string left, right, pair, joined;
  for (uint32_t rank = 0; !scanner.Consume(']'); ++rank) {
    if (rank > 0) DI_RETURN_IF_ERROR(scanner.Expect(','));
    if (rank > BpeMerges::kMaxRank) return Unsupported("more than " + std::to_string(BpeMerges::kMaxRank) + " merges");
    if (scanner.Consume('[')) {
      DI_RETURN_IF_ERROR(scanner.String(&left));
      DI_RETURN_IF_ERROR(scanner.Expect(','));
      DI_RETURN_IF_ERROR(scanner.String(&right));
      DI_RETURN_IF_ERROR(scanner.Expect(']'));
    } else {
      DI_RETURN_IF_ERROR(scanner.String(&pair));
      size_t space = pair.find(' ');
      if (space == std::string::npos || pair.find(' ', space + 1) != std::string::npos) {
        return Status::InvalidArgument("tokenizer.json: merge " + std::to_string(rank) + " '" + pair + "' is not 'a b'");
      }
      left.assign(pair, 0, space);
      right.assign(pair, space + 1);
    }
    auto l = model.vocab_.find(left);
    auto r = model.vocab_.find(right);
    joined.assign(left).append(right);
    auto merged = model.vocab_.find(joined);
    if (l == model.vocab_.end() || r == model.vocab_.end() || merged == model.vocab_.end()) {
      return Status::InvalidArgument("tokenizer.json: merge " + std::to_string(rank) + " '" + left + " " + right +
                                     "' uses a token missing from the vocab");
    }
    model.merges_.Add(l->second, r->second, rank, merged->second);
  }
  return model;
}

}  // namespace deepinfer::tokenizer
