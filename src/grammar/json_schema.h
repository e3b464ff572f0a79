// The JSON Schema front end: a schema (draft 7 / 2019-09 / 2020-12 keywords) lowered to a Grammar that
// accepts exactly the JSON texts, spelled as described below, of the instances the schema validates.
//
// Spelling: compact (no whitespace) by default, or flexible whitespace between tokens; object members in
// the schema's `properties` order, then other members; strings in canonical spelling where their
// characters are constrained (json_text.h); numbers without exponent where they are bounded (except on the open side of
// a one-sided bound at zero or beyond, where the sign decides); `integer` as
// an integer literal only, -?(0|[1-9][0-9]*): no fraction, no exponent (the standard counts 35.0 as an
// integer, the programs that read the output do not; an integer's bounds and multipleOf apply as usual).
//
// Supported: type (incl. lists), enum, const, properties, required, additionalProperties,
// patternProperties, min/maxProperties, items, prefixItems, additionalItems (draft 7 tuples), min/maxItems,
// contains (one kind of element, without tuple items or min/maxContains; counts up to 64 around it),
// min/maxLength, pattern, format (date-time, date, time, duration, uuid, email, hostname, ipv4, ipv6, uri,
// uri-reference, iri, iri-reference, uri-template, json-pointer: the regular languages of their RFCs; regex:
// ECMA-262 pattern syntax without the u flag, Annex B as browsers read it, groups nesting through a rule,
// within the bounds json_schema_regex_format.cpp states, and only where no pattern, length or negation
// also constrains the string: those need a regular language; a negation of it, as in `not` or oneOf's
// other branches, leaves out every string that fails only the format),
// minimum, maximum, exclusiveMinimum/Maximum (both drafts' forms; a bound with a fraction compares as the
// exact decimal the schema spells, integers round it), multipleOf (any decimal step, exact on the digits:
// a remainder automaton where the step is not 10^k or 10^-k, which then leaves exponent spellings out;
// several steps at once from allOf), anyOf, oneOf (branches proven disjoint, required-only branches,
// or overlapping branches made exclusive by negating the others, up to 256 alternatives; otherwise refused,
// or taken as anyOf where JsonSchemaOptions::one_of_as_any_of asks), uniqueItems (in the grammar where the items
// come from a finite set of scalars small enough to list: enum, const, booleans, null, an integer range of
// at most 64; any other items are checked by the matcher at run time, a duplicate item's last token masked
// (matcher.h); with tuple items or contains, or inside an exclusion of automata (an overlapping oneOf made
// exclusive, a not), refused), allOf
// (merged; each member's additionalProperties still holds for exactly the names it neither lists nor
// matches, whatever other members list or match), not (where the negation is exact: types, required, properties, patterns, formats, lengths,
// counts, numeric bounds, multipleOf (numbers no multiple of the step), enum/const of scalars (numbers kept out by the ranges around them, integers
// only), dependencies, items, contains, additionalProperties, patternProperties, propertyNames patterns
// (one such member-needing negation per object) and `not` enum/const (an object with one of its names), and not/anyOf/allOf/oneOf of those (not oneOf: none of
// the branches, or two that may meet), and `$ref`s of those: a reference into a definition that reaches itself
// negates to a definition of its own (one rule per reference, at most 64, its recursion under a member or an element);
// numbers that are not integers are spelled without exponent), if/then/else (draft 7 on:
// under a `$schema` naming an older draft they are unknown words; when `if` has such a negation; several
// in one allOf when each `if` tests member values: const/enum, required),
// dependencies, dependentRequired, dependentSchemas, propertyNames (pattern, min/maxLength),
// $ref/$defs/definitions (recursive too, also where merged schemas recur inside their own members, as in an allOf of
// recursive definitions; local references only; siblings of a `$ref` as the schema's
// draft says, see JsonSchemaOptions::draft7_without_schema; an enum beside an ignored `$ref` is ignored
// too). An enum or const under any other keywords (uniqueItems, contains, propertyNames, if/then/else, ...
// included) is the list of its members that validate.
// Ignored, as the standard allows: annotations (title, description, default, examples, readOnly, ...),
// unknown keywords, and formats not listed above (format is an annotation by default): among the standard ones
// `idn-email` and `idn-hostname` (IDNA's
// rules rest on Unicode tables and context rules) and `relative-json-pointer` (its drafts disagree on index adjustments).
// Anything else that constrains instances (min/maxContains, uniqueItems beside tuple items, other propertyNames keywords,
// unevaluated*, remote $ref, negations with no exact form, ...) is a kUnimplemented error naming the
// keyword and its path in the schema.
#pragma once

#include <string>
#include <string_view>

#include "core/status.h"
#include "grammar/grammar.h"

namespace deepinfer::grammar {

struct JsonSchemaOptions {
  // kPython: exactly Python json.dumps' default separators (", " and ": ", nothing else), the spelling
  // deepseek-recipe writes tool-call arguments in.
  enum class Whitespace { kCompact, kFlexible, kPython };
  Whitespace whitespace = Whitespace::kCompact;
  // OpenAI `strict: true`: objects without `additionalProperties` allow no other members.
  bool strict = false;
  // `integer` is always an integer literal, -?(0|[1-9][0-9]*) (never "3.0", which the standard counts as an
  // integer too). This says whether a `number` that must be integral (an integral multipleOf) may still be
  // spelled with a zero fraction ("3.0", as JSON's number syntax allows); false for tool-call arguments.
  bool integer_fraction = true;
  // `$ref` beside other keywords: draft 7 and earlier ignore the others, 2019-09 on apply them too. A root
  // `$schema` naming draft-03 to draft-07 selects the former, any other `$schema` the latter; this says
  // which applies to a schema without `$schema` (true: draft 7's).
  bool draft7_without_schema = false;
  // A oneOf whose branches may overlap and that the compiler cannot make exclusive is refused (kUnimplemented
  // naming oneOf and its pointer). true compiles it as anyOf instead, as xgrammar and llguidance do without
  // saying so: an instance that meets two branches is then accepted though the schema rejects it, so each
  // such oneOf is logged as a warning with its pointer and named in Grammar::warnings. Off by default.
  bool one_of_as_any_of = false;
  size_t max_schema_bytes = 4u << 20;
  uint32_t max_depth = 128;  // nesting of schemas (and of merged allOf / $ref chains)
  // Wall-clock budget for translating the schema into a grammar (the automaton compiler has its own). Merging
  // allOf members and inlining references can multiply work far beyond the schema's size, so a request must
  // not be able to hold a thread for longer than this; past it the schema is refused (kDeadlineExceeded).
  double max_translate_ms = 2'000.0;
};

Result<Grammar> JsonSchemaToGrammar(std::string_view schema_json, const JsonSchemaOptions& options = {});
// Any JSON value whose top level is an object (`response_format: json_object`).
Grammar JsonObjectGrammar(const JsonSchemaOptions& options = {});

}  // namespace deepinfer::grammar
