// The vocabulary as the matcher walks it: every ordinary token's bytes in one byte trie, flattened in
// preorder (node i's subtree is [i, end(i))), so a mask is one forward pass that skips rejected subtrees.
//
// Added tokens (control and special tokens, DSML markers) are not in the trie: constrained text can never
// contain them, whatever their spelling. Stop tokens are allowed exactly where the grammar may end. The
// mask is as wide as the model's logits (129,280 for DeepSeek V3/V4), which may exceed the tokenizer's ids.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/status.h"
#include "grammar/mask_entry.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::grammar {

class TokenIndex {
 public:
  struct Options {
    size_t mask_width = 0;           // 0: one past the largest token id
    std::vector<int32_t> stop_ids;   // empty: the tokenizer's end-of-sentence token
    // Added tokens a grammar may name: the k-th one (by its spelling; absent ones are skipped) goes into
    // the trie as MarkerBytes(k) instead of being left out. Those bytes never occur in UTF-8, so no text
    // grammar can reach them; only a grammar that spells them (the DSML tool-call block's `｜DSML｜`) does.
    // With markers, ordinary tokens holding the byte 0xFF are left out, so only a marker spells one.
    std::vector<std::string> markers;
  };
  // "\xFF" and one byte 0x80 + k: bytes no UTF-8 text contains.
  static std::string MarkerBytes(size_t k) { return std::string("\xFF") + static_cast<char>(0x80 + k); }
  static Result<std::shared_ptr<const TokenIndex>> FromTokenizer(const tokenizer::Tokenizer& tok, const Options& options);
  // A vocabulary given as byte strings by id; ids in `excluded` (added tokens) are left out of the trie.
  static Result<std::shared_ptr<const TokenIndex>> FromTokens(const std::vector<std::string>& tokens,
                                                              const std::vector<int32_t>& excluded,
                                                              const std::vector<int32_t>& stop_ids, size_t mask_width);

  size_t width() const { return width_; }
  size_t words() const { return (width_ + 31) / 32; }
  const std::vector<int32_t>& stop_ids() const { return stop_ids_; }
  bool InTrie(int32_t id) const { return id >= 0 && static_cast<size_t>(id) < in_trie_.size() && in_trie_[id]; }
  bool IsStop(int32_t id) const;
  std::string_view Bytes(int32_t id) const {
    return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? std::string_view(bytes_[id]) : std::string_view();
  }
  size_t num_tokens() const { return bytes_.size(); }

  // The trie: node 0 is the root (no byte, depth 0).
  size_t num_nodes() const { return byte_.size(); }
  uint8_t byte(uint32_t node) const { return byte_[node]; }
  uint16_t depth(uint32_t node) const { return depth_[node]; }
  uint32_t end(uint32_t node) const { return end_[node]; }
  // Token ids whose bytes end at `node`.
  const int32_t* tokens_begin(uint32_t node) const { return tok_ids_.data() + tok_begin_[node]; }
  const int32_t* tokens_end(uint32_t node) const { return tok_ids_.data() + tok_begin_[node + 1]; }
  // The per-node arrays above (and subtree_max_plain / subtree_cats below) as plain pointers, for a loop
  // over most of the trie: through the accessors, each store in the loop body made the compiler load the
  // arrays' addresses again for every node.
  struct NodeArrays {
    const uint8_t* byte;
    const uint16_t* depth;
    const uint32_t* end;
    const uint32_t* tok_begin;
    const int32_t* tok_ids;
    const uint8_t* max_plain;
    const uint8_t* cats;
  };
  NodeArrays node_arrays() const {
    return {byte_.data(), depth_.data(), end_.data(), tok_begin_.data(), tok_ids_.data(), max_plain_.data(), cats_.data()};
  }
  // JSON-plain tokens: every byte belongs to a complete code point >= U+0020 other than '"' and '\'
  // (what a JSON string holds unescaped). plain_mask(L) has the plain tokens of 1..L code points
  // (L <= kPlainCap); subtree_max_plain(node) is the largest plain length in the node's subtree, or 255
  // when the subtree holds a token that is not plain (or longer than kPlainCap). A state that accepts any
  // L plain characters accepts plain_mask(L) whole and needs to walk only the other subtrees.
  static constexpr int kPlainCap = 32;
  const std::vector<uint32_t>& plain_mask(int len) const { return plain_masks_[static_cast<size_t>(len)]; }
  size_t plain_count(int len) const { return plain_counts_[static_cast<size_t>(len)]; }
  uint8_t subtree_max_plain(uint32_t node) const { return max_plain_[node]; }
  // Plain code points fall in these categories; a state may accept only some of them (a pattern's "."
  // takes no line separator, "[A-Za-z0-9]" only kTextAlnum). text_mask(cats, L) has the plain tokens of
  // 1..L code points from those categories only (made on first use, thread-safe), subtree_cats(node) the
  // categories in the node's subtree (kTextOther: a token that is not plain).
  static constexpr uint8_t kTextAlnum = 1, kTextSpace = 2, kTextPunct = 4, kTextLineSep = 8, kTextNonAscii = 16;
  static constexpr uint8_t kTextAll = 31, kTextOther = 128;
  const std::vector<uint32_t>& text_mask(uint8_t cats, int len, size_t* count) const;
  uint8_t subtree_cats(uint32_t node) const { return cats_[node]; }
  // Whether token `id` is plain, of at most kPlainCap code points, all of the categories `cats`.
  bool TextToken(int32_t id, uint8_t cats) const {
    const size_t i = static_cast<size_t>(id);
    return i < tok_cats_.size() && tok_plain_[i] <= kPlainCap && (tok_cats_[i] & ~cats) == 0;
  }
  // Plain text at the finest grain the mask shortcuts use: each printable ASCII character is its own
  // member (bit = its byte), non-ASCII code points are two members (kCharLineSep: U+2028 and U+2029;
  // kCharNonAscii: the others), and kCharOther marks what is not plain text (a byte that starts no
  // complete plain code point, '"', '\\', controls). A state's character class (a pattern's [a-z0-9_-])
  // is a set of these, where the five categories above are too coarse to describe it.
  static constexpr int kCharOther = 0, kCharNonAscii = 1, kCharLineSep = 2;
  struct CharSet {
    uint64_t lo = 0, hi = 0;  // members 0..63 and 64..127
    void Add(int member) { (member < 64 ? lo : hi) |= uint64_t{1} << (member & 63); }
    bool Has(int member) const { return ((member < 64 ? lo : hi) >> (member & 63)) & 1; }
    bool SubsetOf(const CharSet& o) const { return (lo & ~o.lo) == 0 && (hi & ~o.hi) == 0; }
    CharSet& operator|=(const CharSet& o) {
      lo |= o.lo, hi |= o.hi;
      return *this;
    }
  };
  // Per node: the members of the code points its subtree's tokens hold from the node's byte on (their
  // tails past the parent), with kCharOther where some tail does not start a plain code point there.
  const CharSet* tail_chars() const { return tail_chars_.data(); }
  // Content fingerprint (tokens, exclusions, stops, width): part of the compiled-grammar cache key.
  uint64_t fingerprint() const { return fingerprint_; }
  // The longest token in bytes (the deepest trie node).
  size_t max_depth() const { return max_depth_; }
  // Mask entries of leaf rules, shared by every grammar bound to this vocabulary (mask_entry.h).
  SharedEntries& shared_entries() const { return *shared_; }

 private:
  size_t width_ = 0;
  std::vector<int32_t> stop_ids_;
  std::vector<std::string> bytes_;
  std::vector<uint8_t> in_trie_;
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<uint32_t> end_;
  std::vector<uint32_t> tok_begin_;
  std::vector<int32_t> tok_ids_;
  uint64_t fingerprint_ = 0;
  size_t max_depth_ = 0;
  std::unique_ptr<SharedEntries> shared_ = std::make_unique<SharedEntries>();
  std::vector<std::vector<uint32_t>> plain_masks_;
  std::vector<size_t> plain_counts_;
  std::vector<uint8_t> max_plain_;
  std::vector<uint8_t> cats_;                  // per node: categories of its subtree's tokens
  std::vector<uint8_t> tok_cats_, tok_plain_;  // per token id: categories, plain length (255: not plain)
  std::vector<CharSet> tail_chars_;            // per node, see tail_chars()
  struct TextMasks {
    std::mutex mu;
    std::unordered_map<uint32_t, std::pair<std::vector<uint32_t>, size_t>> by_key;
  };
  std::unique_ptr<TextMasks> text_masks_ = std::make_unique<TextMasks>();
};

}  // namespace deepinfer::grammar
