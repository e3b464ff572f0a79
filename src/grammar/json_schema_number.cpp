// Numbers of the JSON Schema front end: canonical decimal ranges for minimum/maximum (exclusive or not) and
// multipleOf, built digit by digit from the bounds.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::json_schema_internal {

namespace {

struct Piece {  // an integer-part range and a fraction class
  uint64_t lo;
  std::optional<uint64_t> hi;  // nullopt: unbounded
  int frac;                    // 0 any, 1 zero, 2 positive
};

std::string Digits(uint64_t v) { return std::to_string(v); }

constexpr double kTwoTo64 = 18446744073709551616.0;

class NumberBuilder {
 public:
  NumberBuilder(Grammar* g, bool integer_fraction) : g_(*g), integer_fraction_(integer_fraction) {}

  ExprId Frac(int cls) {
    ExprId digits = g_.Star(g_.Chars({{'0', '9'}}));
    switch (cls) {
      case 1:
        if (!integer_fraction_) return g_.Empty();
        return g_.Optional(g_.Seq({Lit("."), g_.Plus(Lit("0"))}));
      case 2:
        return g_.Seq({Lit("."), digits, g_.Chars({{'1', '9'}}), digits});
      default:
        return g_.Optional(g_.Seq({Lit("."), g_.Plus(g_.Chars({{'0', '9'}}))}));
    }
  }
  ExprId NumberAny(bool integer) {
    ExprId intpart = g_.Alt({Lit("0"), g_.Seq({g_.Chars({{'1', '9'}}), g_.Star(g_.Chars({{'0', '9'}}))})});
    if (integer) return g_.Seq({g_.Optional(Lit("-")), intpart, Frac(1)});
    ExprId exp = g_.Optional(g_.Seq({g_.Chars({{'e', 'e'}, {'E', 'E'}}), g_.Optional(g_.Chars({{'+', '+'}, {'-', '-'}})),
                                     g_.Plus(g_.Chars({{'0', '9'}}))}));
    return g_.Seq({g_.Optional(Lit("-")), intpart, Frac(0), exp});
  }

  // Digit strings of the same length between lo and hi (inclusive). 0...0 to 9...9 is any n digits, taken
  // as one piece: split like any other range, both of its sides split again, and a 16-digit bound made
  // 2^16 alternatives. With it, each side of a split is a chain of one alternative per digit.
  ExprId FixedLen(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return g_.Empty();
    if (lo.find_first_not_of('0') == std::string::npos && hi.find_first_not_of('9') == std::string::npos)
      return g_.Repeat(g_.Chars({{'0', '9'}}), static_cast<uint32_t>(lo.size()), static_cast<uint32_t>(lo.size()));
    if (lo.size() == 1) return g_.Chars({{static_cast<uint32_t>(lo[0]), static_cast<uint32_t>(hi[0])}});
    if (lo[0] == hi[0]) return g_.Seq({Lit(std::string(1, lo[0])), FixedLen(lo.substr(1), hi.substr(1))});
    size_t n = lo.size() - 1;
    std::vector<ExprId> alts;
    alts.push_back(g_.Seq({Lit(std::string(1, lo[0])), FixedLen(lo.substr(1), std::string(n, '9'))}));
    if (hi[0] - lo[0] > 1)
      alts.push_back(g_.Seq({g_.Chars({{static_cast<uint32_t>(lo[0] + 1), static_cast<uint32_t>(hi[0] - 1)}}),
                             g_.Repeat(g_.Chars({{'0', '9'}}), static_cast<uint32_t>(n), static_cast<uint32_t>(n))}));
    alts.push_back(g_.Seq({Lit(std::string(1, hi[0])), FixedLen(std::string(n, '0'), hi.substr(1))}));
    return g_.Alt(std::move(alts));
  }
  // Canonical decimal integers in [lo, hi].
  ExprId IntRange(uint64_t lo, std::optional<uint64_t> hi) {
    if (hi && *hi < lo) return g_.Nothing();
    std::string a = Digits(lo);
    std::vector<ExprId> alts;
    std::string top = hi ? Digits(*hi) : std::string();
    size_t max_len = hi ? top.size() : a.size();
    for (size_t len = a.size(); len <= max_len; ++len) {
      // The smallest value of this length: lo itself, else 10^(len-1).
      std::string l = len == a.size() ? a : std::string(len, '0');
      if (len != a.size()) l[0] = '1';
      std::string h = (hi && len == top.size()) ? top : std::string(len, '9');
      alts.push_back(FixedLen(l, h));
    }
    if (!hi)
      alts.push_back(g_.Seq({g_.Chars({{'1', '9'}}), g_.Repeat(g_.Chars({{'0', '9'}}), static_cast<uint32_t>(a.size()), kUnbounded)}));
    return g_.Alt(std::move(alts));
  }

  // Non-negative numbers m with lo <(=) m <(=) hi, as pieces.
  static std::vector<Piece> Magnitude(std::optional<uint64_t> lo, bool lo_excl, std::optional<uint64_t> hi, bool hi_excl) {
    std::vector<Piece> lower, upper, out;
    if (!lo) lower.push_back({0, std::nullopt, 0});
    else if (!lo_excl) lower.push_back({*lo, std::nullopt, 0});
    else lower = {{*lo + 1, std::nullopt, 0}, {*lo, *lo, 2}};
    if (!hi) upper.push_back({0, std::nullopt, 0});
    else if (!hi_excl) upper = {{0, *hi == 0 ? std::optional<uint64_t>() : std::optional<uint64_t>(*hi - 1), 0}, {*hi, *hi, 1}};
    else if (*hi > 0) upper.push_back({0, *hi - 1, 0});
    if (hi && !hi_excl && *hi == 0) upper = {{0, 0, 1}};
    for (const Piece& a : lower)
      for (const Piece& b : upper) {
        uint64_t l = std::max(a.lo, b.lo);
        std::optional<uint64_t> h = !a.hi ? b.hi : !b.hi ? a.hi : std::optional<uint64_t>(std::min(*a.hi, *b.hi));
        if (h && *h < l) continue;
        int f = a.frac == 0 ? b.frac : b.frac == 0 ? a.frac : (a.frac == b.frac ? a.frac : -1);
        if (f < 0) continue;
        out.push_back({l, h, f});
      }
    return out;
  }

  // Decimal bounds with a fraction (number schemas; integers round their bounds instead). A bound is the
  // shortest decimal that reads back as its double (what the schema's text says, e.g. 0.1), and numbers
  // compare with it as exact decimals, digit by digit: the integer part first, then the fraction at the
  // bound's own integer part.
  struct Dec {
    uint64_t whole = 0;
    std::string frac;  // the fraction's digits, no trailing zeros
  };
  static Result<std::optional<Dec>> ToDec(double v, const std::string& path) {
    v = std::fabs(v);
    if (!std::isfinite(v)) return std::optional<Dec>();
    // Past 2^64 the whole part has no uint64: refused, since reading it as no bound would let through
    // numbers beyond it.
    if (v >= kTwoTo64) return Unsupported("a numeric bound at or past 2^64 beside a fractional one", path);
    char buf[512];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
    if (ec != std::errc()) return Unsupported("a numeric bound this precise", path);
    std::string text(buf, end);
    Dec d;
    const size_t dot = text.find('.');
    const std::string whole = text.substr(0, dot);
    d.whole = std::stoull(whole);  // digits only, below 1e18
    if (dot != std::string::npos) d.frac = text.substr(dot + 1);
    while (!d.frac.empty() && d.frac.back() == '0') d.frac.pop_back();
    if (d.frac.size() > 40) return Unsupported("a numeric bound with more than 40 fraction digits", path);
    return std::optional<Dec>(d);
  }
  // "." and the first n digits of d (appended piecewise: GCC 12 warns, wrongly, on "." + d.substr()).
  ExprId Dot(const std::string& d, size_t n) {
    std::string text(1, '.');
    text.append(d, 0, n);
    return Lit(text);
  }
  ExprId Digit(char lo, char hi) { return g_.Chars({{static_cast<uint32_t>(lo), static_cast<uint32_t>(hi)}}); }
  ExprId AnyDigits() { return g_.Star(Digit('0', '9')); }
  // Fractions (".digits", or none where the value 0 qualifies) whose value is >= / > / <= / < 0.D.
  ExprId FracAbove(const std::string& d, bool strict) {
    std::vector<ExprId> alts;
    for (size_t i = 0; i < d.size(); ++i)
      if (d[i] < '9') alts.push_back(g_.Seq({Dot(d, i), Digit(static_cast<char>(d[i] + 1), '9'), AnyDigits()}));
    if (strict) alts.push_back(g_.Seq({Dot(d, d.size()), AnyDigits(), Digit('1', '9'), AnyDigits()}));
    else if (!d.empty()) alts.push_back(g_.Seq({Dot(d, d.size()), AnyDigits()}));
    else alts.push_back(Frac(0));  // >= 0: any fraction or none
    return g_.Alt(std::move(alts));
  }
  ExprId FracBelow(const std::string& e, bool strict) {
    std::vector<ExprId> alts = {g_.Empty()};  // no fraction: 0 < 0.E (and 0 <= 0.E)
    if (e.empty()) return strict ? g_.Nothing() : g_.Optional(g_.Seq({Lit("."), g_.Plus(Lit("0"))}));
    for (size_t i = 0; i < e.size(); ++i) {
      if (e[i] > '0') alts.push_back(g_.Seq({Dot(e, i), Digit('0', static_cast<char>(e[i] - 1)), AnyDigits()}));
      if (i > 0) alts.push_back(Dot(e, i));  // a proper prefix: E has more, non-zero
    }
    if (!strict) alts.push_back(g_.Seq({Dot(e, e.size()), g_.Star(Lit("0"))}));
    return g_.Alt(std::move(alts));
  }
  // Non-negative magnitudes between a (or 0) and b (or unbounded), each bound exclusive or not.
  ExprId Magnitudes(const std::optional<Dec>& a, bool a_excl, const std::optional<Dec>& b, bool b_excl, int frac_digits) {
    const uint64_t ia = a ? a->whole : 0;
    auto limit = [&](ExprId f) {
      if (frac_digits < 0) return f;
      ExprId d = Digit('0', '9');
      return g_.And(f, g_.Optional(g_.Seq({Lit("."), g_.Repeat(d, 1, static_cast<uint32_t>(frac_digits)), g_.Star(Lit("0"))})));
    };
    const ExprId low = a ? FracAbove(a->frac, a_excl) : Frac(0);
    const ExprId high = b ? FracBelow(b->frac, b_excl) : Frac(0);
    if (b && b->whole < ia) return g_.Nothing();
    if (b && b->whole == ia) return g_.Seq({Lit(Digits(ia)), limit(g_.And(low, high))});
    std::vector<ExprId> parts = {g_.Seq({Lit(Digits(ia)), limit(low)})};
    if (!b || b->whole >= ia + 2)
      parts.push_back(g_.Seq({IntRange(ia + 1, b ? std::optional<uint64_t>(b->whole - 1) : std::nullopt), limit(Frac(0))}));
    if (b) parts.push_back(g_.Seq({Lit(Digits(b->whole)), limit(high)}));
    return g_.Alt(std::move(parts));
  }
  Result<ExprId> Decimal(std::optional<double> lo, bool lo_excl, std::optional<double> hi, bool hi_excl, int frac_digits,
                         const std::string& path) {
    std::vector<ExprId> alts;
    if (!hi || *hi > 0 || (*hi == 0 && !hi_excl)) {  // x >= 0
      std::optional<Dec> a, b;
      if (lo && *lo >= 0) {
        DI_ASSIGN_OR_RETURN(a, ToDec(*lo, path));
      }
      if (hi) {
        DI_ASSIGN_OR_RETURN(b, ToDec(*hi, path));
      }
      alts.push_back(Magnitudes(a, lo && *lo >= 0 && lo_excl, b, hi_excl, frac_digits));
    }
    if (!lo || *lo < 0) {  // x < 0: its magnitude is above 0 (or -hi) and at most -lo
      std::optional<Dec> a = Dec{}, b;
      bool a_excl = true;
      if (hi && *hi < 0) {
        DI_ASSIGN_OR_RETURN(a, ToDec(-*hi, path));
        a_excl = hi_excl;
      }
      if (lo) {
        DI_ASSIGN_OR_RETURN(b, ToDec(-*lo, path));
      }
      alts.push_back(g_.Seq({Lit("-"), Magnitudes(a, a_excl, b, lo_excl, frac_digits)}));
    }
    return g_.Alt(std::move(alts));
  }

  // A magnitude bound: `up`, the largest magnitude (then nullopt: none, for an infinite one), else the
  // smallest. Doubles this large are integers, so every bound below 2^64 is exact; a largest magnitude past
  // it becomes 2^64 - 1 (a subset: no valid instance that long is spelled), a smallest one is refused.
  static Result<std::optional<uint64_t>> Bound(double v, bool up, const std::string& path, bool integer) {
    if (!std::isfinite(v)) return std::optional<uint64_t>();
    double r = up ? std::ceil(v) : std::floor(v);
    if (r != v && !integer) return Status::Unimplemented("a non-integral numeric bound at " + path + " is not supported");
    if (std::fabs(r) >= kTwoTo64) {
      if (up) return std::optional<uint64_t>(UINT64_MAX);
      return Unsupported("a numeric bound at or past 2^64", path);
    }
    return std::optional<uint64_t>(static_cast<uint64_t>(std::fabs(r)));
  }

  // The number schema `s`: its range and multipleOf, then the steps the range does not spell by itself
  // ($multiples from merged allOf members, a multipleOf other than 10^k or 10^-k) as remainder automata
  // beside it, and the steps it must not be a multiple of ($not_multiples, from negations) taken out.
  Result<ExprId> Number(const Json& s, bool integer, const std::string& path) {
    std::vector<double> steps, excluded;
    for (const auto& [key, into] : {std::pair{"$multiples", &steps}, std::pair{"$not_multiples", &excluded}}) {
      auto it = s.find(key);
      if (it == s.end()) continue;
      if (!it->is_array()) return Invalid(std::string(key) + " must be an array", path);
      for (const Json& m : *it) {
        if (!m.is_number() || !(m.get<double>() > 0)) return Invalid("multipleOf must be positive", path);
        into->push_back(m.get<double>());
      }
    }
    DI_ASSIGN_OR_RETURN(ExprId out, Range(s, integer, path, &steps));
    for (double m : steps) {
      DI_ASSIGN_OR_RETURN(ExprId multiples, MultiplesOf(m, path));
      out = g_.And(out, multiples);
    }
    if (!excluded.empty()) {
      // The remainder automaton reads plain decimals only: an exponent spelling (1e2) is left out, as it
      // would pass for "not a multiple" whatever its value.
      ExprId digits = g_.Plus(Digit('0', '9'));
      out = g_.And(out, g_.Seq({g_.Optional(Lit("-")), digits, g_.Optional(g_.Seq({Lit("."), digits}))}));
      std::vector<ExprId> multiples;
      for (double m : excluded) {
        DI_ASSIGN_OR_RETURN(ExprId e, MultiplesOf(m, path));
        multiples.push_back(e);
      }
      out = g_.Minus(out, g_.Alt(std::move(multiples)));
    }
    return out;
  }

  // The decimals that are multiples of `step`: the step as the shortest decimal that reads back as its
  // double (what the schema's text says, e.g. 0.25), numerator / 10^fraction digits, and a remainder
  // automaton modulo the numerator (Grammar::Multiple), exact on the digits as written.
  Result<ExprId> MultiplesOf(double step, const std::string& path) {
    // The automaton has numerator * (fraction digits + 3) states; past this the product with the range
    // grows too large to compile within the limits.
    constexpr uint64_t kMaxStates = uint64_t{1} << 16;
    const std::string what = "multipleOf (" + std::to_string(step) + ")";
    char buf[512];
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), step, std::chars_format::fixed);
    if (ec != std::errc() || !std::isfinite(step)) return Unsupported(what, path);
    uint64_t numerator = 0;
    uint32_t fraction_digits = 0;
    bool fraction = false;
    for (const char* c = buf; c != end; ++c) {
      if (*c == '.') {
        fraction = true;
        continue;
      }
      numerator = numerator * 10 + static_cast<uint64_t>(*c - '0');
      fraction_digits += fraction ? 1 : 0;
      if (numerator > kMaxStates || fraction_digits > 30) return Unsupported(what + " with a step of this many digits", path);
    }
    while (fraction_digits > 0 && numerator % 10 == 0) numerator /= 10, --fraction_digits;
    if (numerator == 0 || numerator * (fraction_digits + 3) > kMaxStates)
      return Unsupported(what + " with a step of this many digits", path);
    return g_.Multiple(static_cast<uint32_t>(numerator), fraction_digits);
  }

  // The range and multipleOf of a number schema. A multipleOf the range cannot spell (a step other than
  // 10^k, beyond a small finite range, or other than 10^-k) is added to `steps` instead.
  Result<ExprId> Range(const Json& s, bool integer, const std::string& path, std::vector<double>* steps) {
    std::optional<double> lo, hi;
    bool lo_excl = false, hi_excl = false;
    auto num = [&](const char* k) -> std::optional<double> {
      auto it = s.find(k);
      if (it != s.end() && it->is_number()) return it->get<double>();
      return std::nullopt;
    };
    if (auto v = num("minimum")) lo = v;
    if (auto v = num("maximum")) hi = v;
    if (auto it = s.find("exclusiveMinimum"); it != s.end()) {
      if (it->is_boolean()) lo_excl = it->get<bool>();
      else if (auto v = num("exclusiveMinimum"); v && (!lo || *v >= *lo)) lo = v, lo_excl = true;
    }
    if (auto it = s.find("exclusiveMaximum"); it != s.end()) {
      if (it->is_boolean()) hi_excl = it->get<bool>();
      else if (auto v = num("exclusiveMaximum"); v && (!hi || *v <= *hi)) hi = v, hi_excl = true;
    }
    // The step the range spells itself (an integer), 0 for none.
    double mult = num("multipleOf").value_or(0);
    if (auto it = s.find("multipleOf"); it != s.end() && it->is_number() && !(mult > 0))
      return Invalid("multipleOf must be positive", path);
    int frac_digits = -1;  // -1: any
    bool int_only = integer;
    if (mult > 0) {
      const double m = mult;
      if (m == std::floor(m)) {
        int_only = true;
      } else {
        int k = 0;
        double p = m;
        while (k < 10 && std::fabs(p - std::round(p)) > 1e-9) p *= 10, ++k;
        if (std::fabs(std::round(p) - 1.0) > 1e-9) {
          steps->push_back(m);  // not 10^-k: a remainder automaton
        } else {
          frac_digits = k;
        }
        mult = 0;  // spelled by frac_digits or by `steps`: nothing below reads it
      }
    }
    // Integer-only with a non-integral bound: round the bound inwards.
    if (int_only) {
      if (lo && *lo != std::floor(*lo)) lo = std::floor(*lo), lo_excl = true;
      if (hi && *hi != std::ceil(*hi)) hi = std::ceil(*hi), hi_excl = true;
    }
    auto fractional = [](const std::optional<double>& b) {
      return b && std::isfinite(*b) && *b != std::floor(*b) && std::fabs(*b) < 1e18;
    };
    if (!int_only && (fractional(lo) || fractional(hi))) return Decimal(lo, lo_excl, hi, hi_excl, frac_digits, path);
    bool bounded = lo || hi;
    if (!bounded && frac_digits < 0 && (mult == 0 || mult == 1.0)) return NumberAny(int_only);
    std::vector<ExprId> alts;
    // Non-negative part.
    bool want_nonneg = !hi || *hi > 0 || (*hi == 0 && !hi_excl);
    if (want_nonneg) {
      std::optional<uint64_t> mlo, mhi;
      bool mlo_excl = false;
      if (lo && *lo > 0) {
        DI_ASSIGN_OR_RETURN(mlo, Bound(*lo, false, path, int_only));
        mlo_excl = lo_excl;
      } else if (lo && *lo == 0) {
        mlo = 0, mlo_excl = lo_excl;
      }
      if (hi) {
        DI_ASSIGN_OR_RETURN(mhi, Bound(*hi, true, path, int_only));
      }
      for (const Piece& p : Magnitude(mlo, mlo_excl, mhi, hi && hi_excl)) alts.push_back(PieceExpr(p, int_only, frac_digits));
    }
    bool want_neg = !lo || *lo < 0;
    if (want_neg) {
      std::optional<uint64_t> mlo, mhi;
      bool mlo_excl = true, mhi_excl = false;
      mlo = 0;
      if (hi && *hi < 0) {
        DI_ASSIGN_OR_RETURN(mlo, Bound(-*hi, false, path, int_only));
        mlo_excl = hi_excl;
      }
      if (lo) {
        DI_ASSIGN_OR_RETURN(mhi, Bound(-*lo, true, path, int_only));
        mhi_excl = lo_excl;
      }
      std::vector<ExprId> neg;
      for (const Piece& p : Magnitude(mlo, mlo_excl, mhi, mhi_excl))
        if (!(p.hi && *p.hi == 0 && p.frac == 1)) neg.push_back(PieceExpr(p, int_only, frac_digits));
      if (!neg.empty()) alts.push_back(g_.Seq({Lit("-"), g_.Alt(std::move(neg))}));
    }
    // Bounded on one side only, at zero or beyond it, the sign alone decides: a number on the allowed side
    // keeps JSON's exponent spelling too (1e-06 for minimum 0, as Python writes it), with a nonzero
    // mantissa where zero itself is excluded.
    if (!int_only && frac_digits < 0 && mult == 0) {
      const bool nonneg_any = lo && !hi && *lo <= 0;
      const bool neg_any = hi && !lo && *hi >= 0;
      if (nonneg_any) alts.push_back(Exponential(*lo == 0 && lo_excl));
      if (neg_any) alts.push_back(g_.Seq({Lit("-"), Exponential(*hi == 0 && hi_excl)}));
    }
    ExprId out = g_.Alt(std::move(alts));
    if (mult > 0 && int_only && mult != 1.0) {
      double m = mult;
      double p = m;
      int zeros = 0;
      while (p >= 10 && std::fmod(p, 10) == 0) p /= 10, ++zeros;
      if (p == 1) {
        // Multiples of 10^k: zero, or digits ending in k zeros.
        ExprId tail = g_.Repeat(Lit("0"), static_cast<uint32_t>(zeros), static_cast<uint32_t>(zeros));
        ExprId mults = g_.Seq({g_.Optional(Lit("-")),
                               g_.Alt({Lit("0"), g_.Seq({g_.Chars({{'1', '9'}}), g_.Star(g_.Chars({{'0', '9'}})), tail})}),
                               Frac(1)});
        out = g_.And(out, mults);
      } else if (lo && hi && (*hi - *lo) / m <= 4096) {
        std::vector<ExprId> values;
        for (double v = std::ceil(*lo / m) * m; v <= *hi; v += m) {
          if ((v == *lo && lo_excl) || (v == *hi && hi_excl)) continue;
          values.push_back(g_.Seq({Lit(v < 0 ? "-" : ""), Lit(Digits(static_cast<uint64_t>(std::fabs(v))))}));
        }
        out = g_.Alt(std::move(values));
      } else {
        steps->push_back(m);  // beside the range, as a remainder automaton
      }
    }
    return out;
  }

  // A magnitude with an exponent, (0|[1-9][0-9]*)(\.[0-9]+)?[eE][+-]?[0-9]+; `nonzero`: its mantissa has a
  // nonzero digit.
  ExprId Exponential(bool nonzero) {
    ExprId digit = g_.Chars({{'0', '9'}}), nonzero_digit = g_.Chars({{'1', '9'}});
    ExprId digits = g_.Repeat(digit, 1, kUnbounded);
    ExprId fraction = g_.Optional(g_.Seq({Lit("."), digits}));
    ExprId whole = g_.Seq({nonzero_digit, g_.Star(digit), fraction});
    ExprId small = nonzero ? g_.Seq({Lit("0."), g_.Star(digit), nonzero_digit, g_.Star(digit)})
                           : g_.Seq({Lit("0"), fraction});
    ExprId exponent = g_.Seq({g_.Chars({{'e', 'e'}, {'E', 'E'}}), g_.Optional(g_.Chars({{'+', '+'}, {'-', '-'}})), digits});
    return g_.Seq({g_.Alt({whole, small}), exponent});
  }

  ExprId PieceExpr(const Piece& p, bool int_only, int frac_digits) {
    int cls = int_only ? (p.frac == 2 ? -1 : 1) : p.frac;
    if (cls < 0) return g_.Nothing();
    ExprId frac;
    if (frac_digits >= 0 && cls != 1) {
      ExprId d = g_.Chars({{'0', '9'}});
      ExprId limited = g_.Seq({Lit("."), g_.Repeat(d, 1, static_cast<uint32_t>(frac_digits)), g_.Star(Lit("0"))});
      frac = cls == 0 ? g_.Optional(limited) : g_.And(limited, Frac(2));
    } else {
      frac = Frac(cls);
    }
    return g_.Seq({IntRange(p.lo, p.hi), frac});
  }

 private:
  ExprId Lit(const std::string& s) { return g_.Literal(s); }

  Grammar& g_;
  bool integer_fraction_;
};

}  // namespace

ExprId JsonNumberAny(Grammar* g, bool integer, bool integer_fraction) {
  return NumberBuilder(g, integer_fraction).NumberAny(integer);
}

Result<ExprId> JsonNumber(Grammar* g, const Json& s, bool integer, bool integer_fraction, const std::string& path) {
  return NumberBuilder(g, integer_fraction).Number(s, integer, path);
}

}  // namespace deepinfer::grammar::json_schema_internal
