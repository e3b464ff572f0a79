#include "grammar/regex.h"

#include <string>
#include <unordered_map>
#include <vector>

#include "core/utf8.h"
#include "grammar/json_text.h"

namespace deepinfer::grammar {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

Ranges Complement(Ranges r) {
  NormalizeRanges(&r);
  Ranges out;
  uint32_t next = 0;
  for (auto [lo, hi] : r) {
    if (lo > next) out.push_back({next, lo - 1});
    next = hi + 1;
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

const Ranges& Digits() {
  static const Ranges r = {{'0', '9'}};
  return r;
}
const Ranges& Word() {
  static const Ranges r = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
  return r;
}
const Ranges& Space() {
  // ECMA-262 WhiteSpace and LineTerminator.
  static const Ranges r = {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
                           {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
  return r;
}

// A parsed sub-pattern as two languages: `free`, its matches that pass no `$`, and `end`, those that
// pass a `$` (so the string ends right after them; has_end false: none). A `$` inside the pattern
// (`(a|$)`, `x($|/)`) is then exact: whatever follows an `end` match must match the empty string.
struct Piece {
  ExprId free;
  ExprId end = 0;
  bool has_end = false;
};

class Parser {
 public:
  Parser(std::string_view p, const RegexOptions& o, Grammar* g) : p_(p), o_(o), g_(g) {}

  Result<ExprId> Run() {
    if (p_.size() > o_.max_length)
      return Status::ResourceExhausted("the regex is longer than " + std::to_string(o_.max_length) + " bytes");
    if (!utf8::IsValid(p_)) return Status::InvalidArgument("the regex is not valid UTF-8");
    std::vector<ExprId> alts;
    while (true) {
      bool start_anchor = false, end_anchor = false;
      if (Peek('^')) {
        ++pos_;
        start_anchor = true;
      }
      // Look-aheads right at the start of an anchored alternative test the whole string: it must (or, for
      // (?!...), must not) begin with a match of theirs, an intersection (or difference) of regular
      // languages. Elsewhere a look-ahead's reach depends on what follows it: refused (ParseAtom).
      std::vector<std::pair<ExprId, bool>> looks;  // the strings that begin with a match; negative
      while ((start_anchor || o_.full_match) && (p_.substr(pos_, 3) == "(?=" || p_.substr(pos_, 3) == "(?!")) {
        const bool negative = p_[pos_ + 2] == '!';
        pos_ += 3;
        if (Peek('^')) ++pos_;  // the look-ahead stands at the start already
        DI_ASSIGN_OR_RETURN(Piece x, ParseAlt(1));
        if (!Peek(')')) return Error("missing ')'");
        ++pos_;
        ExprId begins = g_->Seq({x.free, g_->Star(Char(Ranges{{0, 0x10FFFF}}))});
        if (x.has_end) begins = g_->Alt({begins, x.end});
        looks.push_back({begins, negative});
      }
      DI_ASSIGN_OR_RETURN(Piece seq, ParseSeq(0));
      if (Peek('$')) {
        ++pos_;
        end_anchor = true;
      }
      std::vector<ExprId> parts, branch;
      const bool free_start = !start_anchor && !o_.full_match;
      if (free_start) parts.push_back(g_->Star(Char(Ranges{{0, 0x10FFFF}})));
      parts.push_back(seq.free);
      if (!end_anchor && !o_.full_match) parts.push_back(g_->Star(Char(Ranges{{0, 0x10FFFF}})));
      branch.push_back(g_->Seq(std::move(parts)));
      if (seq.has_end) {
        if (free_start) branch.push_back(g_->Seq({g_->Star(Char(Ranges{{0, 0x10FFFF}})), seq.end}));
        else branch.push_back(seq.end);
      }
      if (looks.empty()) {
        alts.insert(alts.end(), branch.begin(), branch.end());
      } else {
        ExprId b = g_->Alt(std::move(branch));
        for (const auto& [begins, negative] : looks) b = negative ? g_->Minus(b, begins) : g_->And(b, begins);
        alts.push_back(b);
      }
      if (pos_ >= p_.size()) break;
      if (p_[pos_] == '|') {
        ++pos_;
        continue;
      }
      if (p_[pos_] == ')') return Error("unmatched ')'");
      if (p_[pos_] == '$' || p_[pos_] == '^') return Unsupported("an anchor (^ or $) inside the pattern");
      return Error("unexpected character");
    }
    return g_->Alt(std::move(alts));
  }

 private:
  bool Peek(char c) const { return pos_ < p_.size() && p_[pos_] == c; }
  Status Error(const std::string& what) const {
    return Status::InvalidArgument("regex: " + what + " at offset " + std::to_string(pos_));
  }
  Status Unsupported(const std::string& what) const {
    return Status::Unimplemented("regex: " + what + " is not supported (offset " + std::to_string(pos_) + ")");
  }
  ExprId Char(Ranges r) { return o_.json_string ? JsonCanonicalChars(g_, std::move(r)) : g_->Chars(std::move(r)); }

  // Whether the expression matches the empty string (over the node kinds the parser builds).
  bool Nullable(ExprId root) const {
    std::vector<std::pair<ExprId, bool>> stack = {{root, false}};
    std::unordered_map<ExprId, bool> done;  // memo of this walk
    auto known = [&](ExprId id) -> const bool* {
      auto it = done.find(id);
      return it == done.end() ? nullptr : &it->second;
    };
    while (!stack.empty()) {
      auto [id, expanded] = stack.back();
      stack.pop_back();
      if (known(id)) continue;
      const Expr& e = g_->expr(id);
      if (!expanded) {
        stack.push_back({id, true});
        for (ExprId k : e.kids)
          if (!known(k)) stack.push_back({k, false});
        continue;
      }
      bool n = false;
      switch (e.kind) {
        case ExprKind::kEmpty: n = true; break;
        case ExprKind::kLiteral: n = e.text.empty(); break;
        case ExprKind::kSeq:
          n = true;
          for (ExprId k : e.kids) n = n && *known(k);
          break;
        case ExprKind::kAlt:
          for (ExprId k : e.kids) n = n || *known(k);
          break;
        case ExprKind::kRepeat: n = e.min == 0 || *known(e.kids[0]); break;
        default: n = false; break;
      }
      done[id] = n;
    }
    return *known(root);
  }
  bool Nullable(const Piece& p) const { return Nullable(p.free) || (p.has_end && Nullable(p.end)); }

  Result<Piece> ParseAlt(uint32_t depth) {
    std::vector<ExprId> alts, ends;
    while (true) {
      DI_ASSIGN_OR_RETURN(Piece seq, ParseSeq(depth));
      alts.push_back(seq.free);
      if (seq.has_end) ends.push_back(seq.end);
      if (Peek('|')) {
        ++pos_;
        continue;
      }
      Piece out{g_->Alt(std::move(alts))};
      if (!ends.empty()) out.end = g_->Alt(std::move(ends)), out.has_end = true;
      return out;
    }
  }

  Result<Piece> ParseSeq(uint32_t depth) {
    if (depth > o_.max_depth) return Status::ResourceExhausted("regex: groups nest deeper than " + std::to_string(o_.max_depth));
    std::vector<Piece> items;
    while (pos_ < p_.size()) {
      char c = p_[pos_];
      if (c == '|' || c == ')') break;
      if (c == '$') {
        // An end anchor at the end of a top-level alternative: Run() takes it.
        if (depth == 0 && (pos_ + 1 == p_.size() || p_[pos_ + 1] == '|')) break;
        ++pos_;
        items.push_back(Piece{g_->Nothing(), g_->Empty(), true});
        continue;
      }
      if (c == '^') return Unsupported("an anchor (^) inside the pattern");
      DI_ASSIGN_OR_RETURN(Piece atom, ParseAtom(depth));
      DI_ASSIGN_OR_RETURN(Piece quantified, ParseQuantifier(atom));
      items.push_back(quantified);
    }
    // free: every item free; end: items 0..k-1 free, item k passing its `$`, and the rest empty.
    std::vector<ExprId> frees, ends;
    for (const auto& it : items) frees.push_back(it.free);
    for (size_t k = 0; k < items.size(); ++k) {
      if (!items[k].has_end) continue;
      bool rest_empty = true;
      for (size_t j = k + 1; j < items.size() && rest_empty; ++j) rest_empty = Nullable(items[j]);
      if (!rest_empty) continue;
      std::vector<ExprId> parts(frees.begin(), frees.begin() + static_cast<std::ptrdiff_t>(k));
      parts.push_back(items[k].end);
      ends.push_back(g_->Seq(std::move(parts)));
    }
    Piece out{g_->Seq(std::move(frees))};
    if (!ends.empty()) out.end = g_->Alt(std::move(ends)), out.has_end = true;
    return out;
  }

  Result<Piece> ParseQuantifier(Piece atom) {
    if (pos_ >= p_.size()) return atom;
    uint32_t min = 1, max = 1;
    char c = p_[pos_];
    if (c == '*') {
      min = 0, max = kUnbounded, ++pos_;
    } else if (c == '+') {
      min = 1, max = kUnbounded, ++pos_;
    } else if (c == '?') {
      min = 0, max = 1, ++pos_;
    } else if (c == '{') {
      size_t save = pos_;
      ++pos_;
      uint64_t a = 0, b = 0;
      bool have_a = ReadNumber(&a);
      bool comma = false, have_b = false;
      if (have_a && Peek(',')) {
        comma = true;
        ++pos_;
        have_b = ReadNumber(&b);
      }
      if (!have_a || !Peek('}')) {  // not a quantifier: a literal '{' (Annex B)
        pos_ = save;
        return atom;
      }
      ++pos_;
      if (a > 1000000 || b > 1000000) return Status::ResourceExhausted("regex: a repetition count above 1000000");
      min = static_cast<uint32_t>(a);
      max = comma ? (have_b ? static_cast<uint32_t>(b) : kUnbounded) : min;
      if (max < min) return Error("a {n,m} quantifier with m < n");
    } else {
      return atom;
    }
    if (Peek('?')) ++pos_;  // lazy: same language
    if (pos_ < p_.size() && (p_[pos_] == '*' || p_[pos_] == '+' || p_[pos_] == '?' || p_[pos_] == '{')) {
      if (p_[pos_] != '{') return Error("nothing to repeat");
    }
    Piece out{g_->Repeat(atom.free, min, max)};
    // Passing the `$`: some free rounds, then the round that ends; rounds after it match the empty
    // string, and count towards `min` only if a round can.
    if (atom.has_end && max > 0) {
      const uint32_t lo = Nullable(atom) ? 0 : (min > 0 ? min - 1 : 0);
      const uint32_t hi = max == kUnbounded ? kUnbounded : max - 1;
      if (lo <= hi) out.end = g_->Seq({g_->Repeat(atom.free, lo, hi), atom.end}), out.has_end = true;
    }
    return out;
  }

  bool ReadNumber(uint64_t* out) {
    size_t start = pos_;
    *out = 0;
    while (pos_ < p_.size() && p_[pos_] >= '0' && p_[pos_] <= '9') {
      if (*out < 100000000) *out = *out * 10 + static_cast<uint64_t>(p_[pos_] - '0');
      ++pos_;
    }
    return pos_ > start;
  }

  Result<uint32_t> ReadCodePoint() {
    char32_t cp;
    size_t n = utf8::Decode(p_, pos_, &cp);
    if (n == 0) return Error("invalid UTF-8");
    pos_ += n;
    return static_cast<uint32_t>(cp);
  }

  Result<Piece> ParseAtom(uint32_t depth) {
    char c = p_[pos_];
    switch (c) {
      case '(': {
        ++pos_;
        if (Peek('?')) {
          ++pos_;
          if (Peek(':')) {
            ++pos_;
          } else if (Peek('=') || Peek('!')) {
            return Unsupported("look-ahead");
          } else if (Peek('<')) {
            ++pos_;
            if (Peek('=') || Peek('!')) return Unsupported("look-behind");
            while (pos_ < p_.size() && p_[pos_] != '>') ++pos_;
            if (!Peek('>')) return Error("unterminated group name");
            ++pos_;
          } else {
            return Unsupported("the group modifier (?" + std::string(1, pos_ < p_.size() ? p_[pos_] : ' '));
          }
        }
        DI_ASSIGN_OR_RETURN(Piece inner, ParseAlt(depth + 1));
        if (!Peek(')')) return Error("missing ')'");
        ++pos_;
        return inner;
      }
      case '[': {
        DI_ASSIGN_OR_RETURN(ExprId cls, ParseClass());
        return Piece{cls};
      }
      case '.':
        ++pos_;
        return Piece{Char(Complement({{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}))};
      case '*':
      case '+':
      case '?':
        return Error("nothing to repeat");
      case '\\': {
        ++pos_;
        if (pos_ >= p_.size()) return Error("a trailing backslash");
        char e = p_[pos_];
        if (e == 'b' || e == 'B') return Unsupported("a word boundary (\\b, \\B)");
        if (e >= '1' && e <= '9') return Unsupported("a backreference");
        if (e == 'k') return Unsupported("a named backreference");
        Ranges r;
        DI_RETURN_IF_ERROR(ParseEscape(false, &r));
        return Piece{Char(std::move(r))};
      }
      default: {
        DI_ASSIGN_OR_RETURN(uint32_t cp, ReadCodePoint());
        return Piece{Char(Ranges{{cp, cp}})};
      }
    }
  }

  // After the backslash; fills the ranges the escape stands for.
  Status ParseEscape(bool in_class, Ranges* r) {
    char e = p_[pos_++];
    auto set = [&](const Ranges& s) { r->insert(r->end(), s.begin(), s.end()); };
    switch (e) {
      case 'd': set(Digits()); return Status::Ok();
      case 'D': set(Complement(Digits())); return Status::Ok();
      case 'w': set(Word()); return Status::Ok();
      case 'W': set(Complement(Word())); return Status::Ok();
      case 's': set(Space()); return Status::Ok();
      case 'S': set(Complement(Space())); return Status::Ok();
      case 'n': r->push_back({'\n', '\n'}); return Status::Ok();
      case 'r': r->push_back({'\r', '\r'}); return Status::Ok();
      case 't': r->push_back({'\t', '\t'}); return Status::Ok();
      case 'f': r->push_back({'\f', '\f'}); return Status::Ok();
      case 'v': r->push_back({'\v', '\v'}); return Status::Ok();
      case '0': r->push_back({0, 0}); return Status::Ok();
      case 'b':
        if (in_class) {
          r->push_back({'\b', '\b'});
          return Status::Ok();
        }
        return Unsupported("a word boundary");
      case 'c': {
        if (pos_ < p_.size() && ((p_[pos_] >= 'a' && p_[pos_] <= 'z') || (p_[pos_] >= 'A' && p_[pos_] <= 'Z'))) {
          uint32_t v = static_cast<uint32_t>(p_[pos_++]) % 32;
          r->push_back({v, v});
          return Status::Ok();
        }
        r->push_back({'\\', '\\'});
        --pos_;
        return Status::Ok();
      }
      case 'x': {
        uint32_t v = 0;
        if (!ReadHex(2, &v)) return Error("a \\x escape needs two hex digits");
        r->push_back({v, v});
        return Status::Ok();
      }
      case 'u': {
        uint32_t v = 0;
        if (Peek('{')) {
          ++pos_;
          size_t digits = 0;
          while (pos_ < p_.size() && p_[pos_] != '}' && digits < 8) {
            uint32_t d;
            if (!HexDigit(p_[pos_], &d)) return Error("a bad \\u{...} escape");
            v = v * 16 + d;
            ++pos_, ++digits;
          }
          if (!Peek('}') || digits == 0 || v > 0x10FFFF) return Error("a bad \\u{...} escape");
          ++pos_;
        } else if (!ReadHex(4, &v)) {
          return Error("a \\u escape needs four hex digits");
        }
        if (v >= 0xD800 && v <= 0xDBFF && pos_ + 1 < p_.size() && p_[pos_] == '\\' && p_[pos_ + 1] == 'u') {
          size_t save = pos_;
          pos_ += 2;
          uint32_t lo = 0;
          if (ReadHex(4, &lo) && lo >= 0xDC00 && lo <= 0xDFFF) {
            v = 0x10000 + ((v - 0xD800) << 10) + (lo - 0xDC00);
          } else {
            pos_ = save;
          }
        }
        if (v >= 0xD800 && v <= 0xDFFF) return Unsupported("a lone surrogate escape");
        r->push_back({v, v});
        return Status::Ok();
      }
      case 'p':
      case 'P':
        return Unsupported("a Unicode property escape (\\p{...})");
      default: {
        --pos_;
        DI_ASSIGN_OR_RETURN(uint32_t cp, ReadCodePoint());
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || (cp >= '0' && cp <= '9' && !in_class))
          return Unsupported(std::string("the escape \\") + static_cast<char>(cp));
        r->push_back({cp, cp});
        return Status::Ok();
      }
    }
  }

  static bool HexDigit(char c, uint32_t* d) {
    if (c >= '0' && c <= '9') return *d = static_cast<uint32_t>(c - '0'), true;
    if (c >= 'a' && c <= 'f') return *d = static_cast<uint32_t>(c - 'a' + 10), true;
    if (c >= 'A' && c <= 'F') return *d = static_cast<uint32_t>(c - 'A' + 10), true;
    return false;
  }
  bool ReadHex(int n, uint32_t* v) {
    *v = 0;
    for (int i = 0; i < n; ++i) {
      uint32_t d;
      if (pos_ >= p_.size() || !HexDigit(p_[pos_], &d)) return false;
      *v = *v * 16 + d;
      ++pos_;
    }
    return true;
  }

  Result<ExprId> ParseClass() {
    ++pos_;  // '['
    bool negate = false;
    if (Peek('^')) {
      negate = true;
      ++pos_;
    }
    Ranges r;
    bool first = true;
    while (true) {
      if (pos_ >= p_.size()) return Error("missing ']'");
      if (p_[pos_] == ']' && !(first && false)) break;
      first = false;
      Ranges lo_set;
      DI_RETURN_IF_ERROR(ClassAtom(&lo_set));
      if (Peek('-') && pos_ + 1 < p_.size() && p_[pos_ + 1] != ']') {
        ++pos_;
        Ranges hi_set;
        DI_RETURN_IF_ERROR(ClassAtom(&hi_set));
        if (lo_set.size() != 1 || hi_set.size() != 1 || lo_set[0].first != lo_set[0].second ||
            hi_set[0].first != hi_set[0].second) {
          // Annex B: a class escape at either end makes '-' literal.
          r.insert(r.end(), lo_set.begin(), lo_set.end());
          r.push_back({'-', '-'});
          r.insert(r.end(), hi_set.begin(), hi_set.end());
          continue;
        }
        if (hi_set[0].first < lo_set[0].first) return Error("a class range out of order");
        r.push_back({lo_set[0].first, hi_set[0].first});
        continue;
      }
      r.insert(r.end(), lo_set.begin(), lo_set.end());
    }
    ++pos_;  // ']'
    if (negate) r = Complement(std::move(r));
    NormalizeRanges(&r);
    if (r.empty()) return g_->Nothing();
    return Char(std::move(r));
  }

  Status ClassAtom(Ranges* r) {
    if (p_[pos_] == '\\') {
      ++pos_;
      if (pos_ >= p_.size()) return Error("a trailing backslash");
      if (p_[pos_] == 'B') return Unsupported("\\B in a class");
      if (p_[pos_] == '-') {
        ++pos_;
        r->push_back({'-', '-'});
        return Status::Ok();
      }
      return ParseEscape(true, r);
    }
    DI_ASSIGN_OR_RETURN(uint32_t cp, ReadCodePoint());
    r->push_back({cp, cp});
    return Status::Ok();
  }

  std::string_view p_;
  const RegexOptions& o_;
  Grammar* g_;
  size_t pos_ = 0;
};

}  // namespace

namespace {

// The top-level alternatives of a pattern, split at the bars outside groups and classes (escapes kept).
std::vector<std::string> TopAlternatives(std::string_view p) {
  std::vector<std::string> out(1);
  int depth = 0;
  bool in_class = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\' && i + 1 < p.size()) {
      out.back() += p.substr(i, 2);
      ++i;
      continue;
    }
    if (in_class) in_class = c != ']';
    else if (c == '[') in_class = true;
    else if (c == '(') ++depth;
    else if (c == ')') --depth;
    else if (c == '|' && depth == 0) {
      out.emplace_back();
      continue;
    }
    out.back() += c;
  }
  return out;
}

// An alternative that is one group, "(x|y)" or "(?:x|y)" with nothing after it, says the same as its
// alternatives at the top, where ^ and $ at their ends are anchors the parser takes ("(^a$)|b").
std::string UnwrapWholeGroups(std::string_view pattern) {
  std::vector<std::string> alts = TopAlternatives(pattern);
  std::string out;
  for (size_t round = 0; round < alts.size() && round < 1000; ++round) {
    bool changed = false;
    std::vector<std::string> next;
    for (const std::string& a : alts) {
      size_t open = 0;
      if (a.size() >= 2 && a[0] == '(' && a.back() == ')') open = a.rfind("(?:", 0) == 0 ? 3 : (a.size() > 1 && a[1] == '?' ? 0 : 1);
      // The group must close at the last character: its inner alternatives stand alone.
      bool whole = open > 0;
      if (whole) {
        int depth = 0;
        bool in_class = false;
        for (size_t i = 0; i < a.size() && whole; ++i) {
          const char c = a[i];
          if (c == '\\') {
            ++i;
            continue;
          }
          if (in_class) in_class = c != ']';
          else if (c == '[') in_class = true;
          else if (c == '(') ++depth;
          else if (c == ')' && --depth == 0 && i + 1 != a.size()) whole = false;
        }
      }
      if (!whole) {
        next.push_back(a);
        continue;
      }
      for (auto& inner : TopAlternatives(std::string_view(a).substr(open, a.size() - open - 1))) next.push_back(std::move(inner));
      changed = true;
    }
    alts = std::move(next);
    if (!changed) break;
  }
  for (size_t i = 0; i < alts.size(); ++i) out += (i ? "|" : "") + alts[i];
  return out;
}

}  // namespace

Result<ExprId> CompileRegex(std::string_view pattern, const RegexOptions& options, Grammar* g) {
  // Only where an anchor sits inside a group: the rewrite is exact, but error offsets would move.
  if (pattern.find('(') != std::string_view::npos && pattern.find('^', 1) != std::string_view::npos) {
    const std::string unwrapped = UnwrapWholeGroups(pattern);
    Parser p(unwrapped, options, g);
    return p.Run();
  }
  Parser p(pattern, options, g);
  return p.Run();
}

}  // namespace deepinfer::grammar
