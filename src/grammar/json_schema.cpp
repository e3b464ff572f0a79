#include "grammar/json_schema.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/json.h"
#include "grammar/compiler.h"
#include "grammar/json_text.h"
#include "grammar/regex.h"

namespace deepinfer::grammar {

namespace {

using Json = nlohmann::ordered_json;

// Keywords that only annotate (or that this compiler reads elsewhere) and never constrain by themselves.
const std::set<std::string>& AnnotationKeywords() {
  static const std::set<std::string> k = {
      "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "$anchor",
      "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding", "contentSchema", "$defs",
      "definitions", "$vocabulary", "discriminator", "nullable_note"};
  return k;
}

// Keywords that constrain instances and that this compiler does not implement.
const std::set<std::string>& UnsupportedKeywords() {
  static const std::set<std::string> k = {"if", "then", "else", "dependentSchemas", "dependentRequired",
                                          "dependencies", "propertyNames", "contains", "minContains",
                                          "maxContains", "unevaluatedProperties", "unevaluatedItems",
                                          "$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor"};
  return k;
}

enum TypeBit : uint8_t {
  kNull = 1,
  kBool = 2,
  kObject = 4,
  kArray = 8,
  kString = 16,
  kInteger = 32,  // integers only
  kNumber = 64,   // numbers with a fraction (kInteger | kNumber = all numbers)
  kAllTypes = 127,
};

struct Piece {  // an integer-part range and a fraction class
  uint64_t lo;
  std::optional<uint64_t> hi;  // nullopt: unbounded
  int frac;                    // 0 any, 1 zero, 2 positive
};

std::string Digits(uint64_t v) { return std::to_string(v); }

class SchemaCompiler {
 public:
  SchemaCompiler(const Json& root, const JsonSchemaOptions& o) : root_(root), o_(o) {}

  Result<Grammar> Run() {
    uint32_t r = g_.AddRule("root");
    g_.set_root(r);
    DI_ASSIGN_OR_RETURN(ExprId body, Compile(root_, "#", 0));
    g_.Define(r, g_.Seq({Ws(), body, Ws()}));
    for (auto& [ptr, rule] : pending_) (void)ptr, (void)rule;
    return std::move(g_);
  }

  Grammar AnyObjectGrammar() {
    uint32_t r = g_.AddRule("root");
    g_.set_root(r);
    AnyValue();
    g_.Define(r, g_.Seq({Ws(), Ref(any_object_rule_), Ws()}));
    return std::move(g_);
  }

 private:
  Status Unsupported(const std::string& keyword, const std::string& path) {
    return Status::Unimplemented("JSON Schema keyword '" + keyword + "' at " + path + " is not supported");
  }
  Status Invalid(const std::string& what, const std::string& path) {
    return Status::InvalidArgument("invalid JSON Schema at " + path + ": " + what);
  }
  // A length/count keyword ("minLength", "maxItems", ...) must be a non-negative integer; values
  // above `cap` are clamped so a huge bound cannot blow up the compiled grammar.
  Status ReadCount(const Json& s, const char* keyword, double cap, const std::string& path, uint32_t* out) {
    auto it = s.find(keyword);
    if (it == s.end() || !it->is_number()) return Status::Ok();
    double v = it->get<double>();
    if (!(v >= 0) || v != std::floor(v)) return Invalid(std::string(keyword) + " must be a non-negative integer", path);
    *out = static_cast<uint32_t>(std::min(v, cap));
    return Status::Ok();
  }
  ExprId Ref(uint32_t rule) { return g_.Ref(rule); }

  ExprId Ws() {
    if (o_.whitespace != JsonSchemaOptions::Whitespace::kFlexible) return g_.Empty();
    if (ws_ == 0xFFFFFFFFu) ws_ = g_.Star(g_.Chars({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}, {'\r', '\r'}}));
    return ws_;
  }
  ExprId Lit(const std::string& s) { return g_.Literal(s); }
  ExprId Tok(const std::string& s) {
    if (o_.whitespace == JsonSchemaOptions::Whitespace::kPython && (s == "," || s == ":")) return Lit(s + " ");
    return g_.Seq({Lit(s), Ws()});
  }
  // `"` any string body `"`.
  ExprId AnyString() { return StringRule("string", g_.Empty(), true, 0, kUnbounded); }

  // A string value as a rule of its own, `"` body `"`, one per distinct (constraint, bounds): a bounded one
  // runs with a counter in its frame (ExprKind::kCounted), and rules without patterns are the same in
  // every grammar, so their mask entries are shared. `any_spelling`: the body is every JSON spelling of
  // unconstrained characters (then `body` is unused); else `body` constrains canonically spelled text.
  ExprId StringRule(const std::string& key, ExprId body, bool any_spelling, uint32_t min, uint32_t max) {
    std::string name = key;
    if (min > 0 || max != kUnbounded)
      name += "{" + std::to_string(min) + "," + (max == kUnbounded ? std::string() : std::to_string(max)) + "}";
    if (auto it = string_rules_.find(name); it != string_rules_.end()) return Ref(it->second);
    ExprId unit = any_spelling ? JsonAnyChar(&g_) : CanonicalAnyChar();
    ExprId content;
    if (min == 0 && max == kUnbounded) {
      content = any_spelling ? g_.Star(unit) : body;
    } else if (any_spelling) {
      content = g_.Counted(g_.Star(unit), unit, g_.Repeat(unit, min, max), min, max);
    } else {
      content = g_.Counted(body, unit, g_.And(body, g_.Repeat(unit, min, max)), min, max);
    }
    uint32_t rule = g_.AddRule(name);
    g_.Define(rule, g_.Seq({Lit("\""), content, Lit("\"")}));
    g_.Keep(rule);
    string_rules_[name] = rule;
    return Ref(rule);
  }
  ExprId CanonicalAnyChar() {
    if (canon_char_ == 0xFFFFFFFFu) canon_char_ = JsonCanonicalChars(&g_, {{0, 0x10FFFF}});
    return canon_char_;
  }

  // The recursive rules of an unconstrained JSON value.
  ExprId AnyValue() {
    if (any_value_rule_ != 0xFFFFFFFFu) return Ref(any_value_rule_);
    any_value_rule_ = g_.AddRule("json_value");
    any_object_rule_ = g_.AddRule("json_object");
    uint32_t arr = g_.AddRule("json_array");
    ExprId value = Ref(any_value_rule_);
    ExprId member = g_.Seq({AnyString(), Ws(), Tok(":"), value});
    ExprId comma = Tok(",");
    g_.Define(any_object_rule_,
              g_.Seq({Tok("{"), g_.Optional(g_.Seq({member, Ws(), g_.Star(g_.Seq({comma, member, Ws()}))})), Lit("}")}));
    g_.Define(arr, g_.Seq({Tok("["), g_.Optional(g_.Seq({value, Ws(), g_.Star(g_.Seq({comma, value, Ws()}))})), Lit("]")}));
    g_.Define(any_value_rule_, g_.Alt({Lit("null"), Lit("true"), Lit("false"), NumberAny(false), AnyString(),
                                       Ref(any_object_rule_), Ref(arr)}));
    return Ref(any_value_rule_);
  }

  ExprId Frac(int cls) {
    ExprId digits = g_.Star(g_.Chars({{'0', '9'}}));
    switch (cls) {
      case 1:
        if (!o_.integer_fraction) return g_.Empty();
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

  // Digit strings of the same length between lo and hi (inclusive).
  ExprId FixedLen(const std::string& lo, const std::string& hi) {
    if (lo.empty()) return g_.Empty();
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
      std::string l = a;
      if (len != a.size()) {
        l.assign(len, '0');
        l[0] = '1';
      }
      if (len == 1 && len != a.size()) l = "0";
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

  static Result<std::optional<uint64_t>> Bound(double v, bool up, const std::string& path, bool integer) {
    (void)path;
    if (!std::isfinite(v)) return std::optional<uint64_t>();
    double r = up ? std::ceil(v) : std::floor(v);
    if (r != v && !integer) return Status::Unimplemented("a non-integral numeric bound at " + path + " is not supported");
    if (std::fabs(r) >= 1e18) return std::optional<uint64_t>();
    return std::optional<uint64_t>(static_cast<uint64_t>(std::fabs(r)));
  }

  Result<ExprId> Number(const Json& s, bool integer, const std::string& path) {
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
    std::optional<double> mult = num("multipleOf");
    if (mult && *mult <= 0) return Invalid("multipleOf must be positive", path);
    int frac_digits = -1;  // -1: any
    bool int_only = integer;
    if (mult) {
      double m = *mult;
      if (m == std::floor(m)) {
        int_only = true;
      } else {
        int k = 0;
        double p = m;
        while (k < 10 && std::fabs(p - std::round(p)) > 1e-9) p *= 10, ++k;
        if (std::fabs(std::round(p) - 1.0) > 1e-9) return Unsupported("multipleOf (" + std::to_string(m) + ")", path);
        frac_digits = k;
      }
    }
    // Integer-only with a non-integral bound: round the bound inwards.
    if (int_only) {
      if (lo && *lo != std::floor(*lo)) lo = std::floor(*lo), lo_excl = true;
      if (hi && *hi != std::ceil(*hi)) hi = std::ceil(*hi), hi_excl = true;
    }
    bool bounded = lo || hi;
    if (!bounded && frac_digits < 0 && (!mult || *mult == 1.0)) return NumberAny(int_only);
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
    ExprId out = g_.Alt(std::move(alts));
    if (mult && int_only && *mult != 1.0) {
      double m = *mult;
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
          values.push_back(Lit(Digits(static_cast<uint64_t>(std::fabs(v))).insert(0, v < 0 ? "-" : "")));
        }
        out = g_.Alt(std::move(values));
      } else {
        return Unsupported("multipleOf (" + std::to_string(m) + ") without a small finite range", path);
      }
    }
    return out;
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

  Result<ExprId> Format(const std::string& f) {
    static const std::map<std::string, std::string> kFormats = {
        {"date", "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"},
        {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
        {"date-time",
         "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])[Tt ]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?"
         "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
        {"duration",
         "P([0-9]+W|([0-9]+Y([0-9]+M)?([0-9]+D)?|[0-9]+M([0-9]+D)?|[0-9]+D)(T([0-9]+H([0-9]+M)?([0-9]+S)?|[0-9]+M([0-9]+S)?|[0-9]+S))?"
         "|T([0-9]+H([0-9]+M)?([0-9]+S)?|[0-9]+M([0-9]+S)?|[0-9]+S))"},
        {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
        {"email",
         "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
         "(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"},
        {"hostname", "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"},
        {"ipv4", "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"},
        {"ipv6",
         "(([0-9a-fA-F]{1,4}:){7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|"
         "([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|"
         "([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|"
         "[0-9a-fA-F]{1,4}:(:[0-9a-fA-F]{1,4}){1,6}|:((:[0-9a-fA-F]{1,4}){1,7}|:))"},
        {"uri", "[A-Za-z][A-Za-z0-9+.-]*:[A-Za-z0-9\\-._~:/?#\\[\\]@!$&'()*+,;=%]*"},
    };
    auto it = kFormats.find(f);
    if (it == kFormats.end()) return CanonicalStar();
    RegexOptions ro;
    ro.full_match = true;
    ro.json_string = true;
    return CompileRegex(it->second, ro, &g_);
  }
  ExprId CanonicalStar() { return g_.Star(CanonicalAnyChar()); }
  static bool KnownFormat(const std::string& f) {
    static const std::set<std::string> k = {"date", "time", "date-time", "duration", "uuid", "email",
                                            "hostname", "ipv4", "ipv6", "uri"};
    return k.count(f) > 0;
  }

  Result<ExprId> String(const Json& s, const std::string& path) {
    uint32_t min = 0, max = kUnbounded;
    DI_RETURN_IF_ERROR(ReadCount(s, "minLength", 1e6, path, &min));
    DI_RETURN_IF_ERROR(ReadCount(s, "maxLength", 1e6, path, &max));
    std::vector<ExprId> constraints;
    std::string key = "string";  // names the rule: equal constraints share one
    if (auto it = s.find("pattern"); it != s.end()) {
      if (!it->is_string()) return Invalid("pattern must be a string", path);
      key += " pattern " + JsonQuote(it->get<std::string>());
      RegexOptions ro;
      ro.full_match = false;
      ro.json_string = true;
      auto re = CompileRegex(it->get<std::string>(), ro, &g_);
      if (!re.ok()) return re.status().WithContext(path + "/pattern");
      constraints.push_back(*re);
    }
    if (auto it = s.find("format"); it != s.end() && it->is_string() && KnownFormat(it->get<std::string>())) {
      key += " format " + it->get<std::string>();
      DI_ASSIGN_OR_RETURN(ExprId f, Format(it->get<std::string>()));
      constraints.push_back(f);
    }
    if (auto it = s.find("$patterns"); it != s.end()) {
      for (const auto& p : *it) {
        if (!p.is_string()) return Invalid("pattern must be a string", path);
        key += " pattern " + JsonQuote(p.get<std::string>());
        RegexOptions ro;
        ro.full_match = false;
        ro.json_string = true;
        auto re = CompileRegex(p.get<std::string>(), ro, &g_);
        if (!re.ok()) return re.status().WithContext(path + "/pattern");
        constraints.push_back(*re);
      }
    }
    if (constraints.empty()) return StringRule("string", g_.Empty(), true, min, max);
    ExprId body = constraints[0];
    for (size_t i = 1; i < constraints.size(); ++i) body = g_.And(body, constraints[i]);
    return StringRule(key, body, false, min, max);
  }

  static int HexDigit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  Result<const Json*> Resolve(const std::string& ref, const std::string& path) {
    if (ref.empty() || ref[0] != '#') return Unsupported("$ref to '" + ref + "' (only local references)", path);
    const Json* cur = &root_;
    size_t pos = 1;
    if (pos < ref.size() && ref[pos] != '/') return Unsupported("$ref to an anchor '" + ref + "'", path);
    while (pos < ref.size()) {
      size_t next = ref.find('/', pos + 1);
      std::string token = ref.substr(pos + 1, next == std::string::npos ? std::string::npos : next - pos - 1);
      pos = next == std::string::npos ? ref.size() : next;
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {
        if (token[i] == '~' && i + 1 < token.size()) {
          key.push_back(token[i + 1] == '1' ? '/' : '~');
          ++i;
        } else if (token[i] == '%') {
          // URI percent-encoding: exactly two hex digits (untrusted text: no stoi, which throws).
          const int hi = i + 2 < token.size() ? HexDigit(token[i + 1]) : -1;
          const int lo = hi >= 0 ? HexDigit(token[i + 2]) : -1;
          if (lo < 0) return Invalid("$ref '" + ref + "' has an invalid percent-encoding", path);
          key.push_back(static_cast<char>(hi * 16 + lo));
          i += 2;
        } else {
          key.push_back(token[i]);
        }
      }
      if (cur->is_object()) {
        auto it = cur->find(key);
        if (it == cur->end()) return Invalid("$ref '" + ref + "' does not resolve", path);
        cur = &*it;
      } else if (cur->is_array()) {
        size_t idx = 0;
        bool digits = !key.empty() && key.size() <= 9;
        for (char c : key) {
          if (c < '0' || c > '9') digits = false;
          else idx = idx * 10 + static_cast<size_t>(c - '0');
        }
        if (!digits || idx >= cur->size()) return Invalid("$ref '" + ref + "' does not resolve", path);
        cur = &(*cur)[idx];
      } else {
        return Invalid("$ref '" + ref + "' does not resolve", path);
      }
    }
    return cur;
  }

  // allOf, $ref siblings and anyOf/oneOf distribution: merge schemas at the JSON level.
  Result<Json> Merge(const Json& a, const Json& b, const std::string& path, uint32_t depth) {
    if (depth > o_.max_depth) return Status::ResourceExhausted("schemas nest deeper than " + std::to_string(o_.max_depth));
    if (a.is_boolean()) return a.get<bool>() ? b : a;
    if (b.is_boolean()) return b.get<bool>() ? a : b;
    DI_ASSIGN_OR_RETURN(Json x, Inline(a, path, depth + 1));
    DI_ASSIGN_OR_RETURN(Json y, Inline(b, path, depth + 1));
    if (x.is_boolean() || y.is_boolean()) return Merge(x, y, path, depth + 1);
    Json out = x;
    for (auto it = y.begin(); it != y.end(); ++it) {
      const std::string& k = it.key();
      const Json& v = it.value();
      if (!out.contains(k) || AnnotationKeywords().count(k)) {
        if (!out.contains(k)) out[k] = v;
        continue;
      }
      Json& cur = out[k];
      if (cur == v) continue;
      if (k == "type") {
        auto set = [](const Json& t) {
          std::set<std::string> s;
          if (t.is_string()) s.insert(t.get<std::string>());
          else for (const auto& e : t) if (e.is_string()) s.insert(e.get<std::string>());
          return s;
        };
        auto s1 = set(cur), s2 = set(v);
        Json both = Json::array();
        for (const auto& t : s1) {
          if (s2.count(t)) both.push_back(t);
          else if (t == "number" && s2.count("integer")) both.push_back("integer");
          else if (t == "integer" && s2.count("number")) both.push_back("integer");
        }
        cur = both;
      } else if (k == "properties" || k == "patternProperties" || k == "$defs" || k == "definitions") {
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (!cur.contains(p.key())) cur[p.key()] = p.value();
          else if (cur[p.key()] != p.value()) cur[p.key()] = Json{{"allOf", Json::array({cur[p.key()], p.value()})}};
        }
      } else if (k == "required") {
        for (const auto& r : v)
          if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
      } else if (k == "minimum" || k == "minLength" || k == "minItems" || k == "minProperties") {
        if (v.is_number() && cur.is_number() && v.get<double>() > cur.get<double>()) cur = v;
      } else if (k == "maximum" || k == "maxLength" || k == "maxItems" || k == "maxProperties") {
        if (v.is_number() && cur.is_number() && v.get<double>() < cur.get<double>()) cur = v;
      } else if (k == "exclusiveMinimum" && v.is_number() && cur.is_number()) {
        if (v.get<double>() > cur.get<double>()) cur = v;
      } else if (k == "exclusiveMaximum" && v.is_number() && cur.is_number()) {
        if (v.get<double>() < cur.get<double>()) cur = v;
      } else if (k == "enum") {
        Json both = Json::array();
        for (const auto& e : cur)
          if (std::find(v.begin(), v.end(), e) != v.end()) both.push_back(e);
        cur = both;
      } else if (k == "const") {
        out["enum"] = Json::array();
      } else if (k == "pattern") {
        if (!out.contains("$patterns")) out["$patterns"] = Json::array();
        out["$patterns"].push_back(v);
      } else if (k == "additionalProperties" || k == "items" || k == "additionalItems") {
        cur = Json{{"allOf", Json::array({cur, v})}};
      } else if (k == "allOf") {
        for (const auto& e : v) cur.push_back(e);
      } else if (k == "anyOf" || k == "oneOf") {
        // Both must hold: keep one here, the other as an allOf member.
        if (!out.contains("allOf")) out["allOf"] = Json::array();
        out["allOf"].push_back(Json{{k, v}});
      } else if (UnsupportedKeywords().count(k) == 0 && k.rfind("x-", 0) != 0) {
        if (k == "format" || k == "multipleOf" || k == "uniqueItems" || k == "not" || k == "prefixItems")
          return Unsupported("allOf with two different '" + k + "'", path);
      }
    }
    return out;
  }

  // A schema with its top-level $ref and allOf folded in.
  Result<Json> Inline(const Json& s, const std::string& path, uint32_t depth) {
    if (depth > o_.max_depth) return Status::ResourceExhausted("$ref/allOf chains deeper than " + std::to_string(o_.max_depth));
    if (!s.is_object()) return s;
    Json out = s;
    if (auto it = out.find("$ref"); it != out.end()) {
      if (!it->is_string()) return Invalid("$ref must be a string", path);
      DI_ASSIGN_OR_RETURN(const Json* target, Resolve(it->get<std::string>(), path));
      Json rest = out;
      rest.erase("$ref");
      DI_ASSIGN_OR_RETURN(out, Merge(*target, rest, path, depth + 1));
    }
    if (auto it = out.find("allOf"); it != out.end() && it->is_array()) {
      Json parts = *it;
      out.erase("allOf");
      for (const auto& p : parts) {
        DI_ASSIGN_OR_RETURN(out, Merge(out, p, path, depth + 1));
      }
    }
    return out;
  }

  static bool HasConstraints(const Json& s) {
    if (!s.is_object()) return !s.is_boolean() || !s.get<bool>();
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!AnnotationKeywords().count(it.key()) && it.key() != "anyOf" && it.key() != "oneOf") return true;
    return false;
  }

  static uint8_t TypesOf(const Json& s) {
    if (!s.is_object()) return (s.is_boolean() && !s.get<bool>()) ? 0 : kAllTypes;
    uint8_t types = kAllTypes;
    if (auto it = s.find("type"); it != s.end()) {
      types = 0;
      auto add = [&](const std::string& t) {
        if (t == "null") types |= kNull;
        else if (t == "boolean") types |= kBool;
        else if (t == "object") types |= kObject;
        else if (t == "array") types |= kArray;
        else if (t == "string") types |= kString;
        else if (t == "integer") types |= kInteger;
        else if (t == "number") types |= kInteger | kNumber;
      };
      if (it->is_string()) add(it->get<std::string>());
      else if (it->is_array()) for (const auto& t : *it) if (t.is_string()) add(t.get<std::string>());
    }
    auto values = [&](const Json& vs) {
      uint8_t t = 0;
      for (const auto& v : vs) {
        if (v.is_null()) t |= kNull;
        else if (v.is_boolean()) t |= kBool;
        else if (v.is_object()) t |= kObject;
        else if (v.is_array()) t |= kArray;
        else if (v.is_string()) t |= kString;
        else if (v.is_number_integer() || v.is_number_unsigned()) t |= kInteger;
        else if (v.is_number()) t |= (v.get<double>() == std::floor(v.get<double>())) ? kInteger : kNumber;
      }
      return t;
    };
    if (auto it = s.find("const"); it != s.end()) types &= values(Json::array({*it}));
    if (auto it = s.find("enum"); it != s.end() && it->is_array()) types &= values(*it);
    return types;
  }

  // Whether two branches can never validate the same instance (by type, or by a required property whose
  // const/enum values do not meet).
  Result<bool> Disjoint(const Json& a, const Json& b) {
    if ((TypesOf(a) & TypesOf(b)) == 0) return true;
    if (!a.is_object() || !b.is_object()) return false;
    auto pa = a.find("properties"), pb = b.find("properties");
    if (pa == a.end() || pb == b.end() || !pa->is_object() || !pb->is_object()) return false;
    auto required = [](const Json& s, const std::string& k) {
      auto r = s.find("required");
      return r != s.end() && r->is_array() && std::find(r->begin(), r->end(), k) != r->end();
    };
    for (auto it = pa->begin(); it != pa->end(); ++it) {
      auto jt = pb->find(it.key());
      if (jt == pb->end() || !required(a, it.key()) || !required(b, it.key())) continue;
      auto vals = [](const Json& s) -> std::optional<Json> {
        if (!s.is_object()) return std::nullopt;
        if (auto c = s.find("const"); c != s.end()) return Json::array({*c});
        if (auto e = s.find("enum"); e != s.end() && e->is_array()) return *e;
        return std::nullopt;
      };
      auto va = vals(it.value()), vb = vals(jt.value());
      if (!va || !vb) continue;
      bool meet = false;
      for (const auto& x : *va)
        if (std::find(vb->begin(), vb->end(), x) != vb->end()) meet = true;
      if (!meet) return true;
    }
    return false;
  }

  Result<ExprId> Compile(const Json& schema, const std::string& path, uint32_t depth) {
    if (depth > o_.max_depth) return Status::ResourceExhausted("the schema nests deeper than " + std::to_string(o_.max_depth) + " levels");
    if (schema.is_boolean()) return schema.get<bool>() ? AnyValue() : g_.Nothing();
    if (!schema.is_object()) return Invalid("a schema must be an object or a boolean", path);
    // A $ref alone (annotations aside) becomes a rule, so recursive schemas stay finite.
    if (auto it = schema.find("$ref"); it != schema.end()) {
      bool alone = true;
      for (auto k = schema.begin(); k != schema.end(); ++k)
        if (k.key() != "$ref" && !AnnotationKeywords().count(k.key()) && k.key().rfind("x-", 0) != 0) alone = false;
      if (alone) {
        if (!it->is_string()) return Invalid("$ref must be a string", path);
        std::string ref = it->get<std::string>();
        if (ref == "#/") ref = "#";
        auto found = ref_rules_.find(ref);
        if (found != ref_rules_.end()) return Ref(found->second);
        DI_ASSIGN_OR_RETURN(const Json* target, Resolve(ref, path));
        uint32_t rule = g_.AddRule(ref);
        ref_rules_[ref] = rule;
        DI_ASSIGN_OR_RETURN(ExprId body, Compile(*target, ref, depth + 1));
        g_.Define(rule, body);
        return Ref(rule);
      }
    }
    DI_ASSIGN_OR_RETURN(Json s, Inline(schema, path, depth));
    if (s.is_boolean()) return s.get<bool>() ? AnyValue() : g_.Nothing();
    for (auto it = s.begin(); it != s.end(); ++it)
      if (UnsupportedKeywords().count(it.key())) return Unsupported(it.key(), path);
    if (auto it = s.find("uniqueItems"); it != s.end() && it->is_boolean() && it->get<bool>()) {
      auto mx = s.find("maxItems");
      if (!(mx != s.end() && mx->is_number() && mx->get<double>() <= 1) && (TypesOf(s) & kArray))
        return Unsupported("uniqueItems", path);
    }
    if (auto it = s.find("not"); it != s.end()) {
      const Json& n = *it;
      bool type_only = n.is_object() && n.size() == 1 && n.contains("type");
      if (!type_only && !(n.is_object() && n.empty())) return Unsupported("not", path);
      uint8_t excluded = n.empty() ? static_cast<uint8_t>(kAllTypes) : TypesOf(n);
      Json rest = s;
      rest.erase("not");
      uint8_t keep = TypesOf(rest) & static_cast<uint8_t>(~excluded);
      return Typed(rest, keep, path, depth);
    }
    if (auto it = s.find("anyOf"); it != s.end() || s.contains("oneOf")) {
      bool one = it == s.end();
      const Json& branches = one ? s["oneOf"] : *it;
      std::string kw = one ? "oneOf" : "anyOf";
      if (!branches.is_array() || branches.empty()) return Invalid(kw + " must be a non-empty array", path);
      Json rest = s;
      rest.erase(kw);
      bool distribute = HasConstraints(rest);
      std::vector<Json> merged;
      for (size_t i = 0; i < branches.size(); ++i) {
        if (distribute) {
          DI_ASSIGN_OR_RETURN(Json m, Merge(rest, branches[i], path + "/" + kw + "/" + std::to_string(i), depth + 1));
          merged.push_back(std::move(m));
        } else {
          DI_ASSIGN_OR_RETURN(Json m, Inline(branches[i], path, depth + 1));
          merged.push_back(std::move(m));
        }
      }
      if (one && merged.size() > 1) {
        for (size_t i = 0; i < merged.size(); ++i)
          for (size_t j = i + 1; j < merged.size(); ++j) {
            DI_ASSIGN_OR_RETURN(bool d, Disjoint(merged[i], merged[j]));
            if (!d) return Unsupported("oneOf (with branches that may overlap)", path);
          }
      }
      std::vector<ExprId> alts;
      for (size_t i = 0; i < merged.size(); ++i) {
        DI_ASSIGN_OR_RETURN(ExprId e, Compile(merged[i], path + "/" + kw + "/" + std::to_string(i), depth + 1));
        alts.push_back(e);
      }
      return g_.Alt(std::move(alts));
    }
    return Typed(s, TypesOf(s), path, depth);
  }

  Result<ExprId> Typed(const Json& s, uint8_t types, const std::string& path, uint32_t depth) {
    if (auto it = s.find("const"); it != s.end()) return Values(Json::array({*it}), s, types);
    if (auto it = s.find("enum"); it != s.end()) {
      if (!it->is_array()) return Invalid("enum must be an array", path);
      return Values(*it, s, types);
    }
    std::vector<ExprId> alts;
    if (types & kNull) alts.push_back(Lit("null"));
    if (types & kBool) alts.push_back(g_.Alt({Lit("true"), Lit("false")}));
    if (types & kString) {
      DI_ASSIGN_OR_RETURN(ExprId e, String(s, path));
      alts.push_back(e);
    }
    if ((types & (kInteger | kNumber)) != 0) {
      DI_ASSIGN_OR_RETURN(ExprId e, Number(s, (types & kNumber) == 0, path));
      alts.push_back(e);
    }
    if (types & kArray) {
      DI_ASSIGN_OR_RETURN(ExprId e, Array(s, path, depth));
      alts.push_back(e);
    }
    if (types & kObject) {
      DI_ASSIGN_OR_RETURN(ExprId e, Object(s, path, depth));
      alts.push_back(e);
    }
    return g_.Alt(std::move(alts));
  }

  Result<ExprId> Values(const Json& values, const Json& s, uint8_t types) {
    (void)s;
    std::vector<ExprId> alts;
    for (const auto& v : values) {
      uint8_t t = TypesOf(Json{{"const", v}});
      if (!(t & types)) continue;
      alts.push_back(Lit(v.dump(-1, ' ', false, Json::error_handler_t::replace)));
    }
    return g_.Alt(std::move(alts));
  }

  Result<ExprId> Array(const Json& s, const std::string& path, uint32_t depth) {
    std::vector<ExprId> prefix;
    const Json* rest_schema = nullptr;
    Json rest_true = true;
    auto it_prefix = s.find("prefixItems");
    auto it_items = s.find("items");
    if (it_prefix != s.end()) {
      if (!it_prefix->is_array()) return Invalid("prefixItems must be an array", path);
      for (size_t i = 0; i < it_prefix->size(); ++i) {
        DI_ASSIGN_OR_RETURN(ExprId e, Compile((*it_prefix)[i], path + "/prefixItems/" + std::to_string(i), depth + 1));
        prefix.push_back(e);
      }
      rest_schema = it_items != s.end() ? &*it_items : &rest_true;
    } else if (it_items != s.end() && it_items->is_array()) {  // draft 7 tuple
      for (size_t i = 0; i < it_items->size(); ++i) {
        DI_ASSIGN_OR_RETURN(ExprId e, Compile((*it_items)[i], path + "/items/" + std::to_string(i), depth + 1));
        prefix.push_back(e);
      }
      auto add = s.find("additionalItems");
      rest_schema = add != s.end() ? &*add : &rest_true;
    } else {
      rest_schema = it_items != s.end() ? &*it_items : &rest_true;
    }
    uint32_t min = 0, max = kUnbounded;
    DI_RETURN_IF_ERROR(ReadCount(s, "minItems", 1e5, path, &min));
    DI_RETURN_IF_ERROR(ReadCount(s, "maxItems", 1e5, path, &max));
    bool rest_allowed = !(rest_schema->is_boolean() && !rest_schema->get<bool>());
    ExprId item = 0;
    if (rest_allowed) {
      DI_ASSIGN_OR_RETURN(item, Compile(*rest_schema, path + "/items", depth + 1));
    }
    ExprId sep = Tok(",");
    const uint32_t m = static_cast<uint32_t>(prefix.size());
    ExprId body;
    auto el = [&](ExprId e) { return g_.Seq({e, Ws()}); };
    if (m == 0) {
      if (!rest_allowed) {
        body = g_.Empty();
        if (min > 0) return g_.Nothing();
      } else {
        uint32_t lo = min == 0 ? 0 : min - 1;
        uint32_t hi = max == kUnbounded ? kUnbounded : (max == 0 ? 0 : max - 1);
        if (max == 0) {
          body = g_.Empty();
        } else {
          ExprId list = g_.Seq({el(item), g_.Repeat(g_.Seq({sep, el(item)}), lo, hi)});
          body = min == 0 ? g_.Optional(list) : list;
        }
      }
    } else {
      ExprId tail;
      if (!rest_allowed) {
        if (min > m) return g_.Nothing();
        tail = g_.Empty();
      } else {
        uint32_t lo = min > m ? min - m : 0;
        uint32_t hi = max == kUnbounded ? kUnbounded : (max > m ? max - m : 0);
        tail = g_.Repeat(g_.Seq({sep, el(item)}), lo, hi);
      }
      const uint32_t pm = max == kUnbounded ? m : std::min(m, max);
      ExprId cur = pm == m ? tail : g_.Empty();
      for (uint32_t j = pm; j >= 1; --j) {
        cur = g_.Seq({j > 1 ? sep : g_.Empty(), el(prefix[j - 1]), cur});
        if (j > min) cur = g_.Optional(cur);
      }
      body = cur;
    }
    return g_.Seq({Tok("["), body, Lit("]")});
  }

  Result<ExprId> Object(const Json& s, const std::string& path, uint32_t depth) {
    std::vector<std::string> names;
    std::vector<const Json*> schemas;
    std::vector<uint8_t> required;
    std::set<std::string> req;
    std::vector<std::string> req_order;  // unlisted required names keep the order of `required`
    if (auto it = s.find("required"); it != s.end() && it->is_array())
      for (const auto& r : *it)
        if (r.is_string() && req.insert(r.get<std::string>()).second) req_order.push_back(r.get<std::string>());
    Json any = true;
    const Json* additional = o_.strict ? nullptr : &any;
    Json additional_false = false;
    if (auto it = s.find("additionalProperties"); it != s.end()) additional = &*it;
    if (additional && additional->is_boolean() && !additional->get<bool>()) additional = nullptr;
    const Json* patterns = nullptr;
    if (auto it = s.find("patternProperties"); it != s.end() && it->is_object() && !it->empty()) patterns = &*it;
    if (auto it = s.find("properties"); it != s.end() && it->is_object()) {
      for (auto p = it->begin(); p != it->end(); ++p) {
        names.push_back(p.key());
        schemas.push_back(&p.value());
      }
    }
    std::vector<Json> owned;
    owned.reserve(req.size() + names.size());
    for (const auto& r : req_order) {
      if (std::find(names.begin(), names.end(), r) != names.end()) continue;
      names.push_back(r);
      schemas.push_back(additional ? additional : &any);
    }
    // Listed names matching a pattern must satisfy that pattern's schema too.
    std::vector<Grammar> pattern_tests;
    if (patterns) {
      for (auto p = patterns->begin(); p != patterns->end(); ++p) {
        Grammar t;
        uint32_t r = t.AddRule("p");
        RegexOptions ro;
        ro.full_match = false;
        auto re = CompileRegex(p.key(), ro, &t);
        if (!re.ok()) return re.status().WithContext(path + "/patternProperties");
        t.Define(r, *re);
        auto cg = grammar::Compile(t);
        if (!cg.ok()) return cg.status().WithContext(path + "/patternProperties");
        for (size_t i = 0; i < names.size(); ++i) {
          if (cg->Matches(names[i])) {
            owned.push_back(Json{{"allOf", Json::array({*schemas[i], p.value()})}});
            schemas[i] = &owned.back();
          }
        }
      }
    }
    std::vector<ExprId> items;
    for (size_t i = 0; i < names.size(); ++i) {
      DI_ASSIGN_OR_RETURN(ExprId v, Compile(*schemas[i], path + "/properties/" + names[i], depth + 1));
      items.push_back(g_.Seq({Lit(JsonQuote(names[i])), Ws(), Tok(":"), v, Ws()}));
      required.push_back(req.count(names[i]) ? 1 : 0);
    }
    // Other members: keys not listed (canonical spelling), by pattern, then the additional schema.
    std::vector<ExprId> extra_alts;
    std::vector<ExprId> listed_bodies;
    for (const auto& n : names) {
      std::string q = JsonQuote(n);
      listed_bodies.push_back(Lit(q.substr(1, q.size() - 2)));
    }
    auto key_body_excluding = [&](ExprId body, const std::vector<ExprId>& out) {
      return out.empty() ? body : g_.Minus(body, g_.Alt(out));
    };
    std::vector<ExprId> pattern_bodies;
    if (patterns) {
      for (auto p = patterns->begin(); p != patterns->end(); ++p) {
        RegexOptions ro;
        ro.full_match = false;
        ro.json_string = true;
        auto re = CompileRegex(p.key(), ro, &g_);
        if (!re.ok()) return re.status().WithContext(path + "/patternProperties");
        pattern_bodies.push_back(g_.And(*re, CanonicalStar()));
      }
      size_t i = 0;
      for (auto p = patterns->begin(); p != patterns->end(); ++p, ++i) {
        std::vector<ExprId> out = listed_bodies;
        for (size_t j = 0; j < pattern_bodies.size(); ++j)
          if (j != i) out.push_back(pattern_bodies[j]);
        DI_ASSIGN_OR_RETURN(ExprId v, Compile(p.value(), path + "/patternProperties/" + p.key(), depth + 1));
        extra_alts.push_back(g_.Seq({Lit("\""), key_body_excluding(pattern_bodies[i], out), Lit("\""), Ws(), Tok(":"), v, Ws()}));
      }
    }
    if (additional) {
      std::vector<ExprId> out = listed_bodies;
      out.insert(out.end(), pattern_bodies.begin(), pattern_bodies.end());
      DI_ASSIGN_OR_RETURN(ExprId v, Compile(*additional, path + "/additionalProperties", depth + 1));
      extra_alts.push_back(g_.Seq({Lit("\""), key_body_excluding(CanonicalStar(), out), Lit("\""), Ws(), Tok(":"), v, Ws()}));
    }
    bool has_extra = !extra_alts.empty();
    if (has_extra) {
      items.push_back(g_.Alt(std::move(extra_alts)));
      required.push_back(0);
    }
    uint32_t min = 0, max = kUnbounded;
    DI_RETURN_IF_ERROR(ReadCount(s, "minProperties", 1e4, path, &min));
    DI_RETURN_IF_ERROR(ReadCount(s, "maxProperties", 1e4, path, &max));
    ExprId body = g_.SepList(std::move(items), std::move(required), Tok(","), true, has_extra, min, max);
    return g_.Seq({Tok("{"), body, Lit("}")});
  }

  const Json& root_;
  const JsonSchemaOptions& o_;
  Grammar g_;
  std::map<std::string, uint32_t> ref_rules_;
  std::map<std::string, uint32_t> pending_;
  std::map<std::string, uint32_t> string_rules_;
  uint32_t any_value_rule_ = 0xFFFFFFFFu;
  uint32_t any_object_rule_ = 0xFFFFFFFFu;
  ExprId ws_ = 0xFFFFFFFFu;
  ExprId canon_char_ = 0xFFFFFFFFu;
};

}  // namespace

Result<Grammar> JsonSchemaToGrammar(std::string_view schema_json, const JsonSchemaOptions& options) {
  if (schema_json.size() > options.max_schema_bytes)
    return Status::ResourceExhausted("the schema is larger than " + std::to_string(options.max_schema_bytes) + " bytes");
  // Parsed without recursion and with a nesting bound, so nlohmann's own recursive copies and compares
  // of the value stay bounded too.
  auto parsed = ParseOrderedJson(schema_json, JsonLimits{options.max_schema_bytes, static_cast<int>(options.max_depth) * 4});
  if (!parsed.ok()) return Status::InvalidArgument("the schema is not valid JSON: " + parsed.status().message());
  Json schema = std::move(*parsed);
  SchemaCompiler c(schema, options);
  return c.Run();
}

Grammar JsonObjectGrammar(const JsonSchemaOptions& options) {
  Json empty = Json::object();
  SchemaCompiler c(empty, options);
  return c.AnyObjectGrammar();
}

}  // namespace deepinfer::grammar
