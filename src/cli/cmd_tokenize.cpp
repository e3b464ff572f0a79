// deepinfer tokenize: text to token ids and back with a tokenizer.json.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kTokenizeUsage =
    "usage: deepinfer tokenize [options] [TEXT...]\n\n"
    "Encodes TEXT (the arguments joined by spaces), or --file, or standard input when neither is given,\n"
    "and prints the token ids separated by spaces. Added-token spellings such as <｜User｜> in the text stay\n"
    "plain text unless --special is given. Files are read as raw bytes (\\r\\n is kept).\n\n"
    "  --tokenizer T     a tokenizer.json, a directory holding one, or a builtin tokenizer: deepseek-v3,\n"
    "                    deepseek-v4, deepseek-v4.1 (default: $DEEPINFER_TOKENIZER, else deepseek-v4)\n"
    "  --file PATH       read the input from PATH ('-' for standard input)\n"
    "  --decode          the input is token ids (spaces, commas or a JSON array); print the text\n"
    "  --skip-special    with --decode: drop special tokens\n"
    "  --special         match added-token spellings in the text (Hugging Face encode behaviour)\n"
    "  --json            print a JSON array of ids (or, with --decode, a JSON string)\n"
    "  --count           print only the number of tokens\n"
    "  --jsonl           batch mode: every input line is a JSON string (with --decode: a JSON array of\n"
    "                    ids); prints one JSON array of ids (a JSON string) per line\n";

Result<std::vector<int32_t>> ParseIds(const std::string& input) {
  std::vector<int32_t> ids;
  std::string token;
  auto flush = [&]() -> Status {
    if (token.empty()) return Status::Ok();
    char* end = nullptr;
    long long v = std::strtoll(token.c_str(), &end, 10);
    if (end == nullptr || *end != '\0' || v < 0 || v > INT32_MAX) {
      return Status::InvalidArgument("not a token id: '" + token + "'");
    }
    ids.push_back(static_cast<int32_t>(v));
    token.clear();
    return Status::Ok();
  };
  for (char c : input) {
    if (c == ' ' || c == ',' || c == '\n' || c == '\r' || c == '\t' || c == '[' || c == ']') {
      DI_RETURN_IF_ERROR(flush());
    } else {
      token.push_back(c);
    }
  }
  DI_RETURN_IF_ERROR(flush());
  return ids;
}

// One JSON value per input line in, one per output line out: lets tests and tools batch many strings
// through one process.
int RunJsonl(const tokenizer::Tokenizer& tokenizer, const std::string& input, bool decode, bool special, bool skip_special) {
  std::string out;
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < input.size()) {
    size_t end = input.find('\n', pos);
    if (end == std::string::npos) end = input.size();
    std::string_view line(input.data() + pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line.empty()) continue;
    auto parsed = ParseJson(line);
    if (!parsed.ok()) return Fail("tokenize", "line " + std::to_string(line_no) + ": " + parsed.status().message());
    const nlohmann::json& value = *parsed;
    if (decode) {
      if (!value.is_array()) return Fail("tokenize", "line " + std::to_string(line_no) + ": not a JSON array of ids");
      std::vector<int32_t> ids;
      for (const auto& v : value) {
        // Ids are checked against the vocabulary before the cast: 4294967297 must not wrap to 1.
        if (!v.is_number_unsigned() || v.get<uint64_t>() >= tokenizer.vocab_size()) {
          return Fail("tokenize", "line " + std::to_string(line_no) + ": " + v.dump() + " is not a token id of this vocabulary");
        }
        ids.push_back(static_cast<int32_t>(v.get<uint64_t>()));
      }
      out += nlohmann::json(tokenizer.Decode(ids, skip_special)).dump();
    } else {
      if (!value.is_string()) return Fail("tokenize", "line " + std::to_string(line_no) + ": not a JSON string");
      const std::string& text = value.get_ref<const std::string&>();
      out += nlohmann::json(special ? tokenizer.EncodeWithAddedTokens(text) : tokenizer.EncodeText(text)).dump();
    }
    out += '\n';
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int RunTokenize(const std::vector<std::string>& args) {
  std::string tokenizer_hint, file, text;
  bool decode = false, as_json = false, count = false, special = false, skip_special = false;
  bool jsonl = false;
  std::vector<std::string> words;
  Flags flags("tokenize");
  flags.Path("--tokenizer", &tokenizer_hint);
  flags.Path("--file", &file);
  flags.Switch("--decode", &decode);
  flags.Switch("--json", &as_json);
  flags.Switch("--jsonl", &jsonl);
  flags.Switch("--count", &count);
  flags.Switch("--special", &special);
  flags.Switch("--skip-special", &skip_special);
  flags.Positionals("TEXT", &words);
  if (int rc = flags.Parse(args)) return rc;
  const bool have_text = !words.empty();
  for (size_t i = 0; i < words.size(); ++i) text += (i ? " " : "") + words[i];
  if (have_text && !file.empty()) return UsageError("tokenize", "give TEXT or --file, not both");
  if (!have_text) {
    if (file.empty() || file == "-") {
      Result<std::string> content = ReadStdinToString();
      if (!content.ok()) return Fail("tokenize", content.status().message());
      text = std::move(*content);
    } else {
      Result<std::string> content = ReadFileToString(file);
      if (!content.ok()) return Fail("tokenize", content.status().message());
      text = std::move(*content);
    }
  }
  Result<tokenizer::Tokenizer> tokenizer = tokenizer::LoadTokenizer(tokenizer_hint);
  if (!tokenizer.ok()) return Fail("tokenize", tokenizer.status().message());

  if (jsonl) return RunJsonl(*tokenizer, text, decode, special, skip_special);
  if (decode) {
    Result<std::vector<int32_t>> ids = ParseIds(text);
    if (!ids.ok()) return Fail("tokenize", ids.status().message());
    for (int32_t id : *ids) {
      if (static_cast<size_t>(id) >= tokenizer->vocab_size() || tokenizer->IdToToken(id).empty()) {
        return Fail("tokenize", "token id " + std::to_string(id) + " is not in the vocabulary");
      }
    }
    std::string decoded = tokenizer->Decode(*ids, skip_special);
    if (as_json) {
      std::printf("%s\n", nlohmann::json(decoded).dump().c_str());
    } else {
      std::fwrite(decoded.data(), 1, decoded.size(), stdout);
    }
    return 0;
  }
  std::vector<int32_t> ids = special ? tokenizer->EncodeWithAddedTokens(text) : tokenizer->EncodeText(text);
  if (count) {
    std::printf("%zu\n", ids.size());
    return 0;
  }
  std::string out = as_json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += as_json ? ", " : " ";
    out += std::to_string(ids[i]);
  }
  out += as_json ? "]\n" : "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

const CommandRegistration kTokenizeRegistration(
    {"tokenize", "text to token ids and back (tokenizer.json)", kTokenizeUsage, RunTokenize});

}  // namespace
}  // namespace deepinfer::cli
