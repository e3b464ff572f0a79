#include "tokenizer/piece_cache.h"

#include <cstring>

namespace deepinfer {

PieceCache& PieceCache::ForThread(uint64_t serial) {
  thread_local PieceCache cache;
  if (cache.serial_ != serial || cache.slots_.empty()) {
    cache.serial_ = serial;
    cache.Clear();
  }
  return cache;
}

void PieceCache::Clear() {
  slots_.assign(kSlots, Entry{});
  keys_.clear();
  ids_.clear();
  used_ = 0;
}

uint64_t PieceCache::Hash(std::string_view piece) {
  uint64_t h = 0xCBF29CE484222325ULL ^ piece.size();
  size_t i = 0;
  for (; i + 8 <= piece.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, piece.data() + i, 8);
    h = (h ^ w) * 0x9E3779B97F4A7C15ULL;
    h ^= h >> 29;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, piece.data() + i, piece.size() - i);
  h = (h ^ tail) * 0x9E3779B97F4A7C15ULL;
  h ^= h >> 32;
  return h;
}

bool PieceCache::Find(std::string_view piece, uint64_t hash, const int32_t** ids, size_t* count) const {
  size_t mask = kSlots - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const Entry& e = slots_[i];
    if (!e.used) return false;
    if (e.hash == hash && e.key_length == piece.size() &&
        std::memcmp(keys_.data() + e.key_offset, piece.data(), piece.size()) == 0) {
      *ids = ids_.data() + e.ids_offset;
      *count = e.id_count;
      return true;
    }
  }
}

void PieceCache::Insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t count) {
  if (piece.size() > kMaxPieceBytes || count > 255) return;
  if (used_ * 2 >= kSlots) Clear();
  size_t mask = kSlots - 1;
  size_t i = hash & mask;
  while (slots_[i].used) i = (i + 1) & mask;
  Entry& e = slots_[i];
  e.used = true;
  e.hash = hash;
  e.key_offset = static_cast<uint32_t>(keys_.size());
  e.key_length = static_cast<uint8_t>(piece.size());
  e.ids_offset = static_cast<uint32_t>(ids_.size());
  e.id_count = static_cast<uint8_t>(count);
  keys_.insert(keys_.end(), piece.begin(), piece.end());
  ids_.insert(ids_.end(), ids, ids + count);
  ++used_;
}

}  // namespace deepinfer
