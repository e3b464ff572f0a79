#include "grammar/token_index.h"

#include <algorithm>
#include <numeric>

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::grammar {

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
  std::vector<uint8_t> byte_v, max_plain_v, cats_v;
  std::vector<uint16_t> depth_v;
  std::vector<uint32_t> end_v, tok_begin_v;
  byte_v.push_back(0);
  depth_v.push_back(0);
  end_v.push_back(0);
  std::vector<std::vector<int32_t>> node_tokens(1);
  std::vector<uint32_t> path = {0};  // path[d] = open node at depth d
  std::string prev;
  for (int32_t id : order) {
    const std::string& s = tokens[id];
    size_t common = 0;
    while (common < s.size() && common < prev.size() && s[common] == prev[common]) ++common;
    common = std::min(common, path.size() - 1);
    while (path.size() > common + 1) {
      end_v[path.back()] = static_cast<uint32_t>(byte_v.size());
      path.pop_back();
    }
    for (size_t d = common; d < s.size(); ++d) {
      byte_v.push_back(static_cast<uint8_t>(s[d]));
      depth_v.push_back(static_cast<uint16_t>(d + 1));
      end_v.push_back(0);
      node_tokens.emplace_back();
      path.push_back(static_cast<uint32_t>(byte_v.size() - 1));
    }
    node_tokens[path.back()].push_back(id);
    t.max_depth_ = std::max(t.max_depth_, s.size());
    prev = s;
  }
  while (!path.empty()) {
    end_v[path.back()] = static_cast<uint32_t>(byte_v.size());
    path.pop_back();
  }
  tok_begin_v.push_back(0);
  for (const auto& v : node_tokens) {
    for (int32_t id : v) {
      t.tok_ids_.push_back(id);
      uint16_t last = 0;
      for (size_t k = 0; k < tokens[id].size(); ++k)
        if (static_cast<uint8_t>(tokens[id][k]) < 0x20) last = static_cast<uint16_t>(k + 1);
      t.tok_ctl_.push_back(last);
    }
    tok_begin_v.push_back(static_cast<uint32_t>(t.tok_ids_.size()));
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
      if ((cp >= '0' && cp <= '9') || (cp >= 'A' && cp <= 'Z') || (cp >= 'a' && cp <= 'z')) *cats |= kTextAlnum;
      else if (cp == ' ') *cats |= kTextSpace;
      else if (cp < 0x80) *cats |= kTextPunct;
      else if (cp == 0x2028 || cp == 0x2029) *cats |= kTextLineSep;
      else *cats |= kTextNonAscii;
      pos += len;
      if (++n > kPlainCap) return *cats |= kTextOther, 255;
    }
    return n;
  };
  t.plain_masks_.assign(kPlainCap + 1, std::vector<uint32_t>(t.words(), 0));
  t.plain_counts_.assign(kPlainCap + 1, 0);
  max_plain_v.assign(byte_v.size(), 0);
  cats_v.assign(byte_v.size(), 0);
  t.tok_cats_.assign(tokens.size(), kTextOther);
  t.tok_plain_.assign(tokens.size(), 255);
  for (uint32_t node = 0; node < byte_v.size(); ++node) {
    for (uint32_t k = tok_begin_v[node]; k < tok_begin_v[node + 1]; ++k) {
      int32_t id = t.tok_ids_[k];
      uint8_t cats = 0;
      int len = plain_len(tokens[id], &cats);
      t.tok_cats_[static_cast<size_t>(id)] = cats;
      t.tok_plain_[static_cast<size_t>(id)] = static_cast<uint8_t>(len);
      cats_v[node] |= cats;
      max_plain_v[node] = static_cast<uint8_t>(std::max<int>(max_plain_v[node], len));
      if (len <= kPlainCap)
        for (int l = len; l <= kPlainCap; ++l) {
          t.plain_masks_[l][static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
          ++t.plain_counts_[l];
        }
    }
  }
  std::vector<uint32_t> parent_v(byte_v.size(), 0);
  {
    std::vector<uint32_t>& parent = parent_v;
    std::vector<uint32_t> open = {0};
    for (uint32_t node = 1; node < byte_v.size(); ++node) {
      while (open.size() > depth_v[node]) open.pop_back();
      parent[node] = open.back();
      open.push_back(node);
    }
    // Bytes below each node, for the loop shortcut (below_bytes). kUtf8Below: the node ends a whole
    // code point (its path is valid UTF-8) and every token below is valid UTF-8, its last code point
    // perhaps cut short.
    std::vector<int8_t> pending(byte_v.size(), 0);  // continuation bytes still owed after the node; -1 invalid
    std::vector<uint8_t> valid(byte_v.size(), 1);   // every token of the subtree is valid
    for (uint32_t node = 1; node < byte_v.size(); ++node) {
      const int8_t before = pending[parent[node]];
      const uint8_t b = byte_v[node];
      int8_t p = -1;
      if (before < 0) p = -1;
      else if (before > 0) p = (b >= 0x80 && b <= 0xBF) ? static_cast<int8_t>(before - 1) : -1;
      else if (b < 0x80) p = 0;
      else if (b >= 0xC2 && b <= 0xDF) p = 1;
      else if (b >= 0xE0 && b <= 0xEF) p = 2;
      else if (b >= 0xF0 && b <= 0xF4) p = 3;
      // The second byte of E0, ED, F0 and F4 has a narrower range (no overlongs, surrogates or values
      // past U+10FFFF).
      if (p >= 0 && before > 0 && depth_v[node] >= 2) {
        const uint8_t lead = byte_v[parent[node]];
        const bool second = pending[parent[node]] + 1 == (lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2);
        if (second && ((lead == 0xE0 && b < 0xA0) || (lead == 0xED && b > 0x9F) || (lead == 0xF0 && b < 0x90) ||
                       (lead == 0xF4 && b > 0x8F)))
          p = -1;
      }
      pending[node] = p;
      if (p < 0 && tok_begin_v[node] != tok_begin_v[node + 1]) valid[node] = 0;
    }
    t.bytes_set_.assign(byte_v.size(), ByteSet{});
    for (uint32_t node = static_cast<uint32_t>(byte_v.size()) - 1; node > 0; --node) {
      valid[parent[node]] &= valid[node];
      max_plain_v[parent[node]] = std::max(max_plain_v[parent[node]], max_plain_v[node]);
      cats_v[parent[node]] |= cats_v[node];
      ByteSet& up = t.bytes_set_[parent[node]];
      up[0] |= t.bytes_set_[node][0];
      up[1] |= t.bytes_set_[node][1];
      const uint8_t b = byte_v[node];
      if (b >= 0x20 && b < 0x80) up[(b - 0x20) >> 6] |= uint64_t{1} << ((b - 0x20) & 63);
      else up[1] |= b < 0x20 ? kControlBelow : kNonAsciiBelow;
    }
    for (uint32_t node = 0; node < byte_v.size(); ++node)
      if (pending[node] == 0 && valid[node]) t.bytes_set_[node][1] |= kUtf8Below;
  }
  // One 16-byte record per node: a walk that skips subtrees touches one cache line per node it visits
  // instead of one per array.
  t.nodes_.resize(byte_v.size() + 1);
  for (size_t node = 0; node < byte_v.size(); ++node)
    t.nodes_[node] = TrieNode{end_v[node], tok_begin_v[node], depth_v[node], byte_v[node], max_plain_v[node], cats_v[node]};
  t.nodes_.back() = TrieNode{0, tok_begin_v.back(), 0, 0, 0, 0};
  for (uint32_t node = 1; node < byte_v.size(); ++node)
    if (max_plain_v[parent_v[node]] > kPlainCap) t.skeleton_.push_back(SkeletonNode{node, 0});
  for (SkeletonNode& k : t.skeleton_) {
    const uint32_t end = end_v[k.node];
    k.skip = static_cast<uint32_t>(std::lower_bound(t.skeleton_.begin(), t.skeleton_.end(), end,
                                                    [](const SkeletonNode& a, uint32_t n) { return a.node < n; }) -
                                   t.skeleton_.begin());
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
