#include "tokenizer/piece_cache.h"

#include <cstring>

namespace deepinfer::tokenizer {

PieceCache& PieceCache::ForThread(uint64_t serial) {
  constexpr size_t kModelsPerThread = 4;
  thread_local PieceCache caches[kModelsPerThread];
  thread_local size_t next_victim = 0;
  for (PieceCache& c : caches) {
    if (c.serial_ == serial && !c.slots_.empty()) return c;
  }
  PieceCache& c = caches[next_victim];
  next_victim = (next_victim + 1) % kModelsPerThread;
  c.serial_ = serial;
  c.Clear(kInitialSlots);
  return c;
}

void PieceCache::Clear(size_t slots) {
  slots_.assign(slots, Entry{});
  keys_.clear();
  ids_.clear();
  used_ = 0;
}

void PieceCache::Grow() {
  std::vector<Entry> old = std::move(slots_);
  slots_.assign(old.size() * 2, Entry{});
  size_t mask = slots_.size() - 1;
  for (const Entry& e : old) {
    if (!e.used) continue;
    size_t i = e.hash & mask;
    while (slots_[i].used) i = (i + 1) & mask;
    slots_[i] = e;
  }
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
  size_t mask = slots_.size() - 1;
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
  if (used_ * 2 >= slots_.size()) {
    if (slots_.size() < kMaxSlots) {
      Grow();
    } else {
      Clear(kMaxSlots);
    }
  }
  size_t mask = slots_.size() - 1;
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

}  // namespace deepinfer::tokenizer
