// deepinfer grammar: compile a JSON schema, regex or EBNF grammar the way a request's constraint would be
// compiled; report errors, size and compile time; test strings against it through the token-level
// matcher; show the allowed next tokens after a prefix. `--jsonl` is the batch form.
#include <chrono>
#include <iostream>
#include <optional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kGrammarUsage =
    "usage: deepinfer grammar (--json-schema FILE|JSON | --regex PATTERN | --ebnf FILE | --json-object)\n"
    "                         [--test TEXT]... [--prefix TEXT] [--top N] [--flexible-ws] [--strict]\n"
    "                         [--tokenizer PATH]\n"
    "       deepinfer grammar --jsonl [--tokenizer PATH] < cases.jsonl\n\n"
    "Compiles the constraint and prints its size and compile time, or the error that names the cause.\n"
    "--test runs TEXT through the token-level matcher (tokenized with the tokenizer) and says whether the\n"
    "grammar accepts it; --prefix feeds TEXT and lists the allowed next tokens (the first --top N, default\n"
    "20), their count and the forced bytes (jump-forward).\n\n"
    "--jsonl reads lines {\"json_schema\": {...}} (or \"regex\": str, or \"ebnf\": str) with \"instance\": str\n"
    "and writes {\"compiled\": bool, \"error\": str|null, \"accepted\": bool, \"compile_ms\": float} per line.\n"
    "A line with \"generate\": {\"seed\": N, \"max_tokens\": M} (M at most 4096) also generates under the mask\n"
    "with seeded random logits and adds \"generated\": the text, or null when it did not end within M tokens.\n\n"
    "  --tokenizer NAME  a tokenizer.json, its directory, or a builtin (deepseek-v3, deepseek-v4,\n"
    "                    deepseek-v4.1; default deepseek-v4); the mask is 129,280 wide (DeepSeek's logits)\n";

constexpr size_t kLogitsWidth = 129280;

// A schema or grammar argument: inline text when it does not name a readable file.
std::string ReadFileOrText(const std::string& arg) {
  auto text = ReadFileToString(arg, 64u << 20);
  return text.ok() ? *text : arg;
}

std::string Printable(std::string_view bytes) {
  std::string out;
  for (unsigned char c : bytes) {
    if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c < 0x20 || c == 0x7F) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

struct Vocab {
  std::unique_ptr<tokenizer::Tokenizer> tok;
  std::shared_ptr<const grammar::TokenIndex> index;
};

Result<Vocab> LoadVocab(const std::string& hint) {
  DI_ASSIGN_OR_RETURN(tokenizer::Tokenizer t, tokenizer::LoadTokenizer(hint));
  Vocab v;
  v.tok = std::make_unique<tokenizer::Tokenizer>(std::move(t));
  grammar::TokenIndex::Options o;
  o.mask_width = std::max(kLogitsWidth, v.tok->vocab_size());
  DI_ASSIGN_OR_RETURN(v.index, grammar::TokenIndex::FromTokenizer(*v.tok, o));
  return v;
}

// Feeds the instance's tokens and the stop token; true when all are accepted.
bool AcceptsText(const std::shared_ptr<const grammar::BoundGrammar>& bound, const tokenizer::Tokenizer& tok,
                 const std::string& text, size_t* failed_at) {
  grammar::GrammarMatcher m(bound);
  std::vector<int32_t> ids = tok.EncodeText(text);
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!m.AcceptToken(ids[i])) {
      *failed_at = i;
      return false;
    }
  }
  *failed_at = ids.size();
  return m.AcceptToken(bound->vocab().stop_ids()[0]);
}

// The tokens that close something: the stop token, and those whose bytes are only `"`, `]` and `}`.
std::vector<int32_t> ClosingTokens(const grammar::TokenIndex& index, const tokenizer::Tokenizer& tok) {
  std::vector<int32_t> out;
  for (size_t id = 0; id < index.width(); ++id) {
    const auto t = static_cast<int32_t>(id);
    if (index.IsStop(t)) {
      out.push_back(t);
      continue;
    }
    if (id >= tok.vocab_size()) continue;
    const std::string_view bytes = tok.TokenBytes(t);
    if (!bytes.empty() && bytes.find_first_not_of("\"]}") == std::string_view::npos) out.push_back(t);
  }
  return out;
}

// One generation under the mask with seeded random logits: with independent, identically distributed
// logits the argmax is a uniform pick among the allowed tokens, which is what this draws. A walk that only
// did so would rarely close a string (one allowed token in ~100,000 does), so past a quarter of the budget
// it picks among the allowed `closing` tokens when there are any. nullopt: no end within max_tokens.
std::optional<std::string> Generate(const std::shared_ptr<const grammar::BoundGrammar>& bound,
                                    const tokenizer::Tokenizer& tok, const std::vector<int32_t>& closing,
                                    uint32_t seed, int64_t max_tokens) {
  std::mt19937 rng(seed);
  grammar::GrammarMatcher m(bound);
  std::vector<uint32_t> bits(bound->vocab().words());
  const int32_t stop = bound->vocab().stop_ids()[0];
  auto allowed = [&](int32_t id) { return (bits[static_cast<size_t>(id) / 32] >> (id % 32)) & 1; };
  std::string text;
  std::vector<int32_t> closing_allowed;
  for (int64_t step = 0; step < max_tokens; ++step) {
    if (!m.FillNextTokenBitmask(bits.data()).ok()) return std::nullopt;
    int32_t pick = -1;
    closing_allowed.clear();
    if (4 * step >= max_tokens)
      for (int32_t id : closing)
        if (allowed(id)) closing_allowed.push_back(id);
    if (!closing_allowed.empty()) {
      pick = closing_allowed[rng() % closing_allowed.size()];
    } else {
      size_t count = 0;
      for (uint32_t w : bits) count += static_cast<size_t>(__builtin_popcount(w));
      if (count == 0) return std::nullopt;
      size_t k = rng() % count;  // the k-th allowed token
      for (size_t w = 0; w < bits.size() && pick < 0; ++w) {
        const auto n = static_cast<size_t>(__builtin_popcount(bits[w]));
        if (k >= n) {
          k -= n;
          continue;
        }
        uint32_t word = bits[w];
        for (; k > 0; --k) word &= word - 1;
        pick = static_cast<int32_t>(w * 32 + static_cast<size_t>(__builtin_ctz(word)));
      }
    }
    // The stop token once in a while where it is allowed, so that short instances occur too.
    if (allowed(stop) && rng() % 4 == 0) pick = stop;
    if (!m.AcceptToken(pick)) return std::nullopt;
    if (m.IsTerminated()) return text;
    text += tok.TokenBytes(pick);
  }
  return std::nullopt;
}

int RunJsonl(const std::string& tokenizer_hint) {
  auto vocab = LoadVocab(tokenizer_hint);
  if (!vocab.ok()) return Fail("grammar", vocab.status().message());
  grammar::ConstraintCache cache(64);
  std::vector<int32_t> closing;  // ClosingTokens, made on the first generation
  auto input = ReadStdinToString();
  if (!input.ok()) return Fail("grammar", input.status().message());
  std::istringstream lines(*input);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty()) continue;
    nlohmann::ordered_json out = {{"compiled", false}, {"error", nullptr}, {"accepted", false}, {"compile_ms", 0.0}};
    auto parsed = ParseOrderedJson(line);
    nlohmann::ordered_json in = parsed.ok() ? std::move(*parsed) : nlohmann::ordered_json();
    grammar::ConstraintSpec spec;
    std::string instance;
    bool ok_line = in.is_object();
    if (ok_line) {
      if (in.contains("json_schema")) {
        spec.kind = grammar::ConstraintSpec::Kind::kJsonSchema;
        const auto& s = in["json_schema"];
        spec.text = s.is_string() ? s.get<std::string>() : s.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      } else if (in.contains("regex") && in["regex"].is_string()) {
        spec.kind = grammar::ConstraintSpec::Kind::kRegex;
        spec.text = in["regex"].get<std::string>();
      } else if (in.contains("ebnf") && in["ebnf"].is_string()) {
        spec.kind = grammar::ConstraintSpec::Kind::kEbnf;
        spec.text = in["ebnf"].get<std::string>();
      } else {
        ok_line = false;
      }
      if (in.contains("instance") && in["instance"].is_string()) instance = in["instance"].get<std::string>();
    }
    if (!ok_line) {
      out["error"] = "a line needs an object with json_schema, regex or ebnf";
      std::cout << out.dump() << "\n";
      continue;
    }
    auto t0 = std::chrono::steady_clock::now();
    auto bound = cache.Get(spec, vocab->index);
    out["compile_ms"] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (!bound.ok()) {
      out["error"] = bound.status().message();
    } else {
      out["compiled"] = true;
      size_t failed_at = 0;
      out["accepted"] = AcceptsText(*bound, *vocab->tok, instance, &failed_at);
      if (in.contains("generate")) {
        const auto& gen = in["generate"];
        const bool seed_ok = gen.is_object() && gen.contains("seed") && gen["seed"].is_number_unsigned() &&
                             gen["seed"].get<uint64_t>() <= UINT32_MAX;
        const bool max_ok = gen.is_object() && gen.contains("max_tokens") && gen["max_tokens"].is_number_unsigned() &&
                            gen["max_tokens"].get<uint64_t>() >= 1 && gen["max_tokens"].get<uint64_t>() <= 4096;
        if (!seed_ok || !max_ok) {
          out["error"] = "generate needs {\"seed\": 0..4294967295, \"max_tokens\": 1..4096}";
        } else {
          if (closing.empty()) closing = ClosingTokens(*vocab->index, *vocab->tok);
          auto text = Generate(*bound, *vocab->tok, closing, gen["seed"].get<uint32_t>(), gen["max_tokens"].get<int64_t>());
          out["generated"] = text ? nlohmann::ordered_json(*text) : nlohmann::ordered_json(nullptr);
        }
      }
    }
    std::cout << out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
  }
  return 0;
}

int RunGrammar(const std::vector<std::string>& args) {
  grammar::ConstraintSpec spec;
  bool jsonl = false, json_object = false, flexible = false;
  std::vector<std::string> tests;
  std::string schema, regex, ebnf, prefix, tokenizer_hint;
  int64_t top = 20;
  Flags flags("grammar");
  flags.Switch("--jsonl", &jsonl);
  flags.String("--json-schema", &schema);
  flags.String("--regex", &regex);
  flags.String("--ebnf", &ebnf);
  flags.Switch("--json-object", &json_object);
  flags.Strings("--test", &tests);
  flags.String("--prefix", &prefix);
  flags.Int<int64_t>("--top", &top, 0, 1'000'000);
  flags.Path("--tokenizer", &tokenizer_hint);
  flags.Switch("--flexible-ws", &flexible);
  flags.Switch("--strict", &spec.json.strict);
  if (int rc = flags.Parse(args)) return rc;
  const bool have_prefix = flags.given("--prefix");
  int kinds = flags.given("--json-schema") + flags.given("--regex") + flags.given("--ebnf") + json_object;
  if (kinds > 1) return UsageError("grammar", "give one of --json-schema, --regex, --ebnf or --json-object");
  const bool have = kinds == 1;
  if (flags.given("--json-schema")) spec.text = ReadFileOrText(schema);
  if (flags.given("--regex")) spec.kind = grammar::ConstraintSpec::Kind::kRegex, spec.text = regex;
  if (flags.given("--ebnf")) spec.kind = grammar::ConstraintSpec::Kind::kEbnf, spec.text = ReadFileOrText(ebnf);
  if (json_object) spec.kind = grammar::ConstraintSpec::Kind::kJsonObject;
  if (flexible) spec.json.whitespace = grammar::JsonSchemaOptions::Whitespace::kFlexible;
  if (jsonl) return RunJsonl(tokenizer_hint);
  if (!have) return UsageError("grammar", "one of --json-schema, --regex, --ebnf or --json-object is required");
  auto t0 = std::chrono::steady_clock::now();
  auto g = grammar::BuildGrammar(spec);
  if (!g.ok()) return Fail("grammar", g.status().message());
  auto cg = grammar::Compile(*g);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (!cg.ok()) return Fail("grammar", cg.status().message());
  std::printf("compiled in %.2f ms: %u states, %zu rules, %u byte classes, %zu call edges, %zu KiB\n", ms,
              cg->num_states(), cg->rule_names().size(), cg->num_classes(), cg->num_call_edges(),
              cg->memory_bytes() / 1024);
  if (tests.empty() && !have_prefix) return 0;
  auto vocab = LoadVocab(tokenizer_hint);
  if (!vocab.ok()) return Fail("grammar", vocab.status().message());
  auto bound = std::make_shared<const grammar::BoundGrammar>(
      std::make_shared<const grammar::CompiledGrammar>(std::move(*cg)), vocab->index);
  int rc = 0;
  for (const auto& t : tests) {
    size_t failed_at = 0;
    bool ok = AcceptsText(bound, *vocab->tok, t, &failed_at);
    std::vector<int32_t> ids = vocab->tok->EncodeText(t);
    if (ok) {
      std::printf("accepted: %s\n", Printable(t).c_str());
    } else if (failed_at < ids.size()) {
      std::printf("rejected at token %zu (%s): %s\n", failed_at, Printable(vocab->tok->TokenBytes(ids[failed_at])).c_str(),
                  Printable(t).c_str());
      rc = 1;
    } else {
      std::printf("rejected (incomplete): %s\n", Printable(t).c_str());
      rc = 1;
    }
  }
  if (have_prefix) {
    grammar::GrammarMatcher m(bound);
    if (!m.AcceptString(prefix)) return Fail("grammar", "the prefix is not a valid prefix of the grammar");
    std::vector<uint32_t> bits(vocab->index->words());
    auto t1 = std::chrono::steady_clock::now();
    Status s = m.FillNextTokenBitmask(bits.data());
    double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count();
    if (!s.ok()) return Fail("grammar", s.message());
    size_t count = 0;
    std::vector<int32_t> shown;
    for (size_t id = 0; id < vocab->index->width(); ++id) {
      if ((bits[id / 32] >> (id % 32)) & 1) {
        ++count;
        if (shown.size() < static_cast<size_t>(top)) shown.push_back(static_cast<int32_t>(id));
      }
    }
    std::printf("after %s: %zu allowed tokens (mask in %.1f us), forced bytes \"%s\"%s\n", Printable(prefix).c_str(),
                count, us, Printable(m.ForcedBytes()).c_str(), m.CanTerminate() ? ", may end here" : "");
    for (int32_t id : shown)
      std::printf("  %7d  %s\n", id,
                  vocab->index->IsStop(id) ? "<stop>" : ("\"" + Printable(vocab->tok->TokenBytes(id)) + "\"").c_str());
  }
  return rc;
}

const CommandRegistration kGrammarRegistration(
    {"grammar", "compile and test a JSON schema, regex or EBNF constraint", kGrammarUsage, RunGrammar});

}  // namespace
}  // namespace deepinfer::cli
