#include "router/lease_writer.h"

#include <chrono>

#include "core/log.h"
#include "core/sched.h"

namespace deepinfer::router {

LeaseWriter::LeaseWriter(std::string dir, UnitLease lease, std::function<UnitLoad()> load)
    : dir_(std::move(dir)), lease_(std::move(lease)), load_(std::move(load)) {}

LeaseWriter::~LeaseWriter() { Stop(); }

void LeaseWriter::FollowRoleRequest() {
  if (!role_switch_.idle) return;
  auto asked = ReadRoleRequest(dir_, lease_.unit_id);
  auto end_drain = [&] {
    if (lease_.draining) DI_LOG(kInfo, "drain ended").Field("role", UnitRoleName(lease_.role));
    lease_.draining = false;
  };
  if (!asked.ok()) {
    if (asked.status().code() != StatusCode::kNotFound) {
      DI_LOG(kWarn, "role request ignored").Field("reason", asked.status().message());
      (void)RemoveRoleRequest(dir_, lease_.unit_id);
    }
    end_drain();  // withdrawn: the unit goes on in its role
    return;
  }
  if (*asked == lease_.role) {
    end_drain();
    (void)RemoveRoleRequest(dir_, lease_.unit_id);
    return;
  }
  if (Status why = role_switch_.can_take(*asked); !why.ok()) {
    DI_LOG(kWarn, "role request refused").Field("role", UnitRoleName(*asked)).Field("reason", why.message());
    end_drain();
    (void)RemoveRoleRequest(dir_, lease_.unit_id);
    return;
  }
  if (!lease_.draining) {
    DI_LOG(kInfo, "draining to switch role").Field("from", UnitRoleName(lease_.role)).Field("to", UnitRoleName(*asked));
    lease_.draining = true;
    return;  // the lease says so first: requests placed before routers read it still arrive
  }
  if (!role_switch_.idle()) return;
  DI_LOG(kInfo, "role switched").Field("from", UnitRoleName(lease_.role)).Field("to", UnitRoleName(*asked));
  lease_.role = *asked;
  lease_.draining = false;
  (void)RemoveRoleRequest(dir_, lease_.unit_id);
  if (role_switch_.switched) role_switch_.switched(lease_.role);
}

Status LeaseWriter::WriteNow() {
  FollowRoleRequest();
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
  SetCurrentThreadName("lease-renewal");
  // A renewal may wait: the lease lives three periods, and a nice-19 thread still gets a turn within one on
  // a core whose latency-bound threads (a decode unit's engine, its event loop) sleep between their steps;
  // at the default priority its wake-ups would cut into their turns instead.
  if (const Status s = SetThreadBackgroundPriority(); !s.ok())
    DI_LOG(kWarn, "lease renewal keeps the default priority").Field("error", s.message());
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
