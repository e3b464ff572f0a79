// Names of full KV blocks: a 128-bit hash chained from the parent block's hash and the block's token ids,
// rooted in everything else that changes a block's bytes (the weights fingerprint, the compute and KV
// precisions, and a per-tenant cache salt). Equal names mean equal contents, whichever sequence computed
// them, so a block may be shared by reference, kept after its sequence ends and found again by any later
// request with the same prefix (and salt).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "core/hash.h"
#include "kvcache/block_size.h"

namespace deepinfer::kvcache {

using BlockHash = Hash128;
using BlockHashHasher = Hash128Hasher;

// The root of a chain: XXH3-128 over a version tag, the weights fingerprint, the model's compute and KV
// precision names (as the caller spells them) and the salt, each length-prefixed so no two different
// inputs concatenate alike.
BlockHash RootHash(const Hash128& weights_fingerprint, std::string_view compute_precision,
                   std::string_view kv_precision, std::string_view cache_salt);

// XXH3-128 over the parent's hash and the block's token ids (int32, little-endian).
BlockHash ChainHash(const BlockHash& parent, std::span<const int32_t> block_tokens);

// The hashes of every full block of `tokens` (floor(size / 128) of them), chained from `root`. `known`
// hashes already computed for a prefix of the same tokens are reused (incremental growth of a sequence).
void ExtendBlockHashes(const BlockHash& root, std::span<const int32_t> tokens, std::vector<BlockHash>* hashes);

}  // namespace deepinfer::kvcache
