#include "router/upstream.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/clock.h"

namespace deepinfer::router {

namespace {

constexpr size_t kMaxHeadBytes = 64 * 1024;
constexpr size_t kReadBytes = 64 * 1024;

int PollMillis(int64_t deadline_nanos) {
  const int64_t left = deadline_nanos - NowNanos();
  if (left <= 0) return 0;
  return static_cast<int>(std::min<int64_t>((left + 999999) / 1000000, 1000 * 3600));
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return out;
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

std::string_view UpstreamHead::Header(std::string_view name) const {
  for (const auto& h : headers)
    if (h.name == name) return h.value;
  return {};
}

Upstream::~Upstream() { Close(); }

void Upstream::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buffer_.clear();
  done_ = false;
}

Status Upstream::Connect(const std::string& host, int port, int64_t deadline_nanos) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0)
    return Status::Unavailable("resolving " + host + ": " + gai_strerror(rc));
  Status last = Status::Unavailable("no address for " + host);
  for (addrinfo* a = found; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = ::poll(&p, 1, PollMillis(deadline_nanos));
      int err = 0;
      socklen_t len = sizeof err;
      if (rc == 1 && ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0) {
        rc = 0;
      } else {
        last = rc == 0 ? Status::DeadlineExceeded("connecting to " + host + ":" + service + " timed out")
                       : Status::Unavailable("connecting to " + host + ":" + service + ": " + std::strerror(err ? err : errno));
        rc = -1;
      }
    } else if (rc != 0) {
      last = Status::Unavailable("connecting to " + host + ":" + service + ": " + std::strerror(errno));
    }
    if (rc == 0) {
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      fd_ = fd;
      ::freeaddrinfo(found);
      return Status::Ok();
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return last;
}

Status Upstream::Send(std::string_view method, std::string_view target, const std::vector<server::HttpHeader>& headers,
                      std::string_view body, int64_t deadline_nanos) {
  std::string data;
  data.reserve(256 + body.size());
  data.append(method).append(" ").append(target).append(" HTTP/1.1\r\nhost: unit\r\n");
  for (const auto& h : headers) data.append(h.name).append(": ").append(h.value).append("\r\n");
  if (method != "GET" || !body.empty()) data.append("content-length: ").append(std::to_string(body.size())).append("\r\n");
  data.append("\r\n").append(body);
  size_t sent = 0;
  while (sent < data.size()) {
    const ssize_t n = ::send(fd_, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd_, POLLOUT, 0};
      if (::poll(&p, 1, PollMillis(deadline_nanos)) <= 0) return Status::DeadlineExceeded("sending to the unit timed out");
      continue;
    }
    return Status::Unavailable(std::string("sending to the unit: ") + std::strerror(errno));
  }
  return Status::Ok();
}

Status Upstream::Fill(int64_t deadline_nanos) {
  char chunk[kReadBytes];
  while (true) {
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n > 0) {
      buffer_.append(chunk, static_cast<size_t>(n));
      return Status::Ok();
    }
    if (n == 0) return Status::Unavailable("the unit closed the connection");
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return Status::Unavailable(std::string("reading from the unit: ") + std::strerror(errno));
    pollfd p{fd_, POLLIN, 0};
    const int rc = ::poll(&p, 1, PollMillis(deadline_nanos));
    if (rc == 0) return Status::DeadlineExceeded("the unit sent nothing before the deadline");
    if (rc < 0 && errno != EINTR) return Status::Unavailable(std::string("polling the unit: ") + std::strerror(errno));
  }
}

Result<UpstreamHead> Upstream::ReadHead(int64_t deadline_nanos) {
  size_t end;
  while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
    if (buffer_.size() > kMaxHeadBytes) return Status::DataLoss("the unit's response head is too long");
    DI_RETURN_IF_ERROR(Fill(deadline_nanos));
  }
  if (end > kMaxHeadBytes) return Status::DataLoss("the unit's response head is too long");
  std::string_view head(buffer_.data(), end);
  UpstreamHead out;
  const size_t line_end = head.find("\r\n");
  std::string_view status_line = head.substr(0, line_end);
  if (status_line.substr(0, 9) != "HTTP/1.1 " && status_line.substr(0, 9) != "HTTP/1.0 ")
    return Status::DataLoss("the unit's response is not HTTP/1.x");
  std::string_view code = status_line.substr(9, 3);
  if (code.size() != 3 || !std::all_of(code.begin(), code.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return Status::DataLoss("the unit's status line is malformed");
  out.status = (code[0] - '0') * 100 + (code[1] - '0') * 10 + (code[2] - '0');
  size_t pos = line_end == std::string_view::npos ? head.size() : line_end + 2;
  while (pos < head.size()) {
    size_t next = head.find("\r\n", pos);
    if (next == std::string_view::npos) next = head.size();
    std::string_view line = head.substr(pos, next - pos);
    pos = next + 2;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) return Status::DataLoss("the unit sent a malformed header");
    out.headers.push_back({Lower(Trim(line.substr(0, colon))), std::string(Trim(line.substr(colon + 1)))});
  }
  if (Lower(out.Header("transfer-encoding")).find("chunked") != std::string::npos) {
    out.chunked = true;
  } else if (std::string_view cl = out.Header("content-length"); !cl.empty()) {
    if (cl.size() > 15 || !std::all_of(cl.begin(), cl.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return Status::DataLoss("the unit sent a malformed content-length");
    out.content_length = std::stoll(std::string(cl));
  }
  buffer_.erase(0, end + 4);
  chunked_ = out.chunked;
  until_close_ = !out.chunked && out.content_length < 0;
  remaining_ = out.chunked ? -1 : out.content_length;
  done_ = !out.chunked && out.content_length == 0;
  return out;
}

Result<bool> Upstream::ReadBody(std::string* out, int64_t deadline_nanos) {
  const size_t before = out->size();
  while (!done_) {
    if (until_close_) {
      out->append(buffer_);
      buffer_.clear();
      if (out->size() > before) return false;
      Status s = Fill(deadline_nanos);
      if (s.code() == StatusCode::kUnavailable) {
        done_ = true;
        break;
      }
      DI_RETURN_IF_ERROR(s);
      continue;
    }
    if (!chunked_ || remaining_ > 0) {
      const size_t take = std::min<size_t>(buffer_.size(), static_cast<size_t>(remaining_));
      out->append(buffer_, 0, take);
      buffer_.erase(0, take);
      remaining_ -= static_cast<int64_t>(take);
      if (remaining_ == 0 && !chunked_) {
        done_ = true;
        break;
      }
      if (remaining_ == 0) {
        remaining_ = -2;  // the chunk's trailing CRLF
        continue;
      }
      if (out->size() > before) return false;
      DI_RETURN_IF_ERROR(Fill(deadline_nanos));
      continue;
    }
    // A chunk-size line, or the CRLF after a chunk's data.
    const size_t eol = buffer_.find("\r\n");
    if (eol == std::string::npos) {
      if (buffer_.size() > 1024) return Status::DataLoss("the unit sent a malformed chunk");
      if (out->size() > before) return false;
      DI_RETURN_IF_ERROR(Fill(deadline_nanos));
      continue;
    }
    if (remaining_ == -2) {
      if (eol != 0) return Status::DataLoss("the unit sent a malformed chunk");
      buffer_.erase(0, 2);
      remaining_ = -1;
      continue;
    }
    std::string_view size_text(buffer_.data(), eol);
    if (size_t semi = size_text.find(';'); semi != std::string_view::npos) size_text = size_text.substr(0, semi);
    size_text = Trim(size_text);
    if (size_text.empty() || size_text.size() > 8) return Status::DataLoss("the unit sent a malformed chunk size");
    int64_t size = 0;
    for (char c : size_text) {
      int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (v < 0) return Status::DataLoss("the unit sent a malformed chunk size");
      size = size * 16 + v;
    }
    buffer_.erase(0, eol + 2);
    if (size == 0) {
      done_ = true;  // trailers, if any, are not read: the connection is closed after the exchange
      break;
    }
    remaining_ = size;
  }
  return true;
}

Result<SimpleResponse> KeptAliveGetter::Exchange(std::string_view target, int64_t deadline_nanos,
                                                 size_t max_body_bytes) {
  DI_RETURN_IF_ERROR(up_.Send("GET", target, {}, {}, deadline_nanos));
  DI_ASSIGN_OR_RETURN(UpstreamHead head, up_.ReadHead(deadline_nanos));
  SimpleResponse out;
  out.status = head.status;
  while (true) {
    DI_ASSIGN_OR_RETURN(bool done, up_.ReadBody(&out.body, deadline_nanos));
    if (out.body.size() > max_body_bytes) return Status::ResourceExhausted("the unit's response is too large");
    if (done) break;
  }
  const std::string connection = Lower(head.Header("connection"));
  if (!up_.ReusableAfterResponse() || connection.find("close") != std::string::npos) {
    up_.Close();
    open_ = false;
  }
  return out;
}

Result<SimpleResponse> KeptAliveGetter::Get(std::string_view target, double timeout_s, size_t max_body_bytes) {
  const int64_t deadline = NowNanos() + static_cast<int64_t>(timeout_s * 1e9);
  if (open_) {
    Result<SimpleResponse> kept = Exchange(target, deadline, max_body_bytes);
    if (kept.ok()) return kept;
    up_.Close();
    open_ = false;
    if (kept.status().code() == StatusCode::kDeadlineExceeded) return kept;
  }
  DI_RETURN_IF_ERROR(up_.Connect(host_, port_, deadline));
  open_ = true;
  ++connections_;
  Result<SimpleResponse> fresh = Exchange(target, deadline, max_body_bytes);
  if (!fresh.ok()) {
    up_.Close();
    open_ = false;
  }
  return fresh;
}

}  // namespace deepinfer::router
