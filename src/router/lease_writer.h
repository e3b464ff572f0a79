// The unit side of discovery: `deepinfer serve --unit-dir DIR` keeps its lease fresh with this. A thread
// rewrites the lease (with the load the callback reports) every third of its TTL, so that two missed
// renewals still leave it alive, and removes it on Stop (a clean shutdown takes the unit out at once).
// Renewal never waits on requests: it runs on its own thread, at background priority (core/sched.h), with
// a file write as its only I/O.
//
// Role switches (with EnableRoleSwitch): at each renewal the writer looks for DIR/<unit_id>.role
// (unit_lease.h). Asked for another role, the unit drains: its lease says so, and routers send it nothing
// new; once it is idle (its running requests finished), the lease takes the new role, the drain ends and the
// request file is removed. A request for a role the unit cannot take is removed with a log line.
#pragma once

#include <functional>
#include <string>
#include <thread>

#include "core/mutex.h"
#include "router/unit_lease.h"

namespace deepinfer::router {

class LeaseWriter {
 public:
  // `lease` gives the unit's identity; `load` is called at each renewal.
  LeaseWriter(std::string dir, UnitLease lease, std::function<UnitLoad()> load);
  ~LeaseWriter();
  LeaseWriter(const LeaseWriter&) = delete;
  LeaseWriter& operator=(const LeaseWriter&) = delete;

  struct RoleSwitch {
    std::function<bool()> idle;                 // no request running or waiting
    std::function<Status(UnitRole)> can_take;  // why the unit cannot serve in a role, or Ok
    std::function<void(UnitRole)> switched;     // optional: the lease names the new role from now on
  };
  void EnableRoleSwitch(RoleSwitch role_switch) { role_switch_ = std::move(role_switch); }

  // Writes the first lease (an error when the directory cannot take it) and starts renewing.
  Status Start();
  // Stops renewing and removes the lease.
  void Stop();

 private:
  void Loop();
  Status WriteNow();
  void FollowRoleRequest();

  std::string dir_;
  UnitLease lease_;
  std::function<UnitLoad()> load_;
  RoleSwitch role_switch_;
  Mutex mu_;
  CondVar cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace deepinfer::router
