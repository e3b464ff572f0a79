// deepinfer bench grammar: JSON Schema constraints on the committed JSONSchemaBench slice with the DeepSeek
// vocabulary and 129,280-wide masks, ours beside xgrammar and llguidance measured in the same run on the
// same token ids (tools/grammar/peer_bench.py), one thread each.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr const char* kUsage =
    "usage: deepinfer bench grammar [--data FILE] [--tokenizer PATH] [--limit N] [--python PATH] [--no-peers]\n\n"
    "For each schema: compile time; then the first valid instance, serialised compactly and tokenized, is fed\n"
    "token by token, timing the allowed-token mask before each token (and before the stop token). Reports\n"
    "coverage (schemas compiled), valid instances rejected, compile median/p99/max and mask p50/p99/max for\n"
    "deepinfer, xgrammar and llguidance (one thread each, same token ids), and the ratios.\n\n"
    "  --data FILE     schemas as {\"id\", \"schema\", \"tests\"} lines (default: the committed\n"
    "                  tests/grammar/data/jsonschemabench_601.jsonl)\n"
    "  --python PATH   Python with xgrammar and llguidance (requirements-grammar-peers.txt; default\n"
    "                  <repo>/.venv/bin/python or $DEEPINFER_PYTHON)\n"
    "  --no-peers      ours only\n";

constexpr size_t kWidth = 129280;

std::string FindUp(const std::string& relative) {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
    if (fs::exists(dir / relative, ec)) return (dir / relative).string();
    if (dir == dir.root_path()) break;
  }
  return "";
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

struct Figures {
  std::string name;
  size_t compiled = 0, total = 0, tested = 0, rejected = 0;
  std::vector<double> compile_ms, mask_us;
  std::string note;
};

int RunBenchGrammar(const std::vector<std::string>& args) {
  std::string data, tokenizer_hint, python;
  size_t limit = 0;
  bool peers = true;
  for (size_t i = 0; i < args.size(); ++i) {
    auto need = [&]() -> const std::string* { return i + 1 < args.size() ? &args[++i] : nullptr; };
    const std::string* v = nullptr;
    if (args[i] == "--data" && (v = need())) data = *v;
    else if (args[i] == "--tokenizer" && (v = need())) tokenizer_hint = *v;
    else if (args[i] == "--python" && (v = need())) python = *v;
    else if (args[i] == "--limit" && (v = need())) limit = static_cast<size_t>(std::strtoul(v->c_str(), nullptr, 10));
    else if (args[i] == "--no-peers") peers = false;
    else return UsageError("bench grammar", "unknown or incomplete argument '" + args[i] + "'");
  }
  if (data.empty()) data = FindUp("tests/grammar/data/jsonschemabench_601.jsonl");
  std::ifstream in(data);
  if (data.empty() || !in) return Fail("bench grammar", "no schema file (pass --data)");
  auto path = tokenizer::LocateTokenizerJson(tokenizer_hint);
  if (!path.ok()) return Fail("bench grammar", path.status().message());
  auto tok = tokenizer::Tokenizer::FromFile(*path);
  if (!tok.ok()) return Fail("bench grammar", tok.status().message());
  grammar::TokenIndex::Options options;
  options.mask_width = std::max(kWidth, tok->vocab_size());
  auto vocab = grammar::TokenIndex::FromTokenizer(*tok, options);
  if (!vocab.ok()) return Fail("bench grammar", vocab.status().message());
  const int32_t eos = (*vocab)->stop_ids()[0];

  struct Case {
    std::string schema;
    std::vector<int32_t> ids;
    bool has_instance = false;
  };
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line) && (limit == 0 || cases.size() < limit);) {
    Json row = Json::parse(line, nullptr, false);
    if (!row.is_object() || !row.contains("schema")) continue;
    Case c;
    c.schema = row["schema"].dump(-1, ' ', false, Json::error_handler_t::replace);
    for (const auto& t : row.value("tests", Json::array())) {
      if (t.value("valid", false)) {
        c.ids = tok->EncodeText(t["data"].dump(-1, ' ', false, Json::error_handler_t::replace));
        c.has_instance = true;
        break;
      }
    }
    cases.push_back(std::move(c));
  }

  Figures ours{"deepinfer"};
  ours.total = cases.size();
  std::vector<uint32_t> bits((*vocab)->words());
  for (const Case& c : cases) {
    grammar::ConstraintSpec spec;
    spec.text = c.schema;
    auto t0 = std::chrono::steady_clock::now();
    auto g = grammar::BuildGrammar(spec);
    Result<grammar::CompiledGrammar> cg = g.ok() ? grammar::Compile(*g) : Result<grammar::CompiledGrammar>(g.status());
    ours.compile_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
    if (!cg.ok()) continue;
    ++ours.compiled;
    if (!c.has_instance) continue;
    auto bound = std::make_shared<const grammar::BoundGrammar>(
        std::make_shared<const grammar::CompiledGrammar>(std::move(*cg)), *vocab);
    grammar::GrammarMatcher m(bound);
    ++ours.tested;
    bool ok = true;
    std::vector<int32_t> ids = c.ids;
    ids.push_back(eos);
    for (int32_t id : ids) {
      auto t1 = std::chrono::steady_clock::now();
      Status s = m.FillNextTokenBitmask(bits.data());
      ours.mask_us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t1).count());
      bool allowed = s.ok() && ((bits[static_cast<size_t>(id) / 32] >> (id % 32)) & 1);
      if (!allowed || !m.AcceptToken(id)) {
        ok = false;
        break;
      }
    }
    if (!ok) ++ours.rejected;
  }

  std::vector<Figures> all = {ours};
  if (peers) {
    if (python.empty()) {
      if (const char* env = std::getenv("DEEPINFER_PYTHON"); env != nullptr && *env) python = env;
      else python = FindUp(".venv/bin/python");
    }
    std::string script = FindUp("tools/grammar/peer_bench.py");
    fs::path tmp = fs::temp_directory_path() / ("deepinfer_bench_grammar_" + std::to_string(getpid()) + ".jsonl");
    {
      std::ofstream out(tmp);
      for (const Case& c : cases) {
        Json j = {{"schema", c.schema}};
        j["ids"] = c.has_instance ? Json(c.ids) : Json(nullptr);
        out << j.dump() << "\n";
      }
    }
    std::string output;
    if (!python.empty() && !script.empty()) {
      std::string cmd = "'" + python + "' '" + script + "' '" + *path + "' '" + tmp.string() + "' " +
                        std::to_string(options.mask_width) + " " + std::to_string(eos) + " 2>/dev/null";
      if (FILE* pipe = popen(cmd.c_str(), "r")) {
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
        pclose(pipe);
      }
    }
    fs::remove(tmp);
    size_t pos = 0;
    for (const char* name : {"xgrammar", "llguidance"}) {
      Figures f{name};
      f.note = python.empty() ? "no Python (pass --python)" : "did not run";
      size_t nl = output.find('\n', pos);
      Json j = Json::parse(output.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos), nullptr, false);
      pos = nl == std::string::npos ? output.size() : nl + 1;
      if (j.is_object() && !j.contains("error")) {
        f.name = std::string(name) + " " + j.value("version", "");
        f.compiled = j.value("compiled", 0u);
        f.total = j.value("total", 0u);
        f.tested = j.value("tested", 0u);
        f.rejected = j.value("rejected", 0u);
        f.compile_ms = j["compile_ms"].get<std::vector<double>>();
        f.mask_us = j["mask_us"].get<std::vector<double>>();
        f.note.clear();
      } else if (j.is_object()) {
        f.note = j.value("error", "");
      }
      all.push_back(std::move(f));
    }
  }

  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  double load[3] = {0, 0, 0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  std::printf("schemas: %s (%zu)\ntokenizer: %s, mask width %zu, one thread each; load average %.2f %.2f %.2f\n\n",
              data.c_str(), cases.size(), path->c_str(), options.mask_width, load[0], load[1], load[2]);
  std::printf("%-20s %9s %11s %9s %9s %9s | %9s %9s %9s\n", "", "compiled", "rejected", "comp p50", "comp p99",
              "comp max", "mask p50", "mask p99", "mask max");
  std::printf("%-20s %9s %11s %9s %9s %9s | %9s %9s %9s\n", "", "%", "valid", "ms", "ms", "ms", "us", "us", "us");
  for (const Figures& f : all) {
    if (!f.note.empty()) {
      std::printf("%-20s %s\n", f.name.c_str(), f.note.c_str());
      continue;
    }
    char rej[32];
    std::snprintf(rej, sizeof rej, "%zu/%zu", f.rejected, f.tested);
    std::printf("%-20s %8.1f%% %11s %9.2f %9.1f %9.1f | %9.1f %9.1f %9.0f\n", f.name.c_str(),
                f.total ? 100.0 * static_cast<double>(f.compiled) / static_cast<double>(f.total) : 0.0, rej,
                Percentile(f.compile_ms, 0.5), Percentile(f.compile_ms, 0.99), Percentile(f.compile_ms, 1.0),
                Percentile(f.mask_us, 0.5), Percentile(f.mask_us, 0.99), Percentile(f.mask_us, 1.0));
  }
  for (size_t k = 1; k < all.size(); ++k) {
    const Figures& f = all[k];
    if (!f.note.empty() || f.mask_us.empty() || ours.mask_us.empty()) continue;
    std::printf("ratio %s/ours: compile p99 %.2fx, mask p99 %.2fx, mask max %.2fx\n", f.name.c_str(),
                Percentile(f.compile_ms, 0.99) / std::max(1e-9, Percentile(ours.compile_ms, 0.99)),
                Percentile(f.mask_us, 0.99) / std::max(1e-9, Percentile(ours.mask_us, 0.99)),
                Percentile(f.mask_us, 1.0) / std::max(1e-9, Percentile(ours.mask_us, 1.0)));
  }
  std::printf("goals: coverage > 98.7%%, 0 valid rejected, mask p99 < 150 us, max < 2 ms, compile p99 < 25 ms, "
              "max < 40 ms\n");
  return 0;
}

const BenchRegistration kRegistration({"grammar", "JSON Schema constraints: coverage, compile and mask time vs peers",
                                       kUsage, RunBenchGrammar});

}  // namespace
}  // namespace deepinfer::cli
