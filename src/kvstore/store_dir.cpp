#include "kvstore/store_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>

namespace deepinfer::kvstore {
namespace {

constexpr std::string_view kManifestText = "deepinfer-kvstore 1\n";

std::atomic<uint64_t> g_sequence{0};

std::string Errno(int err) { return std::strerror(err); }

// Writes `text` to `path` atomically: a temporary beside it, then rename. Two processes writing the same
// content race harmlessly.
Status WriteFileAtomic(const std::string& path, std::string_view text) {
  const std::string tmp = path + "." + HostTag() + "." + std::to_string(::getpid()) + "." +
                          std::to_string(g_sequence.fetch_add(1)) + ".tmp";
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(tmp + ": cannot create: " + Errno(errno));
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      ::unlink(tmp.c_str());
      return Status::IoError(tmp + ": cannot write: " + Errno(err));
    }
    done += static_cast<size_t>(n);
  }
  ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    return Status::IoError(path + ": cannot rename into place: " + Errno(err));
  }
  return Status::Ok();
}

Status MakeDir(const std::string& path) {
  if (::mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
  return Status::IoError(path + ": cannot create directory: " + Errno(errno));
}

Result<std::string> ReadSmallFile(const std::string& path, size_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return Status::NotFound(path + ": no such file");
    return Status::IoError(path + ": cannot open: " + Errno(err));
  }
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Status::IoError(path + ": cannot read: " + Errno(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > limit) {
      ::close(fd);
      return Status::DataLoss(path + ": larger than " + std::to_string(limit) + " bytes");
    }
  }
  ::close(fd);
  return out;
}

// True when DIR holds nothing but what an interrupted Open of this same code may have left.
Result<bool> IsEmptyOrOurs(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return Status::IoError(dir + ": cannot list: " + Errno(errno));
  bool empty = true;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == ".." || name.starts_with(kManifestName)) continue;
    empty = false;
    break;
  }
  ::closedir(d);
  return empty;
}

std::string LayoutJson(const StoreLayout& layout) {
  nlohmann::ordered_json j;
  j["format"] = kFormatVersion;
  j["model_fingerprint"] = layout.model_fingerprint.ToHex();
  j["segment_bytes"] = layout.segment_bytes;
  j["payload_bytes"] = layout.payload_bytes();
  j["description"] = layout.description;
  return j.dump(2) + "\n";
}

bool ParseUnsigned(std::string_view text, int64_t* out) {
  if (text.empty() || text.size() > 18) return false;
  int64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return true;
}

}  // namespace

int64_t UnixMillis() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

int64_t UnixNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

const std::string& HostTag() {
  static const std::string tag = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof(buf) - 1) != 0) return std::string("host");
    std::string out;
    for (const char* p = buf; *p != '\0' && out.size() < 32; ++p) {
      const char c = *p;
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      out.push_back(ok ? c : '-');
    }
    return out.empty() ? std::string("host") : out;
  }();
  return tag;
}

Result<StoreDir> StoreDir::Open(const std::string& dir, bool create) {
  if (dir.empty()) return Status::InvalidArgument("the KV store directory is empty");
  std::string root = dir;
  while (root.size() > 1 && root.back() == '/') root.pop_back();
  struct stat st {};
  if (::stat(root.c_str(), &st) != 0) {
    const int err = errno;
    if (err != ENOENT || !create) return Status::NotFound(root + ": " + Errno(err));
    if (::mkdir(root.c_str(), 0755) != 0 && errno != EEXIST) {
      return Status::IoError(root + ": cannot create the KV store directory: " + Errno(errno));
    }
  } else if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument(root + ": not a directory");
  }
  StoreDir store(root);
  auto manifest = ReadSmallFile(store.ManifestPath(), 4096);
  if (!manifest.ok() && manifest.status().code() != StatusCode::kNotFound) return manifest.status();
  if (!manifest.ok()) {
    DI_ASSIGN_OR_RETURN(bool empty, IsEmptyOrOurs(root));
    if (!empty) {
      return Status::FailedPrecondition(root + ": not a deepinfer KV store (no KVSTORE file) and not empty; "
                                        "give an empty or new directory");
    }
    if (!create) return Status::NotFound(root + ": not a deepinfer KV store (no KVSTORE file)");
    DI_RETURN_IF_ERROR(WriteFileAtomic(store.ManifestPath(), kManifestText));
  } else if (*manifest != kManifestText) {
    std::string first = manifest->substr(0, manifest->find('\n'));
    if (first.rfind("deepinfer-kvstore ", 0) == 0) {
      return Status::FailedPrecondition(root + ": KV store of format '" + first.substr(18) +
                                        "', this build reads format 1; give a new directory (or empty this one "
                                        "with the build that wrote it: deepinfer kvstore gc --all)");
    }
    return Status::FailedPrecondition(root + ": KVSTORE file is not a deepinfer KV store manifest");
  }
  DI_RETURN_IF_ERROR(MakeDir(store.TmpDir()));
  DI_RETURN_IF_ERROR(MakeDir(store.TrashDir()));
  DI_RETURN_IF_ERROR(MakeDir(store.QuarantineDir()));
  return store;
}

std::string StoreDir::NamespaceDir(const Hash128& ns) const { return root_ + "/" + ns.ToHex(); }

std::string StoreDir::BucketDir(const Hash128& ns, const Hash128& hash) const {
  return NamespaceDir(ns) + "/" + hash.ToHex().substr(0, 2);
}

std::string StoreDir::BlockPath(const Hash128& ns, const Hash128& hash) const {
  const std::string hex = hash.ToHex();
  return NamespaceDir(ns) + "/" + hex.substr(0, 2) + "/" + hex + ".kvb";
}

std::string StoreDir::NewTmpPath() const {
  return TmpDir() + "/" + HostTag() + "." + std::to_string(::getpid()) + "." + std::to_string(g_sequence.fetch_add(1)) +
         ".tmp";
}

std::string StoreDir::NewTrashPath(int64_t now_ms) const {
  return TrashDir() + "/" + std::to_string(now_ms) + "." + HostTag() + "." + std::to_string(::getpid()) + "." +
         std::to_string(g_sequence.fetch_add(1)) + ".kvb";
}

std::string StoreDir::QuarantinePath(int64_t now_ms, std::string_view reason, const Hash128& hash) const {
  return QuarantineDir() + "/" + std::to_string(now_ms) + "." + std::string(reason) + "." + hash.ToHex() + "." +
         std::to_string(g_sequence.fetch_add(1)) + ".kvb";
}

Status StoreDir::EnsureNamespace(const StoreLayout& layout) const {
  DI_RETURN_IF_ERROR(layout.Validate());
  const std::string dir = NamespaceDir(layout.Id());
  DI_RETURN_IF_ERROR(MakeDir(dir));
  const std::string path = dir + "/NAMESPACE";
  const std::string want = LayoutJson(layout);
  auto have = ReadSmallFile(path, 64 * 1024);
  if (have.ok()) {
    if (*have != want) {
      // Same id, different description: only a hash collision or a hand-edited file gets here.
      return Status::FailedPrecondition(path + ": describes another layout than this model's");
    }
    return Status::Ok();
  }
  if (have.status().code() != StatusCode::kNotFound) return have.status();
  return WriteFileAtomic(path, want);
}

bool StoreDir::StillThere() const {
  struct stat st {};
  return ::stat(ManifestPath().c_str(), &st) == 0;
}

bool ParseTmpName(std::string_view name, std::string* host, int64_t* pid) {
  if (!name.ends_with(".tmp")) return false;
  name.remove_suffix(4);
  const size_t last = name.rfind('.');
  if (last == std::string_view::npos) return false;
  int64_t seq;
  if (!ParseUnsigned(name.substr(last + 1), &seq)) return false;
  name = name.substr(0, last);
  const size_t dot = name.rfind('.');
  if (dot == std::string_view::npos || dot == 0) return false;
  if (!ParseUnsigned(name.substr(dot + 1), pid)) return false;
  *host = std::string(name.substr(0, dot));
  return true;
}

bool ParseLeadingMillis(std::string_view name, int64_t* ms) {
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  return ParseUnsigned(name.substr(0, dot), ms);
}

bool ForEachDirEntry(const std::string& dir, const std::function<void(std::string_view name)>& fn) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return false;
  while (dirent* e = ::readdir(d)) {
    std::string_view name = e->d_name;
    if (name == "." || name == "..") continue;
    fn(name);
  }
  ::closedir(d);
  return true;
}

bool IsNamespaceName(std::string_view name) {
  Hash128 h;
  return ParseHex(name, &h) && h.ToHex() == name;
}

bool IsBucketName(std::string_view name) {
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); };
  return name.size() == 2 && hex(name[0]) && hex(name[1]);
}

bool ParseBlockName(std::string_view name, Hash128* hash) {
  if (name.size() != 36 || !name.ends_with(".kvb")) return false;
  return ParseHex(name.substr(0, 32), hash) && hash->ToHex() == name.substr(0, 32);
}

}  // namespace deepinfer::kvstore
