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
  // RFC 3986 URI: scheme ":" then "//" authority (userinfo, a bracketed IP literal or a name, a numeric
  // port) and a path, or a path alone; then ?query and #fragment.
  static const std::string kUnreserved = "A-Za-z0-9\\-._~", kSub = "!$&'()*+,;=", kPct = "%[0-9A-Fa-f]{2}";
  static const std::string kPchar = "([" + kUnreserved + kSub + ":@]|" + kPct + ")";
  static const std::string kUri =
      "[A-Za-z][A-Za-z0-9+.\\-]*:(//(([" + kUnreserved + kSub + ":]|" + kPct + ")*@)?(\\[(" + kIpv6 + "|v[0-9A-Fa-f]+\\.[" +
      kUnreserved + kSub + ":]+)\\]|([" + kUnreserved + kSub + "]|" + kPct + ")*)(:[0-9]*)?(/" + kPchar + "*)*|/(" + kPchar +
      "+(/" + kPchar + "*)*)?|" + kPchar + "+(/" + kPchar + "*)*|)(\\?(" + kPchar + "|[/?])*)?(#(" + kPchar + "|[/?])*)?";
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
      {"uri", kUri},
  };
  auto it = kFormats.find(format);
  return it == kFormats.end() ? nullptr : &it->second;
}

}  // namespace deepinfer::grammar::json_schema_internal
