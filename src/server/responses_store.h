// Responses the server made, kept so that a later request can continue them (`previous_response_id`) or
// read them again (GET /v1/responses/{id}): in memory, bounded in entries, each for a limited time, and each
// visible only to the API key that made it (another key is told it does not exist).
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "core/mutex.h"

namespace deepinfer::server {

struct StoredResponse {
  std::string owner;                // the API key the request was made with (empty: the server has none)
  nlohmann::ordered_json input;     // the conversation's input items, earlier turns included
  nlohmann::ordered_json output;    // the response's output items
  std::string body;                 // the response object as it was answered
};

class ResponsesStore {
 public:
  // At most `max_entries` responses (the oldest goes first), each kept `ttl_s` seconds; 0 entries: none kept.
  ResponsesStore(int64_t max_entries, double ttl_s);

  void Put(const std::string& id, StoredResponse response) EXCLUDES(mu_);
  // The response if it exists, has not expired and belongs to `owner`.
  std::optional<StoredResponse> Get(const std::string& id, const std::string& owner) EXCLUDES(mu_);
  int64_t size() EXCLUDES(mu_);

 private:
  struct Entry {
    StoredResponse response;
    int64_t expires_nanos = 0;
  };
  void DropExpired(int64_t now_nanos) REQUIRES(mu_);

  const int64_t max_entries_;
  const int64_t ttl_nanos_;
  Mutex mu_;
  std::unordered_map<std::string, Entry> entries_ GUARDED_BY(mu_);
  std::deque<std::string> order_ GUARDED_BY(mu_);  // ids, oldest first (all share one TTL: also expiry order)
};

}  // namespace deepinfer::server
