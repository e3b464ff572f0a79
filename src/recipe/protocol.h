// The three API protocols the codec speaks, one type for requests, responses and errors. Their names are
// the same in every command and in the server: "chat" (OpenAI Chat Completions), "responses" (OpenAI
// Responses), "messages" (Anthropic Messages; "anthropic" is accepted as an alias wherever a name is read).
#pragma once

#include <optional>
#include <string_view>

namespace deepinfer::recipe {

enum class Protocol { kChatCompletions, kResponses, kMessages };
std::string_view ProtocolName(Protocol protocol);  // "chat", "responses", "messages"
std::optional<Protocol> ParseProtocol(std::string_view name);
inline constexpr std::string_view kProtocolNames = "chat, responses or messages";

}  // namespace deepinfer::recipe
