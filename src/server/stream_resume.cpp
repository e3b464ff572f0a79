#include "server/stream_resume.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <random>

#include <nlohmann/json.hpp>

#include "pipeline/json_body.h"
#include "pipeline/request_fields.h"
#include "sampling/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::server {

namespace {

using Json = nlohmann::json;

constexpr size_t kMaxResumeIdBytes = 256;

ApiError BadResume(std::string message) {
  // Appended: gcc 12 takes `std::string(field) + ": " + message` at -O3 for a write past the
  // temporary (a false -Warray-bounds, an error here), depending on what it inlined around it.
  std::string text(kResumeField);
  text.append(": ").append(message);
  return pipeline::Invalid(std::string(kResumeField), std::move(text));
}

}  // namespace

std::optional<ApiError> ReadStreamResume(std::string_view body, size_t max_ids, size_t vocab_size,
                                         std::optional<StreamResume>* out) {
  out->reset();
  // Most requests are not continuations: no second parse for them.
  if (body.find(kResumeField) == std::string_view::npos) return std::nullopt;
  pipeline::JsonBody json = pipeline::ParseJsonObject(body);
  if (!json.ok()) return std::nullopt;  // the protocol's parser answers a malformed body
  auto it = json.value.find(kResumeField);
  if (it == json.value.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return BadResume("must be an object");
  StreamResume resume;
  auto ids = it->find("token_ids");
  if (ids == it->end() || !ids->is_array()) return BadResume("token_ids must be an array of token ids");
  if (ids->size() > max_ids) return BadResume("more token_ids than the context holds");
  resume.token_ids.reserve(ids->size());
  for (const Json& id : *ids) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= static_cast<int64_t>(vocab_size))
      return BadResume("token_ids must be ids of this model's vocabulary");
    resume.token_ids.push_back(id.get<int32_t>());
  }
  auto sizes = it->find("update_sizes");
  if (sizes == it->end() || !sizes->is_array() || sizes->size() > max_ids + 1)
    return BadResume("update_sizes must be an array of counts");
  size_t total = 0;
  for (const Json& n : *sizes) {
    if (!n.is_number_unsigned() || n.get<uint64_t>() > resume.token_ids.size() - total)
      return BadResume("update_sizes must count the token_ids");
    resume.update_sizes.push_back(n.get<size_t>());
    total += resume.update_sizes.back();
  }
  if (total != resume.token_ids.size()) return BadResume("update_sizes must count the token_ids");
  auto seed = it->find("seed");
  if (seed == it->end() || !seed->is_number_unsigned()) return BadResume("seed must be a non-negative integer");
  resume.seed = seed->get<uint64_t>();
  auto id = it->find("id");
  if (id == it->end() || !id->is_string() || id->get_ref<const std::string&>().empty() ||
      id->get_ref<const std::string&>().size() > kMaxResumeIdBytes)
    return BadResume("id must be a response id");
  for (char c : id->get_ref<const std::string&>())
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') return BadResume("id must be a response id");
  resume.id = id->get<std::string>();
  auto created = it->find("created");
  if (created == it->end() || !created->is_number_integer() || created->get<int64_t>() < 0)
    return BadResume("created must be a Unix time");
  resume.created = created->get<int64_t>();
  *out = std::move(resume);
  return std::nullopt;
}

bool ResumableStream(const pipeline::PreparedRequest& request) {
  const sampling::SamplingParams& s = request.params.sampling;
  // Penalties over output tokens only would count the resumed ids as prompt; a grammar's state would start
  // over at them.
  return request.stream() && s.n == 1 && request.more_prompts.empty() && !request.params.constraint.grammar &&
         s.presence_penalty == 0 && s.frequency_penalty == 0;
}

std::optional<ApiError> ApplyStreamResume(const StreamResume& resume, pipeline::PreparedRequest* request) {
  if (!ResumableStream(*request)) return BadResume("this request's stream cannot be resumed");
  const int64_t done = static_cast<int64_t>(resume.token_ids.size());
  sampling::SamplingParams& s = request->params.sampling;
  if (done >= s.max_tokens) return BadResume("token_ids already reach max_tokens");
  if (auto& script = request->params.constraint.scripted_tokens) {
    if (resume.token_ids.size() > script->size() ||
        !std::equal(resume.token_ids.begin(), resume.token_ids.end(), script->begin()))
      return BadResume("token_ids are not the start of the scripted output");
    script->erase(script->begin(), script->begin() + done);
  }
  s.max_tokens -= done;
  s.min_tokens = std::max<int64_t>(0, s.min_tokens - done);
  s.seed = resume.seed;
  request->prompt.insert(request->prompt.end(), resume.token_ids.begin(), resume.token_ids.end());
  request->params.primed_output_tokens = done;
  return std::nullopt;
}

bool CanTakeFirstToken(const pipeline::PreparedRequest& request) {
  const sampling::SamplingParams& s = request.params.sampling;
  return s.n == 1 && request.more_prompts.empty() && !request.params.constraint.grammar &&
         !request.params.constraint.scripted_tokens && s.presence_penalty == 0 && s.frequency_penalty == 0 &&
         !s.logprobs && request.params.prompt_logprobs < 0 && request.params.detokenize;
}

std::optional<ApiError> ReadFirstToken(std::string_view header, size_t vocab_size, std::optional<int32_t>* out) {
  out->reset();
  if (header.empty()) return std::nullopt;
  uint64_t id = 0;
  const auto [end, error] = std::from_chars(header.data(), header.data() + header.size(), id);
  if (error != std::errc() || end != header.data() + header.size() || id >= vocab_size) {
    ApiError e;
    e.status = 400;
    e.message = std::string(kFirstTokenHeader) + " must be a token id of this model's vocabulary";
    return e;
  }
  *out = static_cast<int32_t>(id);
  return std::nullopt;
}

engine::RequestUpdate TakeFirstToken(int32_t token, const tokenizer::Tokenizer& tokenizer,
                                     pipeline::PreparedRequest* request) {
  sampling::SamplingParams& s = request->params.sampling;
  // The seed the engine's draws use, reported with the token (a stream's resume announcement carries the
  // first update's): drawn here when the request has none, as the engine would draw it.
  if (!s.seed) s.seed = std::random_device{}() & 0x7fffffff;
  engine::RequestUpdate update;
  update.prompt_tokens = static_cast<int64_t>(request->prompt.size());
  update.seed = *s.seed;
  engine::SequenceDelta& delta = update.sequences.emplace_back();
  engine::GeneratedToken& generated = delta.tokens.emplace_back();
  generated.id = token;
  generated.bytes = std::string(tokenizer.TokenBytes(token));
  generated.control = tokenizer.IsAddedToken(token);
  generated.special = generated.control && tokenizer.IsSpecialToken(token);
  // The text the engine's output thread would release for it, from the same fresh state (the engine's
  // output processor's steps, one token long).
  tokenizer::StreamingDetokenizer detokenizer(tokenizer, request->params.skip_special_tokens);
  sampling::StopStringMatcher stops(s.stop, s.include_stop_str_in_output);
  sampling::StopStringMatcher::Step step = stops.Feed(detokenizer.Add(token));
  delta.text = std::move(step.release);
  if (step.stopped || s.max_tokens == 1) {
    // The output ends with it: nothing is left for the engine, and no prompt position was computed here.
    if (step.stopped) {
      delta.stop_string = std::move(step.matched);
    } else {
      sampling::StopStringMatcher::Step tail = stops.Feed(detokenizer.Finish());
      delta.text += tail.release;
      if (tail.stopped) delta.stop_string = std::move(tail.matched);
      else delta.text += stops.Flush();
    }
    delta.finish = delta.stop_string.empty() ? engine::FinishReason::kLength : engine::FinishReason::kStop;
    update.prompt_cache_hit_tokens = update.prompt_tokens;
    update.finished = true;
    return update;
  }
  s.max_tokens -= 1;
  s.min_tokens = std::max<int64_t>(0, s.min_tokens - 1);
  request->prompt.push_back(token);
  request->params.primed_output_tokens = 1;
  return update;
}

std::vector<engine::RequestUpdate> ResumePrimingUpdates(const StreamResume& resume, int64_t prompt_tokens,
                                                        const tokenizer::Tokenizer& tokenizer) {
  std::vector<engine::RequestUpdate> updates;
  size_t next = 0;
  for (size_t size : resume.update_sizes) {
    engine::RequestUpdate& update = updates.emplace_back();
    update.prompt_tokens = prompt_tokens;
    update.seed = resume.seed;
    engine::SequenceDelta& delta = update.sequences.emplace_back();
    for (size_t i = next; i < next + size; ++i) {
      const int32_t id = resume.token_ids[i];
      engine::GeneratedToken& token = delta.tokens.emplace_back();
      token.id = id;
      token.bytes = std::string(tokenizer.TokenBytes(id));
      token.control = tokenizer.IsAddedToken(id);
      token.special = token.control && tokenizer.IsSpecialToken(id);
    }
    next += size;
  }
  return updates;
}

std::string ResumeComment(std::string_view id, int64_t created, uint64_t seed) {
  Json j = {{"id", id}, {"created", created}, {"seed", seed}};
  return std::string(kResumeComment) + j.dump() + "\n\n";
}

std::string TokenIdsComment(const std::vector<int32_t>& ids, bool finished) {
  Json j = {{"ids", ids}, {"finished", finished}};
  return std::string(kTokenIdsComment) + j.dump() + "\n\n";
}

}  // namespace deepinfer::server
