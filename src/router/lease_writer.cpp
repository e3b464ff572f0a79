#include "router/lease_writer.h"

#include <chrono>

#include "core/log.h"

namespace deepinfer::router {

LeaseWriter::LeaseWriter(std::string dir, UnitLease lease, std::function<UnitLoad()> load)
    : dir_(std::move(dir)), lease_(std::move(lease)), load_(std::move(load)) {}

LeaseWriter::~LeaseWriter() { Stop(); }

Status LeaseWriter::WriteNow() {
  if (load_) lease_.load = load_();
  lease_.heartbeat_unix_ms = UnixMillisNow();
  return WriteLease(dir_, lease_);
}

Status LeaseWriter::Start() {
  DI_RETURN_IF_ERROR(WriteNow());
  thread_ = std::thread([this] { Loop(); });
  return Status::Ok();
}

void LeaseWriter::Loop() {
  const auto period = std::chrono::milliseconds(std::max<int64_t>(lease_.ttl_ms / 3, 10));
  while (true) {
    {
      MutexLock lock(&mu_);
      const auto next = std::chrono::steady_clock::now() + period;
      while (!stopping_ && std::chrono::steady_clock::now() < next) cv_.WaitUntil(&mu_, next);
      if (stopping_) return;
    }
    if (Status s = WriteNow(); !s.ok()) DI_LOG(kWarn, "lease renewal failed").Field("reason", s.message());
  }
}

void LeaseWriter::Stop() {
  {
    MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.SignalAll();
  if (thread_.joinable()) {
    thread_.join();
    if (Status s = RemoveLease(dir_, lease_.unit_id); !s.ok()) DI_LOG(kWarn, "lease removal failed").Field("reason", s.message());
  }
}

}  // namespace deepinfer::router
