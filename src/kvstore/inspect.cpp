#include "kvstore/inspect.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <nlohmann/json.hpp>

#include "core/mapped_file.h"
#include "kvstore/file_io.h"

namespace deepinfer::kvstore {
namespace {

int64_t Millis(const struct timespec& t) { return int64_t{t.tv_sec} * 1000 + t.tv_nsec / 1'000'000; }

// Reads NAMESPACE; leaves the summary's defaults when it is missing or malformed.
void ReadNamespaceFile(const std::string& ns_dir, NamespaceSummary* out) {
  out->model_fingerprint = "?";
  auto text = ReadFileToString(ns_dir + "/NAMESPACE");
  if (!text.ok() || text->size() > 64 * 1024) return;
  auto j = nlohmann::json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return;
  if (auto it = j.find("model_fingerprint"); it != j.end() && it->is_string()) out->model_fingerprint = *it;
  if (auto it = j.find("description"); it != j.end() && it->is_string()) out->description = *it;
  if (auto it = j.find("payload_bytes"); it != j.end() && it->is_number_unsigned()) {
    out->payload_bytes = std::min<uint64_t>(it->get<uint64_t>(), kMaxPayloadBytes);
  }
}

}  // namespace

Result<StoreSummary> SummarizeStore(const StoreDir& dir) {
  StoreSummary s;
  const int64_t now_ms = UnixMillis();
  ForEachDirEntry(dir.root(), [&](std::string_view ns_name) {
    if (!IsNamespaceName(ns_name)) return;
    NamespaceSummary ns;
    ParseHex(ns_name, &ns.id);
    const std::string ns_dir = dir.root() + "/" + std::string(ns_name);
    ReadNamespaceFile(ns_dir, &ns);
    ForEachDirEntry(ns_dir, [&](std::string_view bucket) {
      if (!IsBucketName(bucket)) return;
      const std::string bucket_dir = ns_dir + "/" + std::string(bucket);
      ForEachDirEntry(bucket_dir, [&](std::string_view name) {
        Hash128 h;
        struct stat st {};
        if (!ParseBlockName(name, &h) || ::lstat((bucket_dir + "/" + std::string(name)).c_str(), &st) != 0 ||
            !S_ISREG(st.st_mode)) {
          return;
        }
        ++ns.blocks;
        ns.bytes += static_cast<uint64_t>(st.st_size);
        if (Millis(st.st_mtim) <= now_ms) ++ns.expired;
        const int64_t used = Millis(st.st_atim);
        ns.oldest_use_ms = ns.oldest_use_ms == 0 ? used : std::min(ns.oldest_use_ms, used);
        ns.newest_use_ms = std::max(ns.newest_use_ms, used);
      });
    });
    s.namespaces.push_back(std::move(ns));
  });
  std::sort(s.namespaces.begin(), s.namespaces.end(),
            [](const NamespaceSummary& a, const NamespaceSummary& b) { return a.id.ToHex() < b.id.ToHex(); });
  ForEachDirEntry(dir.TmpDir(), [&](std::string_view) { ++s.tmp_files; });
  ForEachDirEntry(dir.TrashDir(), [&](std::string_view name) {
    struct stat st {};
    ++s.trash_files;
    if (::lstat((dir.TrashDir() + "/" + std::string(name)).c_str(), &st) == 0) s.trash_bytes += static_cast<uint64_t>(st.st_size);
  });
  ForEachDirEntry(dir.QuarantineDir(), [&](std::string_view) { ++s.quarantine_files; });
  struct statvfs vfs {};
  if (::statvfs(dir.root().c_str(), &vfs) == 0) {
    s.fs_bytes = uint64_t{vfs.f_blocks} * vfs.f_frsize;
    s.fs_free_bytes = uint64_t{vfs.f_bavail} * vfs.f_frsize;
  }
  return s;
}

VerifyFailure VerifyBlockFile(const std::string& path, const Hash128& ns, const Hash128& hash, uint64_t expected_payload) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return VerifyFailure::kIo;
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return VerifyFailure::kIo;
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < kHeaderBytes) return VerifyFailure::kTruncated;
  alignas(64) uint8_t header[kHeaderBytes];
  if (!ReadAt(fd, std::span<uint8_t>(header, kHeaderBytes), 0)) return VerifyFailure::kIo;
  auto decoded = DecodeHeader(std::span<const uint8_t, kHeaderBytes>(header, kHeaderBytes));
  if (!decoded.ok()) {
    return decoded.status().code() == StatusCode::kFailedPrecondition ? VerifyFailure::kVersion : VerifyFailure::kHeader;
  }
  const uint64_t payload = expected_payload != 0 ? expected_payload : decoded->payload_bytes;
  if (size != kHeaderBytes + payload) return VerifyFailure::kTruncated;
  if (decoded->payload_bytes != payload) return VerifyFailure::kHeader;
  // Stream the payload in pieces: a verifier's memory stays bounded whatever the block size.
  Hasher128 sum;
  constexpr size_t kPiece = 1 << 20;
  std::vector<uint8_t> buf(std::min<uint64_t>(payload, kPiece));
  const std::span<const uint8_t, kHeaderBytes> h(header, kHeaderBytes);
  sum.Update(h.data(), 96);
  static constexpr uint8_t kZero[16] = {};
  sum.Update(kZero, sizeof kZero);
  sum.Update(h.data() + 112, kHeaderBytes - 112);
  for (uint64_t at = 0; at < payload;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(payload - at, kPiece));
    if (!ReadAt(fd, std::span(buf.data(), n), kHeaderBytes + at)) return VerifyFailure::kIo;
    sum.Update(buf.data(), n);
    at += n;
  }
  if (sum.Digest() != decoded->checksum) return VerifyFailure::kChecksum;
  if (decoded->namespace_id != ns) return VerifyFailure::kNamespace;
  if (decoded->block_hash != hash) return VerifyFailure::kHash;
  return VerifyFailure::kNone;
}

Result<VerifyReport> VerifyStore(const StoreDir& dir, bool quarantine) {
  VerifyReport report;
  const int64_t now_ms = UnixMillis();
  ForEachDirEntry(dir.root(), [&](std::string_view ns_name) {
    if (!IsNamespaceName(ns_name)) return;
    NamespaceSummary ns;
    ParseHex(ns_name, &ns.id);
    const std::string ns_dir = dir.root() + "/" + std::string(ns_name);
    ReadNamespaceFile(ns_dir, &ns);
    ForEachDirEntry(ns_dir, [&](std::string_view bucket) {
      if (!IsBucketName(bucket)) return;
      const std::string bucket_dir = ns_dir + "/" + std::string(bucket);
      ForEachDirEntry(bucket_dir, [&](std::string_view name) {
        Hash128 h;
        if (!ParseBlockName(name, &h)) return;
        const std::string path = bucket_dir + "/" + std::string(name);
        ++report.checked;
        VerifyFailure f = VerifyBlockFile(path, ns.id, h, ns.payload_bytes);
        if (f == VerifyFailure::kNone && h.ToHex().substr(0, 2) != bucket) f = VerifyFailure::kHash;
        if (f == VerifyFailure::kNone) {
          ++report.good;
          return;
        }
        ++report.failures[static_cast<int>(f)];
        if (report.bad.size() < 100) report.bad.push_back(std::string(VerifyFailureName(f)) + " " + path);
        if (quarantine && f != VerifyFailure::kIo &&
            ::rename(path.c_str(), dir.QuarantinePath(now_ms, VerifyFailureName(f), h).c_str()) == 0) {
          ++report.quarantined;
        }
      });
    });
  });
  return report;
}

}  // namespace deepinfer::kvstore
