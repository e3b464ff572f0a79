// uniqueItems at run time: the parts of GrammarMatcher and BoundGrammar that keep each array's finished
// items and correct the mask for duplicates (matcher.h's header comment).
#include <algorithm>
#include <cstring>

#include "grammar/matcher.h"

namespace deepinfer::grammar {

namespace {

bool IsJsonSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// Whether `bytes` from `at` on start with a whole JSON value an array item could be: a string with its
// closing quote, a literal, or the start of a number, object or array (which may finish later in the
// token, or end with it). Errs towards yes: a yes only costs a check.
bool WholeValueAt(std::string_view bytes, size_t at) {
  while (at < bytes.size() && IsJsonSpace(bytes[at])) ++at;
  if (at >= bytes.size()) return false;
  const char c = bytes[at];
  if (c == '-' || (c >= '0' && c <= '9') || c == '{' || c == '[') return true;
  if (c == '"') return bytes.find('"', at + 1) != std::string_view::npos;
  for (std::string_view word : {"true", "false", "null"})
    if (bytes.substr(at, word.size()) == word) return true;
  return false;
}

inline void SetTokenBit(uint32_t* bits, int32_t id) { bits[id >> 5] |= 1u << (id & 31); }
inline void ClearBit(uint32_t* bits, int32_t id) { bits[id >> 5] &= ~(1u << (id & 31)); }
inline bool TestBit(const uint32_t* bits, int32_t id) { return bits[id >> 5] >> (id & 31) & 1; }

}  // namespace

void BoundGrammar::FindUniqueItemsParts() {
  const CompiledGrammar& g = *grammar_;
  stuck_.assign(g.num_states(), 0);
  for (uint32_t s = 1; s < g.num_states(); ++s) {
    if (g.has_calls(s)) continue;
    bool moves = false;
    for (int b = 0; b < 256 && !moves; b = g.class_last(static_cast<uint8_t>(b)) + 1)
      moves = g.Next(s, static_cast<uint8_t>(b)) != CompiledGrammar::kDead;
    stuck_[s] = !moves;
  }
  const TokenIndex& v = *vocab_;
  for (size_t id = 0; id < v.num_tokens(); ++id) {
    if (!v.InTrie(static_cast<int32_t>(id))) continue;
    const std::string_view bytes = v.Bytes(static_cast<int32_t>(id));
    for (size_t at = bytes.find(','); at != std::string_view::npos; at = bytes.find(',', at + 1)) {
      if (WholeValueAt(bytes, at + 1)) {
        comma_value_tokens_.push_back(static_cast<int32_t>(id));
        break;
      }
    }
  }
}

std::string GrammarMatcher::NodeBytes(const TokenIndex& v, uint32_t node) {
  // Every trie node lies on the path of some token below it.
  for (uint32_t j = node; j < v.end(node); ++j)
    if (v.tokens_begin(j) != v.tokens_end(j)) return std::string(v.Bytes(*v.tokens_begin(j)).substr(0, v.depth(node)));
  return std::string();
}

int32_t GrammarMatcher::CallFrame(uint32_t rule, int32_t ret, size_t pos) {
  const bool item = cg_->unique_role(rule) == UniqueRole::kItem;
  return Intern(cg_->rule_start(rule), ret, item ? static_cast<uint32_t>(pos) : 0);
}

bool GrammarMatcher::SetHolds(uint32_t set, const std::string& canonical) const {
  for (; set != 0; set = sets_[set - 1].parent)
    if (sets_[set - 1].item.canonical == canonical) return true;
  return false;
}

Result<int32_t> GrammarMatcher::EndItem(const Node& n) {
  const Node array = nodes_[n.parent];
  UniqueItem item = CanonicalItem(std::string_view(text_).substr(n.count));
  if (SetHolds(array.count, item.canonical)) return -1;
  set_bytes_ += item.canonical.size();
  if (set_bytes_ > g_->limits().max_unique_item_bytes) {
    set_bytes_ -= item.canonical.size();
    return Status::ResourceExhausted("uniqueItems: the items kept to compare exceed " +
                                     std::to_string(g_->limits().max_unique_item_bytes) + " bytes");
  }
  sets_.push_back({array.count, std::move(item)});
  return Intern(array.state, array.parent, static_cast<uint32_t>(sets_.size()));
}

bool GrammarMatcher::AtRisk(const std::vector<int32_t>& stacks) const {
  for (int32_t x : stacks) {
    int32_t child = -1;
    for (int32_t y = x; y >= 0; child = y, y = nodes_[y].parent) {
      const Node& a = nodes_[y];
      if (a.count == 0 || cg_->unique_role(cg_->rule_of(a.state)) != UniqueRole::kArray) continue;
      if (child < 0) return true;  // between items: the next one may repeat one
      const Node& c = nodes_[child];
      if (cg_->unique_role(cg_->rule_of(c.state)) != UniqueRole::kItem) continue;
      const std::string_view prefix = std::string_view(text_).substr(c.count);
      for (uint32_t set = a.count; set != 0; set = sets_[set - 1].parent)
        if (MayEqual(prefix, sets_[set - 1].item)) return true;
    }
  }
  return false;
}

Result<bool> GrammarMatcher::Survives(const std::vector<int32_t>& closed, std::string_view bytes) {
  const Marks mark = Mark();
  std::vector<int32_t> cur, next;
  Advance(closed, static_cast<uint8_t>(bytes[0]), &next);
  text_.push_back(bytes[0]);
  Status status = Status::Ok();
  for (size_t k = 1; k < bytes.size() && !next.empty() && status.ok(); ++k) {
    status = Close(next, &cur);
    Advance(cur, static_cast<uint8_t>(bytes[k]), &next);
    text_.push_back(bytes[k]);
  }
  if (status.ok() && !next.empty()) status = Close(next, &cur);
  const bool alive = status.ok() && !next.empty() && !cur.empty();
  ReleaseTo(mark);
  if (!status.ok()) return status;
  return alive;
}

Status GrammarMatcher::MaskUniqueItems(const std::vector<int32_t>& closed, uint32_t* bits, size_t* budget) {
  const TokenIndex& v = g_->vocab();
  const size_t text_base = text_.size();
  // The walk from the root, along the paths where a duplicate may finish: its verdicts are exact.
  if (AtRisk(closed)) {
    if (levels_.empty()) levels_.resize(1);
    levels_[0] = closed;
    // dup[d]: a duplicate was dropped on the path to depth d (only then can the walk's verdict below a
    // dead node differ from the mask's).
    std::vector<uint8_t> dup(1, 0);
    const uint32_t stop = static_cast<uint32_t>(v.num_nodes());
    for (uint32_t i = 1; i < stop;) {
      const size_t d = v.depth(i);
      text_.resize(text_base + d - 1);
      text_.push_back(static_cast<char>(v.byte(i)));
      Advance(levels_[d - 1], v.byte(i), &scratch_b_);
      if (levels_.size() <= d) levels_.resize(d + 1);
      if (dup.size() <= d) dup.resize(d + 1);
      levels_[d].clear();
      if (!scratch_b_.empty()) {
        const size_t dropped = duplicates_dropped_;
        DI_RETURN_IF_ERROR(Close(scratch_b_, &levels_[d]));
        dup[d] = dup[d - 1] || duplicates_dropped_ != dropped;
      } else {
        dup[d] = dup[d - 1];
      }
      if (*budget < levels_[d].size() + 1)
        return Status::ResourceExhausted("a token mask needs more work than the per-step bound allows");
      *budget -= levels_[d].size() + 1;
      if (levels_[d].empty()) {
        if (dup[d])
          for (uint32_t j = i; j < v.end(i); ++j)
            for (const int32_t* t = v.tokens_begin(j); t != v.tokens_end(j); ++t) ClearBit(bits, *t);
        i = v.end(i);
        continue;
      }
      for (const int32_t* t = v.tokens_begin(i); t != v.tokens_end(i); ++t) SetTokenBit(bits, *t);
      i = AtRisk(levels_[d]) ? i + 1 : v.end(i);
    }
    text_.resize(text_base);
  }
  // Tokens that may start and finish an item after a ',' of their own: stepped one by one.
  for (int32_t id : g_->comma_value_tokens()) {
    if (!TestBit(bits, id)) continue;
    const std::string_view bytes = v.Bytes(id);
    if (*budget < bytes.size() * (closed.size() + 1))
      return Status::ResourceExhausted("a token mask needs more work than the per-step bound allows");
    *budget -= bytes.size() * (closed.size() + 1);
    DI_ASSIGN_OR_RETURN(const bool alive, Survives(closed, bytes));
    if (!alive) ClearBit(bits, id);
  }
  return Status::Ok();
}

}  // namespace deepinfer::grammar
