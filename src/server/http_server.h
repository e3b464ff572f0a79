// The HTTP/1.1 transport of `deepinfer serve`, on Boost.Asio/Beast (kept out of this header: the rest of
// the server sees plain structs). It owns sockets, parsing and the limits that keep untrusted clients
// bounded; what a request means is the Handler's business.
//
// Per connection, one request is served at a time: the next request is read only after the response
// to the current one has been written completely, so pipelined requests are answered in order and a
// client that pipelines cannot make the server buffer more than one request's limits. While a response
// is being produced, the socket is watched for the peer closing; that (or a write that makes no progress
// within write_timeout, or a stream whose unsent bytes pass max_pending_stream_bytes) cancels the
// exchange: the handler's cancel callback runs once, on a server thread, and later writes are dropped.
//
// Thread model: `io_threads` threads run the event loop. Handlers are called on one of them and must not
// block; ResponseChannel methods may be called from any thread (they post to the connection's strand),
// so a generation engine can hand tokens to a channel without waiting for the network. A channel holds
// the server's executor: every channel must be released before the HttpServer is destroyed.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/status.h"

namespace deepinfer::server {

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;  // 0: an ephemeral port (see HttpServer::port())
  int io_threads = 1;
  // Request line + headers, and body (Content-Length or chunked), in bytes.
  size_t max_header_bytes = 64 * 1024;
  size_t max_body_bytes = 32 * 1024 * 1024;
  // How long an idle keep-alive connection (or a new one) may take to deliver a request's headers, and
  // then its body; how long one write may stall before the client counts as gone.
  double header_timeout_s = 5;
  double body_timeout_s = 60;
  double write_timeout_s = 30;
  // Bytes queued on a stream and not yet accepted by the socket: past this the reader counts as stalled.
  size_t max_pending_stream_bytes = 8 * 1024 * 1024;
  // Connections beyond this are answered 503 and closed as they arrive.
  int max_connections = 4096;
  // Scheduler time slice the io threads ask for (core/sched.h; 0: the kernel's default). Short, so that
  // an io thread woken by a token preempts compute threads instead of waiting for their slice to end.
  int64_t io_thread_slice_us = 0;
};

struct HttpHeader {
  std::string name;  // lower case
  std::string value;
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query as sent
  std::string path;    // target without the query
  std::vector<HttpHeader> headers;
  std::string body;
  std::string remote;  // peer address, for logs
  // The header's value, or empty (names compared case-insensitively; the first occurrence wins).
  std::string_view Header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::vector<HttpHeader> headers;  // extra headers (x-request-id, retry-after, ...)
  std::string body;
};

// The way back to one request's client. Exactly one of Respond() or StartStream() ... End() completes the
// exchange; calls after the exchange completed or was cancelled are ignored.
class ResponseChannel {
 public:
  virtual ~ResponseChannel() = default;
  virtual void Respond(HttpResponse response) = 0;
  // Starts a chunked response (server-sent events: content type text/event-stream, no caching).
  virtual void StartStream(int status, std::string content_type, std::vector<HttpHeader> headers) = 0;
  // Queues bytes of the stream; they are written as soon as the socket takes them (each call is flushed
  // without waiting for more: on the strand, straight into the socket when it has room; several queued
  // while a write is in flight go out together).
  virtual void Write(std::string data) = 0;
  // The same, for bytes that stand for something made at `origin_nanos` (NowNanos(), e.g. when the engine
  // delivered the token): the time from then until the socket accepted them is recorded in
  // HttpServer::stream_latency().
  virtual void Write(std::string data, int64_t origin_nanos) = 0;
  virtual void End() = 0;
  // Runs `cancel` once if the exchange dies before it completes (peer closed, stalled writes, shutdown).
  // If that already happened, it runs now, on the calling thread.
  virtual void OnCancel(std::function<void()> cancel) = 0;
  // True once the exchange was cancelled (safe from any thread).
  virtual bool cancelled() const = 0;
  // Runs `fn` on the connection's strand, serialized with this channel's own work (inline when called
  // there already). It runs after cancellation too, so that the caller can clean up there; it is dropped
  // only when the server stops.
  virtual void Post(std::function<void()> fn) = 0;
};

class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual void Handle(HttpRequest request, std::shared_ptr<ResponseChannel> channel) = 0;
  // A request the transport rejected before the handler saw it (status 400, 413 or 431): the handler
  // shapes the error body for the request's path (the protocols differ), `path` empty when the request
  // line itself could not be read.
  virtual HttpResponse TransportError(int status, std::string_view path, std::string_view message) = 0;
};

struct HttpServerCounters {
  int64_t connections_open = 0;
  int64_t connections_total = 0;
  int64_t connections_rejected = 0;  // over max_connections
  int64_t exchanges_active = 0;      // requests read and not yet answered
  int64_t exchanges_cancelled = 0;   // peer gone, stalled, or shut down mid-response
  int64_t transport_errors = 0;      // malformed HTTP, over-limit headers or bodies, timeouts
};

class HttpServer {
 public:
  // Binds and listens (the port is taken when this returns); serving starts with Start().
  static Result<std::unique_ptr<HttpServer>> Create(const HttpServerOptions& options, HttpHandler* handler);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Runs the io threads in the background.
  void Start();
  // Stops accepting; connections waiting for a request are closed, exchanges in flight go on.
  void StopAccepting();
  // Cancels every exchange still in flight and closes every connection.
  void CancelAll();
  // Stops the io threads (after CancelAll, or they may drop what was being written) and joins them.
  void Stop();
  HttpServerCounters counters() const;
  // Seconds from a stream write's origin (see ResponseChannel::Write) to the socket taking its bytes.
  const LatencyHistogram& stream_latency() const;

  struct Impl;  // http_server.cpp

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// "Bad Request", "Not Found", ... for a status code ("" when unknown).
std::string_view HttpStatusText(int status);

}  // namespace deepinfer::server
