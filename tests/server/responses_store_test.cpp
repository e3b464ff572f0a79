// The store behind previous_response_id: bounded in entries (the oldest goes first), entries expire, and a
// response is visible only to the key that made it.
#include "server/responses_store.h"

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

namespace deepinfer::server {
namespace {

StoredResponse Made(std::string owner, std::string body) {
  StoredResponse r;
  r.owner = std::move(owner);
  r.input = nlohmann::ordered_json::array({{{"role", "user"}, {"content", "hi"}}});
  r.output = nlohmann::ordered_json::array();
  r.body = std::move(body);
  return r;
}

TEST(ResponsesStore, OnlyTheOwnerSeesAResponse) {
  ResponsesStore store(8, 3600);
  store.Put("resp_a", Made("key-1", "{\"id\":\"resp_a\"}"));
  ASSERT_TRUE(store.Get("resp_a", "key-1").has_value());
  EXPECT_EQ(store.Get("resp_a", "key-1")->body, "{\"id\":\"resp_a\"}");
  EXPECT_EQ(store.Get("resp_a", "key-1")->input[0]["content"], "hi");
  EXPECT_FALSE(store.Get("resp_a", "key-2").has_value());
  EXPECT_FALSE(store.Get("resp_a", "").has_value());
  EXPECT_FALSE(store.Get("resp_b", "key-1").has_value());
}

TEST(ResponsesStore, TheOldestGoesWhenFull) {
  ResponsesStore store(2, 3600);
  store.Put("resp_1", Made("", "1"));
  store.Put("resp_2", Made("", "2"));
  store.Put("resp_3", Made("", "3"));
  EXPECT_EQ(store.size(), 2);
  EXPECT_FALSE(store.Get("resp_1", "").has_value());
  EXPECT_TRUE(store.Get("resp_2", "").has_value());
  EXPECT_TRUE(store.Get("resp_3", "").has_value());
}

TEST(ResponsesStore, EntriesExpire) {
  ResponsesStore store(8, 0.02);
  store.Put("resp_1", Made("", "1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_FALSE(store.Get("resp_1", "").has_value());
  EXPECT_EQ(store.size(), 0);
}

TEST(ResponsesStore, ZeroEntriesKeepsNothing) {
  ResponsesStore store(0, 3600);
  store.Put("resp_1", Made("", "1"));
  EXPECT_FALSE(store.Get("resp_1", "").has_value());
}

}  // namespace
}  // namespace deepinfer::server
