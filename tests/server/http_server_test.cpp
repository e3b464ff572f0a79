// The HTTP transport against a real loopback socket: keep-alive, pipelining, chunked bodies both ways,
// the header/body limits, timeouts, streaming with per-event flush, and cancellation when the client
// goes away or stops reading. The handler is a small one written here; the server is the real one.
#include <algorithm>
#include "server/http_server.h"

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "raw_client.h"

namespace deepinfer::server {
namespace {

using test_support::RawClient;

constexpr int kBigBlocks = 384;  // 24 MiB
constexpr int kMixedChunks = 4000;

// Chunk i of /mixed: its index, then filler whose length cycles through 0..8999 with a step prime to
// the cycle, so consecutive chunks differ in size and any reordering or loss shows in the bytes.
std::string MixedChunk(int i) {
  std::string chunk = "<" + std::to_string(i) + ">";
  chunk.append(static_cast<size_t>((i * 7919) % 9000), static_cast<char>('a' + i % 26));
  return chunk;
}

class TestHandler : public HttpHandler {
 public:
  ~TestHandler() override { JoinAll(); }

  void Handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel) override {
    handled.fetch_add(1);
    if (request.path == "/echo") {
      HttpResponse r;
      r.content_type = "text/plain";
      r.body = request.method + " " + request.target + " " + request.body;
      channel->Respond(std::move(r));
    } else if (request.path == "/stream") {
      // Ten events from another thread, 5 ms apart: each must reach the client before the next is made.
      channel->StartStream(200, "text/event-stream", {});
      Spawn([channel] {
        for (int i = 0; i < 10; ++i) {
          channel->Write("data: " + std::to_string(i) + "\n\n", NowNanos());
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        channel->End();
      });
    } else if (request.path == "/hold") {
      channel->OnCancel([this] { cancelled.fetch_add(1); });
      held.push_back(channel);  // never answered
    } else if (request.path == "/big") {
      // kBigBlocks blocks of 64 KiB, block i all of letter i % 26, written at once: more than the
      // socket takes, so the writes go out partly straight into the socket and partly asynchronously.
      channel->StartStream(200, "application/octet-stream", {});
      Spawn([channel] {
        for (int i = 0; i < kBigBlocks; ++i) channel->Write(std::string(64 * 1024, static_cast<char>('a' + i % 26)), NowNanos());
        channel->End();
      });
    } else if (request.path == "/mixed") {
      // kMixedChunks chunks of 1 to ~9 KB from another thread, as fast as they come, while the client
      // reads in bursts: the socket fills and drains again and again, so the writes switch between going
      // straight into the socket and through the connection's strand many times. (The client keeps the
      // default receive buffer: one far below loopback's 64 KiB segment leaves TCP to zero-window probes
      // with exponential back-off, and the stream crawls whatever the server does.)
      channel->StartStream(200, "application/octet-stream", {});
      Spawn([channel] {
        for (int i = 0; i < kMixedChunks; ++i) channel->Write(MixedChunk(i), NowNanos());
        channel->End();
      });
    } else if (request.path == "/flood") {
      channel->OnCancel([this] { cancelled.fetch_add(1); });
      channel->StartStream(200, "text/event-stream", {});
      Spawn([channel] {
        const std::string block(64 * 1024, 'x');
        for (int i = 0; i < 100000 && !channel->cancelled(); ++i) {
          channel->Write(block);
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
      });
    } else {
      HttpResponse r;
      r.status = 404;
      channel->Respond(std::move(r));
    }
  }

  HttpResponse TransportError(int status, std::string_view path, std::string_view message) override {
    HttpResponse r;
    r.status = status;
    r.content_type = "text/plain";
    r.body = std::string(path) + "|" + std::string(message);
    return r;
  }

  void Spawn(std::function<void()> fn) {
    std::lock_guard lock(mu_);
    threads_.emplace_back(std::move(fn));
  }
  void JoinAll() {
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  std::atomic<int> handled{0};
  std::atomic<int> cancelled{0};
  std::vector<std::shared_ptr<ResponseChannel>> held;

 private:
  std::mutex mu_;
  std::vector<std::thread> threads_;
};

class HttpServerTest : public ::testing::Test {
 protected:
  void StartServer(HttpServerOptions options = {}) {
    options.port = 0;
    auto server = HttpServer::Create(options, &handler_);
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(*server);
    server_->Start();
  }
  void TearDown() override {
    if (server_) {
      server_->CancelAll();
      handler_.JoinAll();
      // Channels hold the server's executor: none may outlive the server (see http_server.h).
      handler_.held.clear();
      server_->Stop();
    }
  }
  template <typename Pred>
  static bool Eventually(Pred pred, double seconds = 5) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return pred();
  }

  TestHandler handler_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartServer();
  RawClient client(server_->port());
  ASSERT_TRUE(client.connected());
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(client.Send("POST /echo?i=" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"));
    int status;
    std::string headers, body;
    ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
    EXPECT_EQ(status, 200);
    EXPECT_EQ(body, "POST /echo?i=" + std::to_string(i) + " abc");
  }
  EXPECT_EQ(server_->counters().connections_total, 1);
}

TEST_F(HttpServerTest, PipelinedRequestsAreAnsweredInOrder) {
  StartServer();
  RawClient client(server_->port());
  std::string all;
  for (int i = 0; i < 20; ++i) all += "GET /echo?n=" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_TRUE(client.Send(all));
  for (int i = 0; i < 20; ++i) {
    int status;
    std::string headers, body;
    ASSERT_TRUE(client.ReadResponse(&status, &headers, &body)) << i;
    EXPECT_EQ(body, "GET /echo?n=" + std::to_string(i) + " ");
  }
}

TEST_F(HttpServerTest, ChunkedRequestBodyIsDecoded) {
  StartServer();
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                          "3\r\nabc\r\n4\r\ndefg\r\n0\r\n\r\n"));
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(body, "POST /echo abcdefg");
}

TEST_F(HttpServerTest, ExpectContinueGets100BeforeTheBody) {
  StartServer();
  RawClient client(server_->port());
  ASSERT_TRUE(client.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"));
  ASSERT_TRUE(client.ReadUntil([](const std::string& b) { return b.find("\r\n\r\n") != std::string::npos; }));
  EXPECT_EQ(client.buffer().rfind("HTTP/1.1 100 Continue\r\n\r\n", 0), 0u);
  ASSERT_TRUE(client.Send("hi"));
  ASSERT_TRUE(client.ReadUntil([](const std::string& b) { return b.find(" hi") != std::string::npos; }));
  EXPECT_NE(client.buffer().find("200 OK"), std::string::npos);
}

TEST_F(HttpServerTest, OversizedBodyIs413BeforeItIsRead) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  StartServer(options);
  RawClient client(server_->port());
  // Only the headers are sent: the declared length alone must be refused, and the connection closed.
  ASSERT_TRUE(client.Send("POST /v1/messages HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n"));
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 413);
  EXPECT_EQ(body.rfind("/v1/messages|", 0), 0u) << body;
  EXPECT_TRUE(client.ReadToEof());
  EXPECT_EQ(handler_.handled.load(), 0);
}

TEST_F(HttpServerTest, OversizedChunkedBodyIs413) {
  HttpServerOptions options;
  options.max_body_bytes = 1000;
  StartServer(options);
  RawClient client(server_->port());
  std::string request = "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 5; ++i) request += "190\r\n" + std::string(400, 'a') + "\r\n";
  request += "0\r\n\r\n";
  client.Send(request);
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 413);
  EXPECT_EQ(handler_.handled.load(), 0);
}

TEST_F(HttpServerTest, OversizedHeadersAre431) {
  HttpServerOptions options;
  options.max_header_bytes = 2048;
  StartServer(options);
  RawClient client(server_->port());
  client.Send("GET /echo HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4096, 'a') + "\r\n\r\n");
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 431);
  EXPECT_TRUE(client.ReadToEof());
}

TEST_F(HttpServerTest, MalformedRequestLineIs400AndTheServerGoesOn) {
  StartServer();
  {
    RawClient client(server_->port());
    client.Send("NOT HTTP AT ALL\r\n\r\n");
    int status;
    std::string headers, body;
    ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
    EXPECT_EQ(status, 400);
    EXPECT_TRUE(client.ReadToEof());
  }
  RawClient client(server_->port());
  client.Send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 200);
}

TEST_F(HttpServerTest, SlowHeadersAreCutOffAtTheTimeout) {
  HttpServerOptions options;
  options.header_timeout_s = 0.3;
  StartServer(options);
  RawClient client(server_->port());
  client.Send("GET /echo HTTP/1.1\r\nHost:");  // and nothing more
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(client.ReadToEof(5));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GE(waited, 0.2);
  EXPECT_LT(waited, 3.0);
}

TEST_F(HttpServerTest, StreamIsChunkedAndEachEventArrivesAsItIsMade) {
  StartServer();
  RawClient client(server_->port());
  client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  // The first event arrives while the producer still has ~45 ms of events to go.
  ASSERT_TRUE(client.ReadUntil([](const std::string& b) { return b.find("data: 0\n\n") != std::string::npos; }));
  EXPECT_EQ(client.buffer().find("data: 9\n\n"), std::string::npos);
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 200);
  EXPECT_NE(headers.find("text/event-stream"), std::string::npos);
  std::string expected;
  for (int i = 0; i < 10; ++i) expected += "data: " + std::to_string(i) + "\n\n";
  EXPECT_EQ(body, expected);
  // Every write had an origin: each reached the socket after it and within the test's lifetime.
  EXPECT_GE(server_->stream_latency().count(), 1u);
  EXPECT_LE(server_->stream_latency().count(), 10u);
  EXPECT_GT(server_->stream_latency().min(), 0.0);
  EXPECT_LT(server_->stream_latency().max(), 5.0);
  // The connection stays usable after the stream.
  client.Send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(body, "GET /echo ");
}

TEST_F(HttpServerTest, ClientThatDisconnectsCancelsItsExchange) {
  StartServer();
  {
    RawClient client(server_->port());
    client.Send("GET /hold HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(Eventually([&] { return handler_.handled.load() == 1; }));
  }
  EXPECT_TRUE(Eventually([&] { return handler_.cancelled.load() == 1; }));
  EXPECT_TRUE(Eventually([&] { return server_->counters().exchanges_active == 0; }));
  EXPECT_EQ(server_->counters().exchanges_cancelled, 1);
}

// With several io threads the watch for a closed peer (armed during each exchange) can complete on one
// thread after another has already read the next request from the same readiness: that is no disconnect.
TEST_F(HttpServerTest, KeepAliveOnSeveralIoThreadsIsNeverTakenForADisconnect) {
  HttpServerOptions options;
  options.io_threads = 4;
  StartServer(options);
  RawClient client(server_->port());
  for (int i = 0; i < 1000; ++i) {
    client.Send("GET /echo?" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n");
    int status;
    std::string headers, body;
    ASSERT_TRUE(client.ReadResponse(&status, &headers, &body)) << "request " << i;
    ASSERT_EQ(body, "GET /echo?" + std::to_string(i) + " ");
  }
  EXPECT_EQ(server_->counters().exchanges_cancelled, 0);
}

TEST_F(HttpServerTest, PipelinedBytesDuringAnExchangeDoNotCancelIt) {
  StartServer();
  RawClient client(server_->port());
  client.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\nGET /echo?after HTTP/1.1\r\nHost: x\r\n\r\n");
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(body.size(), 10u * 9u);
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(body, "GET /echo?after ");
  EXPECT_EQ(handler_.cancelled.load(), 0);
}

TEST_F(HttpServerTest, StreamLargerThanTheSocketTakesArrivesWholeAndInOrder) {
  HttpServerOptions options;
  options.max_pending_stream_bytes = 64 << 20;
  StartServer(options);
  RawClient client(server_->port());
  client.Send("GET /big HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  // Let the server fill the socket's buffers (loopback's grow to a few MiB) before reading anything.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(client.ReadToEof(30));
  int status;
  std::string headers, body;
  size_t consumed = 0;
  ASSERT_TRUE(RawClient::Parse(client.buffer(), &status, &headers, &body, &consumed));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(consumed, client.buffer().size());
  ASSERT_EQ(body.size(), size_t{kBigBlocks} * 64 * 1024);
  for (int i = 0; i < kBigBlocks; ++i) {
    const std::string_view block(body.data() + static_cast<size_t>(i) * 64 * 1024, 64 * 1024);
    ASSERT_EQ(block.find_first_not_of(static_cast<char>('a' + i % 26)), std::string_view::npos) << "block " << i;
  }
  EXPECT_GE(server_->stream_latency().count(), 1u);
  EXPECT_EQ(handler_.cancelled.load(), 0);
}

TEST_F(HttpServerTest, ChunksFromAnotherThreadArriveInOrderWhileTheReaderLagsAndCatchesUp) {
  HttpServerOptions options;
  options.max_pending_stream_bytes = 64 << 20;
  StartServer(options);
  RawClient client(server_->port());
  client.Send("GET /mixed HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  ASSERT_TRUE(client.ReadToEofInBursts(64 * 1024, std::chrono::milliseconds(2), 60)) << client.buffer().size() << " bytes read";
  int status;
  std::string headers, body;
  size_t consumed = 0;
  ASSERT_TRUE(RawClient::Parse(client.buffer(), &status, &headers, &body, &consumed));
  EXPECT_EQ(status, 200);
  EXPECT_EQ(consumed, client.buffer().size());
  std::string expected;
  for (int i = 0; i < kMixedChunks; ++i) expected += MixedChunk(i);
  ASSERT_EQ(body.size(), expected.size());
  EXPECT_TRUE(body == expected) << "first difference at byte " << std::mismatch(body.begin(), body.end(), expected.begin()).first - body.begin();
  // Each write that reached the socket at once, and each one finished later, counted its latency once
  // at most (writes queued behind one another count as one).
  EXPECT_GE(server_->stream_latency().count(), 1u);
  EXPECT_LE(server_->stream_latency().count(), static_cast<uint64_t>(kMixedChunks));
  EXPECT_EQ(handler_.cancelled.load(), 0);
}

TEST_F(HttpServerTest, ReaderThatStallsIsCancelled) {
  HttpServerOptions options;
  options.max_pending_stream_bytes = 1 << 20;
  options.write_timeout_s = 2;
  StartServer(options);
  RawClient client(server_->port());
  client.SetReceiveBuffer(4096);
  client.Send("GET /flood HTTP/1.1\r\nHost: x\r\n\r\n");
  // Never read: the socket buffers fill, unsent bytes pass the bound (or the write times out).
  EXPECT_TRUE(Eventually([&] { return handler_.cancelled.load() == 1; }, 10));
}

TEST_F(HttpServerTest, ConnectionsOverTheLimitGet503) {
  HttpServerOptions options;
  options.max_connections = 2;
  StartServer(options);
  RawClient a(server_->port()), b(server_->port());
  ASSERT_TRUE(Eventually([&] { return server_->counters().connections_open == 2; }));
  RawClient c(server_->port());
  int status;
  std::string headers, body;
  ASSERT_TRUE(c.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 503);
  a.Send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(a.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 200);
}

TEST_F(HttpServerTest, StopAcceptingLetsTheExchangeInFlightFinish) {
  StartServer();
  RawClient idle(server_->port());
  RawClient busy(server_->port());
  busy.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(busy.ReadUntil([](const std::string& b) { return b.find("data: 0") != std::string::npos; }));
  server_->StopAccepting();
  EXPECT_TRUE(idle.ReadToEof());  // closed between requests
  int status;
  std::string headers, body;
  ASSERT_TRUE(busy.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(body.size(), 10u * 9u);
  EXPECT_TRUE(busy.ReadToEof());
  RawClient late(server_->port());
  EXPECT_TRUE(!late.connected() || late.ReadToEof());
}

// Property: whatever bytes arrive (mutations of valid requests: cut, repeated, flipped, spliced), the
// server answers with a well-formed response or closes, never hangs past its timeouts, and still serves
// a clean request afterwards.
TEST_F(HttpServerTest, MalformedHttpNeverBreaksTheServer) {
  HttpServerOptions options;
  options.header_timeout_s = 0.2;
  options.body_timeout_s = 0.2;
  options.max_body_bytes = 4096;
  options.max_header_bytes = 4096;
  StartServer(options);
  const std::vector<std::string> seeds = {
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello",
      "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
      "GET /stream HTTP/1.1\r\nHost: x\r\n\r\n",
      "GET /echo HTTP/1.0\r\n\r\n",
  };
  std::mt19937 rng(1234);
  for (int round = 0; round < 300; ++round) {
    std::string bytes = seeds[rng() % seeds.size()];
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % (bytes.size() + 1);
      switch (rng() % 6) {
        case 0: bytes.resize(pos); break;
        case 1: if (pos < bytes.size()) bytes[pos] = static_cast<char>(rng()); break;
        case 2: bytes.insert(pos, std::string(1 + rng() % 8, static_cast<char>(rng()))); break;
        case 3: bytes.insert(pos, bytes.substr(0, rng() % (bytes.size() + 1))); break;
        case 4: bytes.insert(pos, "\r\nContent-Length: " + std::to_string(static_cast<int>(rng() % 100000) - 10) + "\r\n"); break;
        case 5: bytes.insert(pos, std::string(rng() % 6000, 'A')); break;
      }
    }
    RawClient client(server_->port());
    client.Send(bytes);
    if (round % 2 == 0) client.ShutdownWrite();
    // Whatever came back must parse as responses; the server closes or waits within its timeouts.
    client.ReadToEof(3);
    std::string rest = client.buffer();
    while (!rest.empty()) {
      int status;
      std::string headers, body;
      size_t consumed = 0;
      if (!RawClient::Parse(rest, &status, &headers, &body, &consumed)) break;
      EXPECT_GE(status, 100);
      EXPECT_LT(status, 600);
      rest.erase(0, consumed);
    }
  }
  RawClient client(server_->port());
  client.Send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n");
  int status;
  std::string headers, body;
  ASSERT_TRUE(client.ReadResponse(&status, &headers, &body));
  EXPECT_EQ(status, 200);
  EXPECT_TRUE(Eventually([&] { return server_->counters().exchanges_active == 0; }));
}

}  // namespace
}  // namespace deepinfer::server
