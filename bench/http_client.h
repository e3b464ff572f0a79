// A minimal blocking HTTP/1.1 keep-alive client for the serving benchmarks (`bench server`, `bench serve`):
// one connection per client thread (on loopback the simplest client that cannot itself serialize the
// connections), de-chunked bodies handed over as they arrive, and the few SSE and JSON scans the
// benchmarks need to count tokens without parsing every event.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

namespace deepinfer::bench {

struct Url {
  std::string host = "127.0.0.1";
  int port = 8000;
};

class Connection {
 public:
  explicit Connection(const Url& url) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(url.port));
    inet_pton(AF_INET, url.host.c_str(), &addr.sin_addr);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    int one = 1;
    if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Connection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return fd_ >= 0; }

  // Sends one request and reads its whole response; `on_data` sees the de-chunked body as it arrives
  // and may return false to stop reading (the connection is then unusable). Returns the status, or -1.
  template <typename OnData>
  int Exchange(const std::string& request, OnData on_data, double timeout_s = 60) {
    if (!SendAll(request)) return -1;
    std::string head;
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos)
      if (!Fill(timeout_s)) return -1;
    head = buffer_.substr(0, end);
    buffer_.erase(0, end + 4);
    const int status = std::atoi(head.c_str() + 9);
    std::string lower = head;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.find("transfer-encoding: chunked") != std::string::npos) {
      while (true) {
        size_t line;
        while ((line = buffer_.find("\r\n")) == std::string::npos)
          if (!Fill(timeout_s)) return -1;
        const size_t size = std::strtoul(buffer_.c_str(), nullptr, 16);
        while (buffer_.size() < line + 2 + size + 2)
          if (!Fill(timeout_s)) return -1;
        if (size == 0) {
          buffer_.erase(0, line + 4);
          break;
        }
        if (!on_data(std::string_view(buffer_).substr(line + 2, size))) return status;
        buffer_.erase(0, line + 2 + size + 2);
      }
    } else {
      const size_t cl = lower.find("content-length: ");
      const size_t length = cl == std::string::npos ? 0 : std::strtoul(lower.c_str() + cl + 16, nullptr, 10);
      while (buffer_.size() < length)
        if (!Fill(timeout_s)) return -1;
      on_data(std::string_view(buffer_).substr(0, length));
      buffer_.erase(0, length);
    }
    return status;
  }

 private:
  bool SendAll(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  bool Fill(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_s * 1000)) <= 0) return false;
    char chunk[65536];
    const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
    if (n <= 0) return false;
    buffer_.append(chunk, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buffer_;
};

inline std::string Post(const std::string& path, const std::string& body) {
  return "POST " + path + " HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}
inline std::string Get(const std::string& path) { return "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n"; }

// GET on a fresh connection; the body, or "" on failure.
inline std::string Fetch(const Url& url, const std::string& path) {
  Connection c(url);
  std::string body;
  if (!c.ok() || c.Exchange(Get(path), [&](std::string_view d) { body.append(d); return true; }) != 200) return "";
  return body;
}

// Where the value of JSON member `key` (quoted) begins in `text`, from `from` on; npos if absent. Servers
// differ in the whitespace around the colon (llama_cpp.server writes `"content": "..."`).
inline size_t MemberValue(std::string_view text, std::string_view key, size_t from = 0) {
  for (size_t at = text.find(key, from); at != std::string_view::npos; at = text.find(key, at + 1)) {
    size_t i = at + key.size();
    while (i < text.size() && text[i] == ' ') ++i;
    if (i >= text.size() || text[i] != ':') continue;
    ++i;
    while (i < text.size() && text[i] == ' ') ++i;
    return i;
  }
  return std::string_view::npos;
}

inline int64_t CompletionTokens(std::string_view sse) {
  const size_t at = sse.rfind("\"completion_tokens\"");
  if (at == std::string_view::npos) return -1;
  const size_t value = MemberValue(sse, "\"completion_tokens\"", at);
  if (value == std::string_view::npos) return -1;
  return std::strtoll(std::string(sse.substr(value, 24)).c_str(), nullptr, 10);
}

// Whether one SSE data event carries generated text (a non-empty content or reasoning delta).
inline bool CarriesText(std::string_view event) {
  for (std::string_view key : {std::string_view("\"content\""), std::string_view("\"reasoning_content\"")}) {
    const size_t at = MemberValue(event, key);
    if (at != std::string_view::npos && at + 1 < event.size() && event[at] == '"' && event[at + 1] != '"')
      return true;
  }
  return false;
}

// The end of the SSE event that begins at `from` (a blank line ends it: "\n\n", or "\r\n\r\n" as
// sse-starlette writes by default); npos while incomplete. `*next` is where the event after it begins.
inline size_t EventEnd(std::string_view body, size_t from, size_t* next) {
  const size_t lf = body.find("\n\n", from);
  const size_t crlf = body.find("\n\r\n", from);
  if (lf == std::string_view::npos && crlf == std::string_view::npos) return std::string_view::npos;
  if (crlf < lf) {
    *next = crlf + 3;
    return crlf > from && body[crlf - 1] == '\r' ? crlf - 1 : crlf;
  }
  *next = lf + 2;
  return lf;
}

// "http://HOST:PORT" (or "HOST:PORT"); localhost as 127.0.0.1.
inline Url ParseUrl(const std::string& text) {
  Url url;
  std::string rest = text;
  if (rest.rfind("http://", 0) == 0) rest = rest.substr(7);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  url.host = rest.substr(0, colon);
  if (colon != std::string::npos) url.port = std::atoi(rest.c_str() + colon + 1);
  if (url.host == "localhost") url.host = "127.0.0.1";
  return url;
}

}  // namespace deepinfer::bench
