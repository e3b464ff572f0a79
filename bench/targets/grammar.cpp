// deepinfer bench grammar: JSON Schema constraints on the committed JSONSchemaBench slice with the DeepSeek
// vocabulary and 129,280-wide masks, ours beside xgrammar and llguidance. The peers run in
// tools/grammar/peer_bench.py, one thread each, which writes their figures and the token ids it fed
// them; `--peer FILE` reads that file, feeds ours the same ids and prints the three side by side.
#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <filesystem>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "grammar/constraint.h"
#include "grammar/matcher.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::bench {
namespace {

namespace fs = std::filesystem;
using cli::Fail;
using Json = nlohmann::ordered_json;

constexpr const char* kGrammarUsage =
    "usage: deepinfer bench grammar [--data FILE] [--tokenizer PATH] [--limit N] [--peer FILE]\n"
    "                              [--per-schema FILE] [--mismatches FILE] [--lenient-one-of]\n"
    "                              [--time-limit-ms MS]\n\n"
    "For each schema: compile time; then the first valid instance, serialised compactly and tokenized, is fed\n"
    "token by token, timing the allowed-token mask before each token (and before the stop token). Reports\n"
    "coverage (schemas compiled), valid instances rejected (as written, and apart those rejected also when\n"
    "spelled as the grammar writes them), compile median/p99/max and mask p50/p99/max, one thread;\n"
    "and, untimed, every test instance of the compiled schemas: valid ones accepted (as written and in the\n"
    "grammar's member order), invalid ones rejected (by the data's labels). With --peer FILE (written by\n"
    "tools/grammar/peer_bench.py on the same data and tokenizer: see requirements-grammar-peers.txt) it uses\n"
    "the peers' token ids and prints xgrammar and llguidance beside ours with the ratios.\n\n"
    "  --tokenizer T   a tokenizer.json or a builtin name (default deepseek-v3, as the peers' figures)\n"
    "  --data FILE     schemas as {\"id\", \"schema\", \"tests\"} lines (default: the committed\n"
    "                  tests/grammar/data/jsonschemabench_601.jsonl)\n"
    "  --per-schema FILE  also write one line per schema, {\"id\", \"compiled\", \"compile_ms\", \"front_end_ms\"\n"
    "                  (its part before the automaton), \"grammar\" (a fingerprint of its text), \"states\",\n"
    "                  \"masks\", \"mask_max_us\", \"mask_total_us\", \"accepted\", and \"error\" when refused}: which\n"
    "                  schemas make the tails, and the refusals by cause\n"
    "  --mismatches FILE  also write one line per wrong verdict, {\"id\", \"test\" (its index in the schema's\n"
    "                  tests), \"valid\" (the data's label)}: each valid instance rejected in member order and\n"
    "                  each invalid one accepted\n"
    "  --lenient-one-of  a oneOf that cannot be made exclusive compiles as anyOf (as the peers do; unsound:\n"
    "                  JsonSchemaOptions::one_of_as_any_of) instead of being refused\n"
    "  --time-limit-ms MS  the wall-clock limits of translating a schema and of compiling its automaton\n"
    "                  (default: the library's, 2 s each); on a loaded machine the limits, not the work,\n"
    "                  end the slowest schemas, so comparisons of CPU time raise them\n";

constexpr size_t kWidth = 129280;

// CPU time of the calling thread: the shared machine's load stretches wall time, not this.
double ThreadCpuUs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) / 1e3;
}

// The p-quantile of v: the sample at the nearest rank, no interpolation.
double NearestRank(std::vector<double> v, double p) {
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
  std::string data, tokenizer_hint, peer_path, per_schema_path, mismatches_path;
  int64_t limit = 0;
  cli::Flags flags("bench grammar");
  flags.Path("--data", &data);
  flags.Path("--tokenizer", &tokenizer_hint);
  flags.Path("--peer", &peer_path);
  flags.Path("--per-schema", &per_schema_path);
  flags.Path("--mismatches", &mismatches_path);
  bool lenient_one_of = false;
  flags.Switch("--lenient-one-of", &lenient_one_of);
  double time_limit_ms = 0;
  flags.Double("--time-limit-ms", &time_limit_ms, 1.0, 3'600'000.0);
  flags.Int<int64_t>("--limit", &limit, 0, 1'000'000);
  if (int rc = flags.Parse(args)) return rc;
  Json peer_doc;
  if (!peer_path.empty()) {
    auto text = ReadFileToString(peer_path);
    if (!text.ok()) return Fail("bench grammar", text.status().message());
    auto doc = ParseOrderedJson(*text, JsonLimits{size_t{1} << 30, 16});
    if (!doc.ok() || !doc->is_object()) return Fail("bench grammar", peer_path + ": not a peer_bench.py result");
    peer_doc = std::move(*doc);
  }
  if (data.empty()) data = FindUp("tests/grammar/data/jsonschemabench_601.jsonl");
  auto text = ReadFileToString(data);
  if (data.empty() || !text.ok()) return Fail("bench grammar", "no schema file (pass --data)");
  std::istringstream in(*text);
  // deepseek-v3 by default: the tokenizer the peer figures were measured with.
  auto path = tokenizer::ResolveTokenizer(tokenizer_hint, "deepseek-v3");
  if (!path.ok()) return Fail("bench grammar", path.status().message());
  auto tok = tokenizer::LoadTokenizer(*path);
  if (!tok.ok()) return Fail("bench grammar", tok.status().message());
  grammar::TokenIndex::Options options;
  options.mask_width = std::max(kWidth, tok->vocab_size());
  auto vocab = grammar::TokenIndex::FromTokenizer(*tok, options);
  if (!vocab.ok()) return Fail("bench grammar", vocab.status().message());
  const int32_t eos = (*vocab)->stop_ids()[0];

  struct Case {
    std::string id;
    std::string schema;
    std::vector<int32_t> ids;
    bool has_instance = false;
    // The same instance spelled as the grammar writes it (tools/grammar/add_canonical.py), where it differs.
    std::vector<int32_t> canonical_ids;
    // Every test instance, for the verdict counts: valid ones with their canonical spelling (empty: the same).
    struct Instance {
      bool valid;
      std::vector<int32_t> ids, canonical_ids;
    };
    std::vector<Instance> instances;
  };
  std::vector<Case> cases;
  const Json* peer_ids = peer_doc.is_object() && peer_doc.contains("cases") ? &peer_doc["cases"] : nullptr;
  for (std::string line; std::getline(in, line) && (limit == 0 || cases.size() < static_cast<size_t>(limit));) {
    auto parsed = ParseOrderedJson(line);
    if (!parsed.ok() || !parsed->is_object() || !parsed->contains("schema")) continue;
    const Json& row = *parsed;
    Case c;
    c.id = row.value("id", std::to_string(cases.size()));
    c.schema = row["schema"].dump(-1, ' ', false, Json::error_handler_t::replace);
    for (const auto& t : row.value("tests", Json::array())) {
      if (!t.is_object() || !t.contains("data")) continue;
      Case::Instance inst{t.value("valid", false), tok->EncodeText(t["data"].dump(-1, ' ', false, Json::error_handler_t::replace)), {}};
      if (inst.valid && t.contains("canonical"))
        inst.canonical_ids = tok->EncodeText(t["canonical"].dump(-1, ' ', false, Json::error_handler_t::replace));
      c.instances.push_back(std::move(inst));
    }
    for (const auto& t : row.value("tests", Json::array())) {
      if (t.is_object() && t.contains("data") && t.value("valid", false)) {
        c.ids = tok->EncodeText(t["data"].dump(-1, ' ', false, Json::error_handler_t::replace));
        c.has_instance = true;
        if (t.contains("canonical")) {
          c.canonical_ids = tok->EncodeText(t["canonical"].dump(-1, ' ', false, Json::error_handler_t::replace));
        }
        break;
      }
    }
    // The peers' ids (Python's serialisation, the Hugging Face tokenizer) when given, so all three see
    // the same tokens.
    if (peer_ids && cases.size() < peer_ids->size()) {
      const Json& ids = (*peer_ids)[cases.size()];
      c.has_instance = ids.is_array();
      c.ids = c.has_instance ? ids.get<std::vector<int32_t>>() : std::vector<int32_t>();
    }
    cases.push_back(std::move(c));
  }

  Figures ours{"deepinfer"};
  size_t rejected_canonically = 0;  // valid instances rejected even when spelled as the grammar writes them
  // Over every test instance of the compiled schemas (not timed): valid ones accepted as written, and in
  // the grammar's spelling; invalid ones accepted (each one a soundness bug, or a mislabelled instance).
  size_t valid_all = 0, valid_written = 0, valid_canonical = 0, invalid_all = 0, invalid_accepted = 0;
  std::vector<std::string> invalid_accepted_ids, valid_rejected_ids;
  ours.total = cases.size();
  std::vector<uint32_t> bits((*vocab)->words());
  FILE* per_schema = nullptr;
  if (!per_schema_path.empty()) {
    per_schema = std::fopen(per_schema_path.c_str(), "w");
    if (!per_schema) return Fail("bench grammar", per_schema_path + ": cannot be written");
  }
  FILE* mismatches = nullptr;
  if (!mismatches_path.empty()) {
    mismatches = std::fopen(mismatches_path.c_str(), "w");
    if (!mismatches) return Fail("bench grammar", mismatches_path + ": cannot be written");
  }
  // One line per schema, written as each finishes; `masks`: the times of its own masks (ours.mask_us's tail).
  // `grammar`: a fingerprint of the grammar's text (FNV-1a), to check that a change meant to keep the front
  // end's output does; `states`: the compiled automaton's size (-1: not compiled).
  auto write_row = [&](const Case& c, const Result<grammar::Grammar>& g, double front_end_ms, int64_t states,
                       std::optional<bool> accepted, size_t first_mask, const Status& refusal = Status::Ok()) {
    if (!per_schema) return;
    uint64_t fingerprint = 14695981039346656037ull;
    if (g.ok())
      for (unsigned char ch : g->ToString()) fingerprint = (fingerprint ^ ch) * 1099511628211ull;
    double max_us = 0, total_us = 0;
    for (size_t k = first_mask; k < ours.mask_us.size(); ++k) {
      max_us = std::max(max_us, ours.mask_us[k]);
      total_us += ours.mask_us[k];
    }
    char hex[24];
    std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(fingerprint));
    Json row = {{"id", c.id}, {"compiled", states >= 0}, {"compile_ms", ours.compile_ms.back()},
                {"front_end_ms", front_end_ms},
                {"grammar", g.ok() ? Json(hex) : Json(nullptr)}, {"states", states >= 0 ? Json(states) : Json(nullptr)},
                {"masks", ours.mask_us.size() - first_mask}, {"mask_max_us", max_us}, {"mask_total_us", total_us},
                {"accepted", accepted ? Json(*accepted) : Json(nullptr)}};
    if (!refusal.ok()) row["error"] = refusal.message();
    std::fprintf(per_schema, "%s\n", row.dump().c_str());
  };
  for (const Case& c : cases) {
    const size_t first_mask = ours.mask_us.size();
    grammar::ConstraintSpec spec;
    spec.text = c.schema;
    spec.json.one_of_as_any_of = lenient_one_of;
    grammar::CompileLimits limits;
    if (time_limit_ms > 0) spec.json.max_translate_ms = limits.max_compile_ms = time_limit_ms;
    double t0 = ThreadCpuUs();
    auto g = grammar::BuildGrammar(spec);
    const double front_end_ms = (ThreadCpuUs() - t0) / 1e3;
    Result<grammar::CompiledGrammar> cg = g.ok() ? grammar::Compile(*g, limits) : Result<grammar::CompiledGrammar>(g.status());
    ours.compile_ms.push_back((ThreadCpuUs() - t0) / 1e3);
    const int64_t states = cg.ok() ? int64_t{cg->num_states()} : -1;  // -1: not compiled
    if (!cg.ok()) {
      write_row(c, g, front_end_ms, states, std::nullopt, first_mask, cg.status());
      continue;
    }
    ++ours.compiled;
    if (!c.has_instance) {
      write_row(c, g, front_end_ms, states, std::nullopt, first_mask);
      continue;
    }
    auto bound = std::make_shared<const grammar::BoundGrammar>(
        std::make_shared<const grammar::CompiledGrammar>(std::move(*cg)), *vocab);
    ++ours.tested;
    // Feeds ids and the stop token through a fresh matcher, each step's mask checked (and timed if asked).
    auto accepts = [&](std::vector<int32_t> ids, std::vector<double>* mask_us) {
      grammar::GrammarMatcher m(bound);
      ids.push_back(eos);
      for (int32_t id : ids) {
        double t1 = ThreadCpuUs();
        Status s = m.FillNextTokenBitmask(bits.data());
        if (mask_us) mask_us->push_back(ThreadCpuUs() - t1);
        bool allowed = s.ok() && ((bits[static_cast<size_t>(id) / 32] >> (id % 32)) & 1);
        if (!allowed || !m.AcceptToken(id)) return false;
      }
      return true;
    };
    const bool accepted = accepts(c.ids, &ours.mask_us);
    write_row(c, g, front_end_ms, states, accepted, first_mask);
    for (size_t test = 0; test < c.instances.size(); ++test) {
      const Case::Instance& inst = c.instances[test];
      const bool written = accepts(inst.ids, nullptr);
      auto note_mismatch = [&] {
        if (mismatches)
          std::fprintf(mismatches, "%s\n", Json({{"id", c.id}, {"test", test}, {"valid", inst.valid}}).dump().c_str());
      };
      if (inst.valid) {
        ++valid_all;
        valid_written += written;
        const bool canonical = written || (!inst.canonical_ids.empty() && accepts(inst.canonical_ids, nullptr));
        valid_canonical += canonical;
        if (!canonical) {
          valid_rejected_ids.push_back(c.id);
          note_mismatch();
        }
      } else {
        ++invalid_all;
        invalid_accepted += written;
        if (written) {
          invalid_accepted_ids.push_back(c.id);
          note_mismatch();
        }
      }
    }
    if (accepted) continue;
    ++ours.rejected;
    if (c.canonical_ids.empty() || !accepts(c.canonical_ids, nullptr)) ++rejected_canonically;
  }

  if (per_schema) std::fclose(per_schema);
  if (mismatches) std::fclose(mismatches);
  std::vector<Figures> all = {ours};
  if (peer_doc.is_object()) {
    for (const Json& j : peer_doc.value("peers", Json::array())) {
      Figures f{j.value("name", "peer") + " " + j.value("version", "")};
      if (j.contains("error")) {
        f.note = j.value("error", "");
      } else {
        f.compiled = j.value("compiled", 0u);
        f.total = j.value("total", 0u);
        f.tested = j.value("tested", 0u);
        f.rejected = j.value("rejected", 0u);
        f.compile_ms = j["compile_ms"].get<std::vector<double>>();
        f.mask_us = j["mask_us"].get<std::vector<double>>();
      }
      all.push_back(std::move(f));
    }
  }

  double load[3] = {0, 0, 0};
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = -1;
    std::fclose(f);
  }
  std::printf("schemas: %s (%zu)\ntokenizer: %s, mask width %zu, one thread each, CPU time of the measuring\n"
              "thread (of the process for peer compiles); load average %.2f %.2f %.2f\n\n",
              data.c_str(), cases.size(), path->ToString().c_str(), options.mask_width, load[0], load[1], load[2]);
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
                NearestRank(f.compile_ms, 0.5), NearestRank(f.compile_ms, 0.99), NearestRank(f.compile_ms, 1.0),
                NearestRank(f.mask_us, 0.5), NearestRank(f.mask_us, 0.99), NearestRank(f.mask_us, 1.0));
  }
  std::printf("deepinfer valid rejected: %zu of %zu as written, %zu also when spelled as the grammar writes it "
              "(members in the schema's order, enum/const as the schema spells them: the data's \"canonical\")\n",
              ours.rejected, ours.tested, rejected_canonically);
  auto some = [](const std::vector<std::string>& ids) {
    std::string out;
    for (size_t k = 0; k < ids.size() && k < 8; ++k) out += (k ? ", " : " (") + ids[k];
    return ids.empty() ? out : out + (ids.size() > 8 ? ", ...)" : ")");
  };
  std::printf("deepinfer, every test instance of the compiled schemas: valid accepted %zu of %zu as written, %zu in "
              "the grammar's member order%s; invalid rejected %zu of %zu%s\n",
              valid_written, valid_all, valid_canonical, some(valid_rejected_ids).c_str(), invalid_all - invalid_accepted,
              invalid_all, some(invalid_accepted_ids).c_str());
  for (size_t k = 1; k < all.size(); ++k) {
    const Figures& f = all[k];
    if (!f.note.empty() || f.mask_us.empty() || ours.mask_us.empty()) continue;
    std::printf("ratio %s/ours: compile p99 %.2fx, mask p99 %.2fx, mask max %.2fx\n", f.name.c_str(),
                NearestRank(f.compile_ms, 0.99) / std::max(1e-9, NearestRank(ours.compile_ms, 0.99)),
                NearestRank(f.mask_us, 0.99) / std::max(1e-9, NearestRank(ours.mask_us, 0.99)),
                NearestRank(f.mask_us, 1.0) / std::max(1e-9, NearestRank(ours.mask_us, 1.0)));
  }
  std::printf("goals: coverage >= 99.0%%, 0 invalid accepted, 0 valid rejected in member order, mask p99 < 150 us, "
              "max < 2 ms, compile p99 < 25 ms, max < 100 ms\n");
  return 0;
}

const cli::BenchRegistration kGrammarRegistration(
    {"grammar", "JSON Schema constraints: coverage, compile and mask time vs peers", kGrammarUsage, RunBenchGrammar});

}  // namespace
}  // namespace deepinfer::bench
