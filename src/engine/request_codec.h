// A request to the engine (prompt ids and RequestParams) as JSON text, so that it can cross a process
// boundary: to an executor in another process, a prefill or decode peer, a router. Everything in
// RequestParams is data (the constraint too), so a request read back runs exactly as the original did:
// same tokens, same logprobs, same finish reasons.
//
// The text is untrusted on read: its size, nesting and every list and string are bounded, each field's
// type and range is checked (sampling parameters as AddRequest checks them, token ids against the widest
// vocabulary; the engine checks them against its own when the request is added), unknown fields are
// refused, and every error is a kInvalidArgument naming the field. Absent fields take RequestParams'
// defaults.
//
// deadline_nanos is a steady-clock time (core/clock.h): meaningful only to processes on the same machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace deepinfer::engine {

// Bounds RequestFromJson enforces beyond those of the sampling parameters.
inline constexpr size_t kMaxRequestJsonBytes = size_t{64} << 20;
inline constexpr size_t kMaxRequestPromptTokens = size_t{1} << 22;
inline constexpr size_t kMaxScriptedTokens = size_t{1} << 20;
inline constexpr size_t kMaxConstraintChoices = 4096;

struct PlainRequest {
  std::vector<int32_t> prompt;
  RequestParams params;
};

// One line of JSON.
std::string RequestToJson(const PlainRequest& request);
Result<PlainRequest> RequestFromJson(std::string_view json);

}  // namespace deepinfer::engine
