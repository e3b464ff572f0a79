// libFuzzer target for RequestFromJson: arbitrary bytes as a serialised engine request. Nothing may crash;
// a refusal is a kInvalidArgument; an accepted request writes back to JSON that reads again to the same
// request (its JSON is a fixed point).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "engine/request_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto request = engine::RequestFromJson(text);
  if (!request.ok()) {
    if (request.status().code() != StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  const std::string json = engine::RequestToJson(*request);
  auto again = engine::RequestFromJson(json);
  if (!again.ok()) std::abort();
  if (engine::RequestToJson(*again) != json) std::abort();
  return 0;
}
