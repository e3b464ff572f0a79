// The router's HTTP/1.1 client to one unit: a blocking socket whose every wait has a deadline (connect,
// send, the response head, each read of the body), so that a unit that dies, hangs or answers garbage
// costs at most that long. Response heads and chunk sizes are bounded; bodies are handed on as they
// arrive (Content-Length or chunked).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "server/http_server.h"

namespace deepinfer::router {

struct UpstreamHead {
  int status = 0;
  std::vector<server::HttpHeader> headers;  // names lower case
  bool chunked = false;
  int64_t content_length = -1;  // -1: until the connection closes (or chunked)
  std::string_view Header(std::string_view name) const;
};

class Upstream {
 public:
  Upstream() = default;
  ~Upstream();
  Upstream(const Upstream&) = delete;
  Upstream& operator=(const Upstream&) = delete;

  // Deadlines are NowNanos() values.
  Status Connect(const std::string& host, int port, int64_t deadline_nanos);
  // Sends one request (Connection: close is not asked: the unit closes when the router does).
  Status Send(std::string_view method, std::string_view target, const std::vector<server::HttpHeader>& headers,
              std::string_view body, int64_t deadline_nanos);
  Result<UpstreamHead> ReadHead(int64_t deadline_nanos);
  // Appends the body bytes that arrive before the deadline (at least one, unless the body ends) to `out`;
  // true once the body is complete. An error: the unit closed early, sent a malformed chunk, or the
  // deadline passed (kDeadlineExceeded).
  Result<bool> ReadBody(std::string* out, int64_t deadline_nanos);
  // After ReadBody said the body is complete: whether the connection may carry another request (the body
  // had a Content-Length, nothing after it arrived; a chunked body's trailers are never read).
  bool ReusableAfterResponse() const { return fd_ >= 0 && done_ && !chunked_ && !until_close_ && buffer_.empty(); }
  void Close();

 private:
  // Reads more bytes into buffer_; kDeadlineExceeded, or an error when the peer closed.
  Status Fill(int64_t deadline_nanos);

  int fd_ = -1;
  std::string buffer_;  // received, not yet consumed
  bool chunked_ = false;
  int64_t remaining_ = -1;  // Content-Length left, or of the current chunk; -1 before a chunk's size
  bool until_close_ = false;
  bool done_ = false;
};

struct SimpleResponse {
  int status = 0;
  std::string body;
};

// Whole GETs to one unit, each with one deadline, over one kept-alive connection: health checks come every
// refresh, and a connection of its own each time costs the unit an accept, a connection's setup and its
// teardown on the core its latency-bound threads run on. The connection is kept while the unit keeps it
// open; a GET that fails on a kept one (the unit closed it while idle, or restarted) is sent once more on a
// fresh one within what is left of its deadline, unless that deadline passed (a hung unit costs one
// timeout). One caller at a time.
class KeptAliveGetter {
 public:
  KeptAliveGetter(std::string host, int port) : host_(std::move(host)), port_(port) {}
  // The status and body (bounded by max_body_bytes).
  Result<SimpleResponse> Get(std::string_view target, double timeout_s, size_t max_body_bytes = 1 << 20);
  int64_t connections() const { return connections_; }  // opened so far

 private:
  Result<SimpleResponse> Exchange(std::string_view target, int64_t deadline_nanos, size_t max_body_bytes);

  std::string host_;
  int port_;
  Upstream up_;
  bool open_ = false;
  int64_t connections_ = 0;
};

}  // namespace deepinfer::router
