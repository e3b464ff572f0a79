// deepinfer bench tokenize: encoding speed, beside the Hugging Face `tokenizers` package's on the same inputs
// (the committed test corpus and a generated mixed English/Chinese/code file; tools/tokenizer/bench_hf.py).

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/common.h"
#include "cli/command.h"
#include "cli/flags.h"
#include "core/clock.h"
#include "core/json.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "tokenizer/locate.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer::bench {
namespace {

using cli::Fail;


constexpr const char* kTokenizeUsage =
    "usage: deepinfer bench tokenize [--tokenizer T] [--mixed-mb N] [--corpus FILE] [--peer FILE]\n"
    "                                [--write-inputs DIR]\n\n"
    "Encoding throughput (MB/s, best of 3) on the committed corpus (tests/tokenizer/data/corpus.jsonl, each\n"
    "string encoded separately) and on a generated mixed English/Chinese/code file, on one thread and on all\n"
    "threads of the shared pool (segment-parallel for the big file); then the time to encode a 77,000-token\n"
    "prompt and to load tokenizer.json. With --peer, the Hugging Face tokenizers figures for the same inputs\n"
    "(Python encode on one thread, encode_batch on all cores) beside ours, and the ratio:\n"
    "  .venv/bin/python tools/tokenizer/bench_hf.py --deepinfer build/release/bin/deepinfer --out hf.json\n"
    "  deepinfer bench tokenize --peer hf.json\n\n"
    "  --tokenizer T       a tokenizer.json, a directory holding one, or a builtin name (default deepseek-v4)\n"
    "  --mixed-mb N        size of the generated file (default 10)\n"
    "  --corpus FILE       the corpus (default: tests/tokenizer/data/corpus.jsonl of this build's tree)\n"
    "  --peer FILE         the peer's figures (tools/tokenizer/bench_hf.py); refused if its inputs differ\n"
    "  --write-inputs DIR  write the inputs (what the peer script reads) into DIR and exit\n";

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
    auto j = ParseJson(line);
    if (j.ok() && j->is_string()) out.push_back(j->get<std::string>());
  }
  return out;
}

// The longest line-aligned prefix of `mixed` that encodes to at most 77,000 tokens, in bytes.
size_t PromptBytes(const tokenizer::Tokenizer& tok, std::string_view mixed) {
  size_t lo = 0, hi = std::min(mixed.size(), size_t{77000} * 16);
  while (hi - lo > 64) {
    const size_t mid = (lo + hi) / 2;
    if (tok.EncodeText(mixed.substr(0, mid)).size() <= 77000) lo = mid; else hi = mid;
  }
  const size_t line_end = mixed.rfind('\n', lo);
  return line_end == std::string::npos ? lo : line_end + 1;
}

int RunBenchTokenize(const std::vector<std::string>& args) {
  std::string tokenizer_hint, corpus_path, peer_path, inputs_dir;
  double mixed_mb = 10;
  cli::Flags flags("bench tokenize");
  flags.Path("--tokenizer", &tokenizer_hint);
  flags.Double("--mixed-mb", &mixed_mb, 0.001, 1024);
  flags.Path("--corpus", &corpus_path);
  flags.Path("--peer", &peer_path);
  flags.Path("--write-inputs", &inputs_dir);
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

  if (corpus_path.empty()) corpus_path = FindUp("tests/tokenizer/data/corpus.jsonl");
  if (corpus_path.empty()) return Fail("bench tokenize", "no corpus: pass --corpus FILE (tests/tokenizer/data/corpus.jsonl)");
  auto corpus_text = ReadFileToString(corpus_path);
  if (!corpus_text.ok()) return Fail("bench tokenize", corpus_text.status().message());
  std::vector<std::string> corpus = LoadCorpus(corpus_path);
  if (corpus.empty()) return Fail("bench tokenize", corpus_path + ": no JSON strings");
  size_t corpus_bytes = 0;
  for (const auto& s : corpus) corpus_bytes += s.size();
  std::string mixed = GenerateMixed(static_cast<size_t>(mixed_mb * 1024 * 1024));
  const size_t prompt_bytes = PromptBytes(tok, mixed);

  BenchInputs inputs;
  inputs.files = {{"tokenizer.json", *json}, {"corpus.jsonl", *corpus_text}, {"mixed.txt", mixed}};
  inputs.params = {{"prompt_bytes", prompt_bytes}};
  if (!inputs_dir.empty()) {
    if (Status st = WriteBenchInputs(inputs_dir, "tokenize", inputs); !st.ok()) return Fail("bench tokenize", st.message());
    std::printf("wrote the inputs of bench tokenize to %s (inputs_id %s)\n", inputs_dir.c_str(), inputs.Id().c_str());
    return 0;
  }
  nlohmann::json theirs;
  if (!peer_path.empty()) {
    auto peer = ReadPeer(peer_path, "tokenize", inputs);
    if (!peer.ok()) return Fail("bench tokenize", peer.status().message());
    theirs = std::move(peer).value();
  }
  double load_cpu_s = BestCpu(3, [&] { (void)tokenizer::Tokenizer::FromJson(*json); });

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

  std::string_view prompt = std::string_view(mixed).substr(0, prompt_bytes);
  size_t prompt_tokens = tok.EncodeText(prompt).size();
  double prompt_1t = BestCpu(5, [&] { (void)tok.EncodeTextSequential(prompt); });
  double prompt_all = BestWall(5, [&] { (void)tok.EncodeText(prompt); });

  auto mbps = [](size_t bytes, double s) { return s > 0 ? static_cast<double>(bytes) / 1e6 / s : 0.0; };
  auto hf_mbps = [&](const char* key, size_t bytes) { return mbps(bytes, PeerNumber(theirs, key)); };
  std::printf("tokenizer: %s\nthreads: %d (shared pool)\n", source->ToString().c_str(), threads);
  std::printf("%s\n\n", theirs.is_object() ? PeerLine(theirs, peer_path).c_str()
                                          : "peer: none (see --help: tools/tokenizer/bench_hf.py, then --peer FILE)");
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
  if (PeerNumber(theirs, "mixed_count") > 0) {
    std::printf("mixed file: %zu tokens (HF: %.0f)\n", mixed_count, PeerNumber(theirs, "mixed_count"));
  }
  std::printf("%zu-token prompt (%zu bytes): ours %.1f ms CPU on 1 thread, %.1f ms wall on %d", prompt_tokens, prompt_bytes,
              prompt_1t * 1e3, prompt_all * 1e3, threads);
  if (PeerNumber(theirs, "prompt_1t") > 0) {
    std::printf("; HF %.1f ms CPU (%s)", PeerNumber(theirs, "prompt_1t") * 1e3,
                Ratio(PeerNumber(theirs, "prompt_1t"), prompt_1t).c_str());
  }
  std::printf("\nload tokenizer.json: %.0f ms CPU (first load %.0f ms wall)\n", load_cpu_s * 1e3, load_wall_s * 1e3);
  return 0;
}

const cli::BenchRegistration kTokenizeRegistration({"tokenize", "tokenizer throughput against Hugging Face tokenizers",
                                                   kTokenizeUsage, RunBenchTokenize});

}  // namespace
}  // namespace deepinfer::bench
