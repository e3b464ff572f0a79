// A per-thread memo of pre-tokenized piece -> ids. Natural text repeats a small set of pieces, so most
// pieces skip BPE. Bounded: it starts over when full.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace deepinfer::tokenizer {

class PieceCache {
 public:
  static constexpr size_t kMaxPieceBytes = 48;

  // This thread's cache for the model with `serial`. A thread keeps caches for a few models at once, so
  // alternating between two tokenizers does not empty them.
  static PieceCache& ForThread(uint64_t serial);

  // The cached ids of `piece`, or false.
  bool Find(std::string_view piece, uint64_t hash, const int32_t** ids, size_t* count) const;
  void Insert(std::string_view piece, uint64_t hash, const int32_t* ids, size_t count);
  static uint64_t Hash(std::string_view piece);

 private:
  struct Entry {
    uint64_t hash = 0;
    uint32_t key_offset = 0;
    uint32_t ids_offset = 0;
    uint8_t key_length = 0;
    uint8_t id_count = 0;
    bool used = false;
  };
  void Clear(size_t slots);
  void Grow();

  // Starts small (a thread that encodes one short prompt pays little) and doubles up to the maximum.
  static constexpr size_t kInitialSlots = 1 << 10;
  static constexpr size_t kMaxSlots = 1 << 17;
  uint64_t serial_ = 0;
  size_t used_ = 0;
  std::vector<Entry> slots_;
  std::vector<char> keys_;
  std::vector<int32_t> ids_;
};

}  // namespace deepinfer::tokenizer
