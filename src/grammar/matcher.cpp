#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <type_traits>

#include "grammar/mask_bits.h"

namespace deepinfer::grammar {

namespace {

// The states reached from `from` by one byte in [lo, hi], through byte transitions only (one state per
// byte class the range touches); false when some byte of the range is rejected.
bool StepRange(const CompiledGrammar& g, const std::vector<uint32_t>& from, uint8_t lo, uint8_t hi,
               std::vector<uint32_t>* out) {
  out->clear();
  for (uint32_t s : from) {
    for (int b = lo; b <= hi; b = g.class_last(static_cast<uint8_t>(b)) + 1) {
      uint32_t t = g.Next(s, static_cast<uint8_t>(b));
      if (t == CompiledGrammar::kDead) return false;
      if (std::find(out->begin(), out->end(), t) == out->end()) out->push_back(t);
      if (out->size() > 64) return false;
    }
  }
  return true;
}

// Plain code points (U+0020.. except '"' and '\\') by category (TokenIndex::kText*), as byte-range
// sequences.
using Seq = std::vector<std::pair<uint8_t, uint8_t>>;
const std::vector<std::pair<uint8_t, std::vector<Seq>>>& TextSeqs() {
  static const std::vector<std::pair<uint8_t, std::vector<Seq>>> kSeqs = {
      {TokenIndex::kTextAlnum, {{{0x30, 0x39}}, {{0x41, 0x5A}}, {{0x61, 0x7A}}}},
      {TokenIndex::kTextSpace, {{{0x20, 0x20}}}},
      {TokenIndex::kTextPunct,
       {{{0x21, 0x21}}, {{0x23, 0x2F}}, {{0x3A, 0x40}}, {{0x5B, 0x5B}}, {{0x5D, 0x60}}, {{0x7B, 0x7F}}}},
      {TokenIndex::kTextLineSep, {{{0xE2, 0xE2}, {0x80, 0x80}, {0xA8, 0xA9}}}},
      {TokenIndex::kTextNonAscii,
       {{{0xC2, 0xDF}, {0x80, 0xBF}},
        {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}},
        {{0xE1, 0xE1}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xE2, 0xE2}, {0x80, 0x80}, {0x80, 0xA7}},
        {{0xE2, 0xE2}, {0x80, 0x80}, {0xAA, 0xBF}},
        {{0xE2, 0xE2}, {0x81, 0xBF}, {0x80, 0xBF}},
        {{0xE3, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}},
        {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
        {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}}},
  };
  return kSeqs;
}

// The largest L <= kPlainCap such that every string of up to L plain code points of the categories `cats`
// leads from `state` to a live state by byte transitions alone (0 when even one fails); *failed is the
// category of a code point that fails at depth L. States are expanded once each (breadth first, so the
// depth a state is first met at is the shortest way there); past kMaxSeen states the depth so far is
// returned, which only means a smaller shortcut.
int TextDepth(const CompiledGrammar& g, uint32_t state, uint8_t cats, uint8_t* failed, std::atomic<uint8_t>* closed) {
  constexpr size_t kMaxSeen = 1024;
  *failed = 0;
  // The states met: stamps in a per-thread array kept between calls (a fresh array as large as the
  // grammar cost more than the search itself in grammars of tens of thousands of states), and a list.
  thread_local std::vector<uint32_t> stamp;
  thread_local uint32_t gen = 0;
  if (stamp.size() < g.num_states()) stamp.assign(g.num_states(), 0), gen = 0;
  if (++gen == 0) std::fill(stamp.begin(), stamp.end(), 0), gen = 1;
  std::vector<uint32_t> seen_list = {state};
  stamp[state] = gen;
  auto seen = [&](uint32_t t) {
    if (stamp[t] == gen) return true;
    stamp[t] = gen;
    return false;
  };
  std::vector<uint32_t> frontier = {state}, next, cur, tmp;
  for (int depth = 0; depth < TokenIndex::kPlainCap; ++depth) {
    next.clear();
    for (const auto& [cat, seqs] : TextSeqs()) {
      if (!(cats & cat)) continue;
      for (uint32_t from : frontier) {
        if (closed[from].load(std::memory_order_relaxed)) continue;  // everything past it stays alive
        for (const Seq& seq : seqs) {
          cur.assign(1, from);
          for (auto [lo, hi] : seq) {
            // Byte classes are intervals, so StepRange looks at one byte per class.
            if (!StepRange(g, cur, lo, hi, &tmp)) {
              *failed = cat;
              return depth;
            }
            cur.swap(tmp);
          }
          for (uint32_t t : cur)
            if (!seen(t)) seen_list.push_back(t), next.push_back(t);
          if (seen_list.size() > kMaxSeen) return depth;
        }
      }
    }
    if (next.empty()) {
      // Every state met is closed under these code points; with all categories, remember them.
      if (cats == TokenIndex::kTextAll)
        for (uint32_t t : seen_list) closed[t].store(1, std::memory_order_relaxed);
      return TokenIndex::kPlainCap;
    }
    frontier.swap(next);
  }
  return TokenIndex::kPlainCap;
}

// The category set and length of the plain-text shortcut for `state`: all categories when they all
// pass, else the ones left after dropping those that fail first (a pattern's "." takes no U+2028).
int TextShortcut(const CompiledGrammar& g, uint32_t state, uint8_t* cats, std::atomic<uint8_t>* closed) {
  uint8_t s = TokenIndex::kTextAll;
  int best = 0;
  uint8_t best_cats = 0;
  while (s != 0) {
    uint8_t failed = 0;
    const int depth = TextDepth(g, state, s, &failed, closed);
    if (depth > best) best = depth, best_cats = s;
    if (depth == TokenIndex::kPlainCap || failed == 0) break;
    s = static_cast<uint8_t>(s & ~failed);
  }
  *cats = best_cats;
  return best;
}

// For a counted state at a unit boundary without calls: the categories whose every code point is one
// unit that comes back to the state itself, through states inside the unit only (a pattern's "." leaves
// out U+2028 and U+2029; tokens holding those are walked).
uint8_t CountedTextLoop(const CompiledGrammar& g, uint32_t state) {
  if (!g.counting(state) || !g.boundary(state) || g.has_calls(state)) return 0;
  std::vector<uint32_t> cur, tmp;
  uint8_t loops = 0;
  for (const auto& [cat, seqs] : TextSeqs()) {
    bool ok = true;
    for (size_t k = 0; k < seqs.size() && ok; ++k) {
      const Seq& seq = seqs[k];
      cur.assign(1, state);
      for (size_t i = 0; i < seq.size() && ok; ++i) {
        if (!StepRange(g, cur, seq[i].first, seq[i].second, &tmp)) {
          ok = false;
          break;
        }
        cur.swap(tmp);
        for (uint32_t t : cur) {
          const bool last = i + 1 == seq.size();
          // Inside the unit: counting, not at a boundary, no calls; at its end: the state itself.
          if (last ? t != state : (!g.counting(t) || g.boundary(t) || g.has_calls(t) || g.accepting(t))) ok = false;
        }
      }
    }
    if (ok) loops |= cat;
  }
  return loops;
}

// The characters (TokenIndex::CharSet members) that lead from `state` back to `state` by byte transitions
// alone (the loop of a character class such as [^,:&\\s]+, or of a search for a word before the word
// starts): each ASCII character by itself, the non-ASCII classes as wholes.
TokenIndex::CharSet LoopChars(const CompiledGrammar& g, uint32_t state) {
  TokenIndex::CharSet loops;
  for (int c = 0x20; c < 0x80; ++c)
    if (c != '"' && c != '\\' && g.Next(state, static_cast<uint8_t>(c)) == state) loops.Add(c);
  std::vector<uint32_t> cur, tmp;
  for (const auto& [cat, seqs] : TextSeqs()) {
    if (cat != TokenIndex::kTextNonAscii && cat != TokenIndex::kTextLineSep) continue;
    bool ok = true;
    for (size_t k = 0; k < seqs.size() && ok; ++k) {
      cur.assign(1, state);
      for (auto [lo, hi] : seqs[k]) {
        if (!StepRange(g, cur, lo, hi, &tmp)) {
          ok = false;
          break;
        }
        cur.swap(tmp);
      }
      ok = ok && cur.size() == 1 && cur[0] == state;
    }
    if (ok) loops.Add(cat == TokenIndex::kTextNonAscii ? TokenIndex::kCharNonAscii : TokenIndex::kCharLineSep);
  }
  return loops;
}

// Subtrees smaller than this are walked even when their state loops: taking their tokens in bulk saves
// too little to pay for the check.
constexpr uint32_t kMinSelfLoopSubtree = 4;

constexpr uint32_t kNoExit = 0xFFFFFFFFu;

// A token that stays inside a counted rule, for its state's mask entry (see MaskEntry::counted_ids).
struct CountedToken {
  uint32_t need, reach;
  int32_t id;
};

// By need (readers only take prefixes of it), each need's tokens in walk order. Needs span few values
// (units read plus the fewest the end state still needs), so a counting sort does it: the first mask of a
// counted state has tens of thousands of such tokens, and a comparison sort was most of it. Kept out of
// line, away from the trie walk's loop.
[[gnu::noinline]] void SortByNeed(std::vector<CountedToken>* tokens) {
  std::vector<CountedToken>& inside = *tokens;
  uint32_t lo = inside[0].need, hi = inside[0].need;
  for (const CountedToken& c : inside) lo = std::min(lo, c.need), hi = std::max(hi, c.need);
  if (hi - lo <= 4 * inside.size() + 1024) {
    std::vector<uint32_t> at(static_cast<size_t>(hi - lo) + 2, 0);
    for (const CountedToken& c : inside) ++at[c.need - lo + 1];
    for (size_t k = 1; k < at.size(); ++k) at[k] += at[k - 1];
    std::vector<CountedToken> by_need(inside.size());
    for (const CountedToken& c : inside) by_need[at[c.need - lo]++] = c;
    inside.swap(by_need);
  } else {
    std::stable_sort(inside.begin(), inside.end(),
                     [](const CountedToken& a, const CountedToken& b) { return a.need < b.need; });
  }
}

}  // namespace

BoundGrammar::BoundGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenIndex> vocab,
                           MatcherLimits limits)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), limits_(limits) {
  entries_.resize(grammar_->num_states());
  text_closed_.reset(new std::atomic<uint8_t>[grammar_->num_states()]());
  loop_chars_.reset(new LoopCharsSlot[grammar_->num_states()]);
  if (grammar_->has_unique_items()) FindUniqueItemsParts();
}

size_t BoundGrammar::cached_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_count_;
}

std::shared_ptr<const MaskEntry> BoundGrammar::GetEntry(uint32_t state) const {
  const CompiledGrammar& g = *grammar_;
  const uint32_t rule = g.rule_of(state);
  if (g.leaf(rule)) {
    const RuleHash& h = g.rule_hash(rule);
    SharedEntries& shared = vocab_->shared_entries();
    if (auto e = shared.Find(h.a, h.b, g.canon_index(state))) return e;
    return shared.Put(h.a, h.b, g.canon_index(state), ComputeEntry(state));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_[state]) return entries_[state];
  }
  std::shared_ptr<const MaskEntry> e = ComputeEntry(state);
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_[state]) return entries_[state];
  if (cached_bytes_ + e->bytes() <= limits_.cache_bytes) {
    entries_[state] = e;
    cached_bytes_ += e->bytes();
    ++cached_count_;
  }
  return e;
}

// One walk of the trie in preorder, following the state's own rule by byte transitions only (one state
// per depth), so each node is visited at most once and rejected subtrees are skipped whole.
std::shared_ptr<const MaskEntry> BoundGrammar::ComputeEntry(uint32_t state) const {
  const CompiledGrammar& g = *grammar_;
  const TokenIndex& v = *vocab_;
  auto entry = std::make_shared<MaskEntry>();
  const bool counted = g.counted(g.rule_of(state));
  std::vector<uint32_t> acc(v.words(), 0);
  size_t count = 0;
  // Plain-text shortcut (rules without counters): when every run of up to L plain characters of some
  // categories keeps the state alive through byte transitions alone, those tokens are accepted and
  // subtrees holding only such tokens need no walk. Inside an unconstrained key or pattern this leaves a
  // few percent of the trie. Counted states whose plain code points are one unit each take such tokens
  // by length at mask time instead (MaskEntry::text_len).
  uint8_t cats = 0;
  const int plain = counted ? 0 : TextShortcut(g, state, &cats, text_closed_.get());
  const uint8_t loop_cats = counted ? CountedTextLoop(g, state) : 0;
  entry->text_cats = loop_cats;
  entry->text_len = loop_cats ? static_cast<uint8_t>(TokenIndex::kPlainCap) : 0;
  const uint8_t not_loop = static_cast<uint8_t>(~loop_cats);
  if (plain > 0) {
    size_t n = 0;
    const auto& pm = cats == TokenIndex::kTextAll ? v.plain_mask(plain) : v.text_mask(cats, plain, &n);
    if (cats == TokenIndex::kTextAll) n = v.plain_count(plain);
    for (size_t w = 0; w < acc.size(); ++w) acc[w] |= pm[w];
    count += n;
  }
  const uint8_t not_cats = static_cast<uint8_t>(~cats);
  // Self-loop characters of the states the walk meets (the last one asked, else the grammar's cache).
  uint32_t last_loop_state = CompiledGrammar::kDead;
  TokenIndex::CharSet last_loop_chars;
  auto self_loop_chars = [&](uint32_t s) -> const TokenIndex::CharSet& {
    if (s != last_loop_state) {
      LoopCharsSlot& slot = loop_chars_[s];
      if (slot.known.load(std::memory_order_acquire)) {
        last_loop_chars.lo = slot.lo.load(std::memory_order_relaxed);
        last_loop_chars.hi = slot.hi.load(std::memory_order_relaxed);
      } else {
        last_loop_chars = LoopChars(g, s);
        slot.lo.store(last_loop_chars.lo, std::memory_order_relaxed);
        slot.hi.store(last_loop_chars.hi, std::memory_order_relaxed);
        slot.known.store(true, std::memory_order_release);
      }
      last_loop_state = s;
    }
    return last_loop_chars;
  };
  const TokenIndex::CharSet* const tail_chars = v.tail_chars();
  const size_t depth_cap = v.max_depth() + 1;
  std::vector<uint32_t> st(depth_cap), units(depth_cap, 0), exited(depth_cap, kNoExit);
  st[0] = state;
  std::vector<CountedToken> inside;
  bool finite_reach = false;
  const uint32_t stop = v.end(0);
  // The walk, specialised for rules with and without a counter: most entries are of rules without one,
  // and this loop is the whole cost of a first mask over the vocabulary's trie.
  const TokenIndex::NodeArrays node = v.node_arrays();
  uint32_t* const depth_state = st.data();
  uint32_t* const acc_bits = acc.data();
  auto walk = [&](auto with_counter) {
    constexpr bool kCounted = decltype(with_counter)::value;
    for (uint32_t i = 1; i < stop;) {
      if (!kCounted && plain > 0 && node.max_plain[i] <= plain && (node.cats[i] & not_cats) == 0) {
        i = node.end[i];
        continue;
      }
      if (kCounted && loop_cats && node.max_plain[i] <= TokenIndex::kPlainCap && (node.cats[i] & not_loop) == 0) {
        i = node.end[i];
        continue;
      }
      const uint16_t d = node.depth[i];
      const uint32_t s = depth_state[d - 1];
      const uint32_t t = g.Next(s, node.byte[i]);
      if (t == CompiledGrammar::kDead) {
        i = node.end[i];
        continue;
      }
      if (!kCounted && t == s && node.end[i] - i >= kMinSelfLoopSubtree && !tail_chars[i].Has(TokenIndex::kCharOther) &&
          tail_chars[i].SubsetOf(self_loop_chars(s))) {
        // Every token here is the walked prefix, then code points that each come back to `s`: all are
        // accepted (and need no exits or calls, which only ever add tokens). Characters, not categories:
        // a search for a word loops on every letter but the word's first.
        for (const int32_t *k = node.tok_ids + node.tok_begin[i], *te = node.tok_ids + node.tok_begin[node.end[i]];
             k != te; ++k) {
          SetBit(acc_bits, *k);
          ++count;
        }
        i = node.end[i];
        continue;
      }
      depth_state[d] = t;
      uint32_t x = kNoExit;
      if constexpr (kCounted) {
        uint32_t u = units[d - 1];
        x = exited[d - 1];
        if (g.counting(s)) {
          if (!g.counting(t)) x = u;
          else if (g.boundary(s)) ++u;
        }
        units[d] = u;
        exited[d] = x;
        const int32_t* tb = node.tok_ids + node.tok_begin[i];
        const int32_t* te = node.tok_ids + node.tok_begin[i + 1];
        if (tb != te) {
          if (x != kNoExit) {
            for (const int32_t* k = tb; k != te; ++k) entry->post.push_back({*k, x});
          } else {
            const uint32_t dmax = g.dmax(t);
            const uint32_t reach = dmax == kUnbounded ? kUnbounded : u + dmax;
            finite_reach |= dmax != kUnbounded;
            for (const int32_t* k = tb; k != te; ++k)
              if (!loop_cats || !v.TextToken(*k, loop_cats)) inside.push_back({u + g.dmin(t), reach, *k});
          }
        }
      } else {
        for (const int32_t *k = node.tok_ids + node.tok_begin[i], *te = node.tok_ids + node.tok_begin[i + 1]; k != te; ++k) {
          SetBit(acc_bits, *k);
          ++count;
        }
      }
      if (node.end[i] > i + 1) {
        if (g.accepting(t)) entry->exits.push_back({i, x == kNoExit ? 0 : x});
        if (g.has_calls(t)) entry->calls.push_back({i, t});
      }
      ++i;
    }
  };
  if (counted) walk(std::true_type{});
  else walk(std::false_type{});
  if (count < v.words()) {
    for (size_t w = 0; w < acc.size(); ++w)
      for (uint32_t word = acc[w]; word != 0; word &= word - 1)
        entry->ids.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(word))));
  } else {
    entry->bits = std::move(acc);
  }
  if (!inside.empty()) {
    SortByNeed(&inside);
    entry->counted_ids.reserve(inside.size());
    entry->need.reserve(inside.size());
    entry->counted_all.assign(v.words(), 0);
    for (const CountedToken& c : inside) {
      entry->counted_ids.push_back(c.id);
      entry->need.push_back(c.need);
      if (finite_reach) entry->reach.push_back(c.reach);
      SetBit(entry->counted_all.data(), c.id);
    }
    entry->max_need = inside.back().need;
    entry->by_room.resize(entry->max_need);
  }
  return entry;
}

void GrammarMatcher::AddCounted(const MaskEntry& e, uint32_t state, uint32_t count, uint32_t min, uint32_t max,
                                uint32_t* bits) const {
  const uint64_t room = max == kUnbounded ? ~uint64_t{0} : max - std::min(count, max);
  const uint32_t floor = min > count ? min - count : 0;  // units still owed to minLength
  if (e.text_len > 0) {
    // Plain tokens of L code points: L units, back in `state`; allowed when L + dmin <= room and, where
    // the state has a most, L + dmax >= floor.
    const uint64_t dmin = cg_->dmin(state), dmax = cg_->dmax(state);
    const uint64_t hi = room < dmin ? 0 : std::min<uint64_t>(e.text_len, room - dmin);
    const uint64_t lo = dmax == kUnbounded || floor <= dmax + 1 ? 1 : floor - dmax;
    if (hi >= lo) {
      const TokenIndex& v = g_->vocab();
      size_t n = 0;
      const auto& upto = v.text_mask(e.text_cats, static_cast<int>(hi), &n);
      if (lo <= 1) {
        for (size_t w = 0; w < upto.size(); ++w) bits[w] |= upto[w];
      } else {
        const auto& below = v.text_mask(e.text_cats, static_cast<int>(lo - 1), &n);
        for (size_t w = 0; w < upto.size(); ++w) bits[w] |= upto[w] & ~below[w];
      }
    }
  }
  if (!e.counted_ids.empty()) {
    if (!e.reach.empty() && floor > 0) {
      // Some end state has a most: check every token (patterns with bounded pieces; rare).
      for (size_t k = 0; k < e.counted_ids.size() && e.need[k] <= room; ++k)
        if (e.reach[k] == kUnbounded || e.reach[k] >= floor) SetBit(bits, e.counted_ids[k]);
    } else if (room >= e.max_need) {
      for (size_t w = 0; w < e.counted_all.size(); ++w) bits[w] |= e.counted_all[w];
    } else {
      std::shared_ptr<const std::vector<uint32_t>> mask;
      {
        std::lock_guard<std::mutex> lock(e.by_room_mu);
        mask = e.by_room[room];
      }
      if (!mask) {
        auto made = std::make_shared<std::vector<uint32_t>>(e.counted_all.size(), 0);
        for (size_t k = 0; k < e.counted_ids.size() && e.need[k] <= room; ++k) SetBit(made->data(), e.counted_ids[k]);
        std::lock_guard<std::mutex> lock(e.by_room_mu);
        if (!e.by_room[room]) e.by_room[room] = made;
        mask = e.by_room[room];
      }
      for (size_t w = 0; w < mask->size(); ++w) bits[w] |= (*mask)[w];
    }
  }
  for (auto [id, units] : e.post)
    if (units <= room && units >= floor) SetBit(bits, id);
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const BoundGrammar> grammar)
    : g_(std::move(grammar)), cg_(&g_->grammar()) {
  Reset();
}

void GrammarMatcher::Reset() {
  nodes_.clear();
  intern_.clear();
  unique_ = cg_->has_unique_items();
  text_.clear();
  sets_.clear();
  set_bytes_ = 0;
  configs_ = {Intern(cg_->start(), -1, 0)};
  history_.clear();
  history_.push_back({configs_, Mark(), false});
  terminated_ = false;
  error_ = Status::Ok();
}

int32_t GrammarMatcher::Intern(uint32_t state, int32_t parent, uint32_t count) {
  auto [it, fresh] = intern_.try_emplace(NodeKey{state, parent, count}, static_cast<int32_t>(nodes_.size()));
  if (fresh) nodes_.push_back({state, parent, count});
  return it->second;
}

void GrammarMatcher::ReleaseTo(size_t mark) {
  while (nodes_.size() > mark) {
    const Node& n = nodes_.back();
    intern_.erase(NodeKey{n.state, n.parent, n.count});
    nodes_.pop_back();
  }
}

void GrammarMatcher::ReleaseTo(const Marks& m) {
  ReleaseTo(m.nodes);
  while (sets_.size() > m.sets) {
    set_bytes_ -= sets_.back().item.canonical.size();
    sets_.pop_back();
  }
  text_.resize(m.text);
}

Status GrammarMatcher::Close(const std::vector<int32_t>& in, std::vector<int32_t>* out) {
  out->clear();
  const size_t limit = g_->limits().max_stacks;
  if (in.size() == 1) {
    const Node& n = nodes_[in[0]];
    if (!cg_->has_calls(n.state) && !(cg_->accepting(n.state) && n.parent >= 0)) {
      out->push_back(in[0]);
      return Status::Ok();
    }
  }
  work_.assign(in.begin(), in.end());
  seen_.clear();
  while (!work_.empty()) {
    int32_t x = work_.back();
    work_.pop_back();
    if (!seen_.try_emplace(x, 1).second) continue;
    const Node n = nodes_[x];
    // With uniqueItems, a frame that can only end its rule is left out: its end is the one way on, and
    // that end may be refused (a duplicate item).
    if (!(unique_ && n.parent >= 0 && g_->stuck(n.state))) {
      out->push_back(x);
      if (out->size() > limit)
        return Status::ResourceExhausted("the grammar is too ambiguous (more than " + std::to_string(limit) +
                                         " parses at once)");
    }
    if (nodes_.size() > g_->limits().max_nodes)
      return Status::ResourceExhausted("the parse holds more than " + std::to_string(g_->limits().max_nodes) +
                                       " stack frames");
    for (const CallEdge* e = cg_->calls_begin(n.state); e != cg_->calls_end(n.state); ++e)
      work_.push_back(CallFrame(e->rule, Intern(e->target, n.parent, n.count), text_.size()));
    if (cg_->accepting(n.state) && n.parent >= 0) {
      if (unique_ && cg_->unique_role(cg_->rule_of(n.state)) == UniqueRole::kItem) {
        DI_ASSIGN_OR_RETURN(const int32_t array, EndItem(n));
        if (array >= 0) work_.push_back(array);
        else ++duplicates_dropped_;
      } else {
        work_.push_back(n.parent);
      }
    }
  }
  return Status::Ok();
}

void GrammarMatcher::Advance(const std::vector<int32_t>& closed, uint8_t byte, std::vector<int32_t>* out) {
  out->clear();
  for (int32_t x : closed) {
    const Node n = nodes_[x];
    uint32_t count = n.count;
    const uint32_t t = cg_->Step(n.state, byte, &count);
    if (t != CompiledGrammar::kDead && cg_->CountLive(t, count)) out->push_back(Intern(t, n.parent, count));
  }
  if (out->size() > 1) {
    std::sort(out->begin(), out->end());
    out->erase(std::unique(out->begin(), out->end()), out->end());
  }
}

Status GrammarMatcher::StepBytes(std::string_view bytes, std::vector<int32_t>* configs) {
  for (char c : bytes) {
    DI_RETURN_IF_ERROR(Close(*configs, &scratch_a_));
    Advance(scratch_a_, static_cast<uint8_t>(c), configs);
    if (configs->empty()) return Status::InvalidArgument("rejected");
    if (unique_) text_.push_back(c);
  }
  if (unique_) {
    // A parse left only with a duplicate item to end is no parse: the step is refused, as its mask bit is.
    DI_RETURN_IF_ERROR(Close(*configs, &scratch_a_));
    if (scratch_a_.empty()) return Status::InvalidArgument("rejected");
  }
  return Status::Ok();
}

bool GrammarMatcher::Terminable(const std::vector<int32_t>& closed) const {
  for (int32_t x : closed)
    if (nodes_[x].parent < 0 && cg_->accepting(nodes_[x].state)) return true;
  return false;
}

bool GrammarMatcher::CanTerminate() {
  if (terminated_) return true;
  const Marks mark = Mark();
  std::vector<int32_t> closed;
  bool ok = Close(configs_, &closed).ok() && Terminable(closed);
  ReleaseTo(mark);
  return ok;
}

bool GrammarMatcher::AcceptToken(int32_t id) {
  if (terminated_) return false;
  const TokenIndex& v = g_->vocab();
  if (v.IsStop(id)) {
    if (!CanTerminate()) return false;
    terminated_ = true;
    history_.push_back({configs_, Mark(), true});
    return true;
  }
  if (!v.InTrie(id)) return false;
  return AcceptString(v.Bytes(id));
}

bool GrammarMatcher::AcceptString(std::string_view bytes) {
  if (terminated_) return false;
  const Marks mark = Mark();
  std::vector<int32_t> next = configs_;
  Status s = StepBytes(bytes, &next);
  if (!s.ok()) {
    if (s.code() == StatusCode::kResourceExhausted) error_ = s;
    ReleaseTo(mark);
    return false;
  }
  configs_ = std::move(next);
  history_.push_back({configs_, Mark(), false});
  return true;
}

void GrammarMatcher::Rollback(size_t n) {
  n = std::min(n, history_.size() - 1);
  history_.resize(history_.size() - n);
  const Saved& s = history_.back();
  configs_ = s.configs;
  terminated_ = s.terminated;
  ReleaseTo(s.mark);
}

Status GrammarMatcher::WalkSubtree(uint32_t node, const std::vector<int32_t>& from, uint32_t* bits, size_t* budget) {
  const TokenIndex& v = g_->vocab();
  const uint16_t base = v.depth(node);
  if (levels_.empty()) levels_.resize(1);
  const size_t text_base = text_.size();
  if (unique_) text_.append(NodeBytes(v, node));
  DI_RETURN_IF_ERROR(Close(from, &levels_[0]));
  const uint32_t stop = v.end(node);
  for (uint32_t i = node + 1; i < stop;) {
    const size_t d = v.depth(i) - base;
    if (unique_) {
      text_.resize(text_base + v.depth(i) - 1);
      text_.push_back(static_cast<char>(v.byte(i)));
    }
    Advance(levels_[d - 1], v.byte(i), &scratch_b_);
    if (scratch_b_.empty()) {
      i = v.end(i);
      continue;
    }
    if (levels_.size() <= d) levels_.resize(d + 1);
    DI_RETURN_IF_ERROR(Close(scratch_b_, &levels_[d]));
    if (*budget < levels_[d].size())
      return Status::ResourceExhausted("a token mask needs more work than the per-step bound allows");
    *budget -= levels_[d].size();
    for (const int32_t* t = v.tokens_begin(i); t != v.tokens_end(i); ++t) SetBit(bits, *t);
    ++i;
  }
  if (unique_) text_.resize(text_base);
  return Status::Ok();
}

Status GrammarMatcher::FillNextTokenBitmask(uint32_t* bits) {
  const TokenIndex& v = g_->vocab();
  std::memset(bits, 0, v.words() * 4);
  if (terminated_) return Status::Ok();
  const Marks mark = Mark();
  size_t budget = g_->limits().max_walk_nodes;
  Status status = Close(configs_, &closed_);
  const bool terminable = status.ok() && Terminable(closed_);
  // Walks below push frames; the closed set is copied so the walks can reuse the scratch vectors.
  const std::vector<int32_t> closed = closed_;
  for (size_t k = 0; k < closed.size() && status.ok(); ++k) {
    const Node n = nodes_[closed[k]];
    std::shared_ptr<const MaskEntry> entry = g_->GetEntry(n.state);
    const MaskEntry& e = *entry;
    const uint32_t rule = cg_->rule_of(n.state);
    const bool counted = cg_->counted(rule);
    if (!e.bits.empty()) {
      for (size_t w = 0; w < e.bits.size(); ++w) bits[w] |= e.bits[w];
    } else {
      for (int32_t id : e.ids) SetBit(bits, id);
    }
    uint32_t min = 0, max = kUnbounded;
    if (counted) {
      min = cg_->count_min(rule);
      max = cg_->count_max(rule);
      AddCounted(e, n.state, n.count, min, max, bits);
    }
    if (n.parent >= 0) {
      for (const MaskEntry::Exit& x : e.exits) {
        if (counted && (static_cast<uint64_t>(n.count) + x.units < min || static_cast<uint64_t>(n.count) + x.units > max))
          continue;
        starts_.assign(1, n.parent);
        status = WalkSubtree(x.node, starts_, bits, &budget);
        if (!status.ok()) break;
      }
    }
    for (const MaskEntry::CallPoint& c : e.calls) {
      if (!status.ok()) break;
      starts_.clear();
      for (const CallEdge* ce = cg_->calls_begin(c.state); ce != cg_->calls_end(c.state); ++ce)
        starts_.push_back(CallFrame(ce->rule, Intern(ce->target, n.parent, n.count), text_.size() + v.depth(c.node)));
      status = WalkSubtree(c.node, starts_, bits, &budget);
    }
  }
  if (status.ok() && unique_) status = MaskUniqueItems(closed, bits, &budget);
  ReleaseTo(mark);
  if (!status.ok()) {
    std::memset(bits, 0, v.words() * 4);
    error_ = status;
    return status;
  }
  if (terminable)
    for (int32_t s : v.stop_ids()) SetBit(bits, s);
  return Status::Ok();
}

std::string GrammarMatcher::ForcedBytes(size_t max_bytes) {
  std::string out;
  if (terminated_) return out;
  const Marks mark = Mark();
  std::vector<int32_t> cur = configs_, closed, next, only;
  while (out.size() < max_bytes) {
    if (!Close(cur, &closed).ok() || Terminable(closed)) break;
    int found = -1;
    bool many = false;
    for (int b = 0; b < 256 && !many; ++b) {
      Advance(closed, static_cast<uint8_t>(b), &next);
      if (next.empty()) continue;
      if (found >= 0) many = true;
      found = b;
      only = next;
    }
    if (many || found < 0) break;
    out.push_back(static_cast<char>(found));
    if (unique_) text_.push_back(static_cast<char>(found));
    cur = only;
  }
  ReleaseTo(mark);
  return out;
}

}  // namespace deepinfer::grammar
