// The router's view of one unit, shared by router.cpp (discovery, health) and proxy.cpp (requests).
// Not part of the router's API.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "core/mutex.h"
#include "router/router.h"
#include "router/upstream.h"

namespace deepinfer::router {

struct Router::Unit {
  std::string id;
  std::string url;
  HostPort addr;
  std::atomic<bool> healthy{false};        // the last health check answered 200
  std::atomic<int64_t> failed_at_ms{0};    // a request failed here: out until a health check passes
  std::atomic<int64_t> placed_prefill_tokens{0};
  std::atomic<int64_t> placed_streams{0};
  std::unique_ptr<KeptAliveGetter> health;  // the health checks' connection (the refresh thread's alone)

  void SetLease(const UnitLease& lease) {
    MutexLock lock(&mu);
    lease_ = lease;
  }
  // Static units (ttl < 0) have no lease to lapse.
  bool LeaseAlive(int64_t now_ms) const {
    MutexLock lock(&mu);
    return lease_.ttl_ms < 0 || lease_.Alive(now_ms);
  }
  UnitLease Lease() const {
    MutexLock lock(&mu);
    return lease_;
  }
  UnitRole Role() const {
    MutexLock lock(&mu);
    return lease_.role;
  }
  // A draining unit (switching roles) finishes what it has and takes nothing new.
  bool Draining() const {
    MutexLock lock(&mu);
    return lease_.draining;
  }
  bool Usable(int64_t now_ms) const {
    return healthy.load() && failed_at_ms.load() == 0 && LeaseAlive(now_ms) && !Draining();
  }
  PlacementLoad Load(int64_t now_ms) const {
    PlacementLoad l;
    {
      MutexLock lock(&mu);
      l.published = lease_.load;
    }
    l.placed_prefill_tokens = placed_prefill_tokens.load();
    l.placed_streams = placed_streams.load();
    l.usable = Usable(now_ms);
    return l;
  }

 private:
  mutable Mutex mu;
  UnitLease lease_ GUARDED_BY(mu);
};

}  // namespace deepinfer::router
