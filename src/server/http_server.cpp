#include "server/http_server.h"

#include <array>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/socket.h>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "core/log.h"
#include "core/sched.h"

namespace deepinfer::server {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::chrono::steady_clock::duration Seconds(double s) {
  return std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(s));
}

constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";
constexpr std::string_view kCrlf = "\r\n";

// Appends `data` as one chunk of a chunked body (size line, the bytes, CRLF), with room reserved for
// `extra` more bytes after it.
void AppendChunk(std::string_view data, size_t extra, std::string* out) {
  char size_line[24];
  const int len = std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  out->reserve(out->size() + static_cast<size_t>(len) + data.size() + kCrlf.size() + extra);
  out->append(size_line, static_cast<size_t>(len));
  out->append(data);
  out->append(kCrlf);
}

}  // namespace

std::string_view HttpRequest::Header(std::string_view name) const {
  for (const auto& h : headers)
    if (IEquals(h.name, name)) return h.value;
  return {};
}

std::string_view HttpStatusText(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 529: return "Overloaded";
    default: return "";
  }
}

class Connection;

struct HttpServer::Impl {
  Impl(const HttpServerOptions& o, HttpHandler* h) : options(o), handler(h), acceptor(ioc) {}

  void Accept();
  void OnAccept(beast::error_code ec, tcp::socket socket);
  void ForEachConnection(const std::function<void(const std::shared_ptr<Connection>&)>& fn);

  HttpServerOptions options;
  HttpHandler* handler;
  // Declared before the io_context: connections that its pending handlers still hold unregister here
  // when the io_context is destroyed.
  std::mutex mu;
  std::map<uint64_t, std::weak_ptr<Connection>> connections;
  uint64_t next_id = 0;
  std::atomic<bool> draining{false};
  std::atomic<int64_t> connections_open{0}, connections_total{0}, connections_rejected{0}, exchanges_active{0},
      exchanges_cancelled{0}, transport_errors{0};
  LatencyHistogram stream_latency;

  net::io_context ioc;
  tcp::acceptor acceptor;
  std::optional<net::executor_work_guard<net::io_context::executor_type>> work;
  std::vector<std::thread> threads;
  int bound_port = 0;
};

// The direct path of one exchange's stream writes. While the connection has nothing queued or in flight
// on its strand, a writer on any thread (the engine's output thread) sends a chunk straight into the
// socket, without waking the event loop; the strand opens the gate when it goes idle and shuts it before
// it writes, closes the socket or ends the exchange. `queued` counts writes posted to the strand and not
// yet taken there: the gate stays shut while any is pending, so a direct write never overtakes one.
struct StreamGate {
  std::mutex mu;
  bool open = false;
  int fd = -1;
  int queued = 0;
  LatencyHistogram* latency = nullptr;  // the server's stream latency, recorded for direct writes
};

// One request's way back. Everything but the constructor may be called from any thread: calls are posted
// to the connection's strand, where `connection_` lives (a stream's chunks may go through the gate instead).
class Exchange final : public ResponseChannel, public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(std::shared_ptr<Connection> connection, net::any_io_executor executor, std::shared_ptr<StreamGate> gate)
      : connection_(std::move(connection)), executor_(std::move(executor)), gate_(std::move(gate)) {}

  void Respond(HttpResponse response) override;
  void StartStream(int status, std::string content_type, std::vector<HttpHeader> headers) override;
  void Write(std::string data) override { Write(std::move(data), 0); }
  void Write(std::string data, int64_t origin_nanos) override;
  void End() override;
  void OnCancel(std::function<void()> cancel) override {
    std::unique_lock lock(mu_);
    if (cancelled_) {
      lock.unlock();
      if (cancel) cancel();
      return;
    }
    cancel_ = std::move(cancel);
  }
  bool cancelled() const override { return cancelled_flag_.load(std::memory_order_acquire); }
  void Post(std::function<void()> fn) override { net::dispatch(executor_, std::move(fn)); }

  // On the strand: marks the exchange cancelled and runs the callback.
  void Cancel() {
    std::function<void()> cancel;
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return;
      cancelled_ = true;
      cancelled_flag_.store(true, std::memory_order_release);
      cancel.swap(cancel_);
    }
    if (cancel) cancel();
  }

  std::shared_ptr<Connection> connection_;  // strand only; reset when the exchange completes or dies

 private:
  template <typename Fn>
  void OnStrand(Fn fn) {
    net::dispatch(executor_, [self = shared_from_this(), fn = std::move(fn)]() mutable { fn(*self); });
  }

  // Sends one chunk through the open gate; false if the gate is shut (the caller posts the write). A
  // chunk the socket takes only in part is finished on the strand.
  bool TryDirectWrite(const std::string& data, int64_t origin_nanos);
  // On the strand: a write or end posted past the gate has arrived (StreamGate::queued).
  void TakeQueued() {
    std::lock_guard lock(gate_->mu);
    --gate_->queued;
  }

  net::any_io_executor executor_;
  std::shared_ptr<StreamGate> gate_;
  std::mutex mu_;
  bool cancelled_ = false;
  std::atomic<bool> cancelled_flag_{false};
  std::function<void()> cancel_;
};

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpServer::Impl* server, uint64_t id)
      : stream_(std::move(socket)),
        server_(server),
        id_(id),
        buffer_(server->options.max_header_bytes + 64 * 1024) {
    beast::error_code ec;
    auto endpoint = stream_.socket().remote_endpoint(ec);
    if (!ec) remote_ = endpoint.address().to_string() + ":" + std::to_string(endpoint.port());
    stream_.socket().set_option(tcp::no_delay(true), ec);
    // Stream chunks are first written synchronously (Flush): a full socket must answer would_block.
    stream_.socket().non_blocking(true, ec);
    server_->connections_open.fetch_add(1);
    server_->connections_total.fetch_add(1);
  }
  ~Connection() {
    server_->connections_open.fetch_sub(1);
    std::lock_guard lock(server_->mu);
    server_->connections.erase(id_);
  }

  net::any_io_executor executor() { return stream_.get_executor(); }

  void Run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->ReadHeader(); });
  }

  // Shutdown: a connection between requests closes now; one in an exchange closes when it completes.
  void CloseIfIdle() {
    if (!exchange_ && !closed_) Close();
  }
  void CancelAndClose() {
    CancelExchange("server shutting down");
    if (!closed_) Close();
  }

  // --- called on the strand by Exchange ---
  void DoRespond(Exchange* exchange, HttpResponse response) {
    if (exchange != exchange_.get() || state_ != State::kHandling) return;
    state_ = State::kWritingResponse;
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), 11);
    res->set(http::field::server, "deepinfer");
    res->set(http::field::content_type, response.content_type);
    for (auto& h : response.headers) res->insert(h.name, h.value);
    res->body() = std::move(response.body);
    res->keep_alive(keep_alive_ && !server_->draining.load());
    res->prepare_payload();
    response_ = res;
    stream_.expires_after(Seconds(server_->options.write_timeout_s));
    http::async_write(stream_, *res, [self = shared_from_this()](beast::error_code ec, size_t) {
      self->response_.reset();
      if (ec) return self->Fail("writing the response", ec);
      self->CompleteExchange();
    });
  }

  void DoStartStream(Exchange* exchange, int status, std::string content_type, std::vector<HttpHeader> headers) {
    if (exchange != exchange_.get() || state_ != State::kHandling) return;
    state_ = State::kStreaming;
    stream_header_ = std::make_unique<http::response<http::empty_body>>(static_cast<http::status>(status), 11);
    stream_header_->set(http::field::server, "deepinfer");
    stream_header_->set(http::field::content_type, content_type);
    stream_header_->set(http::field::cache_control, "no-cache");
    for (auto& h : headers) stream_header_->insert(h.name, h.value);
    stream_header_->keep_alive(keep_alive_ && !server_->draining.load());
    stream_header_->chunked(true);
    serializer_ = std::make_unique<http::response_serializer<http::empty_body>>(*stream_header_);
    writing_ = true;
    stream_.expires_after(Seconds(server_->options.write_timeout_s));
    http::async_write_header(stream_, *serializer_, [self = shared_from_this()](beast::error_code ec, size_t) {
      if (ec) return self->Fail("writing the stream header", ec);
      self->writing_ = false;
      self->Flush();
    });
  }

  void DoWrite(Exchange* exchange, std::string data, int64_t origin_nanos) {
    if (exchange != exchange_.get() || state_ != State::kStreaming || end_requested_) return;
    if (data.empty()) return;
    if (origin_nanos > 0 && (pending_origin_ == 0 || origin_nanos < pending_origin_)) pending_origin_ = origin_nanos;
    if (pending_.empty()) pending_.swap(data);
    else pending_.append(data);
    if (pending_.size() > server_->options.max_pending_stream_bytes) {
      CancelExchange("client not reading");
      return Close();
    }
    if (!writing_) Flush();
  }

  void DoEnd(Exchange* exchange) {
    if (exchange != exchange_.get() || state_ != State::kStreaming || end_requested_) return;
    end_requested_ = true;
    if (!writing_) Flush();
  }

  // The rest of a chunk the gate's direct write sent in part (the gate was open: nothing else was queued
  // or in flight), finished under the write timeout like any other.
  void DoWriteRest(Exchange* exchange, std::string rest, int64_t origin_nanos) {
    if (exchange != exchange_.get() || state_ != State::kStreaming || closed_) return;
    ShutGate();
    inflight_ = std::move(rest);
    inflight_last_ = false;
    inflight_origin_ = origin_nanos;
    WriteInflight(0);
  }

 private:
  enum class State { kReading, kHandling, kWritingResponse, kStreaming, kClosed };

  void ReadHeader() {
    if (closed_) return;
    if (server_->draining.load()) return Close();
    state_ = State::kReading;
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(std::min<size_t>(server_->options.max_header_bytes, UINT32_MAX)));
    parser_->body_limit(server_->options.max_body_bytes);
    stream_.expires_after(Seconds(server_->options.header_timeout_s));
    http::async_read_header(stream_, buffer_, *parser_,
                            [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    if (ec) return OnReadError(ec);
    const auto& header = parser_->get();
    if (IEquals(std::string_view(header[http::field::expect]), "100-continue") && !parser_->is_done()) {
      stream_.expires_after(Seconds(server_->options.body_timeout_s));
      net::async_write(stream_, net::buffer(kContinue.data(), kContinue.size()),
                       [self = shared_from_this()](beast::error_code wec, size_t) {
                         if (wec) return self->Close();
                         self->ReadBody();
                       });
      return;
    }
    if (parser_->is_done()) return Dispatch();
    ReadBody();
  }

  void ReadBody() {
    stream_.expires_after(Seconds(server_->options.body_timeout_s));
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->OnReadError(ec);
                       self->Dispatch();
                     });
  }

  // The request could not be read: a clean close between requests ends quietly; malformed or over-limit
  // requests get one error response (the connection then closes: what follows in the stream is unknown).
  void OnReadError(beast::error_code ec) {
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == net::error::operation_aborted ||
        ec == net::error::connection_reset || closed_)
      return Close();
    server_->transport_errors.fetch_add(1);
    if (ec == beast::error::timeout) return Close();
    int status = 400;
    std::string message = "malformed HTTP request: " + ec.message();
    if (ec == http::error::header_limit || ec == http::error::buffer_overflow) {
      status = 431;
      message = "request headers exceed " + std::to_string(server_->options.max_header_bytes) + " bytes";
    } else if (ec == http::error::body_limit) {
      status = 413;
      message = "request body exceeds " + std::to_string(server_->options.max_body_bytes) +
                " bytes (--max-request-bytes)";
    }
    std::string path;
    if (parser_) {  // the target is set once the request line was parsed, before any header limit
      const std::string_view target = parser_->get().target();
      path = std::string(target.substr(0, target.find('?')));
    }
    HttpResponse response = server_->handler->TransportError(status, path, message);
    WriteAndClose(std::move(response));
  }

  void WriteAndClose(HttpResponse response) {
    state_ = State::kWritingResponse;
    auto res = std::make_shared<http::response<http::string_body>>(static_cast<http::status>(response.status), 11);
    res->set(http::field::server, "deepinfer");
    res->set(http::field::content_type, response.content_type);
    for (auto& h : response.headers) res->insert(h.name, h.value);
    res->body() = std::move(response.body);
    res->keep_alive(false);
    res->prepare_payload();
    stream_.expires_after(Seconds(server_->options.write_timeout_s));
    http::async_write(stream_, *res, [self = shared_from_this(), res](beast::error_code, size_t) { self->Close(); });
  }

  void Dispatch() {
    http::request<http::string_body> message = parser_->release();
    parser_.reset();
    keep_alive_ = message.keep_alive();
    HttpRequest request;
    request.method = std::string(message.method_string());
    request.target = std::string(message.target());
    request.path = request.target.substr(0, request.target.find('?'));
    request.headers.reserve(16);
    for (const auto& field : message) request.headers.push_back({Lower(field.name_string()), std::string(field.value())});
    request.body = std::move(message.body());
    request.remote = remote_;

    state_ = State::kHandling;
    stream_.expires_never();
    gate_ = std::make_shared<StreamGate>();
    gate_->fd = stream_.socket().native_handle();
    gate_->latency = &server_->stream_latency;
    exchange_ = std::make_shared<Exchange>(shared_from_this(), stream_.get_executor(), gate_);
    server_->exchanges_active.fetch_add(1);
    Monitor();
    server_->handler->Handle(std::move(request), exchange_);
  }

  // Watches the socket while a response is produced: readable with nothing to read means the peer
  // closed. Bytes of a pipelined next request are moved into the read buffer (up to its limit) for later.
  void Monitor() {
    if (monitoring_ || closed_) return;
    monitoring_ = true;
    stream_.socket().async_wait(tcp::socket::wait_read, [self = shared_from_this()](beast::error_code ec) {
      self->monitoring_ = false;
      if (!self->exchange_ || self->closed_) return;  // between requests: the read itself sees what came
      if (ec) {
        if (ec == net::error::operation_aborted) return;
        self->CancelExchange("connection error");
        return self->Close();
      }
      beast::error_code aec;
      size_t available = self->stream_.socket().available(aec);
      if (!aec && available == 0) {
        // Readable with nothing to read: the peer closed, or (several io threads) the readiness was that
        // of the bytes this exchange's request was read from, and this handler reached the strand after
        // the read's. A peek at the (non-blocking) socket tells them apart.
        char byte;
        available = self->stream_.socket().receive(net::buffer(&byte, 1), tcp::socket::message_peek, aec);
        if (aec == net::error::would_block) {
          self->Monitor();
          return;
        }
        if (!aec && available == 0) aec = net::error::eof;
      }
      if (aec) {
        self->CancelExchange("client disconnected");
        return self->Close();
      }
      const size_t room = self->buffer_.max_size() - self->buffer_.size();
      if (room == 0) return;  // a full buffer: stop watching, writes will notice a dead peer
      auto space = self->buffer_.prepare(std::min(room, available));
      const size_t n = self->stream_.socket().read_some(space, aec);
      if (aec == net::error::would_block) return self->Monitor();
      if (aec) {
        self->CancelExchange("client disconnected");
        return self->Close();
      }
      self->buffer_.commit(n);
      self->Monitor();
    });
  }

  // Sends what is queued as one write: a chunk (size line, the bytes, CRLF) and, once the handler ended
  // the stream, the last chunk. Written straight into the socket (no completion handler waiting behind
  // other connections' work, no timer to arm); only what the socket does not take goes through an
  // asynchronous write, under the write timeout.
  void Flush() {
    if (closed_ || state_ != State::kStreaming || writing_) return;
    if (pending_.empty() && !end_requested_) return OpenGate();
    ShutGate();
    inflight_.clear();
    if (!pending_.empty()) {
      AppendChunk(pending_, kLastChunk.size(), &inflight_);
      pending_.clear();
    }
    inflight_last_ = end_requested_;
    if (inflight_last_) inflight_.append(kLastChunk);
    inflight_origin_ = pending_origin_;
    pending_origin_ = 0;
    WriteInflight(0);
  }

  // Writes inflight_ from `offset` straight into the socket; what it does not take goes on asynchronously.
  void WriteInflight(size_t offset) {
    beast::error_code ec;
    size_t written = stream_.socket().write_some(net::buffer(inflight_.data() + offset, inflight_.size() - offset), ec);
    if (ec == net::error::would_block) {
      written = 0;
    } else if (ec) {
      return Fail("writing a chunk", ec);
    }
    written += offset;
    if (written == inflight_.size()) return OnChunkWritten();
    writing_ = true;
    stream_.expires_after(Seconds(server_->options.write_timeout_s));
    net::async_write(stream_, net::buffer(inflight_.data() + written, inflight_.size() - written),
                     [self = shared_from_this()](beast::error_code wec, size_t) {
                       self->writing_ = false;
                       if (wec) return self->Fail("writing a chunk", wec);
                       self->OnChunkWritten();
                     });
  }

  // The socket took all of the write in flight: its latency ends now; then the exchange completes (the
  // last chunk went out) or what was queued meanwhile goes next.
  void OnChunkWritten() {
    if (inflight_origin_ > 0)
      server_->stream_latency.Record(static_cast<double>(NowNanos() - inflight_origin_) * 1e-9);
    inflight_origin_ = 0;
    inflight_.clear();
    if (inflight_last_) {
      serializer_.reset();
      stream_header_.reset();
      return CompleteExchange();
    }
    Flush();
  }

  // The gate opens only while the stream is idle here and no posted write is pending.
  void OpenGate() {
    if (!gate_) return;
    std::lock_guard lock(gate_->mu);
    gate_->open = gate_->queued == 0 && gate_->fd >= 0;
  }
  // Shut for good when `forever` (the exchange ends or the socket closes): a direct write in progress
  // finishes first, so the descriptor is never used after it is closed.
  void ShutGate(bool forever = false) {
    if (!gate_) return;
    std::lock_guard lock(gate_->mu);
    gate_->open = false;
    if (forever) gate_->fd = -1;
  }
  void DropGate() {
    ShutGate(true);
    gate_.reset();
  }

  void CompleteExchange() {
    DropGate();
    if (exchange_) {
      exchange_->connection_.reset();
      exchange_.reset();
      server_->exchanges_active.fetch_sub(1);
    }
    end_requested_ = false;
    pending_.clear();
    if (!keep_alive_ || server_->draining.load()) return Close();
    ReadHeader();
  }

  void CancelExchange(const char* reason) {
    DropGate();
    if (!exchange_) return;
    std::shared_ptr<Exchange> exchange = std::move(exchange_);
    exchange->connection_.reset();
    server_->exchanges_active.fetch_sub(1);
    server_->exchanges_cancelled.fetch_add(1);
    DI_LOG(kDebug, "exchange cancelled").Field("reason", reason).Field("remote", remote_);
    exchange->Cancel();
  }

  void Fail(const char* what, beast::error_code ec) {
    DI_LOG(kDebug, "connection failed").Field("while", what).Field("error", ec.message()).Field("remote", remote_);
    CancelExchange("write failed");
    Close();
  }

  void Close() {
    if (closed_) return;
    DropGate();
    closed_ = true;
    state_ = State::kClosed;
    CancelExchange("connection closed");
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  HttpServer::Impl* server_;
  uint64_t id_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  State state_ = State::kReading;
  bool keep_alive_ = true;
  bool closed_ = false;
  bool monitoring_ = false;
  std::shared_ptr<Exchange> exchange_;
  std::shared_ptr<StreamGate> gate_;  // the exchange's
  std::shared_ptr<http::response<http::string_body>> response_;
  // Streaming: the header and its serializer, bytes queued, the bytes being written with their chunk
  // size line, and whether a write is in flight or the handler has ended the stream.
  std::unique_ptr<http::response<http::empty_body>> stream_header_;
  std::unique_ptr<http::response_serializer<http::empty_body>> serializer_;
  std::string pending_;
  std::string inflight_;  // what one write sends: a chunk (size line, data, CRLF), the last chunk, or both
  int64_t pending_origin_ = 0, inflight_origin_ = 0;  // earliest origin of the bytes queued / in flight
  bool writing_ = false;
  bool end_requested_ = false;
  bool inflight_last_ = false;  // the write in flight ends the stream
};

void Exchange::Respond(HttpResponse response) {
  OnStrand([response = std::move(response)](Exchange& self) mutable {
    if (self.connection_) self.connection_->DoRespond(&self, std::move(response));
  });
}

void Exchange::StartStream(int status, std::string content_type, std::vector<HttpHeader> headers) {
  OnStrand([status, content_type = std::move(content_type), headers = std::move(headers)](Exchange& self) mutable {
    if (self.connection_) self.connection_->DoStartStream(&self, status, std::move(content_type), std::move(headers));
  });
}

bool Exchange::TryDirectWrite(const std::string& data, int64_t origin_nanos) {
  std::unique_lock lock(gate_->mu);
  if (!gate_->open || gate_->fd < 0) {
    ++gate_->queued;
    return false;
  }
  std::string chunk;
  AppendChunk(data, 0, &chunk);
  const ssize_t sent = ::send(gate_->fd, chunk.data(), chunk.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  if (sent == static_cast<ssize_t>(chunk.size())) {
    if (origin_nanos > 0) gate_->latency->Record(static_cast<double>(NowNanos() - origin_nanos) * 1e-9);
    return true;
  }
  // A full socket or an error: the strand finishes the chunk (and meets the error, if any) in order.
  gate_->open = false;
  ++gate_->queued;
  lock.unlock();
  chunk.erase(0, sent > 0 ? static_cast<size_t>(sent) : 0);
  OnStrand([rest = std::move(chunk), origin_nanos](Exchange& self) mutable {
    self.TakeQueued();
    if (!self.connection_) return;
    self.connection_->DoWriteRest(&self, std::move(rest), origin_nanos);
  });
  return true;
}

void Exchange::Write(std::string data, int64_t origin_nanos) {
  if (data.empty()) return;
  if (TryDirectWrite(data, origin_nanos)) return;
  OnStrand([data = std::move(data), origin_nanos](Exchange& self) mutable {
    self.TakeQueued();
    if (!self.connection_) return;
    self.connection_->DoWrite(&self, std::move(data), origin_nanos);
  });
}

void Exchange::End() {
  {
    std::lock_guard lock(gate_->mu);
    gate_->open = false;
    ++gate_->queued;
  }
  OnStrand([](Exchange& self) {
    self.TakeQueued();
    if (!self.connection_) return;
    self.connection_->DoEnd(&self);
  });
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    OnAccept(ec, std::move(socket));
  });
}

void HttpServer::Impl::OnAccept(beast::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor.is_open()) return;
  if (!ec) {
    if (connections_open.load() >= options.max_connections) {
      connections_rejected.fetch_add(1);
      static constexpr std::string_view kBusy =
          "HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\nretry-after: 1\r\nconnection: close\r\n"
          "content-length: 24\r\n\r\ntoo many open connections";
      beast::error_code wec;
      socket.non_blocking(true, wec);
      socket.write_some(net::buffer(kBusy.data(), kBusy.size() - 1), wec);
      socket.close(wec);
    } else {
      uint64_t id;
      std::shared_ptr<Connection> connection;
      {
        std::lock_guard lock(mu);
        id = next_id++;
      }
      connection = std::make_shared<Connection>(std::move(socket), this, id);
      {
        std::lock_guard lock(mu);
        connections[id] = connection;
      }
      connection->Run();
    }
  } else {
    DI_LOG(kWarn, "accept failed").Field("error", ec.message());
  }
  if (!draining.load()) Accept();
}

void HttpServer::Impl::ForEachConnection(const std::function<void(const std::shared_ptr<Connection>&)>& fn) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(mu);
    for (auto& [id, weak] : connections)
      if (auto c = weak.lock()) live.push_back(std::move(c));
  }
  for (auto& c : live) fn(c);
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  if (!impl_->threads.empty()) {
    CancelAll();
    Stop();
  }
}

Result<std::unique_ptr<HttpServer>> HttpServer::Create(const HttpServerOptions& options, HttpHandler* handler) {
  if (options.io_threads < 1) return Status::InvalidArgument("io_threads must be at least 1");
  if (options.port < 0 || options.port > 65535) return Status::InvalidArgument("port must be in 0..65535");
  auto impl = std::make_unique<Impl>(options, handler);
  beast::error_code ec;
  const auto address = net::ip::make_address(options.host, ec);
  if (ec) return Status::InvalidArgument("--host '" + options.host + "' is not an IP address");
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(options.port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec)
    return Status::Unavailable("cannot listen on " + options.host + ":" + std::to_string(options.port) + ": " +
                               ec.message());
  impl->bound_port = impl->acceptor.local_endpoint().port();
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->bound_port; }

void HttpServer::Start() {
  impl_->work.emplace(impl_->ioc.get_executor());
  net::post(impl_->ioc, [impl = impl_.get()] { impl->Accept(); });
  for (int i = 0; i < impl_->options.io_threads; ++i) {
    impl_->threads.emplace_back([impl = impl_.get()] {
      SetCurrentThreadName("di-http-io");
      if (impl->options.io_thread_slice_us > 0) {
        const Status slice = SetThreadLatencySlice(impl->options.io_thread_slice_us);
        if (!slice.ok()) DI_LOG(kDebug, "io thread keeps the default time slice").Field("why", slice.message());
      }
      impl->ioc.run();
    });
  }
}

void HttpServer::StopAccepting() {
  impl_->draining.store(true);
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ec;
    impl->acceptor.close(ec);
  });
  impl_->ForEachConnection([](const std::shared_ptr<Connection>& c) {
    net::post(c->executor(), [c] { c->CloseIfIdle(); });
  });
}

void HttpServer::CancelAll() {
  impl_->draining.store(true);
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ec;
    impl->acceptor.close(ec);
  });
  impl_->ForEachConnection([](const std::shared_ptr<Connection>& c) {
    net::post(c->executor(), [c] { c->CancelAndClose(); });
  });
}

void HttpServer::Stop() {
  impl_->work.reset();
  // Let the posted closes run (they end every pending operation), then stop whatever is left.
  for (int i = 0; i < 200 && impl_->connections_open.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  impl_->ioc.stop();
  for (auto& t : impl_->threads) t.join();
  impl_->threads.clear();
  // Run what was posted before the stop on this thread: a generation's final update posted to its strand
  // (the engine shut down just before) releases the exchange and its channel only when it runs; dropped
  // unrun, the channel would stay held past the server (see http_server.h). Bounded: nothing here keeps
  // posting once every connection is cancelled.
  impl_->ioc.restart();
  for (int i = 0; i < 1000000 && impl_->ioc.poll_one() > 0; ++i) {
  }
}

const LatencyHistogram& HttpServer::stream_latency() const { return impl_->stream_latency; }

HttpServerCounters HttpServer::counters() const {
  HttpServerCounters c;
  c.connections_open = impl_->connections_open.load();
  c.connections_total = impl_->connections_total.load();
  c.connections_rejected = impl_->connections_rejected.load();
  c.exchanges_active = impl_->exchanges_active.load();
  c.exchanges_cancelled = impl_->exchanges_cancelled.load();
  c.transport_errors = impl_->transport_errors.load();
  return c;
}

}  // namespace deepinfer::server
