// Resumable streams: what lets a router continue a stream on another unit when its unit fails mid-stream,
// for Chat Completions, Responses, Messages and the legacy Completions (whose chunks carry their token ids
// with `return_token_ids`, so the router reads them there rather than from comments).
//
// A request that carries the `x-deepinfer-stream-resume` header (the router sets it; clients never see
// what it adds) and can be resumed exactly (one output, streamed, no grammar, no output-only penalties)
// gets SSE comments in its stream, which every SSE client ignores and the router strips:
//   `: deepinfer-resume {"id":..,"created":..,"seed":..}`  before the first event
//   `: deepinfer-token-ids {"ids":[..],"finished":b}`       after each update's events
// Each token-ids comment closes a group: the events before it are exactly the codec's output for those
// ids, so a router that forwards whole groups knows which ids its client's text came from.
//
// The continuation is the same body with a `deepinfer_resume` field: those ids, the seed, the response id
// and creation time. The unit renders the prompt as before, appends the ids (the model sees the context
// the interrupted unit saw, and position-keyed sampling draws the same numbers at the same positions),
// takes them off max_tokens, min_tokens and a scripted output, primes the engine's detokenizer and stop
// strings with them (engine::RequestParams::primed_output_tokens), and feeds them to the translator without
// writing its events, one update per group as the interrupted unit fed them (how the codec holds back text,
// an incomplete character for one, depends on where its updates end): the codec's state (reasoning or content, a tool call half parsed, the held-back
// text of a stop string, the counts in usage) is then the interrupted one's, and the events it writes from
// there on are the ones the uninterrupted stream would have written.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine.h"
#include "pipeline/prepare.h"
#include "server/api_errors.h"

namespace deepinfer::tokenizer {
class Tokenizer;
}

namespace deepinfer::server {

inline constexpr std::string_view kStreamResumeHeader = "x-deepinfer-stream-resume";
inline constexpr std::string_view kResumeComment = ": deepinfer-resume ";
inline constexpr std::string_view kTokenIdsComment = ": deepinfer-token-ids ";
inline constexpr std::string_view kResumeField = "deepinfer_resume";

// Prefill/decode disaggregation: a request with this header is computed for its prompt only (one token is
// sampled and answered as usual) and answered once the prompt's KV blocks are durable in the shared store,
// where the decode unit the router sends the full request to next finds them.
inline constexpr std::string_view kPrefillOnlyHeader = "x-deepinfer-prefill-only";
// The prefill unit's answer carries the output's first token (sampled where the prompt's last position was
// computed, as a colocated unit samples it) when the request can take it (CanTakeFirstToken) and it did
// not end the output; its KV store then holds the state after the whole prompt. The router sends it on
// to the decode unit in the same header: that unit appends it to the prompt (the context the prefill unit
// saw, and position-keyed sampling draws the same numbers at the same positions), reports it as its first
// output token, and resumes from that state, computing no prompt position again.
inline constexpr std::string_view kFirstTokenHeader = "x-deepinfer-first-token";

struct StreamResume {
  std::vector<int32_t> token_ids;
  std::vector<size_t> update_sizes;  // ids per update of the interrupted stream, in order; they sum to all
  uint64_t seed = 0;
  std::string id;
  int64_t created = 0;
};

// The body's `deepinfer_resume` field (nullopt: none). Every part is checked: types, an id of at most 256
// bytes, at most `max_ids` ids, each in [0, vocab_size).
std::optional<ApiError> ReadStreamResume(std::string_view body, size_t max_ids, size_t vocab_size,
                                         std::optional<StreamResume>* out);

// Whether a prepared request's stream can be continued exactly elsewhere (one prompt, one output, no
// grammar, no penalties over output tokens only).
bool ResumableStream(const pipeline::PreparedRequest& request);

// Whether a request's first output token can come from elsewhere (kFirstTokenHeader): one prompt, one output,
// no grammar, no penalties over output tokens only, no log probabilities
// (the token's own would be missing), no scripted output.
bool CanTakeFirstToken(const pipeline::PreparedRequest& request);

// The kFirstTokenHeader's value (nullopt: none or empty): a decimal id in [0, vocab_size), or an error.
std::optional<ApiError> ReadFirstToken(std::string_view header, size_t vocab_size, std::optional<int32_t>* out);

// A handed-over first token for a request that CanTakeFirstToken, and the update that reports it (the text
// it releases, as the engine's output thread would release it). When it ends the output (max_tokens 1, a
// stop string completed) the update is the last (finished) and the request is left as it was: the engine
// has nothing to do. Otherwise it is appended to the request's prompt, with one token less to generate and
// the engine's detokenizer and stop strings primed with it (primed_output_tokens); the update's prompt
// counts are then the engine's first update's, less the token (Generation::ReportFirstToken).
engine::RequestUpdate TakeFirstToken(int32_t token, const tokenizer::Tokenizer& tokenizer,
                                     pipeline::PreparedRequest* request);

// The resumed request: the ids after the prompt, the rest of the budget, the seed, the script's rest.
std::optional<ApiError> ApplyStreamResume(const StreamResume& resume, pipeline::PreparedRequest* request);

// The updates that replay the resumed ids through a fresh translator (their events are not written).
std::vector<engine::RequestUpdate> ResumePrimingUpdates(const StreamResume& resume, int64_t prompt_tokens,
                                                        const tokenizer::Tokenizer& tokenizer);

std::string ResumeComment(std::string_view id, int64_t created, uint64_t seed);
std::string TokenIdsComment(const std::vector<int32_t>& ids, bool finished);

}  // namespace deepinfer::server
