#include "recipe/protocol.h"

namespace deepinfer::recipe {

std::string_view ProtocolName(Protocol protocol) {
  switch (protocol) {
    case Protocol::kChatCompletions: return "chat";
    case Protocol::kResponses: return "responses";
    case Protocol::kMessages: return "messages";
  }
  return "?";
}

std::optional<Protocol> ParseProtocol(std::string_view name) {
  if (name == "chat") return Protocol::kChatCompletions;
  if (name == "responses") return Protocol::kResponses;
  // "anthropic": the name the CLI used before the three protocols were named alike; kept as an alias in
  // every command (they all read names through here).
  if (name == "messages" || name == "anthropic") return Protocol::kMessages;
  return std::nullopt;
}

}  // namespace deepinfer::recipe
