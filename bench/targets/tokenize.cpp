// deepinfer bench tokenize: encoding speed against the Hugging Face `tokenizers` package, measured in the
// same run on the same inputs (the committed test corpus and a generated mixed English/Chinese/code file).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::bench {
namespace {

using cli::Fail;

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: deepinfer bench tokenize [--tokenizer PATH] [--python PATH] [--mixed-mb N] [--no-hf]\n\n"
    "Encoding throughput (MB/s, best of 3) on the committed corpus (tests/tokenizer/data/corpus.jsonl, each\n"
    "string encoded separately) and on a generated mixed English/Chinese/code file, on one thread and on all\n"
    "threads of the shared pool (segment-parallel for the big file), beside the Hugging Face tokenizers\n"
    "figure (Python encode on one thread, encode_batch on all cores) and the ratio; then the time to encode\n"
    "a 77,000-token prompt and to load tokenizer.json.\n\n"
    "  --tokenizer T   a tokenizer.json, a directory holding one, or a builtin name (default deepseek-v4)\n"
    "  --python PATH   Python with `tokenizers` (default: <repo>/.venv/bin/python)\n"
    "  --mixed-mb N    size of the generated file (default 10)\n"
    "  --no-hf         skip the Hugging Face measurement\n";

constexpr const char* kHfScript = R"PY(
import json, sys, time
from tokenizers import Tokenizer
tok_path, corpus_path, mixed_path, prompt_bytes = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
spec = json.load(open(tok_path, encoding="utf-8"))
spec["added_tokens"] = []  # plain-text encoding, as deepinfer's EncodeText
tok = Tokenizer.from_str(json.dumps(spec))
corpus = [json.loads(l) for l in open(corpus_path, encoding="utf-8", newline="").read().split("\n") if l]
raw = open(mixed_path, "rb").read()
mixed = raw.decode("utf-8")
prompt = raw[:prompt_bytes].decode("utf-8")
chunks, pos = [], 0
while pos < len(mixed):
    end = mixed.find("\n", pos + 65536)
    end = len(mixed) if end < 0 else end + 1
    chunks.append(mixed[pos:end]); pos = end
def best(f, n=3, clock=time.perf_counter):
    t = []
    for _ in range(n):
        s = clock(); f(); t.append(clock() - s)
    return min(t)
cpu = time.process_time  # one-thread figures in CPU time, as deepinfer's
out = {}
out["corpus_1t"] = best(lambda: [tok.encode(s, add_special_tokens=False) for s in corpus], 3, cpu)
out["corpus_all"] = best(lambda: tok.encode_batch(corpus, add_special_tokens=False))
out["mixed_1t"] = best(lambda: tok.encode(mixed, add_special_tokens=False), 1, cpu)
out["mixed_all"] = best(lambda: tok.encode_batch(chunks, add_special_tokens=False), 2)
out["mixed_count"] = len(tok.encode(mixed, add_special_tokens=False).ids)
out["prompt_1t"] = best(lambda: tok.encode(prompt, add_special_tokens=False), 3, cpu)
print(json.dumps(out))
)PY";

// Deterministic mixed text: English prose, Chinese prose and code, about 40/30/30 by bytes.
std::string GenerateMixed(size_t bytes) {
  static const char* kWords[] = {
      "the", "of", "and", "to", "in", "is", "that", "for", "it", "as", "was", "with", "be", "by", "on", "not",
      "he", "this", "are", "or", "his", "from", "at", "which", "but", "have", "an", "had", "they", "you",
      "were", "their", "one", "all", "we", "can", "her", "has", "there", "been", "if", "more", "when", "will",
      "would", "who", "so", "no", "model", "inference", "tokenizer", "server", "memory", "bandwidth",
      "attention", "expert", "latency", "throughput", "request", "response", "streaming", "benchmark",
      "Unicode", "character", "language", "performance", "system", "network", "compute", "kernel"};
  static const char* kHanzi =
      "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去"
      "行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从"
      "模型推理服务器内存带宽注意力专家延迟吞吐请求响应流式基准字符语言性能系统网络计算";
  static const char* kPunct[] = {"，", "，", "。", "、", "；", "：", "！", "？"};
  static const char* kCode[] = {
      "def {a}({b}, {c}=None):\n    if {c} is None:\n        {c} = []\n    return [{b} * 2 for _ in {c}]\n\n",
      "for (int {a} = 0; {a} < {b}.size(); ++{a}) {\n  total += {b}[{a}] * {c};\n}\n",
      "const {a} = await fetch(`/api/{b}?id=${{c}}`);\nif (!{a}.ok) throw new Error(\"{b} failed\");\n",
      "fn {a}(&self, {b}: usize) -> Result<Vec<u8>, Error> {\n    let {c} = self.buf[..{b}].to_vec();\n    Ok({c})\n}\n",
      "SELECT {a}, COUNT(*) AS {b} FROM {c} WHERE {a} >= 42 GROUP BY {a};\n",
      "    {\"{a}\": {\"{b}\": [1, 2, 3], \"{c}\": null}},\n"};
  static const char* kIdents[] = {"x", "idx", "count", "value", "buffer", "items", "token_ids", "cfg", "n",
                                  "result", "user_name", "kv_cache", "logits", "i", "j", "offset"};
  std::mt19937_64 rng(2026);
  std::string out;
  out.reserve(bytes + 4096);
  std::vector<std::string> hanzi;
  for (const char* p = kHanzi; *p;) {
    int len = (static_cast<unsigned char>(*p) >= 0xF0) ? 4 : (static_cast<unsigned char>(*p) >= 0xE0) ? 3 : 1;
    hanzi.emplace_back(p, len);
    p += len;
  }
  auto pick = [&](size_t n) { return static_cast<size_t>(rng() % n); };
  while (out.size() < bytes) {
    size_t kind = pick(10);
    if (kind < 4) {  // an English paragraph
      for (int s = 0, sentences = 2 + static_cast<int>(pick(4)); s < sentences; ++s) {
        for (int w = 0, words = 6 + static_cast<int>(pick(12)); w < words; ++w) {
          std::string word = kWords[pick(std::size(kWords))];
          if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
          if (pick(20) == 0) word = std::to_string(pick(100000));
          out += word;
          out += (w + 1 == words) ? (pick(5) == 0 ? "? " : ". ") : (pick(10) == 0 ? ", " : " ");
        }
      }
      out += "\n\n";
    } else if (kind < 7) {  // a Chinese paragraph
      for (int s = 0, clauses = 3 + static_cast<int>(pick(6)); s < clauses; ++s) {
        for (int c = 0, chars = 4 + static_cast<int>(pick(14)); c < chars; ++c) out += hanzi[pick(hanzi.size())];
        if (pick(8) == 0) out += std::to_string(pick(2030));
        out += kPunct[pick(std::size(kPunct))];
      }
      out += "\n\n";
    } else {  // code
      std::string snippet = kCode[pick(std::size(kCode))];
      for (const char* hole : {"{a}", "{b}", "{c}"}) {
        std::string name = kIdents[pick(std::size(kIdents))];
        for (size_t p = snippet.find(hole); p != std::string::npos; p = snippet.find(hole, p + name.size())) {
          snippet.replace(p, 3, name);
        }
      }
      out += snippet;
      out += "\n";
    }
  }
  // Cut at a line end so the file is valid UTF-8 and ends cleanly.
  size_t cut = out.rfind('\n', bytes);
  out.resize(cut == std::string::npos ? out.size() : cut + 1);
  return out;
}

std::vector<std::string> LoadCorpus(const std::string& path) {
  std::vector<std::string> out;
  Result<std::string> text = ReadFileToString(path);
  if (!text.ok()) return out;
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_string()) out.push_back(j.get<std::string>());
  }
  return out;
}

int RunBenchTokenize(const std::vector<std::string>& args) {
  std::string tokenizer_hint, python;
  double mixed_mb = 10;
  bool hf = true;
  cli::Flags flags("bench tokenize");
  flags.Path("--tokenizer", &tokenizer_hint);
  flags.Path("--python", &python);
  flags.Double("--mixed-mb", &mixed_mb, 0.001, 1024);
  flags.Switch("--no-hf", &hf, false);
  if (int rc = flags.Parse(args)) return rc;
  auto source = tokenizer::ResolveTokenizer(tokenizer_hint);
  if (!source.ok()) return Fail("bench tokenize", source.status().message());
  auto json = tokenizer::ReadTokenizerJson(*source);
  if (!json.ok()) return Fail("bench tokenize", json.status().message());
  // Load time is tokenizer.json parsing and table building from bytes in memory (a builtin's
  // decompression is not counted).
  Stopwatch load_watch;
  Result<tokenizer::Tokenizer> loaded = tokenizer::Tokenizer::FromJson(*json);
  double load_wall_s = load_watch.ElapsedSeconds();
  if (!loaded.ok()) return Fail("bench tokenize", loaded.status().message());
  const tokenizer::Tokenizer& tok = *loaded;
  double load_cpu_s = BestCpu(3, [&] { (void)tokenizer::Tokenizer::FromJson(*json); });

  std::string corpus_path = FindUp("tests/tokenizer/data/corpus.jsonl");
  std::vector<std::string> corpus = LoadCorpus(corpus_path);
  if (corpus.empty()) return Fail("bench tokenize", "committed corpus tests/tokenizer/data/corpus.jsonl not found");
  size_t corpus_bytes = 0;
  for (const auto& s : corpus) corpus_bytes += s.size();
  std::string mixed = GenerateMixed(static_cast<size_t>(mixed_mb * 1024 * 1024));
  fs::path tmp = fs::temp_directory_path() / ("deepinfer_bench_tokenize_" + std::to_string(getpid()));
  fs::create_directories(tmp);
  std::string mixed_path = (tmp / "mixed.txt").string();
  std::ofstream(mixed_path, std::ios::binary).write(mixed.data(), static_cast<std::streamsize>(mixed.size()));
  std::string tokenizer_path = (tmp / "tokenizer.json").string();
  std::ofstream(tokenizer_path, std::ios::binary).write(json->data(), static_cast<std::streamsize>(json->size()));

  ThreadPool& pool = ThreadPool::Shared();
  const int threads = pool.size();
  double corpus_1t = BestCpu(3, [&] {
    for (const auto& s : corpus) (void)tok.EncodeTextSequential(s);
  });
  double corpus_all = BestWall(3, [&] {
    pool.ParallelFor(static_cast<int64_t>(corpus.size()), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) (void)tok.EncodeTextSequential(corpus[i]);
    }, 64);
  });
  size_t mixed_count = 0;
  double mixed_1t = BestCpu(3, [&] { mixed_count = tok.EncodeTextSequential(mixed).size(); });
  double mixed_all = BestWall(3, [&] { (void)tok.EncodeText(mixed); });
  // Scaling is wall time against wall time (CPU time cannot show it).
  double mixed_1t_wall = BestWall(3, [&] { (void)tok.EncodeTextSequential(mixed); });

  // The longest line-aligned prefix of the mixed file that encodes to at most 77,000 tokens.
  size_t lo = 0, hi = std::min(mixed.size(), size_t{77000} * 16);
  while (hi - lo > 64) {
    size_t mid = (lo + hi) / 2;
    if (tok.EncodeText(std::string_view(mixed).substr(0, mid)).size() <= 77000) lo = mid; else hi = mid;
  }
  size_t prompt_bytes = mixed.rfind('\n', lo);
  prompt_bytes = prompt_bytes == std::string::npos ? lo : prompt_bytes + 1;
  std::string_view prompt = std::string_view(mixed).substr(0, prompt_bytes);
  size_t prompt_tokens = tok.EncodeText(prompt).size();
  double prompt_1t = BestCpu(5, [&] { (void)tok.EncodeTextSequential(prompt); });
  double prompt_all = BestWall(5, [&] { (void)tok.EncodeText(prompt); });

  nlohmann::json theirs;
  std::string hf_note;
  if (hf) {
    if (python.empty()) {
      if (const char* env = std::getenv("DEEPINFER_PYTHON"); env != nullptr && *env) python = env;
      else python = FindUp(".venv/bin/python");
    }
    if (python.empty()) {
      hf_note = "Hugging Face: skipped (no .venv/bin/python; pass --python)";
    } else {
      std::string script_path = (tmp / "hf_bench.py").string();
      std::ofstream(script_path) << kHfScript;
      std::string cmd = "'" + python + "' '" + script_path + "' '" + tokenizer_path + "' '" + corpus_path + "' '" +
                        mixed_path + "' " + std::to_string(prompt_bytes) + " 2>&1";
      FILE* pipe = popen(cmd.c_str(), "r");
      std::string output;
      if (pipe != nullptr) {
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, pipe)) > 0) output.append(buf, n);
        pclose(pipe);
      }
      size_t brace = output.rfind('{');
      if (brace != std::string::npos) theirs = nlohmann::json::parse(output.substr(brace), nullptr, false);
      if (!theirs.is_object()) {
        hf_note = "Hugging Face: failed: " + output.substr(0, 300);
        theirs = nlohmann::json();
      }
    }
  }
  fs::remove_all(tmp);

  auto mbps = [](size_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / 1e6 / s : 0.0; };
  auto hf_mbps = [&](const char* key, size_t bytes) {
    return theirs.is_object() && theirs.contains(key) ? mbps(bytes, theirs[key].get<double>()) : 0.0;
  };
  std::printf("tokenizer: %s\nthreads: %d (shared pool)\n\n", source->ToString().c_str(), threads);
  std::printf("%-34s %10s | %9s %9s %6s | %9s %9s %6s\n", "input", "bytes", "ours 1T", "HF 1T", "ratio", "ours all",
              "HF batch", "ratio");
  auto row = [&](const char* name, size_t bytes, double o1, double oa, const char* k1, const char* ka) {
    double h1 = hf_mbps(k1, bytes), ha = hf_mbps(ka, bytes);
    std::printf("%-34s %10zu | %9.2f %9.2f %6s | %9.2f %9.2f %6s\n", name, bytes, mbps(bytes, o1), h1,
                Ratio(mbps(bytes, o1), h1).c_str(), mbps(bytes, oa), ha, Ratio(mbps(bytes, oa), ha).c_str());
  };
  std::string corpus_name = "corpus (" + std::to_string(corpus.size()) + " strings)";
  row(corpus_name.c_str(), corpus_bytes, corpus_1t, corpus_all, "corpus_1t", "corpus_all");
  char mixed_name[64];
  std::snprintf(mixed_name, sizeof mixed_name, "mixed en/zh/code %.0f MB", mixed_mb);
  row(mixed_name, mixed.size(), mixed_1t, mixed_all, "mixed_1t", "mixed_all");
  std::printf("(MB/s; 1T = one thread, process CPU time, best of 3 (HF mixed: 1 run); all = wall time, best of 3;\n"
              " HF batch = encode_batch of the strings / of ~64 KB chunks of the mixed file)\n\n");
  std::printf("segment-parallel scaling on the mixed file: %.2fx on %d threads (wall %.0f ms -> %.0f ms)\n",
              mixed_1t_wall / mixed_all, threads, mixed_1t_wall * 1e3, mixed_all * 1e3);
  if (theirs.is_object() && theirs.contains("mixed_count")) {
    std::printf("mixed file: %zu tokens (HF: %lld)\n", mixed_count, theirs["mixed_count"].get<long long>());
  }
  std::printf("%zu-token prompt (%zu bytes): ours %.1f ms CPU on 1 thread, %.1f ms wall on %d", prompt_tokens, prompt_bytes,
              prompt_1t * 1e3, prompt_all * 1e3, threads);
  if (theirs.is_object() && theirs.contains("prompt_1t")) {
    std::printf("; HF %.1f ms CPU (%s)", theirs["prompt_1t"].get<double>() * 1e3,
                Ratio(theirs["prompt_1t"].get<double>(), prompt_1t).c_str());
  }
  std::printf("\nload tokenizer.json: %.0f ms CPU (first load %.0f ms wall)\n", load_cpu_s * 1e3, load_wall_s * 1e3);
  if (!hf_note.empty()) std::printf("%s\n", hf_note.c_str());
  return 0;
}

const cli::BenchRegistration kRegistration({"tokenize", "tokenizer throughput against Hugging Face tokenizers",
                                       kUsage, RunBenchTokenize});

}  // namespace
}  // namespace deepinfer::bench
