// Server-sent-events framing: the bytes every event stream of the server and of `deepinfer generate
// --stream` is made of. The only place that writes them.
#pragma once

#include <span>
#include <string>

#include "recipe/stream_events.h"

namespace deepinfer::pipeline {

// The event that closes Chat Completions and Completions streams (`data: [DONE]`).
inline const recipe::StreamEvent kSseDone{"", "[DONE]"};

// Each event as `event: NAME\n` (named events only) and `data: JSON\n\n`, in order.
std::string FormatSse(std::span<const recipe::StreamEvent> events);

}  // namespace deepinfer::pipeline
