// The grammar representation every front end lowers to (EBNF, regex, JSON Schema) and the compiler reads.
//
// A Grammar owns an arena of expression nodes and a list of named rules; rule 0..n-1 each have a body
// expression, and `root` names the start rule. Expressions are character-level (Unicode code points),
// except kBytes, which the JSON Schema compiler uses for raw UTF-8 pieces; the compiler lowers everything
// to bytes. Nodes may be shared (the arena is a DAG): the compiler builds a fresh automaton fragment per
// use, so sharing saves memory in the front ends, never changes the language.
//
// Two nodes exist for constructs an expression tree cannot say compactly:
//  - kSepList: items in a fixed order, each optional or required, joined by a separator, with a bound on
//    how many are present (JSON object members in schema order; min/maxProperties);
//  - kAnd / kMinus: the intersection and difference of two regular sub-languages (a pattern together with
//    maxLength, property names other than the listed ones, oneOf), computed on automata by the compiler;
//  - kCounted: a regular language whose strings are sequences of min..max "units" (JSON string content
//    with minLength/maxLength: units are characters), run with a counter instead of an automaton unrolled
//    max times. It must be a direct part of its rule's top-level sequence (the counter lives in the
//    rule's stack frame), and the rule must end with bytes the units cannot start with (the closing quote).
//  - kMultiple: decimal numbers (-?[0-9]+(\.[0-9]+)?, no exponent) whose value is an integer multiple of
//    min / 10^max (JSON Schema's multipleOf for any decimal step, and with kMinus its negation), run as a
//    remainder automaton over the digits: the number's value is decided digit by digit, exactly.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::grammar {

using ExprId = uint32_t;

enum class ExprKind : uint8_t {
  kEmpty,    // matches ""
  kNothing,  // matches no string
  kLiteral,  // the UTF-8 bytes of `text`
  kChars,    // one code point in `ranges` (inclusive, sorted, disjoint)
  kBytes,    // one byte in `ranges` (values 0..255)
  kSeq,      // kids in order
  kAlt,      // any one kid
  kRepeat,   // kids[0] repeated min..max times (max = kUnbounded for no limit)
  kRef,      // rule `rule`
  kSepList,  // see the header comment: kids = items, `required` per item, kids.back() is the separator
             // when `has_separator`; `repeat_last` lets the last item repeat (0..n times); min..max count
  kAnd,      // kids[0] and kids[1], both regular
  kMinus,    // kids[0] but not kids[1], both regular
  kCounted,  // kids[0] (the body, regular) as a sequence of min..max kids[1] (the unit: regular, prefix-free);
             // kids[2] is the same language without a counter (used where a counter cannot be run)
  kMultiple,  // decimals whose value is a multiple of min / 10^max (see the header comment); no kids
};

inline constexpr uint32_t kUnbounded = 0xFFFFFFFFu;

struct Expr {
  ExprKind kind = ExprKind::kEmpty;
  std::vector<ExprId> kids;
  std::vector<std::pair<uint32_t, uint32_t>> ranges;
  std::vector<uint8_t> required;  // kSepList
  std::string text;
  uint32_t min = 0;
  uint32_t max = 0;
  uint32_t rule = 0;
  bool has_separator = false;
  bool repeat_last = false;
};

// Rules the matcher treats specially to enforce JSON Schema's uniqueItems at run time (matcher.h): an
// array whose items must differ, and the rule of one item of it, called from the array's rule. Both are
// kept as called rules (never inlined), so their stack frames exist at run time.
enum class UniqueRole : uint8_t { kNone, kArray, kItem };

struct Rule {
  std::string name;
  ExprId body = 0;
  bool defined = false;
  bool keep = false;  // never inlined into callers (a leaf rule whose mask entries other grammars share)
  UniqueRole unique_role = UniqueRole::kNone;
};

class Grammar {
 public:
  // Builders. Each returns the new node's id; sizes are checked by the compiler, not here.
  ExprId Empty();
  ExprId Nothing();
  ExprId Literal(std::string_view utf8);
  // Code points in the inclusive ranges (any order, may overlap: they are normalised).
  ExprId Chars(std::vector<std::pair<uint32_t, uint32_t>> ranges);
  ExprId Char(uint32_t cp) { return Chars({{cp, cp}}); }
  ExprId Bytes(std::vector<std::pair<uint32_t, uint32_t>> ranges);
  ExprId Seq(std::vector<ExprId> kids);
  ExprId Alt(std::vector<ExprId> kids);
  ExprId Repeat(ExprId kid, uint32_t min, uint32_t max);
  ExprId Optional(ExprId kid) { return Repeat(kid, 0, 1); }
  ExprId Star(ExprId kid) { return Repeat(kid, 0, kUnbounded); }
  ExprId Plus(ExprId kid) { return Repeat(kid, 1, kUnbounded); }
  ExprId Ref(uint32_t rule);
  ExprId SepList(std::vector<ExprId> items, std::vector<uint8_t> required, ExprId separator, bool has_separator,
                 bool repeat_last, uint32_t min_count, uint32_t max_count);
  ExprId And(ExprId a, ExprId b);
  ExprId Minus(ExprId a, ExprId b);
  ExprId Counted(ExprId body, ExprId unit, ExprId fallback, uint32_t min, uint32_t max);
  // Decimals whose value is a multiple of numerator / 10^fraction_digits (numerator > 0). Its automaton
  // has about numerator * (fraction_digits + 3) states: the caller bounds it.
  ExprId Multiple(uint32_t numerator, uint32_t fraction_digits);

  // Rules: AddRule appends an undefined rule (for forward references); Define sets its body.
  uint32_t AddRule(std::string name);
  void Define(uint32_t rule, ExprId body);
  void Keep(uint32_t rule) { rules_[rule].keep = true; }
  void SetUniqueRole(uint32_t rule, UniqueRole role) {
    rules_[rule].keep = true;
    rules_[rule].unique_role = role;
  }
  // Copies every rule and expression of `other` into this grammar (rule names prefixed with `prefix`,
  // which keeps them apart from this grammar's own) and returns the rule `other`'s root became. Used to
  // embed one front end's grammar in another (a tool parameter's JSON Schema in the DSML tool-call block).
  uint32_t Import(const Grammar& other, std::string_view prefix);
  // The rule named `name`, or -1.
  int32_t FindRule(std::string_view name) const;

  const Expr& expr(ExprId id) const { return exprs_[id]; }
  size_t num_exprs() const { return exprs_.size(); }
  const std::vector<Rule>& rules() const { return rules_; }
  uint32_t root() const { return root_; }
  void set_root(uint32_t rule) { root_ = rule; }

  // A canonical text form (rules and their expressions), used for content hashing and in `deepinfer
  // grammar` output. Deterministic for a given construction.
  std::string ToString() const;

  // Where the grammar accepts more than its source allows, each a sentence naming the place (a oneOf
  // taken as anyOf under JsonSchemaOptions::one_of_as_any_of); empty for an exact grammar. Import keeps
  // the other grammar's.
  void AddWarning(std::string warning) {
    for (const std::string& w : warnings_)
      if (w == warning) return;
    warnings_.push_back(std::move(warning));
  }
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  ExprId Add(Expr e);
  std::vector<Expr> exprs_;
  // Add's table of the nodes built so far, by content hash (nodes Import copies stay out of it).
  std::vector<uint64_t> expr_hash_;
  std::vector<uint32_t> intern_slots_;
  size_t interned_count_ = 0;
  std::vector<Rule> rules_;
  uint32_t root_ = 0;
  std::vector<std::string> warnings_;
};

// Sorts and merges inclusive ranges in place.
void NormalizeRanges(std::vector<std::pair<uint32_t, uint32_t>>* ranges);

}  // namespace deepinfer::grammar
