// The router's kept-alive GETs (health checks): one connection carries them all while the unit keeps it
// open, and one the unit closed (it restarted) is replaced without a failed GET.
#include "router/upstream.h"

#include <gtest/gtest.h>

#include "server/http_server.h"

namespace deepinfer::router {
namespace {

class HealthHandler : public server::HttpHandler {
 public:
  void Handle(server::HttpRequest request, std::shared_ptr<server::ResponseChannel> channel) override {
    server::HttpResponse r;
    r.body = "{\"path\":\"" + request.path + "\"}";
    channel->Respond(std::move(r));
  }
  server::HttpResponse TransportError(int status, std::string_view, std::string_view message) override {
    server::HttpResponse r;
    r.status = status;
    r.body = std::string(message);
    return r;
  }
};

TEST(KeptAliveGetter, ReusesOneConnectionAndReplacesOneTheUnitClosed) {
  HealthHandler handler;
  server::HttpServerOptions options;
  options.port = 0;
  auto server = server::HttpServer::Create(options, &handler);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  (*server)->Start();
  KeptAliveGetter getter("127.0.0.1", (*server)->port());
  for (int i = 0; i < 5; ++i) {
    auto r = getter.Get("/health", 10);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "{\"path\":\"/health\"}");
  }
  EXPECT_EQ(getter.connections(), 1);
  EXPECT_EQ((*server)->counters().connections_total, 1);

  // The unit restarts (on the same port): the kept connection is gone, and the next GET still succeeds, on
  // a new one.
  const int port = (*server)->port();
  (*server)->CancelAll();
  (*server)->Stop();
  server->reset();
  options.port = port;
  auto restarted = server::HttpServer::Create(options, &handler);
  ASSERT_TRUE(restarted.ok()) << restarted.status().ToString();
  (*restarted)->Start();
  auto again = getter.Get("/health", 10);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(getter.connections(), 2);
  EXPECT_EQ((*restarted)->counters().connections_total, 1);
  (*restarted)->CancelAll();
  (*restarted)->Stop();
  restarted->reset();

  // No unit there any more: an error, not a hang.
  EXPECT_FALSE(getter.Get("/health", 10).ok());
}

}  // namespace
}  // namespace deepinfer::router
