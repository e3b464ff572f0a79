#include "grammar/grammar.h"

#include <algorithm>
#include <functional>
#include <string_view>

namespace deepinfer::grammar {

void NormalizeRanges(std::vector<std::pair<uint32_t, uint32_t>>* ranges) {
  auto& r = *ranges;
  for (auto& [lo, hi] : r)
    if (lo > hi) std::swap(lo, hi);
  std::sort(r.begin(), r.end());
  size_t out = 0;
  for (size_t i = 0; i < r.size(); ++i) {
    if (out > 0 && (r[out - 1].second == 0xFFFFFFFFu || r[i].first <= r[out - 1].second + 1)) {
      r[out - 1].second = std::max(r[out - 1].second, r[i].second);
    } else {
      r[out++] = r[i];
    }
  }
  r.resize(out);
}

namespace {

uint64_t ExprContentHash(const Expr& e) {
  uint64_t h = 0x9E3779B97F4A7C15ULL ^ static_cast<uint64_t>(e.kind);
  auto mix = [&h](uint64_t v) {
    h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
    h *= 0xBF58476D1CE4E5B9ULL;
  };
  mix(e.kids.size());
  for (ExprId k : e.kids) mix(k);
  mix(e.ranges.size());
  for (auto [lo, hi] : e.ranges) mix((static_cast<uint64_t>(lo) << 32) | hi);
  mix(e.required.size());
  for (uint8_t r : e.required) mix(r);
  mix(std::hash<std::string_view>()(e.text));
  mix((static_cast<uint64_t>(e.min) << 32) | e.max);
  mix((static_cast<uint64_t>(e.rule) << 2) | (e.has_separator ? 1 : 0) | (e.repeat_last ? 2 : 0));
  return h ^ (h >> 31);
}

bool SameExpr(const Expr& a, const Expr& b) {
  return a.kind == b.kind && a.kids == b.kids && a.ranges == b.ranges && a.required == b.required && a.text == b.text &&
         a.min == b.min && a.max == b.max && a.rule == b.rule && a.has_separator == b.has_separator &&
         a.repeat_last == b.repeat_last;
}

}  // namespace

ExprId Grammar::Add(Expr e) {
  // Equal expressions share one node: front ends rebuild the same pieces (a property's key and colon,
  // whitespace, whole sub-schemas merged into every oneOf branch) many times over, and the nodes are
  // immutable, so sharing changes no language and spares the compiler's passes over the copies.
  // An open-addressing table of node ids (plus one; 0 is free), at most half full.
  if (2 * (interned_count_ + 1) > intern_slots_.size()) {
    std::vector<uint32_t> grown(std::max<size_t>(1024, 2 * intern_slots_.size()), 0);
    const size_t mask = grown.size() - 1;
    for (uint32_t slot : intern_slots_) {
      if (slot == 0) continue;
      size_t i = expr_hash_[slot - 1] & mask;
      while (grown[i] != 0) i = (i + 1) & mask;
      grown[i] = slot;
    }
    intern_slots_ = std::move(grown);
  }
  const uint64_t h = ExprContentHash(e);
  const size_t mask = intern_slots_.size() - 1;
  size_t i = h & mask;
  for (; intern_slots_[i] != 0; i = (i + 1) & mask) {
    const ExprId id = intern_slots_[i] - 1;
    if (expr_hash_[id] == h && SameExpr(exprs_[id], e)) return id;
  }
  exprs_.push_back(std::move(e));
  expr_hash_.resize(exprs_.size(), 0);
  expr_hash_.back() = h;
  intern_slots_[i] = static_cast<uint32_t>(exprs_.size());
  ++interned_count_;
  return static_cast<ExprId>(exprs_.size() - 1);
}

ExprId Grammar::Empty() { return Add(Expr{}); }

ExprId Grammar::Nothing() {
  Expr e;
  e.kind = ExprKind::kNothing;
  return Add(std::move(e));
}

ExprId Grammar::Literal(std::string_view utf8) {
  if (utf8.empty()) return Empty();
  Expr e;
  e.kind = ExprKind::kLiteral;
  e.text = std::string(utf8);
  return Add(std::move(e));
}

ExprId Grammar::Chars(std::vector<std::pair<uint32_t, uint32_t>> ranges) {
  NormalizeRanges(&ranges);
  if (ranges.empty()) return Nothing();
  Expr e;
  e.kind = ExprKind::kChars;
  e.ranges = std::move(ranges);
  return Add(std::move(e));
}

ExprId Grammar::Bytes(std::vector<std::pair<uint32_t, uint32_t>> ranges) {
  NormalizeRanges(&ranges);
  if (ranges.empty()) return Nothing();
  Expr e;
  e.kind = ExprKind::kBytes;
  e.ranges = std::move(ranges);
  return Add(std::move(e));
}

ExprId Grammar::Seq(std::vector<ExprId> kids) {
  if (kids.empty()) return Empty();
  if (kids.size() == 1) return kids[0];
  Expr e;
  e.kind = ExprKind::kSeq;
  e.kids = std::move(kids);
  return Add(std::move(e));
}

ExprId Grammar::Alt(std::vector<ExprId> kids) {
  if (kids.empty()) return Nothing();
  if (kids.size() == 1) return kids[0];
  Expr e;
  e.kind = ExprKind::kAlt;
  e.kids = std::move(kids);
  return Add(std::move(e));
}

ExprId Grammar::Repeat(ExprId kid, uint32_t min, uint32_t max) {
  if (min == 1 && max == 1) return kid;
  if (max == 0) return Empty();
  Expr e;
  e.kind = ExprKind::kRepeat;
  e.kids = {kid};
  e.min = min;
  e.max = max;
  return Add(std::move(e));
}

ExprId Grammar::Ref(uint32_t rule) {
  Expr e;
  e.kind = ExprKind::kRef;
  e.rule = rule;
  return Add(std::move(e));
}

ExprId Grammar::SepList(std::vector<ExprId> items, std::vector<uint8_t> required, ExprId separator,
                        bool has_separator, bool repeat_last, uint32_t min_count, uint32_t max_count) {
  Expr e;
  e.kind = ExprKind::kSepList;
  e.kids = std::move(items);
  e.required = std::move(required);
  e.required.resize(e.kids.size(), 0);
  if (has_separator) e.kids.push_back(separator);
  e.has_separator = has_separator;
  e.repeat_last = repeat_last;
  e.min = min_count;
  e.max = max_count;
  return Add(std::move(e));
}

ExprId Grammar::And(ExprId a, ExprId b) {
  Expr e;
  e.kind = ExprKind::kAnd;
  e.kids = {a, b};
  return Add(std::move(e));
}

ExprId Grammar::Minus(ExprId a, ExprId b) {
  Expr e;
  e.kind = ExprKind::kMinus;
  e.kids = {a, b};
  return Add(std::move(e));
}

ExprId Grammar::Counted(ExprId body, ExprId unit, ExprId fallback, uint32_t min, uint32_t max) {
  Expr e;
  e.kind = ExprKind::kCounted;
  e.kids = {body, unit, fallback};
  e.min = min;
  e.max = max;
  return Add(std::move(e));
}

ExprId Grammar::Multiple(uint32_t numerator, uint32_t fraction_digits) {
  Expr e;
  e.kind = ExprKind::kMultiple;
  e.min = numerator;
  e.max = fraction_digits;
  return Add(std::move(e));
}

uint32_t Grammar::AddRule(std::string name) {
  rules_.push_back(Rule{std::move(name), 0, false});
  return static_cast<uint32_t>(rules_.size() - 1);
}

void Grammar::Define(uint32_t rule, ExprId body) {
  rules_[rule].body = body;
  rules_[rule].defined = true;
}

uint32_t Grammar::Import(const Grammar& other, std::string_view prefix) {
  const uint32_t rule_base = static_cast<uint32_t>(rules_.size());
  const ExprId expr_base = static_cast<ExprId>(exprs_.size());
  warnings_.insert(warnings_.end(), other.warnings_.begin(), other.warnings_.end());
  for (const Rule& r : other.rules_) {
    Rule copy = r;
    copy.name = std::string(prefix) + r.name;
    copy.body += expr_base;
    rules_.push_back(std::move(copy));
  }
  exprs_.reserve(exprs_.size() + other.exprs_.size());
  for (const Expr& e : other.exprs_) {
    Expr copy = e;
    for (ExprId& kid : copy.kids) kid += expr_base;
    if (copy.kind == ExprKind::kRef) copy.rule += rule_base;
    exprs_.push_back(std::move(copy));
  }
  return rule_base + other.root_;
}

int32_t Grammar::FindRule(std::string_view name) const {
  for (size_t i = 0; i < rules_.size(); ++i)
    if (rules_[i].name == name) return static_cast<int32_t>(i);
  return -1;
}

std::string Grammar::ToString() const {
  static const char* kNames[] = {"empty", "nothing", "lit", "chars", "bytes", "seq",
                                 "alt",   "rep",     "ref", "seplist", "and", "minus", "counted", "multiple"};
  std::string out;
  auto num = [&](uint64_t v) { out.append(std::to_string(v)); };
  out.append("root ");
  num(root_);
  out.push_back('\n');
  for (size_t i = 0; i < rules_.size(); ++i) {
    out.append("rule ");
    num(i);
    out.push_back(' ');
    out.append(rules_[i].name);
    if (rules_[i].unique_role != UniqueRole::kNone) out.append(rules_[i].unique_role == UniqueRole::kArray ? " unique-array" : " unique-item");
    out.append(" = e");
    num(rules_[i].body);
    out.push_back('\n');
  }
  for (size_t i = 0; i < exprs_.size(); ++i) {
    const Expr& e = exprs_[i];
    out.push_back('e');
    num(i);
    out.push_back(' ');
    out.append(kNames[static_cast<int>(e.kind)]);
    switch (e.kind) {
      case ExprKind::kLiteral:
        out.push_back(' ');
        num(e.text.size());
        out.push_back(':');
        out.append(e.text);
        break;
      case ExprKind::kChars:
      case ExprKind::kBytes:
        for (auto [lo, hi] : e.ranges) {
          out.push_back(' ');
          num(lo);
          out.push_back('-');
          num(hi);
        }
        break;
      case ExprKind::kRepeat:
      case ExprKind::kCounted:
      case ExprKind::kMultiple:
        out.push_back(' ');
        num(e.min);
        out.push_back(',');
        num(e.max);
        break;
      case ExprKind::kRef:
        out.push_back(' ');
        num(e.rule);
        break;
      case ExprKind::kSepList:
        out.push_back(' ');
        num(e.min);
        out.push_back(',');
        num(e.max);
        if (e.has_separator) out.append(" sep");
        if (e.repeat_last) out.append(" rep");
        out.append(" req");
        for (uint8_t r : e.required) out.push_back(r ? '1' : '0');
        break;
      default:
        break;
    }
    for (ExprId k : e.kids) {
      out.append(" e");
      num(k);
    }
    out.push_back('\n');
  }
  return out;
}

}  // namespace deepinfer::grammar
