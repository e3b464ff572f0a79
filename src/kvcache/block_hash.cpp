#include "kvcache/block_hash.h"

#include <algorithm>

namespace deepinfer::kvcache {

BlockHash RootHash(const Hash128& weights_fingerprint, std::string_view compute_precision,
                   std::string_view kv_precision, std::string_view cache_salt) {
  Hasher128 h;
  h.Update("deepinfer-kv-root-1");
  h.UpdateInt(weights_fingerprint.high).UpdateInt(weights_fingerprint.low);
  for (std::string_view part : {compute_precision, kv_precision, cache_salt}) {
    h.UpdateInt(part.size());
    h.Update(part);
  }
  return h.Digest();
}

BlockHash ChainHash(const BlockHash& parent, std::span<const int32_t> block_tokens) {
  Hasher128 h;
  h.UpdateInt(parent.high).UpdateInt(parent.low);
  h.UpdateInt(block_tokens.size());
  uint8_t le[4 * kBlockTokens];
  for (size_t at = 0; at < block_tokens.size(); at += kBlockTokens) {
    const size_t n = std::min<size_t>(kBlockTokens, block_tokens.size() - at);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t u = static_cast<uint32_t>(block_tokens[at + i]);
      le[4 * i] = static_cast<uint8_t>(u);
      le[4 * i + 1] = static_cast<uint8_t>(u >> 8);
      le[4 * i + 2] = static_cast<uint8_t>(u >> 16);
      le[4 * i + 3] = static_cast<uint8_t>(u >> 24);
    }
    h.Update(le, 4 * n);
  }
  return h.Digest();
}

void ExtendBlockHashes(const BlockHash& root, std::span<const int32_t> tokens, std::vector<BlockHash>* hashes) {
  const size_t full = tokens.size() / kBlockTokens;
  if (hashes->size() > full) hashes->resize(full);
  for (size_t i = hashes->size(); i < full; ++i) {
    const BlockHash& parent = i == 0 ? root : (*hashes)[i - 1];
    hashes->push_back(ChainHash(parent, tokens.subspan(i * kBlockTokens, kBlockTokens)));
  }
}

}  // namespace deepinfer::kvcache
