#include "parallel/unit_messages.h"

#include <gtest/gtest.h>

namespace deepinfer::parallel {
namespace {

engine::RequestUpdate SampleUpdate() {
  engine::RequestUpdate u;
  u.prompt_tokens = 7;
  u.prompt_cache_hit_tokens = 3;
  u.seed = 0x1234567890abcdefULL;
  engine::SequenceDelta d;
  d.index = 1;
  engine::GeneratedToken t;
  t.id = 42;
  t.bytes = "h\xc3";
  t.special = true;
  t.logprob = -0.25f;
  t.top_logprobs = {{42, -0.25f, "h"}, {7, -1.5f, ""}};
  d.tokens = {t, {.id = 5, .bytes = "i", .control = true}};
  d.text = "hi";
  d.finish = engine::FinishReason::kDeadline;
  d.stop_string = "</s>";
  d.stop_token = 9;
  u.sequences = {d, {.index = 0}};
  u.prompt_logprobs = {{.id = 1}, {.id = 2, .logprob = -3}};
  u.finished = true;
  u.status = Status::Internal("model failed");
  return u;
}

TEST(UnitMessages, EveryKindReadsBackAsWritten) {
  std::string batch;
  AppendUnitMessage({.kind = UnitMessageKind::kAdd, .request = 11, .body = "{\"prompt\":[1]}"}, &batch);
  AppendUnitMessage({.kind = UnitMessageKind::kAbort, .request = 12}, &batch);
  AppendUnitMessage({.kind = UnitMessageKind::kAccepted, .request = 13, .status = Status::Unavailable("full")}, &batch);
  AppendUnitMessage({.kind = UnitMessageKind::kUpdate, .request = 14, .update = SampleUpdate()}, &batch);
  AppendUnitMessage({.kind = UnitMessageKind::kFigures, .figures = {1, 2, 3, 4, 5, 6}}, &batch);
  auto parsed = ParseUnitMessages(batch);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_EQ(parsed->size(), 5u);
  const RankEngineFigures& f = (*parsed)[4].figures;
  EXPECT_EQ(f.running, 1);
  EXPECT_EQ(f.waiting, 2);
  EXPECT_EQ(f.kv_blocks_used, 3);
  EXPECT_EQ(f.kv_blocks_total, 4);
  EXPECT_EQ(f.queued_prefill_tokens, 5);
  EXPECT_EQ(f.preemptions, 6);
  const std::vector<UnitMessage>& m = *parsed;
  EXPECT_EQ(m[0].kind, UnitMessageKind::kAdd);
  EXPECT_EQ(m[0].request, 11u);
  EXPECT_EQ(m[0].body, "{\"prompt\":[1]}");
  EXPECT_EQ(m[1].kind, UnitMessageKind::kAbort);
  EXPECT_EQ(m[1].request, 12u);
  EXPECT_EQ(m[2].status.code(), StatusCode::kUnavailable);
  EXPECT_EQ(m[2].status.message(), "full");
  const engine::RequestUpdate want = SampleUpdate();
  const engine::RequestUpdate& got = m[3].update;
  EXPECT_EQ(got.id, 14u);  // the request named by the message
  EXPECT_EQ(got.prompt_tokens, 7);
  EXPECT_EQ(got.prompt_cache_hit_tokens, 3);
  EXPECT_EQ(got.seed, want.seed);
  ASSERT_EQ(got.sequences.size(), 2u);
  const engine::SequenceDelta& d = got.sequences[0];
  EXPECT_EQ(d.index, 1);
  ASSERT_EQ(d.tokens.size(), 2u);
  EXPECT_EQ(d.tokens[0].id, 42);
  EXPECT_EQ(d.tokens[0].bytes, "h\xc3");
  EXPECT_TRUE(d.tokens[0].special);
  EXPECT_FALSE(d.tokens[0].control);
  EXPECT_EQ(d.tokens[0].logprob, -0.25f);
  ASSERT_EQ(d.tokens[0].top_logprobs.size(), 2u);
  EXPECT_EQ(d.tokens[0].top_logprobs[1].id, 7);
  EXPECT_EQ(d.tokens[0].top_logprobs[1].logprob, -1.5f);
  EXPECT_EQ(d.tokens[0].top_logprobs[0].bytes, "h");
  EXPECT_TRUE(d.tokens[1].control);
  EXPECT_EQ(d.text, "hi");
  ASSERT_TRUE(d.finish.has_value());
  EXPECT_EQ(*d.finish, engine::FinishReason::kDeadline);
  EXPECT_EQ(d.stop_string, "</s>");
  EXPECT_EQ(d.stop_token, 9);
  EXPECT_FALSE(got.sequences[1].finish.has_value());
  EXPECT_EQ(got.sequences[1].stop_token, -1);
  ASSERT_EQ(got.prompt_logprobs.size(), 2u);
  EXPECT_EQ(got.prompt_logprobs[1].logprob, -3);
  EXPECT_TRUE(got.finished);
  EXPECT_EQ(got.status.code(), StatusCode::kInternal);
  EXPECT_EQ(got.status.message(), "model failed");
}

TEST(UnitMessages, MalformedBatchesAreOneError) {
  std::string batch;
  AppendUnitMessage({.kind = UnitMessageKind::kUpdate, .request = 1, .update = SampleUpdate()}, &batch);
  // Every cut short of the whole message is malformed.
  for (size_t cut = 1; cut < batch.size(); ++cut)
    EXPECT_EQ(ParseUnitMessages(std::string_view(batch).substr(0, cut)).status().code(), StatusCode::kDataLoss) << cut;
  std::string bad_kind = batch;
  bad_kind[0] = 9;
  EXPECT_FALSE(ParseUnitMessages(bad_kind).ok());
  // A list count far past the bytes that follow (the sequence count: kind 1 + request 8 + three 8-byte fields).
  std::string huge_count = batch;
  huge_count[1 + 8 + 24 + 7] = 0x7f;
  EXPECT_FALSE(ParseUnitMessages(huge_count).ok());
  EXPECT_TRUE(ParseUnitMessages("").ok());
}

}  // namespace
}  // namespace deepinfer::parallel
