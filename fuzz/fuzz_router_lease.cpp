// What the router reads from outside: lease files any process can write into the shared directory, and
// the event streams of units that may answer garbage. Neither may crash it, read out of bounds or trust a
// size field; a lease that parses writes back as one that parses to the same lease, and a unit's comments
// are not relayed as events.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "router/chat_stream_tracker.h"
#include "router/unit_lease.h"
#include "server/stream_resume.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace deepinfer::router;
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode % 3 == 0) {
    auto lease = ParseLease(text);
    if (lease.ok()) {
      const std::string written = LeaseToJson(*lease);
      auto again = ParseLease(written);
      if (!again.ok() || LeaseToJson(*again) != written) __builtin_trap();
    }
    return 0;
  }
  if (mode % 3 == 1) {
    (void)ParseUnitUrl(text);
    return 0;
  }
  // A unit's stream, cut into events at blank lines as the proxy cuts it.
  ChatStreamTracker tracker(static_cast<ChatStreamProtocol>((mode / 3) % 3));
  std::string out;
  size_t at = 0;
  while (at <= text.size()) {
    size_t end = text.find("\n\n", at);
    if (end == std::string_view::npos) end = text.size();
    if (!tracker.Take(text.substr(at, end - at), &out)) break;
    at = end + 2;
  }
  if (mode & 0x80) tracker.Interrupted();
  tracker.Flush(&out);
  (void)tracker.ResumeBody(nlohmann::json::object());
  (void)tracker.ErrorEvent("x");
  if (!out.empty() && out[0] == ':') __builtin_trap();  // comments are the router's, never the client's
  return 0;
}
