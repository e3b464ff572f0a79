// The snapshot record: a round trip keeps every field and byte; anything damaged, cut short, lengthened,
// of another namespace, prefix or version, or declaring counts its position cannot have is refused.
#include "kvstore/snapshot_format.h"

#include <gtest/gtest.h>

namespace deepinfer::kvstore {
namespace {

SnapshotRecord Sample() {
  auto s = std::make_shared<kvcache::SequenceSnapshot>();
  s->num_tokens = 2 * 128 + 3;  // two full blocks, then 3 tokens
  s->prefix_first = 2;
  s->prefix_count = 1;
  s->window_first = 1;
  s->window_count = 2;
  s->state = {1, 2, 3, 4, 5};
  s->blocks.assign(300, 7);
  return {.prefix = {11, 12}, .last_block = {21, 22}, .tail = {40, 41, 42}, .snapshot = s};
}

TEST(SnapshotFormat, RoundTripAndRefusals) {
  const Hash128 ns{1, 2};
  const SnapshotRecord r = Sample();
  auto bytes = EncodeSnapshotRecord(ns, r);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->size(), kSnapshotHeaderBytes + 3 * 4 + 5 + 300);
  auto back = DecodeSnapshotRecord(*bytes, ns, r.prefix);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->tail, r.tail);
  EXPECT_EQ(back->last_block, r.last_block);
  EXPECT_EQ(back->snapshot->num_tokens, 259);
  EXPECT_EQ(back->snapshot->window_first, 1);
  EXPECT_EQ(back->snapshot->window_count, 2);
  EXPECT_EQ(back->snapshot->state, r.snapshot->state);
  EXPECT_EQ(back->snapshot->blocks, r.snapshot->blocks);

  EXPECT_EQ(DecodeSnapshotRecord(*bytes, Hash128{1, 3}, r.prefix).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeSnapshotRecord(*bytes, ns, Hash128{11, 13}).status().code(), StatusCode::kDataLoss);
  for (size_t at : {size_t{20}, size_t{130}, size_t{146}, bytes->size() - 1}) {  // header, its block, tail, blocks
    std::vector<uint8_t> bad = *bytes;
    bad[at] ^= 1;
    EXPECT_EQ(DecodeSnapshotRecord(bad, ns, r.prefix).status().code(), StatusCode::kDataLoss) << at;
  }
  std::vector<uint8_t> cut(bytes->begin(), bytes->end() - 1), longer = *bytes;
  longer.push_back(0);
  EXPECT_EQ(DecodeSnapshotRecord(cut, ns, r.prefix).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeSnapshotRecord(longer, ns, r.prefix).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(DecodeSnapshotRecord(std::span(bytes->data(), 10), ns, r.prefix).status().code(), StatusCode::kDataLoss);
  std::vector<uint8_t> other_version = *bytes;
  other_version[8] = 1;
  EXPECT_EQ(DecodeSnapshotRecord(other_version, ns, r.prefix).status().code(), StatusCode::kFailedPrecondition);
  // What a sweep reads: the block it continues, from the header alone.
  auto block = SnapshotRecordBlock(std::span(bytes->data(), kSnapshotHeaderBytes));
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  EXPECT_EQ(*block, std::optional<Hash128>(r.last_block));
  EXPECT_EQ(SnapshotRecordBlock(other_version).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(SnapshotRecordBlock(std::span(bytes->data(), 100)).status().code(), StatusCode::kDataLoss);
  std::vector<uint8_t> not_a_record = *bytes;
  not_a_record[0] = 'X';
  EXPECT_EQ(SnapshotRecordBlock(not_a_record).status().code(), StatusCode::kDataLoss);
  // A declared size past its bound is refused before anything is read or allocated.
  std::vector<uint8_t> huge = *bytes;
  huge[88 + 7] = 0x7f;
  EXPECT_EQ(DecodeSnapshotRecord(huge, ns, r.prefix).status().code(), StatusCode::kDataLoss);
}

// A state at a block boundary (a whole prompt of full blocks) has no tail and no partial prefix block: it
// round-trips; a partial block there, or a boundary before the first block, is refused.
TEST(SnapshotFormat, ABlockBoundaryStateHasNoTail) {
  const Hash128 ns{1, 2};
  SnapshotRecord r = Sample();
  auto s = std::make_shared<kvcache::SequenceSnapshot>(*r.snapshot);
  s->num_tokens = 2 * 128;
  s->prefix_count = 0;
  s->window_first = 0;  // the window blocks end at the last full one
  s->blocks.assign(200, 7);
  r.snapshot = s;
  r.tail.clear();
  auto bytes = EncodeSnapshotRecord(ns, r);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(bytes->size(), kSnapshotHeaderBytes + 5 + 200);
  auto back = DecodeSnapshotRecord(*bytes, ns, r.prefix);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->tail.empty());
  EXPECT_EQ(back->snapshot->num_tokens, 256);
  EXPECT_EQ(back->snapshot->prefix_count, 0);
  EXPECT_EQ(back->snapshot->window_count, 2);
  EXPECT_EQ(back->snapshot->blocks, s->blocks);
  EXPECT_EQ(back->last_block, r.last_block);

  auto partial = std::make_shared<kvcache::SequenceSnapshot>(*s);
  partial->prefix_count = 1;  // block 2 holds no position yet
  r.snapshot = partial;
  EXPECT_EQ(EncodeSnapshotRecord(ns, r).status().code(), StatusCode::kInvalidArgument);
  auto none = std::make_shared<kvcache::SequenceSnapshot>(*s);
  none->num_tokens = 0;
  none->prefix_first = 0;
  none->window_count = 0;
  r.snapshot = none;
  EXPECT_EQ(EncodeSnapshotRecord(ns, r).status().code(), StatusCode::kInvalidArgument);
}

TEST(SnapshotFormat, InconsistentRecordsAreNotWritten) {
  SnapshotRecord r = Sample();
  r.tail = {40, 41};  // 2 tokens for a position 3 past the blocks
  EXPECT_EQ(EncodeSnapshotRecord({}, r).status().code(), StatusCode::kInvalidArgument);
  r = Sample();
  auto s = std::make_shared<kvcache::SequenceSnapshot>(*r.snapshot);
  s->prefix_first = 1;  // the partial block follows the full ones
  r.snapshot = s;
  EXPECT_EQ(EncodeSnapshotRecord({}, r).status().code(), StatusCode::kInvalidArgument);
  r.snapshot = nullptr;
  EXPECT_EQ(EncodeSnapshotRecord({}, r).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace deepinfer::kvstore
