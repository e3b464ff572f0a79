// The flags several subcommands share for the API side: --protocol and --model-version, spelled and
// checked the same way everywhere (recipe/protocol.h: chat, responses, messages; `anthropic` an alias).
#pragma once

#include <string>

#include "cli/flags.h"
#include "recipe/model_version.h"
#include "recipe/protocol.h"

namespace deepinfer::cli {

inline void AddProtocolFlag(Flags& flags, recipe::Protocol* out) {
  flags.Custom("--protocol", "chat|responses|messages", [out](const std::string& v) {
    auto protocol = recipe::ParseProtocol(v);
    if (!protocol) {
      return Status::InvalidArgument("takes " + std::string(recipe::kProtocolNames) + " (got '" + v + "')");
    }
    *out = *protocol;
    return Status::Ok();
  });
}

inline void AddModelVersionFlag(Flags& flags, recipe::ModelVersion* out) {
  flags.Custom("--model-version", "v3.2|v4|v4.1", [out](const std::string& v) {
    auto version = recipe::ParseModelVersion(v);
    if (!version.ok()) return Status::InvalidArgument("takes v3.2, v4 or v4.1 (got '" + v + "')");
    *out = *version;
    return Status::Ok();
  });
}

}  // namespace deepinfer::cli
