// What rank 0 of a serving unit and the other ranks tell each other at each step agreement: rank 0 adds
// requests (engine/request_codec.h's JSON) and aborts them; a rank answers whether it accepted a request,
// and sends each request's updates back. A message names the request by rank 0's id for it.
//
// Messages come from another deepinfer of the same build, but they are still read as untrusted bytes:
// every count and size is checked against what is left, and a malformed batch is one kDataLoss error.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "engine/engine.h"

namespace deepinfer::parallel {

enum class UnitMessageKind : uint8_t {
  kAdd = 1,       // rank 0 → rank: `body` is the request as JSON
  kAbort = 2,     // rank 0 → rank
  kAccepted = 3,  // rank → rank 0: `status` is AddRequest's answer
  kUpdate = 4,    // rank → rank 0: `update`
  kFigures = 5,   // rank → rank 0: `figures` (its engine's state)
};

// A rank's engine as its own Stats() sees it, sent to rank 0 now and then for /metrics.
struct RankEngineFigures {
  int64_t running = 0, waiting = 0;
  int64_t kv_blocks_used = 0, kv_blocks_total = 0;
  int64_t queued_prefill_tokens = 0;
  int64_t preemptions = 0;
};

struct UnitMessage {
  UnitMessageKind kind = UnitMessageKind::kAdd;
  uint64_t request = 0;  // rank 0's id of the request
  std::string body;
  Status status;
  engine::RequestUpdate update;
  RankEngineFigures figures;
};

// Appends one message to a batch.
void AppendUnitMessage(const UnitMessage& message, std::string* batch);
// Every message of a batch, in order.
Result<std::vector<UnitMessage>> ParseUnitMessages(std::string_view batch);

}  // namespace deepinfer::parallel
