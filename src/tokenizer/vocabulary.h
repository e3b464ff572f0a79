// Vocabulary: what a tokenizer.json describes, loaded and checked: vocabulary, merges, added tokens.
// Only the constructs the DeepSeek tokenizers use are accepted; anything else is a kUnimplemented error
// that names the construct, so an unsupported file never tokenizes silently differently.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe.h"

namespace deepinfer::tokenizer {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool special = false;
  bool normalized = false;
};

class Vocabulary {
 public:
  static Result<Vocabulary> FromJson(std::string_view json_text);

  const BpeMerges& merges() const { return merges_; }
  const int32_t* byte_ids() const { return byte_ids_; }
  const std::vector<AddedToken>& added_tokens() const { return added_tokens_; }

  // Stored spelling and decoded bytes by id (empty when the id has no string).
  std::string_view Spelling(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < spelling_.size() ? std::string_view(spelling_[id]) : "";
  }
  std::string_view Bytes(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? std::string_view(bytes_[id]) : "";
  }
  bool Known(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < flags_.size() && (flags_[id] & kKnown); }
  bool IsAdded(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < flags_.size() && (flags_[id] & kAdded); }
  bool IsSpecial(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < flags_.size() && (flags_[id] & kSpecial);
  }
  size_t id_limit() const { return spelling_.size(); }
  // Vocabulary or added token by spelling; added tokens win, as in the oracle.
  int32_t Find(std::string_view spelling) const;

  // Unique per loaded model: keys per-thread caches.
  uint64_t serial() const { return serial_; }

 private:
  enum : uint8_t { kKnown = 1, kAdded = 2, kSpecial = 4 };

  BpeMerges merges_;
  int32_t byte_ids_[256] = {};
  std::vector<AddedToken> added_tokens_;
  std::vector<std::string> spelling_;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> flags_;
  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  uint64_t serial_ = 0;
};

}  // namespace deepinfer::tokenizer
