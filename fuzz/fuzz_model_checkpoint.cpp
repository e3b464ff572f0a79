// Checkpoint loading end to end: the input is a whole model directory (config.json, the safetensors shards,
// model.safetensors.index.json) packed as "DICKPT1\n" then, per file, "NAME\nLENGTH\n" and LENGTH bytes
// (tools/hostile/gen_corpus.py writes seeds from a tiny model). The files go into a scratch directory and
// model::LoadCausalLM reads it; whatever happens, it must return (no crash, no unbounded allocation under
// the fuzzer's -rss_limit_mb) with either a model or a one-line error.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "model/causal_lm.h"

namespace {

namespace fs = std::filesystem;

const fs::path& ScratchDir() {
  static const fs::path dir = [] {
    std::string templ = (fs::temp_directory_path() / "deepinfer-fuzz-ckpt-XXXXXX").string();
    if (::mkdtemp(templ.data()) == nullptr) std::abort();
    std::atexit([] { std::error_code ec; fs::remove_all(ScratchDir(), ec); });
    return fs::path(templ);
  }();
  return dir;
}

bool SafeName(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// Unpacks the files; false when the input is not in the packed form (nothing to load).
bool Unpack(std::string_view in, std::vector<std::pair<std::string, std::string_view>>* files) {
  constexpr std::string_view kMagic = "DICKPT1\n";
  if (in.substr(0, kMagic.size()) != kMagic) return false;
  in.remove_prefix(kMagic.size());
  while (!in.empty() && files->size() < 16) {
    const size_t nl = in.find('\n');
    if (nl == std::string_view::npos) return false;
    const std::string name(in.substr(0, nl));
    in.remove_prefix(nl + 1);
    const size_t nl2 = in.find('\n');
    if (nl2 == std::string_view::npos || nl2 > 9) return false;
    size_t length = 0;
    for (char c : in.substr(0, nl2)) {
      if (c < '0' || c > '9') return false;
      length = length * 10 + static_cast<size_t>(c - '0');
    }
    in.remove_prefix(nl2 + 1);
    if (length > in.size()) length = in.size();  // a truncated last file stays truncated
    if (!SafeName(name)) return false;
    files->emplace_back(name, in.substr(0, length));
    in.remove_prefix(length);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::pair<std::string, std::string_view>> files;
  if (!Unpack(std::string_view(reinterpret_cast<const char*>(data), size), &files)) return 0;
  const fs::path& dir = ScratchDir();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) fs::remove(entry.path(), ec);
  for (const auto& [name, bytes] : files) {
    std::ofstream(dir / name, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  }
  deepinfer::model::LoadOptions options;
  auto loaded = deepinfer::model::LoadCausalLM(dir.string(), options);
  if (!loaded.ok()) {
    if (loaded.status().message().find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  // What loads must describe itself consistently.
  const deepinfer::model::ModelInfo& info = (*loaded)->info();
  if (info.vocab_size <= 0 || info.hidden_size <= 0 || info.eos_token_ids.empty()) __builtin_trap();
  return 0;
}
