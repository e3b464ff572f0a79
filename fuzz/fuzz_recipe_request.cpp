// libFuzzer target for request parsing and prompt rendering: arbitrary bytes as an API request body for
// each protocol and each model version. Nothing may crash; a rejected request carries an HTTP status and
// an error body that is valid JSON; an accepted one renders (or fails to render with a status) and every
// marked control-token range spells its token.
//
// Input layout: byte 0 selects protocol (bits 0-1) and model version (bits 2-3); the rest is the body.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include <nlohmann/json.hpp>

#include "recipe/render.h"
#include "recipe/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::recipe;
  if (size < 1) return 0;
  const Protocol protocols[] = {Protocol::kChatCompletions, Protocol::kResponses, Protocol::kMessages,
                                Protocol::kChatCompletions};
  const ModelVersion versions[] = {ModelVersion::kV4, ModelVersion::kV41, ModelVersion::kV32, ModelVersion::kV4};
  const Protocol protocol = protocols[data[0] & 3];
  RequestOptions options;
  options.model_version = versions[(data[0] >> 2) & 3];
  const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
  ParseOutcome parsed = ParseRequest(protocol, body, options);
  if (!parsed.ok()) {
    if (parsed.error.http_status < 400 || parsed.error.http_status > 599) std::abort();
    const auto error = nlohmann::json::parse(ErrorBody(protocol, parsed.error), nullptr, false);
    if (error.is_discarded() || !error.contains("error")) std::abort();
    return 0;
  }
  auto prompt = RenderPrompt(parsed.request->conversation, options.model_version);
  if (!prompt.ok()) return 0;
  size_t end = 0;
  for (const SpecialRange& r : prompt->special_ranges) {
    if (r.begin < end || r.end > prompt->text.size()) std::abort();
    if (std::string_view(prompt->text).substr(r.begin, r.end - r.begin) != SpecialTokenSpelling(r.token)) std::abort();
    end = r.end;
  }
  return 0;
}
