// deepinfer init-model: writes a random-initialised DeepSeek-V3, V3.2, V4 or V4.1 checkpoint in the released Hugging
// Face layout (config.json, sharded safetensors, the tokenizer), seeded and reproducible.
#include <unistd.h>

#include <cstdio>
#include <functional>

#include "cli/command.h"
#include "cli/flags.h"
#include "model/deepseek_v3/v3_init.h"
#include "model/deepseek_v41/v41_init.h"
#include "model/deepseek_v4/v4_init.h"
#include "tokenizer/locate.h"

namespace deepinfer::cli {
namespace {


constexpr const char* kInitModelUsage =
    "usage: deepinfer init-model --preset tiny|small|bench --out DIR [--arch v3|v3.2|v4|v4.1]\n"
    "                            [--seed N] [--format f32|bf16|fp8] [--tokenizer PATH]\n\n"
    "Writes a random DeepSeek-V4 checkpoint (model_type deepseek_v4) into DIR: config.json, sharded safetensors\n"
    "with model.safetensors.index.json under DeepSeek's released tensor names, and the V4 tokenizer.json.\n\n"
    "  --arch     v4 (default) or v4.1: DeepSeek-V4.1 (model_type deepseek_v41, composite config, FP8 32x32\n"
    "             blocks, packed FP4 experts, small FP8 Engram tables; bf16 or fp8 only) with the V4.1 tokenizer;\n"
    "             v3: DeepSeek-V3 (model_type deepseek_v3: MLA, grouped sigmoid routing; fp8 as released, FP8\n"
    "             128x128 blocks with fp32 weight_scale_inv) with the V4 tokenizer (V3's ids plus the thinking\n"
    "             tokens that the v3.2 prompt format needs); v3.2: DeepSeek-V3.2 (model_type deepseek_v32: v3\n"
    "             plus the lightning indexer in every layer; no MTP layer)\n"
    "  --preset   tiny (tests), small (the server's default; ~95 M parameters), bench (~1.2 B parameters)\n"
    "  --seed     random seed (default 0); the same seed gives the same bytes\n"
    "  --format   weights: bf16 (default for tiny and small), f32, or fp8 (default for bench): FP8 E4M3\n"
    "             with 128x128 UE8M0 block scales and MXFP4 routed experts, as released\n"
    "  --tokenizer  a tokenizer.json to copy (with the tokenizer_config.json beside it), a directory holding\n"
    "             one, or a builtin tokenizer: deepseek-v4 (default; deepseek-v4.1 for --arch v4.1), deepseek-v3\n";

// "writing shards: i/n" on stderr when it is a terminal.
std::function<void(int64_t, int64_t)> ShardProgress() {
  const bool tty = isatty(fileno(stderr));
  return [tty](int64_t done, int64_t total) {
    if (!tty) return;
    std::fprintf(stderr, "\rwriting shards: %lld/%lld", static_cast<long long>(done), static_cast<long long>(total));
    if (done == total) std::fprintf(stderr, "\n");
  };
}

// DeepSeek-V4.1: the preset, and the V4.1 tokenizer beside it (its Engram layers hash the tokenizer's
// compressed token ids; the presets' engram_compressed_vocab_size is that tokenizer's 99,092).
int InitV41(const std::string& preset, const std::string& out, std::string format_name, const std::string& tokenizer,
            uint64_t seed) {
  auto config = model::V41PresetConfig(preset);
  if (!config.ok()) return UsageError("init-model", config.status().message());
  if (format_name.empty()) format_name = preset == "bench" ? "fp8" : "bf16";
  auto format = model::ParseV41InitFormat(format_name);
  if (!format.ok()) return UsageError("init-model", format.status().message());
  auto tokenizer_source = tokenizer::ResolveTokenizer(tokenizer, "deepseek-v4.1");
  if (!tokenizer_source.ok()) return Fail("init-model", tokenizer_source.status().message());
  const auto progress = ShardProgress();
  Status s = model::WriteRandomV41Checkpoint(*config, out, seed, *format, progress);
  if (!s.ok()) return Fail("init-model", s.message());
  s = tokenizer::WriteTokenizerFiles(*tokenizer_source, out);
  if (!s.ok()) return Fail("init-model", s.message());
  std::printf("wrote %s DeepSeek-V4.1 checkpoint (%s, seed %llu) to %s\n", preset.c_str(), format_name.c_str(),
              static_cast<unsigned long long>(seed), out.c_str());
  return 0;
}

// DeepSeek-V3 and V3.2: the preset, and a tokenizer with the V3 ids.
int InitV3(const std::string& preset, const std::string& out, std::string format_name, const std::string& tokenizer,
           uint64_t seed, bool v32) {
  auto config = v32 ? model::V32PresetConfig(preset) : model::V3PresetConfig(preset);
  if (!config.ok()) return UsageError("init-model", config.status().message());
  if (format_name.empty()) format_name = preset == "bench" ? "fp8" : "bf16";
  auto format = model::ParseV3InitFormat(format_name);
  if (!format.ok()) return UsageError("init-model", format.status().message());
  // The V4 tokenizer is V3's (the same BPE and control-token ids) plus the thinking tokens the V3.2 prompt
  // format needs; a checkpoint that will only take --prompt-ids can have the original with --tokenizer.
  auto tokenizer_source = tokenizer::ResolveTokenizer(tokenizer, "deepseek-v4");
  if (!tokenizer_source.ok()) return Fail("init-model", tokenizer_source.status().message());
  const auto progress = ShardProgress();
  Status s = model::WriteRandomV3Checkpoint(*config, out, seed, *format, progress);
  if (!s.ok()) return Fail("init-model", s.message());
  s = tokenizer::WriteTokenizerFiles(*tokenizer_source, out);
  if (!s.ok()) return Fail("init-model", s.message());
  std::printf("wrote %s DeepSeek-%s checkpoint (%s random weights: its text is noise; seed %llu) to %s\n",
              preset.c_str(), v32 ? "V3.2" : "V3", format_name.c_str(),
              static_cast<unsigned long long>(seed), out.c_str());
  return 0;
}

int RunInitModel(const std::vector<std::string>& args) {
  std::string preset, out, format_name, tokenizer, arch = "v4";
  uint64_t seed = 0;
  Flags flags("init-model");
  flags.Choice("--arch", &arch,
               {{"v3", std::string("v3")}, {"v3.2", std::string("v3.2")}, {"v4", std::string("v4")},
                {"v4.1", std::string("v4.1")}});
  flags.String("--preset", &preset).Required();
  flags.Path("--out", &out).Required();
  flags.String("--format", &format_name);
  flags.Path("--tokenizer", &tokenizer);
  flags.Int<uint64_t>("--seed", &seed, 0, UINT64_MAX);
  if (int rc = flags.Parse(args)) return rc;
  if (arch == "v3" || arch == "v3.2") return InitV3(preset, out, format_name, tokenizer, seed, arch == "v3.2");
  if (arch == "v4.1") return InitV41(preset, out, format_name, tokenizer, seed);
  auto config = model::V4PresetConfig(preset);
  if (!config.ok()) return UsageError("init-model", config.status().message());
  if (format_name.empty()) format_name = preset == "bench" ? "fp8" : "bf16";
  auto format = model::ParseV4InitFormat(format_name);
  if (!format.ok()) return UsageError("init-model", format.status().message());

  auto tokenizer_source = tokenizer::ResolveTokenizer(tokenizer, "deepseek-v4");
  if (!tokenizer_source.ok()) return Fail("init-model", tokenizer_source.status().message());

  const auto progress = ShardProgress();
  Status s = model::WriteRandomV4Checkpoint(*config, out, seed, *format, progress);
  if (!s.ok()) return Fail("init-model", s.message());
  s = tokenizer::WriteTokenizerFiles(*tokenizer_source, out);
  if (!s.ok()) return Fail("init-model", s.message());
  std::printf("wrote %s checkpoint (%s, seed %llu) to %s\n", preset.c_str(), format_name.c_str(),
              static_cast<unsigned long long>(seed), out.c_str());
  return 0;
}

const CommandRegistration kInitModelRegistration({"init-model",
                                                  "write a random-initialised DeepSeek-V3, V3.2, V4 or V4.1 checkpoint",
                                                  kInitModelUsage, RunInitModel});

}  // namespace
}  // namespace deepinfer::cli
