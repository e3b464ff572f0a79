// A blocking loopback client on raw sockets, for tests that must send exactly the bytes they choose
// (malformed requests, pipelining, slow or vanishing readers) and read exactly what came back.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <string_view>
#include <thread>

namespace deepinfer::server::test_support {

class RawClient {
 public:
  explicit RawClient(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ::close(fd_);
      fd_ = -1;
    }
    int one = 1;
    if (fd_ >= 0) ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~RawClient() { Close(); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }
  // Half-closes: the server sees the end of the request stream.
  void ShutdownWrite() { ::shutdown(fd_, SHUT_WR); }
  // Sets a small receive buffer so that a client that does not read fills up quickly.
  void SetReceiveBuffer(int bytes) { ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &bytes, sizeof bytes); }

  bool Send(std::string_view bytes) {
    while (!bytes.empty()) {
      const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads until `pred(buffer)` holds, the peer closes, or `timeout_s` passes. Returns whether pred held.
  template <typename Pred>
  bool ReadUntil(Pred pred, double timeout_s = 5) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!pred(buffer_)) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return pred(buffer_);
      char chunk[16384];
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) {
        eof_ = true;
        return pred(buffer_);
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    return true;
  }
  // Reads until the peer closes (true) or the timeout passes (false).
  bool ReadToEof(double timeout_s = 5) {
    ReadUntil([this](const std::string&) { return eof_; }, timeout_s);
    return eof_;
  }

  // Like ReadToEof, but a reader that lags: after each `burst` bytes it pauses for `pause`, so a fast
  // writer fills the socket and has to wait for it to drain, over and over.
  bool ReadToEofInBursts(size_t burst, std::chrono::milliseconds pause, double timeout_s) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    while (!eof_ && std::chrono::steady_clock::now() < deadline) {
      const size_t target = buffer_.size() + burst;
      ReadUntil([&](const std::string& b) { return eof_ || b.size() >= target; }, 5);
      std::this_thread::sleep_for(pause);
    }
    return eof_;
  }

  // One complete response (headers, then a Content-Length or chunked body) off the front of the buffer;
  // false if none arrives in time. `body` is de-chunked.
  bool ReadResponse(int* status, std::string* headers, std::string* body, double timeout_s = 5) {
    size_t consumed = 0;
    auto complete = [&](const std::string& b) { return Parse(b, status, headers, body, &consumed); };
    if (!ReadUntil(complete, timeout_s)) return false;
    buffer_.erase(0, consumed);
    return true;
  }

  const std::string& buffer() const { return buffer_; }
  bool eof() const { return eof_; }

  // Parses one response at the start of `b`; false while incomplete.
  static bool Parse(const std::string& b, int* status, std::string* headers, std::string* body, size_t* consumed) {
    const size_t end = b.find("\r\n\r\n");
    if (end == std::string::npos || b.size() < 12) return false;
    *status = std::atoi(b.c_str() + 9);
    *headers = b.substr(0, end + 2);
    std::string lower = *headers;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    size_t pos = end + 4;
    body->clear();
    if (lower.find("transfer-encoding: chunked") != std::string::npos) {
      while (true) {
        const size_t line = b.find("\r\n", pos);
        if (line == std::string::npos) return false;
        const size_t size = std::strtoul(b.substr(pos, line - pos).c_str(), nullptr, 16);
        if (b.size() < line + 2 + size + 2) return false;
        body->append(b, line + 2, size);
        pos = line + 2 + size + 2;
        if (size == 0) break;
      }
    } else {
      size_t length = 0;
      const size_t cl = lower.find("content-length: ");
      if (cl != std::string::npos) length = std::strtoul(lower.c_str() + cl + 16, nullptr, 10);
      if (b.size() < pos + length) return false;
      body->assign(b, pos, length);
      pos += length;
    }
    *consumed = pos;
    return true;
  }

 private:
  int fd_ = -1;
  std::string buffer_;
  bool eof_ = false;
};

}  // namespace deepinfer::server::test_support
