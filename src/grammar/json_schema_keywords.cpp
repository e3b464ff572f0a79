// The JSON Schema front end's keyword lists, error helpers and the regular expressions of the formats it
// constrains (shared by json_schema*.cpp).
#include <map>
#include <set>
#include <string>

#include "grammar/json_schema_internal.h"

namespace deepinfer::grammar::json_schema_internal {

const std::set<std::string>& AnnotationKeywords() {
  static const std::set<std::string> k = {
      "title", "description", "default", "examples", "example", "$comment", "$schema", "$id", "id", "$anchor",
      "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding", "contentSchema", "$defs",
      "definitions", "$vocabulary", "discriminator", "nullable_note"};
  return k;
}

const std::set<std::string>& UnsupportedKeywords() {
  static const std::set<std::string> k = {"minContains",
                                          "maxContains", "unevaluatedProperties", "unevaluatedItems",
                                          "$dynamicRef", "$recursiveRef", "$dynamicAnchor", "$recursiveAnchor"};
  return k;
}

Status Unsupported(const std::string& keyword, const std::string& path) {
  return Status::Unimplemented("JSON Schema keyword '" + keyword + "' at " + path + " is not supported");
}

Status Invalid(const std::string& what, const std::string& path) {
  return Status::InvalidArgument("invalid JSON Schema at " + path + ": " + what);
}

const std::string* FormatRegex(const std::string& format) {
  // date-time separates with T or t only (RFC 3339's grammar; the space its note allows is not in it).
  // A calendar date (RFC 3339 5.7): the days each month has, February 29 in leap years only (divisible
  // by 4, centuries by 400), no year 0000 (Python's date.fromisoformat, which jsonschema asks, has none).
  static const std::string kDate =
      "(([0-9]{3}[1-9]|[0-9]{2}[1-9]0|[0-9][1-9]00|[1-9]000)-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|"
      "(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))|"
      "([0-9]{2}(0[48]|[2468][048]|[13579][26])|(0[48]|[2468][048]|[13579][26])00)-02-29)";
  static const std::string kIpv4 = "((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])";
  // RFC 3986 IPv6address: h16 groups around at most one "::", the last 32 bits as two groups or an IPv4.
  static const std::string kH16 = "[0-9a-fA-F]{1,4}";
  static const std::string kLs32 = "(" + kH16 + ":" + kH16 + "|" + kIpv4 + ")";
  static const std::string kIpv6 =
      "((" + kH16 + ":){6}" + kLs32 + "|::(" + kH16 + ":){5}" + kLs32 + "|(" + kH16 + ")?::(" + kH16 + ":){4}" + kLs32 +
      "|((" + kH16 + ":){0,1}" + kH16 + ")?::(" + kH16 + ":){3}" + kLs32 + "|((" + kH16 + ":){0,2}" + kH16 + ")?::(" + kH16 +
      ":){2}" + kLs32 + "|((" + kH16 + ":){0,3}" + kH16 + ")?::" + kH16 + ":" + kLs32 + "|((" + kH16 + ":){0,4}" + kH16 +
      ")?::" + kLs32 + "|((" + kH16 + ":){0,5}" + kH16 + ")?::" + kH16 + "|((" + kH16 + ":){0,6}" + kH16 + ")?::)";
  // RFC 3986 URI and URI-reference, and RFC 3987 IRI and IRI-reference: the same grammar where an IRI's
  // unreserved characters add `ucschar` and its query `iprivate`. A URI is scheme ":" then "//" authority
  // (userinfo, a bracketed IP literal or a name, a numeric port) and a path, or a path alone; then ?query
  // and #fragment. A relative reference has no scheme, so its first segment (unless it starts "//" or "/")
  // holds no ":".
  struct UriGrammar {
    std::string absolute, reference;
  };
  auto uri_grammar = [&](const std::string& ucschar, const std::string& iprivate) {
    const std::string unreserved = "A-Za-z0-9\\-._~" + ucschar, sub = "!$&'()*+,;=", pct = "%[0-9A-Fa-f]{2}";
    const std::string pchar = "([" + unreserved + sub + ":@]|" + pct + ")";
    const std::string segment_nc = "([" + unreserved + sub + "@]|" + pct + ")";
    const std::string authority = "(([" + unreserved + sub + ":]|" + pct + ")*@)?(\\[(" + kIpv6 + "|v[0-9A-Fa-f]+\\.[A-Za-z0-9\\-._~" +
                                  sub + ":]+)\\]|([" + unreserved + sub + "]|" + pct + ")*)(:[0-9]*)?";
    const std::string abempty = "(/" + pchar + "*)*", absolute = "/(" + pchar + "+" + abempty + ")?";
    const std::string tail = "(\\?(" + pchar + "|[/?" + iprivate + "])*)?(#(" + pchar + "|[/?])*)?";
    UriGrammar u;
    u.absolute = "[A-Za-z][A-Za-z0-9+.\\-]*:(//" + authority + abempty + "|" + absolute + "|" + pchar + "+" + abempty + "|)" + tail;
    u.reference = "(" + u.absolute + "|(//" + authority + abempty + "|" + absolute + "|" + segment_nc + "+" + abempty + "|)" + tail + ")";
    return u;
  };
  static const UriGrammar kUri = uri_grammar("", "");
  static const UriGrammar kIri = uri_grammar(
      "\\u00A0-\\uD7FF\\uF900-\\uFDCF\\uFDF0-\\uFFEF\\u{10000}-\\u{1FFFD}\\u{20000}-\\u{2FFFD}\\u{30000}-\\u{3FFFD}"
      "\\u{40000}-\\u{4FFFD}\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}\\u{70000}-\\u{7FFFD}\\u{80000}-\\u{8FFFD}"
      "\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}\\u{B0000}-\\u{BFFFD}\\u{C0000}-\\u{CFFFD}\\u{D0000}-\\u{DFFFD}"
      "\\u{E1000}-\\u{EFFFD}",
      "\\uE000-\\uF8FF\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}");
  // RFC 6570 level 4: literals (ASCII but for space, quotes, <>\^`{|}, plus an IRI's ucschar and
  // iprivate, or percent-encoded) and {expressions}: an operator, then variable names (dotted varchars)
  // each with a prefix length below 10000 or an explode. The operators the RFC reserves for extensions
  // (= , ! @ |) are left out: a processor must refuse a template that uses them.
  static const std::string kVarchar = "([A-Za-z0-9_]|%[0-9A-Fa-f]{2})";
  static const std::string kVarspec = kVarchar + "(\\.?" + kVarchar + ")*(:[1-9][0-9]{0,3}|\\*)?";
  static const std::string kUriTemplate =
      "([!#$&(-;=?-\\[\\]_a-z~\\u00A0-\\uD7FF\\uE000-\\uFDCF\\uFDF0-\\uFFEF\\u{10000}-\\u{1FFFD}\\u{20000}-\\u{2FFFD}"
      "\\u{30000}-\\u{3FFFD}\\u{40000}-\\u{4FFFD}\\u{50000}-\\u{5FFFD}\\u{60000}-\\u{6FFFD}\\u{70000}-\\u{7FFFD}"
      "\\u{80000}-\\u{8FFFD}\\u{90000}-\\u{9FFFD}\\u{A0000}-\\u{AFFFD}\\u{B0000}-\\u{BFFFD}\\u{C0000}-\\u{CFFFD}"
      "\\u{D0000}-\\u{DFFFD}\\u{E1000}-\\u{EFFFD}\\u{F0000}-\\u{FFFFD}\\u{100000}-\\u{10FFFD}]|%[0-9A-Fa-f]{2}|"
      "\\{[+#./;?&]?" + kVarspec + "(," + kVarspec + ")*\\})*";
  static const std::map<std::string, std::string> kFormats = {
      {"date", kDate},
      {"time", "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      {"date-time",
       kDate + "[Tt]([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?"
       "([Zz]|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"},
      // RFC 3339 Appendix A: Y [M [D]], M [D] or D, then T with H [M [S]], M [S] or S; or weeks alone.
      {"duration",
       "P([0-9]+W|([0-9]+Y([0-9]+M([0-9]+D)?)?|[0-9]+M([0-9]+D)?|[0-9]+D)(T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S))?"
       "|T([0-9]+H([0-9]+M([0-9]+S)?)?|[0-9]+M([0-9]+S)?|[0-9]+S))"},
      {"uuid", "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"},
      // RFC 5321: a dot-atom or quoted local part; a domain name or an address literal.
      {"email",
       "([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*|\"([\\x20\\x21\\x23-\\x5b\\x5d-\\x7e]|\\\\[\\x20-\\x7e])*\")@"
       "([A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*|\\[" + kIpv4 + "\\]|\\[IPv6:" + kIpv6 + "\\])"},
      {"hostname", "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*"},
      {"ipv4", kIpv4},
      {"ipv6", kIpv6},
      {"uri", kUri.absolute},
      {"uri-reference", kUri.reference},
      {"iri", kIri.absolute},
      {"iri-reference", kIri.reference},
      {"uri-template", kUriTemplate},
      // RFC 6901: "/"-prefixed reference tokens where "~" escapes only as ~0 or ~1.
      {"json-pointer", "(/([^/~]|~[01])*)*"},
  };
  auto it = kFormats.find(format);
  return it == kFormats.end() ? nullptr : &it->second;
}

}  // namespace deepinfer::grammar::json_schema_internal
