#include "grammar/matcher.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

namespace deepinfer::grammar {

namespace {

// A stack during an entry's walk: top state and the index of the frame below in a walk-local arena;
// -1 is the frame the walk started from, whose end is recorded instead of followed.
struct LocalConfig {
  uint32_t state;
  int32_t below;
  bool operator<(const LocalConfig& o) const { return state != o.state ? state < o.state : below < o.below; }
  bool operator==(const LocalConfig& o) const { return state == o.state && below == o.below; }
};

class LocalWalker {
 public:
  LocalWalker(const CompiledGrammar& g, size_t max_stacks) : g_(g), max_stacks_(max_stacks) {}

  // Applies calls and the ends of pushed rules; *ends tells whether the starting frame may end here.
  Status Close(const std::vector<LocalConfig>& in, std::vector<LocalConfig>* out, bool* ends) {
    *ends = false;
    out->clear();
    if (in.size() == 1 && in[0].below < 0 && !g_.has_calls(in[0].state)) {
      out->push_back(in[0]);
      *ends = g_.accepting(in[0].state);
      return Status::Ok();
    }
    work_.assign(in.begin(), in.end());
    seen_.clear();
    while (!work_.empty()) {
      LocalConfig c = work_.back();
      work_.pop_back();
      uint64_t key = (static_cast<uint64_t>(c.state) << 32) | static_cast<uint32_t>(c.below);
      if (!seen_.insert(key).second) continue;
      out->push_back(c);
      if (out->size() > max_stacks_)
        return Status::ResourceExhausted("the grammar is too ambiguous (more than " + std::to_string(max_stacks_) +
                                         " parses at once)");
      for (const CallEdge* e = g_.calls_begin(c.state); e != g_.calls_end(c.state); ++e)
        work_.push_back({g_.rule_start(e->rule), Intern(e->target, c.below)});
      if (g_.accepting(c.state)) {
        if (c.below < 0)
          *ends = true;
        else
          work_.push_back(frames_[c.below]);
      }
    }
    return Status::Ok();
  }

  void Advance(const std::vector<LocalConfig>& closed, uint8_t byte, std::vector<LocalConfig>* out) {
    out->clear();
    for (const LocalConfig& c : closed)
      if (uint32_t t = g_.Next(c.state, byte); t != CompiledGrammar::kDead) out->push_back({t, c.below});
    if (out->size() > 1) {
      std::sort(out->begin(), out->end());
      out->erase(std::unique(out->begin(), out->end()), out->end());
    }
  }

  size_t frames() const { return frames_.size(); }

 private:
  int32_t Intern(uint32_t state, int32_t below) {
    uint64_t key = (static_cast<uint64_t>(state) << 32) | static_cast<uint32_t>(below);
    auto [it, fresh] = ids_.try_emplace(key, static_cast<int32_t>(frames_.size()));
    if (fresh) frames_.push_back({state, below});
    return it->second;
  }

  const CompiledGrammar& g_;
  size_t max_stacks_;
  std::vector<LocalConfig> frames_;
  std::unordered_map<uint64_t, int32_t> ids_;
  std::vector<LocalConfig> work_;
  std::unordered_set<uint64_t> seen_;
};

inline void SetBit(uint32_t* bits, int32_t id) { bits[id >> 5] |= 1u << (id & 31); }

// The states reached from `from` by one byte in [lo, hi], through byte transitions only (one state per
// byte class the range touches); false when some byte of the range is rejected.
bool StepRange(const CompiledGrammar& g, const std::vector<uint32_t>& from, uint8_t lo, uint8_t hi,
               std::vector<uint32_t>* out) {
  out->clear();
  for (uint32_t s : from) {
    for (int b = lo; b <= hi;) {
      uint32_t t = g.Next(s, static_cast<uint8_t>(b));
      if (t == CompiledGrammar::kDead) return false;
      if (std::find(out->begin(), out->end(), t) == out->end()) out->push_back(t);
      if (out->size() > 64) return false;
      const uint8_t cls = g.byte_class(static_cast<uint8_t>(b));
      while (b <= hi && g.byte_class(static_cast<uint8_t>(b)) == cls) ++b;
    }
  }
  return true;
}

// The largest L <= kPlainCap such that every string of up to L JSON-plain code points (U+0020.. except
// '"' and '\') leads from `state` to a live state by byte transitions alone; 0 when even one fails.
int PlainDepth(const CompiledGrammar& g, uint32_t state) {
  // Every plain code point as byte-range sequences.
  static const std::vector<std::vector<std::pair<uint8_t, uint8_t>>> kSeqs = {
      {{0x20, 0x21}}, {{0x23, 0x5B}}, {{0x5D, 0x7F}}, {{0xC2, 0xDF}, {0x80, 0xBF}},
      {{0xE0, 0xE0}, {0xA0, 0xBF}, {0x80, 0xBF}}, {{0xE1, 0xEC}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xED, 0xED}, {0x80, 0x9F}, {0x80, 0xBF}}, {{0xEE, 0xEF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF0, 0xF0}, {0x90, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF1, 0xF3}, {0x80, 0xBF}, {0x80, 0xBF}, {0x80, 0xBF}},
      {{0xF4, 0xF4}, {0x80, 0x8F}, {0x80, 0xBF}, {0x80, 0xBF}}};
  // Byte classes are intervals, so StepRange looks at one byte per class.
  std::vector<uint32_t> frontier = {state}, next, cur, tmp;
  for (int depth = 0; depth < TokenIndex::kPlainCap; ++depth) {
    next.clear();
    for (const auto& seq : kSeqs) {
      cur = frontier;
      for (auto [lo, hi] : seq) {
        if (!StepRange(g, cur, lo, hi, &tmp)) return depth;
        cur.swap(tmp);
      }
      for (uint32_t t : cur)
        if (std::find(next.begin(), next.end(), t) == next.end()) next.push_back(t);
      if (next.size() > 64) return depth;
    }
    frontier.swap(next);
  }
  return TokenIndex::kPlainCap;
}

}  // namespace

BoundGrammar::BoundGrammar(std::shared_ptr<const CompiledGrammar> grammar, std::shared_ptr<const TokenIndex> vocab,
                           MatcherLimits limits)
    : grammar_(std::move(grammar)), vocab_(std::move(vocab)), limits_(limits) {
  entries_.resize(grammar_->num_states());
}

size_t BoundGrammar::cached_entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return cached_count_;
}

Result<std::shared_ptr<const BoundGrammar::Entry>> BoundGrammar::GetEntry(uint32_t state) const {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (entries_[state]) return entries_[state];
  }
  DI_ASSIGN_OR_RETURN(std::shared_ptr<const Entry> e, ComputeEntry(state));
  size_t bytes = e->bits.size() * 4 + e->ids.size() * 4 + e->ends.size() * 8 + sizeof(Entry);
  std::lock_guard<std::mutex> lock(mu_);
  if (entries_[state]) return entries_[state];
  if (cached_bytes_ + bytes <= limits_.cache_bytes) {
    entries_[state] = e;
    cached_bytes_ += bytes;
    ++cached_count_;
  }
  return e;
}

Result<std::shared_ptr<const BoundGrammar::Entry>> BoundGrammar::ComputeEntry(uint32_t state) const {
  const CompiledGrammar& g = *grammar_;
  const TokenIndex& v = *vocab_;
  auto entry = std::make_shared<Entry>();
  std::vector<uint32_t> acc(v.words(), 0);
  size_t count = 0;
  LocalWalker walker(g, limits_.max_stacks);
  std::vector<std::vector<LocalConfig>> level(1);
  std::vector<LocalConfig> tmp;
  bool ends = false;
  DI_RETURN_IF_ERROR(walker.Close({{state, -1}}, &level[0], &ends));
  entry->ends_at_start = ends;
  // Plain-text shortcut: when every run of up to L plain characters keeps this state alive through byte
  // transitions alone, those tokens are accepted whatever follows, and subtrees holding only such tokens
  // need no walk. Inside an unconstrained JSON string this leaves a few percent of the trie to visit.
  const int plain = PlainDepth(g, state);
  if (plain > 0) {
    const auto& pm = v.plain_mask(plain);
    for (size_t w = 0; w < acc.size(); ++w) acc[w] |= pm[w];
    count += v.plain_count(plain);
  }
  const uint32_t stop = v.end(0);
  size_t visited = 0;
  for (uint32_t i = 1; i < stop;) {
    if (plain > 0 && v.subtree_max_plain(i) <= plain) {
      i = v.end(i);
      continue;
    }
    const uint16_t d = v.depth(i);
    walker.Advance(level[d - 1], v.byte(i), &tmp);
    if (tmp.empty()) {
      i = v.end(i);
      continue;
    }
    if (level.size() <= d) level.resize(d + 1);
    DI_RETURN_IF_ERROR(walker.Close(tmp, &level[d], &ends));
    visited += level[d].size();
    if (visited > limits_.max_walk_nodes || walker.frames() > limits_.max_nodes)
      return Status::ResourceExhausted("a token mask needs more work than the per-step bound allows");
    for (const int32_t* t = v.tokens_begin(i); t != v.tokens_end(i); ++t) {
      SetBit(acc.data(), *t);
      ++count;
    }
    if (ends && v.end(i) > i + 1) entry->ends.push_back({i, d});
    ++i;
  }
  if (count < v.words()) {
    for (size_t w = 0; w < acc.size(); ++w)
      for (uint32_t word = acc[w]; word != 0; word &= word - 1)
        entry->ids.push_back(static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(word))));
  } else {
    entry->bits = std::move(acc);
  }
  return std::shared_ptr<const Entry>(std::move(entry));
}

GrammarMatcher::GrammarMatcher(std::shared_ptr<const BoundGrammar> grammar)
    : g_(std::move(grammar)), cg_(&g_->grammar()) {
  Reset();
}

void GrammarMatcher::Reset() {
  nodes_.clear();
  intern_.clear();
  configs_ = {Intern(cg_->start(), -1)};
  history_.clear();
  history_.push_back({configs_, nodes_.size(), false});
  terminated_ = false;
  error_ = Status::Ok();
}

int32_t GrammarMatcher::Intern(uint32_t state, int32_t parent) {
  uint64_t key = (static_cast<uint64_t>(state) << 32) | static_cast<uint32_t>(parent);
  auto [it, fresh] = intern_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (fresh) nodes_.push_back({state, parent});
  return it->second;
}

void GrammarMatcher::ReleaseTo(size_t mark) {
  while (nodes_.size() > mark) {
    const Node& n = nodes_.back();
    intern_.erase((static_cast<uint64_t>(n.state) << 32) | static_cast<uint32_t>(n.parent));
    nodes_.pop_back();
  }
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
    out->push_back(x);
    if (out->size() > limit)
      return Status::ResourceExhausted("the grammar is too ambiguous (more than " + std::to_string(limit) +
                                       " parses at once)");
    if (nodes_.size() > g_->limits().max_nodes)
      return Status::ResourceExhausted("the parse holds more than " + std::to_string(g_->limits().max_nodes) +
                                       " stack frames");
    const Node n = nodes_[x];
    for (const CallEdge* e = cg_->calls_begin(n.state); e != cg_->calls_end(n.state); ++e)
      work_.push_back(Intern(cg_->rule_start(e->rule), Intern(e->target, n.parent)));
    if (cg_->accepting(n.state) && n.parent >= 0) work_.push_back(n.parent);
  }
  return Status::Ok();
}

void GrammarMatcher::Advance(const std::vector<int32_t>& closed, uint8_t byte, std::vector<int32_t>* out) {
  out->clear();
  for (int32_t x : closed) {
    const Node n = nodes_[x];
    if (uint32_t t = cg_->Next(n.state, byte); t != CompiledGrammar::kDead) out->push_back(Intern(t, n.parent));
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
  size_t mark = nodes_.size();
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
    history_.push_back({configs_, nodes_.size(), true});
    return true;
  }
  if (!v.InTrie(id)) return false;
  return AcceptString(v.Bytes(id));
}

bool GrammarMatcher::AcceptString(std::string_view bytes) {
  if (terminated_) return false;
  size_t mark = nodes_.size();
  std::vector<int32_t> next = configs_;
  Status s = StepBytes(bytes, &next);
  if (!s.ok()) {
    if (s.code() == StatusCode::kResourceExhausted) error_ = s;
    ReleaseTo(mark);
    return false;
  }
  configs_ = std::move(next);
  history_.push_back({configs_, nodes_.size(), false});
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

Status GrammarMatcher::WalkSubtree(uint32_t node, int32_t from, uint32_t* bits, size_t* budget) {
  const TokenIndex& v = g_->vocab();
  const uint16_t base = v.depth(node);
  if (levels_.empty()) levels_.resize(1);
  DI_RETURN_IF_ERROR(Close({from}, &levels_[0]));
  const uint32_t stop = v.end(node);
  for (uint32_t i = node + 1; i < stop;) {
    const size_t d = v.depth(i) - base;
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
  return Status::Ok();
}

Status GrammarMatcher::FillNextTokenBitmask(uint32_t* bits) {
  const TokenIndex& v = g_->vocab();
  std::memset(bits, 0, v.words() * 4);
  if (terminated_) return Status::Ok();
  const size_t mark = nodes_.size();
  size_t budget = g_->limits().max_walk_nodes;
  // The stacks whose top may start the next token: each current stack, and the stacks below it for as
  // long as the top rule may end before any byte.
  std::vector<int32_t> tops;
  bool terminable = false;
  Status status;
  for (int32_t x : configs_) {
    for (int32_t y = x; y >= 0;) {
      if (std::find(tops.begin(), tops.end(), y) != tops.end()) break;
      tops.push_back(y);
      auto entry = g_->GetEntry(nodes_[y].state);
      if (!entry.ok()) {
        status = entry.status();
        break;
      }
      if (!(*entry)->ends_at_start) break;
      if (nodes_[y].parent < 0) terminable = true;
      y = nodes_[y].parent;
    }
  }
  for (size_t k = 0; k < tops.size() && status.ok(); ++k) {
    const Node n = nodes_[tops[k]];
    auto entry = g_->GetEntry(n.state);
    if (!entry.ok()) {
      status = entry.status();
      break;
    }
    const BoundGrammar::Entry& e = **entry;
    if (!e.bits.empty()) {
      for (size_t w = 0; w < e.bits.size(); ++w) bits[w] |= e.bits[w];
    } else {
      for (int32_t id : e.ids) SetBit(bits, id);
    }
    if (n.parent < 0) continue;
    for (auto [node, depth] : e.ends) {
      (void)depth;
      status = WalkSubtree(node, n.parent, bits, &budget);
      if (!status.ok()) break;
    }
  }
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
  const size_t mark = nodes_.size();
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
    cur = only;
  }
  ReleaseTo(mark);
  return out;
}

}  // namespace deepinfer::grammar
