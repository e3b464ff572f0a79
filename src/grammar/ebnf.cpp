#include "grammar/ebnf.h"

#include <map>
#include <string>

#include "core/utf8.h"

namespace deepinfer::grammar {

namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

class EbnfParser {
 public:
  EbnfParser(std::string_view t, const EbnfOptions& o) : t_(t), o_(o) {}

  Result<Grammar> Run() {
    if (t_.size() > o_.max_length) return Status::ResourceExhausted("the grammar is longer than " + std::to_string(o_.max_length) + " bytes");
    if (!utf8::IsValid(t_)) return Status::InvalidArgument("the grammar is not valid UTF-8");
    std::vector<uint32_t> order;
    while (true) {
      SkipSpace();
      if (pos_ >= t_.size()) break;
      std::string name = Name();
      if (name.empty()) return Error("expected a rule name");
      SkipSpace();
      if (t_.substr(pos_, 3) != "::=") return Error("expected '::=' after '" + name + "'");
      pos_ += 3;
      uint32_t rule = RuleId(name);
      if (g_.rules()[rule].defined) return Error("rule '" + name + "' is defined twice");
      DI_ASSIGN_OR_RETURN(ExprId body, Alternatives(0));
      g_.Define(rule, body);
      order.push_back(rule);
      if (g_.rules().size() > o_.max_rules) return Status::ResourceExhausted("more than " + std::to_string(o_.max_rules) + " rules");
    }
    if (order.empty()) return Status::InvalidArgument("the grammar defines no rule");
    int32_t root = g_.FindRule("root");
    g_.set_root(root >= 0 && g_.rules()[root].defined ? static_cast<uint32_t>(root) : order[0]);
    for (const Rule& r : g_.rules())
      if (!r.defined) return Status::InvalidArgument("rule '" + r.name + "' is used but not defined");
    return std::move(g_);
  }

 private:
  Status Error(const std::string& what) const {
    size_t line = 1;
    for (size_t i = 0; i < pos_ && i < t_.size(); ++i) line += t_[i] == '\n';
    return Status::InvalidArgument("grammar line " + std::to_string(line) + ": " + what);
  }
  void SkipSpace() {
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c == '#') {
        while (pos_ < t_.size() && t_[pos_] != '\n') ++pos_;
      } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++pos_;
      } else {
        break;
      }
    }
  }
  static bool NameChar(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.';
  }
  std::string Name() {
    size_t start = pos_;
    while (pos_ < t_.size() && NameChar(t_[pos_]) && !(t_[pos_] == '.' && pos_ == start)) ++pos_;
    return std::string(t_.substr(start, pos_ - start));
  }
  uint32_t RuleId(const std::string& name) {
    auto it = ids_.find(name);
    if (it != ids_.end()) return it->second;
    uint32_t r = g_.AddRule(name);
    ids_[name] = r;
    return r;
  }
  // Whether a rule definition (`name ::=`) starts at pos_.
  bool AtDefinition() const {
    size_t p = pos_;
    while (p < t_.size() && NameChar(t_[p])) ++p;
    if (p == pos_) return false;
    while (p < t_.size() && (t_[p] == ' ' || t_[p] == '\t' || t_[p] == '\n' || t_[p] == '\r')) ++p;
    return t_.substr(p, 3) == "::=";
  }

  Result<ExprId> Alternatives(uint32_t depth) {
    if (depth > o_.max_depth) return Status::ResourceExhausted("the grammar nests deeper than " + std::to_string(o_.max_depth));
    std::vector<ExprId> alts;
    while (true) {
      DI_ASSIGN_OR_RETURN(ExprId seq, Sequence(depth));
      alts.push_back(seq);
      SkipSpace();
      if (pos_ < t_.size() && t_[pos_] == '|') {
        ++pos_;
        continue;
      }
      return g_.Alt(std::move(alts));
    }
  }

  Result<ExprId> Sequence(uint32_t depth) {
    std::vector<ExprId> items;
    while (true) {
      SkipSpace();
      if (pos_ >= t_.size()) break;
      char c = t_[pos_];
      if (c == '|' || c == ')') break;
      if (AtDefinition()) break;
      DI_ASSIGN_OR_RETURN(ExprId atom, Atom(depth));
      DI_ASSIGN_OR_RETURN(ExprId q, Quantified(atom));
      items.push_back(q);
    }
    return g_.Seq(std::move(items));
  }

  Result<ExprId> Quantified(ExprId atom) {
    while (pos_ < t_.size()) {
      char c = t_[pos_];
      if (c == '*') {
        ++pos_, atom = g_.Star(atom);
      } else if (c == '+') {
        ++pos_, atom = g_.Plus(atom);
      } else if (c == '?') {
        ++pos_, atom = g_.Optional(atom);
      } else if (c == '{') {
        ++pos_;
        SkipSpace();
        uint64_t a = 0, b = 0;
        if (!Number(&a)) return Error("expected a number after '{'");
        SkipSpace();
        uint32_t max = static_cast<uint32_t>(a);
        if (pos_ < t_.size() && t_[pos_] == ',') {
          ++pos_;
          SkipSpace();
          max = Number(&b) ? static_cast<uint32_t>(b) : kUnbounded;
          SkipSpace();
        }
        if (pos_ >= t_.size() || t_[pos_] != '}') return Error("expected '}'");
        ++pos_;
        if (max != kUnbounded && max < a) return Error("a {n,m} repetition with m < n");
        atom = g_.Repeat(atom, static_cast<uint32_t>(a), max);
      } else {
        break;
      }
    }
    return atom;
  }

  bool Number(uint64_t* v) {
    size_t start = pos_;
    *v = 0;
    while (pos_ < t_.size() && t_[pos_] >= '0' && t_[pos_] <= '9') {
      if (*v < 100000000) *v = *v * 10 + static_cast<uint64_t>(t_[pos_] - '0');
      ++pos_;
    }
    return pos_ > start;
  }

  Result<uint32_t> CodePoint() {
    char32_t cp;
    size_t n = utf8::Decode(t_, pos_, &cp);
    if (n == 0) return Error("invalid UTF-8");
    pos_ += n;
    return static_cast<uint32_t>(cp);
  }
  Result<uint32_t> Hex(int n) {
    uint32_t v = 0;
    for (int i = 0; i < n; ++i) {
      if (pos_ >= t_.size()) return Error("a short hex escape");
      char c = t_[pos_++];
      uint32_t d;
      if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
      else return Error("a bad hex escape");
      v = v * 16 + d;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return Error("an escape outside Unicode scalar values");
    return v;
  }
  // One possibly escaped character inside a string or class.
  Result<uint32_t> Char() {
    if (t_[pos_] != '\\') return CodePoint();
    ++pos_;
    if (pos_ >= t_.size()) return Error("a trailing backslash");
    char e = t_[pos_++];
    switch (e) {
      case 'n': return 10u;
      case 'r': return 13u;
      case 't': return 9u;
      case 'f': return 12u;
      case 'v': return 11u;
      case 'b': return 8u;
      case '0': return 0u;
      case 'x': return Hex(2);
      case 'u': return Hex(4);
      case 'U': return Hex(8);
      default:
        --pos_;
        return CodePoint();
    }
  }

  Result<ExprId> Atom(uint32_t depth) {
    char c = t_[pos_];
    if (c == '"' || c == '\'') {
      ++pos_;
      std::string lit;
      while (true) {
        if (pos_ >= t_.size()) return Error("an unterminated string");
        if (t_[pos_] == c) break;
        DI_ASSIGN_OR_RETURN(uint32_t cp, Char());
        utf8::Append(lit, cp);
      }
      ++pos_;
      return g_.Literal(lit);
    }
    if (c == '[') {
      ++pos_;
      bool negate = pos_ < t_.size() && t_[pos_] == '^';
      if (negate) ++pos_;
      Ranges r;
      while (true) {
        if (pos_ >= t_.size()) return Error("an unterminated character class");
        if (t_[pos_] == ']') break;
        DI_ASSIGN_OR_RETURN(uint32_t lo, Char());
        uint32_t hi = lo;
        if (pos_ + 1 < t_.size() && t_[pos_] == '-' && t_[pos_ + 1] != ']') {
          ++pos_;
          DI_ASSIGN_OR_RETURN(hi, Char());
          if (hi < lo) return Error("a class range out of order");
        }
        r.push_back({lo, hi});
      }
      ++pos_;
      NormalizeRanges(&r);
      if (negate) {
        Ranges out;
        uint32_t next = 0;
        for (auto [lo, hi] : r) {
          if (lo > next) out.push_back({next, lo - 1});
          next = hi + 1;
        }
        if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
        r = std::move(out);
      }
      return g_.Chars(std::move(r));
    }
    if (c == '(') {
      ++pos_;
      DI_ASSIGN_OR_RETURN(ExprId inner, Alternatives(depth + 1));
      SkipSpace();
      if (pos_ >= t_.size() || t_[pos_] != ')') return Error("missing ')'");
      ++pos_;
      return inner;
    }
    if (c == '.') {
      ++pos_;
      return g_.Chars({{0, 0x10FFFF}});
    }
    std::string name = Name();
    if (name.empty()) return Error(std::string("unexpected character '") + c + "'");
    return g_.Ref(RuleId(name));
  }

  std::string_view t_;
  const EbnfOptions& o_;
  Grammar g_;
  std::map<std::string, uint32_t> ids_;
  size_t pos_ = 0;
};

}  // namespace

Result<Grammar> ParseEbnf(std::string_view text, const EbnfOptions& options) {
  EbnfParser p(text, options);
  return p.Run();
}

}  // namespace deepinfer::grammar
