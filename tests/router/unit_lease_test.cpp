#include "router/unit_lease.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>
#include <vector>

#include "router/lease_writer.h"

namespace deepinfer::router {
namespace {

namespace fs = std::filesystem;

UnitLease SampleLease() {
  UnitLease l;
  l.unit_id = "unit-42-8001";
  l.url = "http://127.0.0.1:8001";
  l.models = {"tiny"};
  l.version = "0.1.0";
  l.pid = 42;
  l.heartbeat_unix_ms = 1000;
  l.ttl_ms = 3000;
  l.load.running = 3;
  l.load.waiting = 1;
  l.load.queued_prefill_tokens = 700;
  l.load.max_num_seqs = 16;
  l.load.kv_usage = 0.25;
  l.load.step_cost = {1e-3, 2e-4, 3e-5, 4e-9, 5e-5};
  l.load.calibrated = true;
  return l;
}

fs::path FreshDir(const char* name) {
  fs::path dir = fs::temp_directory_path() / (std::string("router_test_") + name + "_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

TEST(UnitLease, RoundTripsEveryField) {
  const UnitLease a = SampleLease();
  auto b = ParseLease(LeaseToJson(a));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->unit_id, a.unit_id);
  EXPECT_EQ(b->url, a.url);
  EXPECT_EQ(b->models, a.models);
  EXPECT_EQ(b->pid, 42);
  EXPECT_EQ(b->load.queued_prefill_tokens, 700);
  EXPECT_EQ(b->load.step_cost, a.load.step_cost);
  EXPECT_TRUE(b->load.calibrated);
  // Alive while now < heartbeat + ttl = 4000.
  EXPECT_TRUE(b->Alive(3999));
  EXPECT_FALSE(b->Alive(4000));
}

TEST(UnitLease, RefusesMalformedFields) {
  const std::string good = LeaseToJson(SampleLease());
  auto with = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const size_t at = s.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    s.replace(at, from.size(), to);
    return ParseLease(s);
  };
  EXPECT_FALSE(ParseLease("").ok());
  EXPECT_FALSE(ParseLease("[1,2]").ok());
  EXPECT_FALSE(ParseLease(std::string(kMaxLeaseBytes + 1, ' ')).ok());
  EXPECT_FALSE(with("deepinfer-unit-lease/1", "deepinfer-unit-lease/2").ok());
  EXPECT_FALSE(with("\"unit-42-8001\"", "\"../etc/passwd\"").ok());
  EXPECT_FALSE(with("http://127.0.0.1:8001", "https://127.0.0.1:8001").ok());
  EXPECT_FALSE(with("http://127.0.0.1:8001", "http://127.0.0.1:99999").ok());
  EXPECT_FALSE(with("http://127.0.0.1:8001", "http://127.0.0.1:8001/v1").ok());
  EXPECT_FALSE(with("\"running\":3", "\"running\":-3").ok());
  EXPECT_FALSE(with("\"running\":3", "\"running\":\"3\"").ok());
  EXPECT_FALSE(with("\"kv_usage\":0.25", "\"kv_usage\":1.5").ok());
  EXPECT_FALSE(with("\"ttl_ms\":3000", "\"ttl_ms\":0").ok());
  EXPECT_FALSE(with("[\"tiny\"]", "[]").ok());
  EXPECT_FALSE(with("0.001,", "-0.001,").ok());
  EXPECT_FALSE(with("0.001,", "").ok());  // four coefficients
  EXPECT_FALSE(with("\"role\":\"both\"", "\"role\":\"router\"").ok());
  EXPECT_FALSE(with("\"role\":\"both\"", "\"role\":1").ok());
}

TEST(UnitLease, CarriesTheUnitsRoleAndReadsLeasesWithoutOne) {
  UnitLease a = SampleLease();
  a.role = UnitRole::kPrefill;
  auto b = ParseLease(LeaseToJson(a));
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->role, UnitRole::kPrefill);
  // A lease written before units had roles: the unit does both.
  std::string old = LeaseToJson(SampleLease());
  const size_t at = old.find(",\"role\":\"both\"");
  ASSERT_NE(at, std::string::npos);
  old.erase(at, std::string(",\"role\":\"both\"").size());
  auto c = ParseLease(old);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->role, UnitRole::kBoth);
  UnitRole role;
  EXPECT_TRUE(ParseUnitRole("decode", &role));
  EXPECT_EQ(role, UnitRole::kDecode);
  EXPECT_FALSE(ParseUnitRole("Decode", &role));
}

TEST(UnitLease, ParsesUnitUrls) {
  auto a = ParseUnitUrl("http://localhost:8000/");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host, "localhost");
  EXPECT_EQ(a->port, 8000);
  auto b = ParseUnitUrl("http://[::1]:9");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_FALSE(ParseUnitUrl("http://host").ok());
  EXPECT_FALSE(ParseUnitUrl("http://host:0").ok());
  EXPECT_FALSE(ParseUnitUrl("http://ho st:80").ok());
  EXPECT_FALSE(ParseUnitUrl("ftp://host:80").ok());
}

TEST(UnitLease, ScanSkipsWhatDoesNotParseAndKeepsTheRest) {
  const fs::path dir = FreshDir("scan");
  ASSERT_TRUE(WriteLease(dir, SampleLease()).ok());
  UnitLease other = SampleLease();
  other.unit_id = "unit-7-8002";
  ASSERT_TRUE(WriteLease(dir, other).ok());
  std::ofstream(dir / "broken.lease") << "{\"format\":";
  // A file whose unit id is not its name (a copied lease) is skipped: two units would share one id.
  std::ofstream(dir / "copy.lease") << LeaseToJson(SampleLease());
  std::ofstream(dir / "notes.txt") << "not a lease";
  auto scan = ScanLeases(dir);
  ASSERT_TRUE(scan.ok());
  ASSERT_EQ(scan->leases.size(), 2u);
  EXPECT_EQ(scan->leases[0].unit_id, "unit-42-8001");
  EXPECT_EQ(scan->leases[1].unit_id, "unit-7-8002");
  EXPECT_EQ(scan->errors.size(), 2u);
  EXPECT_FALSE(ScanLeases((dir / "missing").string()).ok());
  fs::remove_all(dir);
}

TEST(LeaseWriter, RenewsAndRemovesItsLease) {
  const fs::path dir = FreshDir("writer");
  UnitLease lease = SampleLease();
  lease.ttl_ms = 30;  // renewed every 10 ms
  int calls = 0;
  {
    LeaseWriter writer(dir, lease, [&calls] {
      UnitLoad load;
      load.running = ++calls;
      return load;
    });
    ASSERT_TRUE(writer.Start().ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    int64_t running = 0;
    while (running < 3 && std::chrono::steady_clock::now() < deadline) {
      auto scan = ScanLeases(dir);
      ASSERT_TRUE(scan.ok());
      if (scan->leases.size() == 1) running = scan->leases[0].load.running;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_GE(running, 3);  // the load callback ran at each renewal
    writer.Stop();
    EXPECT_FALSE(fs::exists(dir / "unit-42-8001.lease"));
  }
  fs::remove_all(dir);
}

// Renewals run on a thread of their own at background priority (core/sched.h: nice 19): the load
// callback, which each renewal calls, sees it.
TEST(LeaseWriter, RenewsAtBackgroundPriority) {
  const fs::path dir = FreshDir("writer-priority");
  UnitLease lease = SampleLease();
  lease.ttl_ms = 30;  // renewed every 10 ms
  std::mutex mu;
  std::vector<int> renewal_nices;  // of the calls not on the test's thread (Start writes the first lease)
  const std::thread::id test_thread = std::this_thread::get_id();
  {
    LeaseWriter writer(dir, lease, [&] {
      if (std::this_thread::get_id() != test_thread) {
        std::lock_guard lock(mu);
        renewal_nices.push_back(getpriority(PRIO_PROCESS, static_cast<id_t>(gettid())));
      }
      return UnitLoad{};
    });
    ASSERT_TRUE(writer.Start().ok());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      {
        std::lock_guard lock(mu);
        if (renewal_nices.size() >= 2) break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    writer.Stop();
  }
  ASSERT_GE(renewal_nices.size(), 2u);
  for (int nice : renewal_nices) EXPECT_EQ(nice, 19);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace deepinfer::router
