#include "grammar/token_index.h"

#include <algorithm>
#include <numeric>

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {

namespace {

uint8_t TextCategoryOf(char32_t cp) {
  if ((cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z')) return TokenIndex::kTextAlnum;
  if (cp == ' ') return TokenIndex::kTextSpace;
  if (cp < 0x80) return TokenIndex::kTextPunct;
  if (cp == 0x2028 || cp == 0x2029) return TokenIndex::kTextLineSep;
  return TokenIndex::kTextNonAscii;
}

int CharMemberOf(char32_t cp) {
  if (cp < 0x80) return static_cast<int>(cp);
  return cp == 0x2028 || cp == 0x2029 ? TokenIndex::kCharLineSep : TokenIndex::kCharNonAscii;
}

// (*tail)[p]: the CharSet members of the code points of bytes[p..], kCharOther where byte p starts no
// complete plain code point or a later one is not plain. Backwards, one decode per position.
void TailChars(std::string_view bytes, std::vector<TokenIndex::CharSet>* tail) {
  tail->assign(bytes.size() + 1, TokenIndex::CharSet{});
  for (size_t p = bytes.size(); p-- > 0;) {
    char32_t cp;
    const size_t len = utf8::Decode(bytes, p, &cp);
    if (len == 0 || cp < 0x20 || cp == '"' || cp == '\\') {
      (*tail)[p].Add(TokenIndex::kCharOther);
    } else {
      (*tail)[p] = (*tail)[p + len];
      (*tail)[p].Add(CharMemberOf(cp));
    }
  }
}

}  // namespace

const std::vector<uint32_t>& TokenIndex::text_mask(uint8_t cats, int len, size_t* count) const {
  const uint32_t key = static_cast<uint32_t>(cats) * 256 + static_cast<uint32_t>(len);
  std::lock_guard<std::mutex> lock(text_masks_->mu);
  auto [it, fresh] = text_masks_->by_key.try_emplace(key);
  if (fresh) {
    // One pass over the tokens, once per (categories, length) and vocabulary.
    std::vector<uint32_t> mask(words(), 0);
    size_t n = 0;
    for (size_t id = 0; id < tok_cats_.size(); ++id) {
      if (!in_trie_[id] || tok_plain_[id] > len || (tok_cats_[id] & ~cats) != 0) continue;
      mask[id >> 5] |= 1u << (id & 31);
      ++n;
    }
    it->second = {std::move(mask), n};
  }
  *count = it->second.second;
  return it->second.first;
}

bool TokenIndex::IsStop(int32_t id) const {
  return std::find(stop_ids_.begin(), stop_ids_.end(), id) != stop_ids_.end();
}

Result<std::shared_ptr<const TokenIndex>> TokenIndex::FromTokenizer(const tokenizer::Tokenizer& tok,
                                                                    const Options& options) {
  std::vector<std::string> tokens(tok.vocab_size());
  std::vector<int32_t> excluded;
  for (size_t id = 0; id < tokens.size(); ++id) {
    tokens[id] = std::string(tok.TokenBytes(static_cast<int32_t>(id)));
    if (tok.IsAddedToken(static_cast<int32_t>(id))) excluded.push_back(static_cast<int32_t>(id));
  }
  if (options.markers.size() > 64) return Status::InvalidArgument("at most 64 marker tokens");
  if (!options.markers.empty()) {
    // Byte-level vocabularies have ordinary tokens for the bytes 0xFF and 0x80: they could spell a marker
    // without being it. No UTF-8 text holds 0xFF, so leaving such tokens out changes no text grammar.
    for (size_t id = 0; id < tokens.size(); ++id) {
      if (tokens[id].find('\xFF') != std::string::npos) excluded.push_back(static_cast<int32_t>(id));
    }
  }
  for (size_t k = 0; k < options.markers.size(); ++k) {
    auto id = tok.TokenToId(options.markers[k]);
    if (!id || *id < 0 || static_cast<size_t>(*id) >= tokens.size()) continue;
    tokens[static_cast<size_t>(*id)] = MarkerBytes(k);
    excluded.erase(std::remove(excluded.begin(), excluded.end(), *id), excluded.end());
  }
  std::vector<int32_t> stops = options.stop_ids;
  if (stops.empty()) {
    auto eos = tok.TokenToId("<｜end▁of▁sentence｜>");
    if (!eos) return Status::NotFound("the tokenizer has no <｜end▁of▁sentence｜> token; name the stop ids");
    stops.push_back(*eos);
  }
  return FromTokens(tokens, excluded, stops, options.mask_width);
}

Result<std::shared_ptr<const TokenIndex>> TokenIndex::FromTokens(const std::vector<std::string>& tokens,
                                                                 const std::vector<int32_t>& excluded,
                                                                 const std::vector<int32_t>& stop_ids,
                                                                 size_t mask_width) {
  auto index = std::make_shared<TokenIndex>();
  TokenIndex& t = *index;
  t.width_ = mask_width == 0 ? tokens.size() : mask_width;
  if (t.width_ < tokens.size())
    return Status::InvalidArgument("the mask width " + std::to_string(t.width_) + " is below the vocabulary size " +
                                   std::to_string(tokens.size()));
  for (int32_t s : stop_ids)
    if (s < 0 || static_cast<size_t>(s) >= t.width_) return Status::OutOfRange("stop id " + std::to_string(s) + " is outside the mask");
  t.stop_ids_ = stop_ids;
  t.bytes_ = tokens;
  t.in_trie_.assign(tokens.size(), 1);
  for (int32_t e : excluded)
    if (e >= 0 && static_cast<size_t>(e) < tokens.size()) t.in_trie_[e] = 0;
  for (int32_t s : stop_ids)
    if (static_cast<size_t>(s) < tokens.size()) t.in_trie_[s] = 0;
  std::vector<int32_t> order;
  for (size_t id = 0; id < tokens.size(); ++id) {
    if (tokens[id].empty() || tokens[id].size() > 65000) t.in_trie_[id] = 0;
    if (t.in_trie_[id]) order.push_back(static_cast<int32_t>(id));
  }
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return tokens[a] != tokens[b] ? tokens[a] < tokens[b] : a < b;
  });
  // Build the preorder trie from the sorted list with a stack of open nodes.
  t.byte_.push_back(0);
  t.depth_.push_back(0);
  t.end_.push_back(0);
  std::vector<std::vector<int32_t>> node_tokens(1);
  std::vector<uint32_t> path = {0};  // path[d] = open node at depth d
  std::string prev;
  std::vector<CharSet> chars_of_token;  // chars_of_token[p]: members of bytes p.. of the token
  for (int32_t id : order) {
    const std::string& s = tokens[id];
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    common = std::min(common, path.size() - 1);
    while (path.size() > common + 1) {
      t.end_[path.back()] = static_cast<uint32_t>(t.byte_.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      t.byte_.push_back(static_cast<uint8_t>(s[d]));
      t.depth_.push_back(static_cast<uint16_t>(d + 1));
      t.end_.push_back(0);
      node_tokens.emplace_back();
      path.push_back(static_cast<uint32_t>(t.byte_.size() - 1));
    }
    node_tokens[path.back()].push_back(id);
    TailChars(s, &chars_of_token);
    t.tail_chars_.resize(t.byte_.size());
    for (size_t d = 1; d < path.size(); ++d) t.tail_chars_[path[d]] |= chars_of_token[d - 1];
    t.max_depth_ = std::max(t.max_depth_, s.size());
    prev = s;
  }
  while (!path.empty()) {
    t.end_[path.back()] = static_cast<uint32_t>(t.byte_.size());
    path.pop_back();
  }
  t.tail_chars_.resize(t.byte_.size());
  t.tok_begin_.push_back(0);
  for (const auto& v : node_tokens) {
    for (int32_t id : v) t.tok_ids_.push_back(id);
    t.tok_begin_.push_back(static_cast<uint32_t>(t.tok_ids_.size()));
  }
  // Plain tokens and the per-subtree maximum of their lengths (children follow their parent in preorder,
  // so one backward pass folds each node into its parent).
  auto plain_len = [](std::string_view b, uint8_t* cats) -> int {
    size_t pos = 0;
    int n = 0;
    *cats = 0;
    while (pos < b.size()) {
      char32_t cp;
      size_t len = utf8::Decode(b, pos, &cp);
      if (len == 0 || cp < 0x20 || cp == '"' || cp == '\\') return *cats = kTextOther, 255;
      *cats |= TextCategoryOf(cp);
      pos += len;
      if (++n > kPlainCap) return *cats |= kTextOther, 255;
    }
    return n;
  };
  t.plain_masks_.assign(kPlainCap + 1, std::vector<uint32_t>(t.words(), 0));
  t.plain_counts_.assign(kPlainCap + 1, 0);
  t.max_plain_.assign(t.byte_.size(), 0);
  t.cats_.assign(t.byte_.size(), 0);
  t.tok_cats_.assign(tokens.size(), kTextOther);
  t.tok_plain_.assign(tokens.size(), 255);
  for (uint32_t node = 0; node < t.byte_.size(); ++node) {
    for (uint32_t k = t.tok_begin_[node]; k < t.tok_begin_[node + 1]; ++k) {
      int32_t id = t.tok_ids_[k];
      uint8_t cats = 0;
      int len = plain_len(tokens[id], &cats);
      t.tok_cats_[static_cast<size_t>(id)] = cats;
      t.tok_plain_[static_cast<size_t>(id)] = static_cast<uint8_t>(len);
      t.cats_[node] |= cats;
      t.max_plain_[node] = static_cast<uint8_t>(std::max<int>(t.max_plain_[node], len));
      if (len <= kPlainCap)
        for (int l = len; l <= kPlainCap; ++l) {
          t.plain_masks_[l][static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
          ++t.plain_counts_[l];
        }
    }
  }
  {
    std::vector<uint32_t> parent(t.byte_.size(), 0);
    std::vector<uint32_t> open = {0};
    for (uint32_t node = 1; node < t.byte_.size(); ++node) {
      while (open.size() > t.depth_[node]) open.pop_back();
      parent[node] = open.back();
      open.push_back(node);
    }
    for (uint32_t node = static_cast<uint32_t>(t.byte_.size()) - 1; node > 0; --node) {
      t.max_plain_[parent[node]] = std::max(t.max_plain_[parent[node]], t.max_plain_[node]);
      t.cats_[parent[node]] |= t.cats_[node];
    }
  }
  uint64_t h = 0xCBF29CE484222325ULL;
  auto mix = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001B3ULL;
  };
  for (size_t id = 0; id < tokens.size(); ++id) {
    uint32_t n = static_cast<uint32_t>(tokens[id].size());
    mix(&n, 4);
    mix(tokens[id].data(), tokens[id].size());
    mix(&t.in_trie_[id], 1);
  }
  for (int32_t s : stop_ids) mix(&s, 4);
  uint64_t w = t.width_;
  mix(&w, 8);
  t.fingerprint_ = h;
  return std::shared_ptr<const TokenIndex>(std::move(index));
}

}  // namespace deepinfer::grammar
