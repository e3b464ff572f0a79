// deepinfer bench kvstore: block write and read throughput and latency of the KV store (src/kvstore) on a
// directory, at DeepSeek's production block size and V4-Flash's, beside fio's figures for the same directory,
// block size and queue depth (tools/kvstore/bench_fio.py writes them; --peer reads them).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "engine/engine.h"
#include "kvcache/kv_cache_spec.h"
#include "kvstore/kv_store_tier.h"
#include "kvstore/store.h"
#include "kvstore/store_dir.h"
#include "kvstore/sweeper.h"
#include "model/causal_lm.h"

namespace deepinfer::bench {
namespace {

// DeepSeek's production blocks: "128-token blocks, about 112 KiB each" (their 3FS KV cache).
constexpr int64_t kDeepSeekBlockBytes = 112 * 1024;

// V4-Flash's persisted (kPrefix) bytes per 128-token block, from its released config.json: 43 layers,
// compress_ratios [0, 0, 4, 128, 4, ..., 128, 4] = 21 CSA layers (ratio 4) and 20 HCA layers (ratio 128),
// head_dim 512, index_head_dim 128. Per block: csa_kv 21·(128/4)·512, hca_kv 20·(128/128)·512,
// csa_index 21·(128/4)·128 elements = 440,320 elements (the window group stays in RAM).
int64_t V4FlashPrefixBlockBytes(int64_t element_bytes) {
  const int64_t csa_layers = 21, hca_layers = 20, head_dim = 512, index_head_dim = 128;
  const int64_t elements = csa_layers * (128 / 4) * head_dim + hca_layers * (128 / 128) * head_dim +
                           csa_layers * (128 / 4) * index_head_dim;
  return elements * element_bytes;
}

struct FioFigures {
  double gbps = 0, p50_ms = 0, p99_ms = 0;
};
struct FioPeer {
  std::string system;
  std::map<int64_t, std::pair<FioFigures, FioFigures>> by_block;  // write, read
};

Result<FioPeer> LoadFioPeer(const std::string& path) {
  DI_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
  auto parsed = ParseJson(text);
  if (!parsed.ok()) return Status::InvalidArgument(path + ": " + parsed.status().message());
  const nlohmann::json& doc = *parsed;
  if (!doc.is_object() || !doc.contains("results") || !doc["results"].is_array()) {
    return Status::InvalidArgument(path + ": expected an object with a 'results' array (tools/kvstore/bench_fio.py)");
  }
  FioPeer peer;
  peer.system = doc.contains("system") && doc["system"].is_string() ? doc["system"].get<std::string>() : "fio";
  auto figures = [&](const nlohmann::json& j, FioFigures* out) -> Status {
    if (!j.is_object()) return Status::InvalidArgument(path + ": a result's read/write must be objects");
    for (auto [key, field] : {std::pair{"gbps", &out->gbps}, {"p50_ms", &out->p50_ms}, {"p99_ms", &out->p99_ms}}) {
      if (!j.contains(key) || !j[key].is_number()) return Status::InvalidArgument(path + ": missing number '" + key + "'");
      *field = j[key].get<double>();
    }
    return Status::Ok();
  };
  for (const auto& r : doc["results"]) {
    if (!r.is_object() || !r.contains("block_bytes") || !r["block_bytes"].is_number_integer() || !r.contains("read") ||
        !r.contains("write")) {
      return Status::InvalidArgument(path + ": a result needs block_bytes, read and write");
    }
    auto& slot = peer.by_block[r["block_bytes"].get<int64_t>()];
    DI_RETURN_IF_ERROR(figures(r["write"], &slot.first));
    DI_RETURN_IF_ERROR(figures(r["read"], &slot.second));
  }
  return peer;
}

struct StoreRow {
  double gbps = 0, p50_ms = 0, p99_ms = 0;
};

struct Setup {
  std::string dir;
  int io_threads = 2;
  int queue_depth = 32;
  kvstore::FsyncPolicy fsync = kvstore::FsyncPolicy::kNone;
  kvstore::IoBackendKind backend = kvstore::IoBackendKind::kAuto;
};

kvstore::StoreOptions OptionsFor(const Setup& setup, int64_t block_bytes, bool direct) {
  kvstore::StoreOptions o;
  o.dir = setup.dir;
  o.layout.model_fingerprint = {.high = 0xbe, .low = static_cast<uint64_t>(block_bytes)};
  o.layout.description = "bench kvstore " + std::to_string(block_bytes) + " B";
  o.layout.segment_bytes = {static_cast<uint64_t>(block_bytes)};
  o.io_threads = setup.io_threads;
  o.queue_depth = std::max(1, setup.queue_depth / setup.io_threads);
  o.write_depth = o.queue_depth;
  o.max_queue_bytes = uint64_t{256} << 20;
  o.fsync = setup.fsync;
  o.backend = setup.backend;
  o.sweep_interval_s = 0;
  o.refresh_interval_s = 1e9;  // measure reads, not the last-use stamps
  o.direct_io = direct;
  return o;
}

// fio (Debian), run by the bench itself with --fio, so that its figures and ours come from the same minutes of
// a shared machine: one scratch file beside the store (not inside: the store refuses foreign files), I/O of the
// store's file size rounded up to 4 KiB, the same queue depth, io_uring. Writes are buffered with an
// fdatasync per block, reads O_DIRECT and random, as tools/kvstore/bench_fio.py does.
Result<FioFigures> RunFio(const std::string& file, bool read, int64_t io_bytes, int queue_depth, int64_t total) {
  if (file.find('\'') != std::string::npos) return Status::InvalidArgument("--fio: the directory's path holds a quote");
  const std::string cmd = "fio --name=kvstore '--filename=" + file + "' --rw=" + (read ? "randread" : "write") +
                          " --bs=" + std::to_string(io_bytes) + " --iodepth=" + std::to_string(queue_depth) +
                          " --ioengine=io_uring --size=" + std::to_string(total) +
                          " --numjobs=1 --output-format=json --group_reporting " +
                          (read ? "--direct=1" : "--fdatasync=1 --direct=0") + " 2>&1";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  if (pipe == nullptr) return Status::IoError("--fio: cannot run fio");
  std::string out;
  char chunk[4096];
  for (size_t got; (got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0 && out.size() < (size_t{16} << 20);) out.append(chunk, got);
  const int rc = ::pclose(pipe);
  const size_t brace = out.find('{');
  if (rc != 0 || brace == std::string::npos) {
    return Status::IoError("--fio: fio failed (is it installed? scripts/setup.sh installs Debian's fio): " +
                           out.substr(0, 300));
  }
  auto parsed = ParseJson(std::string_view(out).substr(brace));
  if (!parsed.ok()) return Status::IoError("--fio: fio's JSON: " + parsed.status().message());
  const nlohmann::json& doc = *parsed;
  const char* side = read ? "read" : "write";
  if (!doc.contains("jobs") || !doc["jobs"].is_array() || doc["jobs"].empty() || !doc["jobs"][0].contains(side)) {
    return Status::IoError("--fio: fio's JSON has no jobs[0]." + std::string(side));
  }
  const nlohmann::json& j = doc["jobs"][0][side];
  FioFigures f;
  f.gbps = j.value("bw_bytes", 0.0) / 1e9;
  if (j.contains("clat_ns") && j["clat_ns"].contains("percentile")) {
    const nlohmann::json& pct = j["clat_ns"]["percentile"];
    f.p50_ms = pct.value("50.000000", 0.0) / 1e6;
    f.p99_ms = pct.value("99.000000", 0.0) / 1e6;
  }
  return f;
}

struct BlockSizeMeasurement {
  std::vector<StoreRow> rows;  // write, read (O_DIRECT; the median round), read (page cache)
  bool have_fio = false;
  FioFigures fio_write, fio_read;  // fio_read: the median round's
  std::vector<double> read_ratios;  // per round: our O_DIRECT read GB/s / fio's
};

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v.size() % 2 == 1 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

// Writes n blocks, reads them back with O_DIRECT `rounds` times (each right after fio's read, with --fio),
// then from the page cache.
Result<BlockSizeMeasurement> MeasureOne(const Setup& setup, int64_t block_bytes, int64_t n, int rounds,
                                        bool fio, std::string* backend) {
  std::vector<uint8_t> payload(static_cast<size_t>(block_bytes));
  for (size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 131 + 7);
  std::vector<int32_t> tokens(kvcache::kBlockTokens);
  const uint64_t nonce = static_cast<uint64_t>(NowNanos());
  auto hash_of = [&](int64_t i) { return kvstore::Hash128{.high = nonce, .low = static_cast<uint64_t>(i)}; };
  const double file_bytes = static_cast<double>(block_bytes + static_cast<int64_t>(kvstore::kHeaderBytes));
  BlockSizeMeasurement m;
  std::vector<StoreRow>& rows = m.rows;
  {
    DI_ASSIGN_OR_RETURN(auto store, kvstore::Store::Open(OptionsFor(setup, block_bytes, false)));
    *backend = std::string(store->backend_name());
    const std::span<const uint8_t> seg(payload);
    Stopwatch watch;
    for (int64_t i = 0; i < n; ++i) {
      kvstore::BlockWrite w;
      w.hash = hash_of(i);
      w.block_index = static_cast<uint32_t>(i);
      tokens[0] = static_cast<int32_t>(i);
      w.tokens = tokens;
      w.segments = std::span(&seg, 1);
      // A full queue drops (by design); the bench waits instead, to measure the writers' throughput.
      while (!store->Put(w)) ::usleep(50);
    }
    store->Flush();
    const double seconds = watch.ElapsedSeconds();
    const kvstore::StoreStats st = store->stats();
    if (st.writes_done != static_cast<uint64_t>(n)) {
      return Status::IoError("wrote " + std::to_string(st.writes_done) + " of " + std::to_string(n) + " blocks (" +
                             std::to_string(st.writes_failed) + " failed)");
    }
    rows.push_back({static_cast<double>(n) * file_bytes / seconds / 1e9, st.write_p50 * 1e3, st.write_p99 * 1e3});
  }
  ::sync();  // O_DIRECT reads of dirty pages would wait for their writeback
  auto read_pass = [&](bool direct) -> Result<StoreRow> {
    StoreRow row;
    DI_ASSIGN_OR_RETURN(auto store, kvstore::Store::Open(OptionsFor(setup, block_bytes, direct)));
    // setup.queue_depth blocks per batch, two batches in flight, each with its own destination blocks:
    // page-aligned, as the engine's pool blocks are (an mmap'd pool; V4-Flash's group blocks are page
    // multiples), so O_DIRECT reads land in them without a bounce buffer.
    const int64_t batch = setup.queue_depth;
    const size_t stride = (payload.size() + 4095) / 4096 * 4096;
    auto pool = kvcache::KvBlockPool::Create(static_cast<int64_t>(stride), 2 * batch);
    if (!pool.ok()) return pool.status();
    auto buffer = [&](int64_t i) { return std::span<uint8_t>(pool->block(static_cast<int32_t>(i)), payload.size()); };
    std::vector<std::future<std::vector<kvstore::ReadResult>>> in_flight(2);
    std::vector<bool> used(2, false);
    int64_t good = 0;
    auto collect = [&](int slot) {
      if (!used[slot]) return;
      for (const auto& r : in_flight[slot].get()) good += r.status.ok() ? 1 : 0;
      used[slot] = false;
    };
    for (int pass = 0; pass < (direct ? 1 : 2); ++pass) {  // page cache: the first pass warms it
      good = 0;
      Stopwatch watch;
      int slot = 0;
      for (int64_t first = 0; first < n; first += batch, slot ^= 1) {
        collect(slot);
        std::vector<kvstore::ReadItem> items;
        for (int64_t i = first; i < std::min(n, first + batch); ++i) {
          kvstore::ReadItem item;
          item.hash = hash_of(i);
          item.check_parent = true;
          item.dest.push_back(buffer(slot * batch + (i - first)));
          items.push_back(std::move(item));
        }
        auto promise = std::make_shared<std::promise<std::vector<kvstore::ReadResult>>>();
        in_flight[slot] = promise->get_future();
        used[slot] = true;
        // The expected token ids must outlive the batch: keep one copy per item in the callback's capture.
        auto expected = std::make_shared<std::vector<std::vector<int32_t>>>();
        for (int64_t i = first; i < std::min(n, first + batch); ++i) {
          expected->push_back(tokens);
          expected->back()[0] = static_cast<int32_t>(i);
        }
        for (size_t k = 0; k < items.size(); ++k) items[k].tokens = (*expected)[k];
        store->Read(std::move(items), [promise, expected](std::vector<kvstore::ReadResult> r) {
          promise->set_value(std::move(r));
        });
      }
      collect(0);
      collect(1);
      const double seconds = watch.ElapsedSeconds();
      if (good != n) return Status::DataLoss("read back " + std::to_string(good) + " of " + std::to_string(n) + " blocks");
      if (pass == (direct ? 0 : 1)) {
        const kvstore::StoreStats st = store->stats();
        if (direct && st.direct_reads == 0) std::fprintf(stderr, "bench kvstore: %s refuses O_DIRECT; reads were buffered\n", setup.dir.c_str());
        if (st.bounced_reads != 0) std::fprintf(stderr, "bench kvstore: %llu reads went through a bounce buffer\n",
                                                static_cast<unsigned long long>(st.bounced_reads));
        row = {static_cast<double>(n) * file_bytes / seconds / 1e9, st.read_p50 * 1e3, st.read_p99 * 1e3};
      }
    }
    return row;
  };
  std::string scratch;
  const int64_t io_bytes = (static_cast<int64_t>(file_bytes) + 4095) / 4096 * 4096;
  if (fio) {
    std::string tmpl = (std::filesystem::path(setup.dir).parent_path() / "fio.XXXXXX").string();
    if (::mkdtemp(tmpl.data()) == nullptr) return Status::IoError("--fio: cannot make a scratch directory beside " + setup.dir);
    scratch = tmpl;
    m.have_fio = true;
  }
  const std::string fio_file = scratch + "/fio.dat";
  auto measure = [&]() -> Status {
    if (fio) {
      DI_ASSIGN_OR_RETURN(m.fio_write, RunFio(fio_file, false, io_bytes, setup.queue_depth, n * io_bytes));
    }
    std::vector<std::pair<double, std::pair<StoreRow, FioFigures>>> by_ratio;
    for (int round = 0; round < rounds; ++round) {
      FioFigures f;
      if (fio) {
        DI_ASSIGN_OR_RETURN(f, RunFio(fio_file, true, io_bytes, setup.queue_depth, n * io_bytes));
      }
      DI_ASSIGN_OR_RETURN(StoreRow ours, read_pass(true));
      const double ratio = fio && f.gbps > 0 ? ours.gbps / f.gbps : ours.gbps;
      if (fio) m.read_ratios.push_back(ratio);
      by_ratio.push_back({ratio, {ours, f}});
    }
    // The median round by ratio (by our throughput without fio): its figures are the row.
    std::sort(by_ratio.begin(), by_ratio.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    const auto& mid = by_ratio[by_ratio.size() / 2];
    rows.push_back(mid.second.first);
    m.fio_read = mid.second.second;
    DI_ASSIGN_OR_RETURN(StoreRow warm, read_pass(false));
    rows.push_back(warm);
    return Status::Ok();
  };
  const Status measured = measure();
  if (fio) {
    std::error_code ec;
    std::filesystem::remove_all(scratch, ec);
  }
  DI_RETURN_IF_ERROR(measured);
  // Leave the directory as found: the bench's namespace emptied.
  kvstore::SweepOptions all;
  all.evict_all = true;
  all.wait_for_lock = true;
  DI_ASSIGN_OR_RETURN(kvstore::StoreDir dir, kvstore::StoreDir::Open(setup.dir, false));
  DI_RETURN_IF_ERROR(kvstore::Sweep(dir, all).status());
  return m;
}

std::string FioCells(const FioPeer* peer, int64_t block_bytes, bool read, const StoreRow& ours) {
  if (peer == nullptr) return "";
  auto it = peer->by_block.find(block_bytes);
  char buf[96];
  if (it == peer->by_block.end()) {
    std::snprintf(buf, sizeof buf, " %9s %8s %8s %8s", "-", "-", "-", "-");
  } else {
    const FioFigures& f = read ? it->second.second : it->second.first;
    std::snprintf(buf, sizeof buf, " %9.3f %8.3f %8.3f %7.0f%%", f.gbps, f.p50_ms, f.p99_ms, 100.0 * ours.gbps / f.gbps);
  }
  return buf;
}

// TTFT of one prompt (Generate with max_tokens 1) through an engine on `model_dir`, with the store at `dir`
// as its persistent tier when `with_store`. A fresh engine each time: nothing is in RAM.
Result<double> TimeFirstToken(const std::string& model_dir, const std::string& dir, bool with_store,
                              const std::vector<int32_t>& prompt, int64_t* hit_tokens) {
  model::LoadOptions load;
  DI_ASSIGN_OR_RETURN(auto m, model::LoadCausalLM(model_dir, load));
  std::unique_ptr<kvstore::KvStoreTier> tier;
  if (with_store) {
    const kvstore::StoreModel store_model{m->info().architecture, m->info().weights_fingerprint,
                                          model::ComputePrecisionName(load.precision),
                                          model::KvPrecisionName(load.kv_precision)};
    DI_ASSIGN_OR_RETURN(auto layout, kvstore::StoreLayoutFor(m->cache_spec(), store_model));
    kvstore::StoreOptions o;
    o.dir = dir;
    o.layout = std::move(layout);
    o.sweep_interval_s = 0;
    DI_ASSIGN_OR_RETURN(auto store, kvstore::Store::Open(std::move(o)));
    tier = std::make_unique<kvstore::KvStoreTier>(std::move(store), kvstore::TtlClass::kChat);
  }
  engine::EngineOptions eo;
  eo.kv_cache_bytes = int64_t{4} << 30;
  eo.max_num_batched_tokens = 8192;
  eo.prefill_chunk = 8192;
  eo.swa_replay = engine::SwaReplay::kBounded;
  eo.lower_tier = tier.get();
  DI_ASSIGN_OR_RETURN(auto eng, engine::Engine::Create(std::move(m), eo));
  engine::RequestParams p;
  p.sampling.max_tokens = 1;
  p.sampling.temperature = 0;
  Stopwatch watch;
  DI_ASSIGN_OR_RETURN(auto out, eng->Generate(std::span(&prompt, 1), p));
  const double seconds = watch.ElapsedSeconds();
  DI_RETURN_IF_ERROR(out[0].status);
  *hit_tokens = out[0].prompt_cache_hit_tokens;
  eng->Shutdown();
  if (tier) tier->store().Flush();
  return seconds;
}

int RunBenchKvstore(const std::vector<std::string>& args) {
  Setup setup;
  std::vector<int64_t> sizes = {kDeepSeekBlockBytes, V4FlashPrefixBlockBytes(2), V4FlashPrefixBlockBytes(4)};
  int64_t total_mib = 512;
  std::string peer_path;
  cli::Flags flags("bench kvstore");
  flags.Path("--dir", &setup.dir).Required();
  flags.IntList("--block-bytes", &sizes, 512, int64_t{256} << 20, 16);
  flags.Int<int64_t>("--total-mib", &total_mib, 1, 1 << 20);
  flags.Int("--queue-depth", &setup.queue_depth, 1, 1024);
  flags.Int("--io-threads", &setup.io_threads, 1, 64);
  flags.Choice("--fsync", &setup.fsync, {{"none", kvstore::FsyncPolicy::kNone}, {"data", kvstore::FsyncPolicy::kData}});
  flags.Choice("--backend", &setup.backend,
               {{"auto", kvstore::IoBackendKind::kAuto}, {"uring", kvstore::IoBackendKind::kUring},
                {"posix", kvstore::IoBackendKind::kPosix}});
  flags.Path("--peer", &peer_path);
  bool run_fio = false;
  int rounds = 0;
  flags.Switch("--fio", &run_fio);
  flags.Int("--rounds", &rounds, 1, 100);
  std::string model_dir;
  int64_t restart_tokens = 8192;
  flags.Path("--model", &model_dir);
  flags.Int<int64_t>("--restart-prompt", &restart_tokens, 129, 1 << 20);
  if (int rc = flags.Parse(args)) return rc;
  if (!model_dir.empty()) {
    // TTFT after a restart: cold (no store), then the same prompt through a fresh engine whose store
    // holds the prompt's blocks (written by a first run), as a fraction of cold.
    std::vector<int32_t> prompt(static_cast<size_t>(restart_tokens));
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(2 + (i * 7919 + 17) % 250);
    int64_t hit = 0;
    auto cold = TimeFirstToken(model_dir, setup.dir, false, prompt, &hit);
    if (!cold.ok()) return cli::Fail("bench kvstore", cold.status().message());
    auto writer = TimeFirstToken(model_dir, setup.dir, true, prompt, &hit);
    if (!writer.ok()) return cli::Fail("bench kvstore", writer.status().message());
    auto restarted = TimeFirstToken(model_dir, setup.dir, true, prompt, &hit);
    if (!restarted.ok()) return cli::Fail("bench kvstore", restarted.status().message());
    std::printf("TTFT, %lld-token prompt, %s: cold %.3f s (with the store writing behind: %.3f s); after a restart "
                "%.3f s (%lld tokens from the store) = %.1f%% of cold\n",
                static_cast<long long>(restart_tokens), model_dir.c_str(), *cold, *writer, *restarted,
                static_cast<long long>(hit), 100.0 * *restarted / *cold);
    kvstore::SweepOptions all;
    all.evict_all = true;
    all.wait_for_lock = true;
    if (auto d = kvstore::StoreDir::Open(setup.dir, false); d.ok()) (void)kvstore::Sweep(*d, all);
    return 0;
  }
  if (setup.queue_depth < setup.io_threads) return cli::UsageError("bench kvstore", "--queue-depth below --io-threads");
  if (run_fio && !peer_path.empty()) return cli::UsageError("bench kvstore", "--fio runs fio itself: drop --peer");
  if (rounds == 0) rounds = run_fio ? 3 : 1;
  FioPeer peer;
  if (!peer_path.empty()) {
    auto loaded = LoadFioPeer(peer_path);
    if (!loaded.ok()) return cli::Fail("bench kvstore", loaded.status().message());
    peer = std::move(*loaded);
  }
  const FioPeer* peer_ptr = peer_path.empty() ? nullptr : &peer;  // --fio: set once fio has run
  std::string backend;
  std::vector<std::pair<int64_t, BlockSizeMeasurement>> results;
  for (int64_t bytes : sizes) {
    const int64_t n = std::max<int64_t>(16, (total_mib << 20) / (bytes + static_cast<int64_t>(kvstore::kHeaderBytes)));
    auto rows = MeasureOne(setup, bytes, n, rounds, run_fio, &backend);
    if (!rows.ok()) return cli::Fail("bench kvstore", rows.status().message());
    results.emplace_back(bytes, std::move(*rows));
  }
  std::printf("KV store on %s: %s, %d I/O threads x %d = queue depth %d, fsync %s, %lld MiB per block size\n",
              setup.dir.c_str(), backend.c_str(), setup.io_threads, std::max(1, setup.queue_depth / setup.io_threads),
              setup.queue_depth, setup.fsync == kvstore::FsyncPolicy::kNone ? "none" : "data",
              static_cast<long long>(total_mib));
  if (run_fio) {
    peer.system = "fio io_uring (run by this bench), queue depth " + std::to_string(setup.queue_depth);
    for (const auto& [bytes, m] : results) peer.by_block[bytes] = {m.fio_write, m.fio_read};
    peer_ptr = &peer;
    std::printf("peer: %s; O_DIRECT reads in %d rounds, each fio's then ours; the row is the median round by ratio\n",
                peer.system.c_str(), rounds);
  } else if (peer_ptr != nullptr) {
    std::printf("peer: %s (from %s)\n", peer.system.c_str(), peer_path.c_str());
  }
  std::printf("\n%-22s %-18s %9s %8s %8s%s\n", "block", "op", "GB/s", "p50 ms", "p99 ms",
              peer_ptr != nullptr ? "  fio GB/s   p50 ms   p99 ms  of fio" : "");
  for (const auto& [bytes, measured] : results) {
    const std::vector<StoreRow>& rows = measured.rows;
    char label[64];
    const char* what = bytes == kDeepSeekBlockBytes               ? "DeepSeek 112 KiB"
                       : bytes == V4FlashPrefixBlockBytes(2) ? "V4-Flash bf16"
                       : bytes == V4FlashPrefixBlockBytes(4) ? "V4-Flash f32"
                                                                  : "";
    std::snprintf(label, sizeof label, "%lld B %s", static_cast<long long>(bytes), what);
    const char* ops[] = {"write", "read (O_DIRECT)", "read (page cache)"};
    for (size_t i = 0; i < rows.size(); ++i) {
      const StoreRow& r = rows[i];
      const std::string fio = i == 2 ? "" : FioCells(peer_ptr, bytes, i == 1, r);
      std::printf("%-22s %-18s %9.3f %8.3f %8.3f%s\n", i == 0 ? label : "", ops[i], r.gbps, r.p50_ms, r.p99_ms,
                  fio.c_str());
    }
    if (measured.read_ratios.size() > 1) {
      std::string each;
      for (double x : measured.read_ratios) {
        char cell[16];
        std::snprintf(cell, sizeof cell, " %.0f%%", 100 * x);
        each += cell;
      }
      std::printf("%-22s O_DIRECT read of fio, by round:%s (median %.0f%%)\n", "", each.c_str(),
                  100 * Median(measured.read_ratios));
    }
  }
  std::printf("\nwrite: Put to renamed (%s); read: open to verified, whole batches of %d in flight x 2.\n"
              "fio: one file beside the store, same block size (rounded to 4 KiB) and queue depth; writes with\n"
              "fdatasync per block, reads O_DIRECT and random (--fio, or tools/kvstore/bench_fio.py).\n",
              setup.fsync == kvstore::FsyncPolicy::kNone ? "buffered, no fsync" : "fdatasync per block",
              setup.queue_depth);
  return 0;
}

const cli::BenchRegistration kKvstoreRegistration(
    {"kvstore", "KV store block write/read throughput and latency, beside fio",
     "usage: deepinfer bench kvstore --dir DIR [--block-bytes LIST] [--total-mib N] [--queue-depth N]\n"
     "                              [--io-threads N] [--fsync none|data] [--backend auto|uring|posix]\n"
     "                              [--fio [--rounds N] | --peer fio.json]\n"
     "       deepinfer bench kvstore --dir DIR --model MODEL_DIR [--restart-prompt N]\n\n"
     "Writes --total-mib (default 512) of blocks per block size into the KV store at DIR (created if missing;\n"
     "empty or a store), reads them back with O_DIRECT and from the page cache, and removes them. Default sizes:\n"
     "DeepSeek's 112 KiB and V4-Flash's persisted block in bf16 and f32 (from its config). --peer FILE prints\n"
     "fio's figures for the same directory, sizes and queue depth beside ours:\n"
     "  python3 tools/kvstore/bench_fio.py --dir DIR --block-bytes LIST --queue-depth N --out FILE\n"
     "--fio runs fio (Debian) itself beside the store instead, and the O_DIRECT reads --rounds times (default 3),\n"
     "fio's right before ours each time, so a shared machine's load hits both alike; the row is the median round.\n"
     "With --model: TTFT of an N-token prompt (default 8192) through a fresh engine after a restart (its blocks\n"
     "in the store at DIR) as a fraction of a cold one.\n",
     RunBenchKvstore});

}  // namespace
}  // namespace deepinfer::bench
