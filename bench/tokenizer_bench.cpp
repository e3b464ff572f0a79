// Tokenizer micro-benchmarks (the whole-system comparison with Hugging Face is `deepinfer bench tokenize`):
// pre-tokenizer alone, full encode on one thread with and without a warm piece cache, decode, streaming.
#include <cstdlib>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "tokenizer/locate.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace deepinfer {
namespace {

const tokenizer::Tokenizer& Get() {
  static const tokenizer::Tokenizer* tok = [] {
    Result<tokenizer::Tokenizer> t = tokenizer::LoadTokenizer("deepseek-v3");
    if (!t.ok()) std::abort();
    return new tokenizer::Tokenizer(std::move(*t));
  }();
  return *tok;
}

// About 64 KB of English, Chinese and code in equal parts.
const std::string& Text() {
  static const std::string text = [] {
    std::string s;
    const char* parts[] = {
        "The quick brown fox jumps over the lazy dog; it's 5 o'clock and 1,234 people are waiting.\n",
        "深度求索的模型在推理时需要高效的分词器，它把文本切成片段，然后按合并规则编码。\n",
        "for (int i = 0; i < n; ++i) {\n    total += weights[i] * inputs[i];  // accumulate\n}\n"};
    for (int i = 0; s.size() < 64 * 1024; ++i) s += parts[i % 3];
    return s;
  }();
  return text;
}

void BM_PreTokenize(benchmark::State& state) {
  std::vector<size_t> ends;
  for (auto _ : state) {
    ends.clear();
    tokenizer::PreTokenize(Text(), &ends);
    benchmark::DoNotOptimize(ends.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Text().size()));
}
BENCHMARK(BM_PreTokenize);

void BM_EncodeTextSequential(benchmark::State& state) {
  const tokenizer::Tokenizer& tok = Get();
  for (auto _ : state) benchmark::DoNotOptimize(tok.EncodeTextSequential(Text()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * Text().size()));
}
BENCHMARK(BM_EncodeTextSequential);

void BM_Decode(benchmark::State& state) {
  const tokenizer::Tokenizer& tok = Get();
  std::vector<int32_t> ids = tok.EncodeTextSequential(Text());
  for (auto _ : state) benchmark::DoNotOptimize(tok.Decode(ids));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}
BENCHMARK(BM_Decode);

void BM_StreamingDetokenizer(benchmark::State& state) {
  const tokenizer::Tokenizer& tok = Get();
  std::vector<int32_t> ids = tok.EncodeTextSequential(Text());
  for (auto _ : state) {
    tokenizer::StreamingDetokenizer stream(tok);
    size_t bytes = 0;
    for (int32_t id : ids) bytes += stream.Add(id).size();
    benchmark::DoNotOptimize(bytes);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * ids.size()));
}
BENCHMARK(BM_StreamingDetokenizer);

}  // namespace
}  // namespace deepinfer

BENCHMARK_MAIN();
