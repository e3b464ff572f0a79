// One byte budget shared by caches of different kinds (the window class's cached blocks and the snapshots of
// finished sequences): each member keeps its own entries in least-recently-used order and tells the budget
// their bytes; past the budget, the least recently used entry of any member is evicted first. Uses are
// ordered by a serial the budget hands out, so members need no common clock. Not thread-safe (the step
// thread owns it and its members).
#pragma once

#include <cstdint>
#include <vector>

namespace deepinfer::kvcache {

class LruBudget {
 public:
  class Member {
   public:
    virtual ~Member() = default;
    // The use serial of the member's least recently used evictable entry; 0 when it has none.
    virtual uint64_t OldestUse() const = 0;
    // Evicts that entry (which gives its bytes back through Credit).
    virtual void EvictOldest() = 0;
  };

  // budget_bytes < 0: no bound.
  explicit LruBudget(int64_t budget_bytes) : budget_(budget_bytes) {}
  LruBudget(const LruBudget&) = delete;
  LruBudget& operator=(const LruBudget&) = delete;

  bool bounded() const { return budget_ >= 0; }
  int64_t budget() const { return budget_; }
  int64_t bytes() const { return bytes_; }

  void Join(Member* member) { members_.push_back(member); }
  // A serial greater than every earlier one: the time of a use.
  uint64_t NextUse() { return ++serial_; }
  void Charge(int64_t n) { bytes_ += n; }
  void Credit(int64_t n) { bytes_ -= n; }
  // Evicts least recently used entries, of whichever member holds the oldest, until the bytes fit the
  // budget or nothing evictable is left.
  void Enforce() {
    while (bounded() && bytes_ > budget_) {
      Member* oldest = nullptr;
      uint64_t oldest_use = 0;
      for (Member* m : members_) {
        const uint64_t use = m->OldestUse();
        if (use != 0 && (oldest == nullptr || use < oldest_use)) {
          oldest = m;
          oldest_use = use;
        }
      }
      if (oldest == nullptr) return;
      oldest->EvictOldest();
    }
  }

 private:
  int64_t budget_;
  int64_t bytes_ = 0;
  uint64_t serial_ = 0;
  std::vector<Member*> members_;
};

}  // namespace deepinfer::kvcache
