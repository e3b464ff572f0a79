#include "server/responses_store.h"

#include "core/clock.h"

namespace deepinfer::server {

ResponsesStore::ResponsesStore(int64_t max_entries, double ttl_s)
    : max_entries_(std::max<int64_t>(max_entries, 0)), ttl_nanos_(static_cast<int64_t>(ttl_s * 1e9)) {}

void ResponsesStore::DropExpired(int64_t now_nanos) {
  while (!order_.empty()) {
    auto it = entries_.find(order_.front());
    if (it != entries_.end() && it->second.expires_nanos > now_nanos) return;
    if (it != entries_.end()) entries_.erase(it);
    order_.pop_front();
  }
}

void ResponsesStore::Put(const std::string& id, StoredResponse response) {
  if (max_entries_ == 0) return;
  const int64_t now = NowNanos();
  MutexLock lock(&mu_);
  DropExpired(now);
  while (static_cast<int64_t>(entries_.size()) >= max_entries_ && !order_.empty()) {
    entries_.erase(order_.front());
    order_.pop_front();
  }
  if (entries_.insert_or_assign(id, Entry{std::move(response), now + ttl_nanos_}).second) order_.push_back(id);
}

std::optional<StoredResponse> ResponsesStore::Get(const std::string& id, const std::string& owner) {
  MutexLock lock(&mu_);
  DropExpired(NowNanos());
  auto it = entries_.find(id);
  if (it == entries_.end() || it->second.response.owner != owner) return std::nullopt;
  return it->second.response;
}

int64_t ResponsesStore::size() {
  MutexLock lock(&mu_);
  return static_cast<int64_t>(entries_.size());
}

}  // namespace deepinfer::server
