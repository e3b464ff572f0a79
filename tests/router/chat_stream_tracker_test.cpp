#include "router/chat_stream_tracker.h"

#include <gtest/gtest.h>

#include "server/stream_resume.h"

namespace deepinfer::router {
namespace {

using Json = nlohmann::json;

// The events of one unit's stream, as server/stream_resume.h writes them (without the blank lines).
const std::string kAnnounce = std::string(server::kResumeComment) + R"({"id":"chatcmpl-a1","created":17,"seed":99})";
std::string Ids(std::string_view ids, bool finished) {
  return std::string(server::kTokenIdsComment) + R"({"ids":)" + std::string(ids) + R"(,"finished":)" +
         (finished ? "true" : "false") + "}";
}

TEST(ChatStreamTrackerTest, ForwardsWholeGroupsAndKeepsTheirIds) {
  ChatStreamTracker t(ChatStreamProtocol::kChatCompletions);
  std::string out;
  ASSERT_TRUE(t.Take(kAnnounce, &out));
  EXPECT_TRUE(t.resumable());
  EXPECT_EQ(out, "");  // comments never reach the client
  ASSERT_TRUE(t.Take("data: {\"a\":1}", &out));
  ASSERT_TRUE(t.Take("data: {\"b\":2}", &out));
  EXPECT_EQ(out, "");  // held until the group's ids arrive
  ASSERT_TRUE(t.Take(Ids("[5,6]", false), &out));
  EXPECT_EQ(out, "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n");
  EXPECT_EQ(t.generated(), 2u);

  // A group cut short by the unit's failure is dropped: the continuation writes it again.
  out.clear();
  ASSERT_TRUE(t.Take("data: {\"c\":3}", &out));
  t.Interrupted();
  EXPECT_EQ(t.held_bytes(), 0u);
  EXPECT_FALSE(t.finished());

  const Json body = Json::parse(t.ResumeBody(Json{{"model", "m"}, {"stream", true}}));
  EXPECT_EQ(body["model"], "m");
  EXPECT_EQ(body[std::string(server::kResumeField)],
            (Json{{"token_ids", {5, 6}}, {"update_sizes", {2}}, {"seed", 99}, {"id", "chatcmpl-a1"}, {"created", 17}}));

  // The continuation announces itself with the values it was given; its groups go on as before.
  ASSERT_TRUE(t.Take(std::string(server::kResumeComment) + R"({"id":"chatcmpl-a1","created":17,"seed":99})", &out));
  ASSERT_TRUE(t.Take("data: {\"c\":3}", &out));
  ASSERT_TRUE(t.Take(Ids("[7]", true), &out));
  ASSERT_TRUE(t.Take("data: [DONE]", &out));
  EXPECT_EQ(out, "data: {\"c\":3}\n\n");
  EXPECT_TRUE(t.finished());
  t.Flush(&out);
  EXPECT_EQ(out, "data: {\"c\":3}\n\ndata: [DONE]\n\n");
  EXPECT_EQ(t.generated(), 3u);
  EXPECT_EQ(t.EndOfFinishedStream(), "data: [DONE]\n\n");
}

TEST(ChatStreamTrackerTest, AUnitWithoutResumeInformationIsRelayedAsItIs) {
  ChatStreamTracker t(ChatStreamProtocol::kMessages);
  std::string out;
  ASSERT_TRUE(t.Take("event: message_start\ndata: {}", &out));
  ASSERT_TRUE(t.Take(": a keep-alive comment", &out));
  EXPECT_EQ(out, "event: message_start\ndata: {}\n\n");
  EXPECT_FALSE(t.resumable());
  EXPECT_EQ(t.EndOfFinishedStream(), "");
}

TEST(ChatStreamTrackerTest, RenumbersResponsesEventsAcrossUnits) {
  ChatStreamTracker t(ChatStreamProtocol::kResponses);
  std::string out;
  ASSERT_TRUE(t.Take(kAnnounce, &out));
  ASSERT_TRUE(t.Take("event: e\ndata: {\"x\":\"\\\"sequence_number\\\":9\",\"sequence_number\":0}", &out));
  ASSERT_TRUE(t.Take(Ids("[1]", false), &out));
  t.Interrupted();
  // The continuation's unit counts its own events from 0, replayed ones included: the client's count goes on.
  ASSERT_TRUE(t.Take("event: e\ndata: {\"sequence_number\":7}", &out));
  ASSERT_TRUE(t.Take(Ids("[2]", false), &out));
  EXPECT_EQ(out,
            "event: e\ndata: {\"x\":\"\\\"sequence_number\\\":9\",\"sequence_number\":0}\n\n"
            "event: e\ndata: {\"sequence_number\":1}\n\n");
  const Json error = Json::parse(t.ErrorEvent("gone").substr(std::string("event: error\ndata: ").size()));
  EXPECT_EQ(error["sequence_number"], 2);
  EXPECT_EQ(error["message"], "gone");
}

TEST(ChatStreamTrackerTest, ErrorEventsTakeEachProtocolsShape) {
  ChatStreamTracker chat(ChatStreamProtocol::kChatCompletions);
  EXPECT_EQ(chat.ErrorEvent("m"), "data: {\"error\":{\"code\":\"unit_failed\",\"message\":\"m\",\"type\":\"api_error\"}}\n\n");
  ChatStreamTracker messages(ChatStreamProtocol::kMessages);
  EXPECT_EQ(messages.ErrorEvent("m"),
            "event: error\ndata: {\"error\":{\"message\":\"m\",\"type\":\"api_error\"},\"type\":\"error\"}\n\n");
}

TEST(ChatStreamTrackerTest, MalformedResumeCommentsFailTheUnit) {
  for (const std::string& bad :
       {std::string(server::kResumeComment) + "{", std::string(server::kResumeComment) + R"({"id":1,"created":1,"seed":1})",
        std::string(server::kResumeComment) + R"({"id":"x","created":1,"seed":-1})"}) {
    ChatStreamTracker t(ChatStreamProtocol::kChatCompletions);
    std::string out;
    EXPECT_FALSE(t.Take(bad, &out)) << bad;
  }
  for (const std::string& bad : {Ids("[-1]", false), Ids("[4294967296]", false), Ids("[\"1\"]", false),
                                 std::string(server::kTokenIdsComment) + R"({"ids":[1]})"}) {
    ChatStreamTracker t(ChatStreamProtocol::kChatCompletions);
    std::string out;
    ASSERT_TRUE(t.Take(kAnnounce, &out));
    EXPECT_FALSE(t.Take(bad, &out)) << bad;
  }
  // Ids before any announcement: not a stream the router asked to track.
  ChatStreamTracker t(ChatStreamProtocol::kChatCompletions);
  std::string out;
  EXPECT_FALSE(t.Take(Ids("[1]", false), &out));
}

TEST(ChatStreamTrackerTest, OnlyChatProtocolPathsAreResumable) {
  EXPECT_EQ(ResumableChatPath("/v1/chat/completions"), ChatStreamProtocol::kChatCompletions);
  EXPECT_EQ(ResumableChatPath("/v1/responses"), ChatStreamProtocol::kResponses);
  EXPECT_EQ(ResumableChatPath("/v1/messages"), ChatStreamProtocol::kMessages);
  EXPECT_FALSE(ResumableChatPath("/v1/completions"));
  EXPECT_FALSE(ResumableChatPath("/v1/messages/count_tokens"));
}

// The unit's side: the continuation field is untrusted input like the rest of the body.
TEST(StreamResumeTest, ReadsAndBoundsTheContinuationField) {
  std::optional<server::StreamResume> resume;
  ASSERT_FALSE(server::ReadStreamResume(R"({"model":"m"})", 100, 50, &resume));
  EXPECT_FALSE(resume);
  ASSERT_FALSE(server::ReadStreamResume(
      R"({"deepinfer_resume":{"token_ids":[1,49],"update_sizes":[0,1,1],"seed":3,"id":"msg_A-b","created":5}})", 100, 50,
      &resume));
  ASSERT_TRUE(resume);
  EXPECT_EQ(resume->token_ids, (std::vector<int32_t>{1, 49}));
  EXPECT_EQ(resume->update_sizes, (std::vector<size_t>{0, 1, 1}));
  EXPECT_EQ(resume->seed, 3u);
  EXPECT_EQ(resume->id, "msg_A-b");
  EXPECT_EQ(resume->created, 5);
  for (const char* bad : {
           R"({"deepinfer_resume":[]})",
           R"({"deepinfer_resume":{"token_ids":[50],"update_sizes":[1],"seed":3,"id":"x","created":5}})",   // past the vocabulary
           R"({"deepinfer_resume":{"token_ids":[1,2,3],"update_sizes":[1],"seed":3,"id":"x","created":5}})",  // more than max_ids (2)
           R"({"deepinfer_resume":{"token_ids":[1],"update_sizes":[1],"seed":-3,"id":"x","created":5}})",
           R"({"deepinfer_resume":{"token_ids":[1],"update_sizes":[1],"seed":3,"id":"a\"b","created":5}})",
           R"({"deepinfer_resume":{"token_ids":[1],"update_sizes":[1],"seed":3,"id":"","created":5}})",
           R"({"deepinfer_resume":{"token_ids":[1],"update_sizes":[1],"seed":3,"id":"x"}})",
           R"({"deepinfer_resume":{"token_ids":[1],"update_sizes":[2],"seed":3,"id":"x","created":5}})",
           R"({"deepinfer_resume":{"token_ids":[1,2],"update_sizes":[1],"seed":3,"id":"x","created":5}})",
           R"({"deepinfer_resume":{"token_ids":[1],"seed":3,"id":"x","created":5}})",
       }) {
    auto error = server::ReadStreamResume(bad, 2, 50, &resume);
    ASSERT_TRUE(error) << bad;
    EXPECT_EQ(error->status, 400);
    EXPECT_EQ(error->param, "deepinfer_resume");
  }
}

}  // namespace
}  // namespace deepinfer::router
