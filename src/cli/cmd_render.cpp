// deepinfer render: an API request in, the DeepSeek prompt (text or token ids) out.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "cli/command.h"
#include "cli/flags.h"
#include "cli/recipe_flags.h"
#include "core/mapped_file.h"
#include "recipe/prompt_tokens.h"
#include "recipe/render.h"
#include "recipe/request.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kRenderUsage =
    "usage: deepinfer render [options] [REQUEST.json | -]\n\n"
    "Reads an API request (a file, or stdin when the path is '-' or absent), converts it into a conversation\n"
    "and prints the DeepSeek prompt for it.\n\n"
    "  --protocol chat|responses|messages    request protocol (default chat; anthropic = messages)\n"
    "  --model-version v3.2|v4|v4.1          prompt encoding (default v4)\n"
    "  --ids                                 print token ids (one JSON array) instead of text\n"
    "  --tokenizer NAME|PATH                 the vocabulary for --ids: a tokenizer.json, a directory holding\n"
    "                                        one, or a builtin (deepseek-v3, deepseek-v4, deepseek-v4.1);\n"
    "                                        default $DEEPINFER_TOKENIZER, else the builtin of --model-version\n"
    "  --jsonl                               stdin holds one request per line; print one JSON result per line\n"
    "                                        ({\"prompt\": ...} or {\"error\": {\"status\", \"body\"}})\n\n"
    "An invalid request prints the protocol's error body on stderr and exits 1.\n";

struct RenderArgs {
  recipe::Protocol protocol = recipe::Protocol::kChatCompletions;
  recipe::ModelVersion version = recipe::ModelVersion::kV4;
  bool ids = false;
  bool jsonl = false;
  std::string tokenizer_path;
  std::string input = "-";
};

// Renders one request; on failure stores the protocol error body and the HTTP status.
bool RenderOne(const RenderArgs& args, std::string_view body, recipe::RenderedPrompt* prompt, std::string* error,
               int* status) {
  recipe::RequestOptions options;
  options.model_version = args.version;
  recipe::ParseOutcome parsed = recipe::ParseRequest(args.protocol, body, options);
  if (!parsed.ok()) {
    *error = recipe::ErrorBody(args.protocol, parsed.error);
    *status = parsed.error.http_status;
    return false;
  }
  auto rendered = recipe::RenderPrompt(parsed.request->conversation, args.version);
  if (!rendered.ok()) {
    *error = recipe::ErrorBody(args.protocol, {400, "invalid_request_error", "", rendered.status().message()});
    *status = 400;
    return false;
  }
  *prompt = std::move(rendered).value();
  return true;
}

std::string IdsJson(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(ids[i]);
  }
  return out + "]";
}

int RunRender(const std::vector<std::string>& argv) {
  RenderArgs args;
  std::vector<std::string> inputs;
  Flags flags("render");
  AddProtocolFlag(flags, &args.protocol);
  AddModelVersionFlag(flags, &args.version);
  flags.Switch("--ids", &args.ids);
  flags.Switch("--jsonl", &args.jsonl);
  flags.String("--tokenizer", &args.tokenizer_path);
  flags.Positionals("REQUEST", &inputs, 0, 1);
  if (int rc = flags.Parse(argv)) return rc;
  if (!inputs.empty()) args.input = inputs[0];
  // The tokenizer is found as every command finds one (tokenizer/locate.h): the named file or builtin, else
  // $DEEPINFER_TOKENIZER, else the builtin vocabulary of the model version.
  std::optional<tokenizer::Tokenizer> tokenizer;
  if (args.ids) {
    const std::string_view builtin = args.version == recipe::ModelVersion::kV32  ? "deepseek-v3"
                                     : args.version == recipe::ModelVersion::kV41 ? "deepseek-v4.1"
                                                                                  : "deepseek-v4";
    auto loaded = tokenizer::LoadTokenizer(args.tokenizer_path, builtin);
    if (!loaded.ok()) return Fail("render", loaded.status().message());
    tokenizer.emplace(std::move(loaded).value());
  }
  auto output = [&](const recipe::RenderedPrompt& prompt, std::string* out) -> bool {
    if (!args.ids) {
      *out = prompt.text;
      return true;
    }
    auto ids = recipe::TokenizePrompt(prompt, *tokenizer);
    if (!ids.ok()) {
      *out = ids.status().message();
      return false;
    }
    *out = IdsJson(*ids);
    return true;
  };

  if (args.jsonl) {
    std::string line;
    while (std::getline(std::cin, line)) {
      nlohmann::ordered_json result;
      recipe::RenderedPrompt prompt;
      std::string error, text;
      int status = 0;
      if (!RenderOne(args, line, &prompt, &error, &status)) {
        result["error"]["status"] = status;
        result["error"]["body"] = error;
      } else if (!output(prompt, &text)) {
        result["error"]["status"] = 500;
        result["error"]["body"] = text;
      } else if (args.ids) {
        result["ids"] = nlohmann::ordered_json::parse(text);
      } else {
        result["prompt"] = text;
      }
      std::cout << result.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace) << "\n";
    }
    return 0;
  }

  std::string body;
  if (args.input == "-") {
    auto read_stdin = ReadStdinToString();
    if (!read_stdin.ok()) return Fail("render", read_stdin.status().message());
    body = std::move(read_stdin).value();
  } else {
    auto read = ReadFileToString(args.input);
    if (!read.ok()) return Fail("render", read.status().message());
    body = std::move(read).value();
  }
  recipe::RenderedPrompt prompt;
  std::string error, text;
  int status = 0;
  if (!RenderOne(args, body, &prompt, &error, &status)) {
    std::fprintf(stderr, "deepinfer render: HTTP %d %s\n", status, error.c_str());
    return 1;
  }
  if (!output(prompt, &text)) return Fail("render", text);
  std::fwrite(text.data(), 1, text.size(), stdout);
  if (args.ids) std::fputc('\n', stdout);
  return 0;
}

const CommandRegistration kRenderRegistration(
    {"render", "render an API request into a DeepSeek prompt (text or ids)", kRenderUsage, RunRender});

}  // namespace
}  // namespace deepinfer::cli
