#include "pipeline/default_model.h"

#include <unistd.h>

#include <cstdlib>
#include <system_error>

#include "core/log.h"
#include "model/deepseek_v4/v4_init.h"
#include "tokenizer/locate.h"

namespace deepinfer::pipeline {

namespace fs = std::filesystem;

fs::path CacheDir() {
  if (const char* env = std::getenv("DEEPINFER_CACHE_DIR"); env && *env) return env;
  if (const char* env = std::getenv("XDG_CACHE_HOME"); env && *env) return fs::path(env) / "deepinfer";
  if (const char* home = std::getenv("HOME"); home && *home) return fs::path(home) / ".cache" / "deepinfer";
  return fs::temp_directory_path() / "deepinfer-cache";
}

Result<std::string> DefaultModelDir() {
  const fs::path dir = CacheDir() / "models" / "small-v4-seed0";
  std::error_code ec;
  if (fs::exists(dir / "config.json", ec) && fs::exists(dir / "tokenizer.json", ec)) return dir.string();
  DI_LOG(kInfo, "creating the embedded default model (first use)").Field("dir", dir.string());
  const fs::path tmp = dir.string() + ".tmp-" + std::to_string(getpid());
  fs::remove_all(tmp, ec);
  auto config = model::V4PresetConfig("small");
  if (!config.ok()) return config.status();
  DI_RETURN_IF_ERROR(model::WriteRandomV4Checkpoint(*config, tmp.string(), 0, model::V4InitFormat::kBF16));
  DI_RETURN_IF_ERROR(tokenizer::WriteTokenizerFiles({"", "deepseek-v4"}, tmp.string()));
  fs::create_directories(dir.parent_path(), ec);
  fs::rename(tmp, dir, ec);
  if (ec && !fs::exists(dir / "config.json")) return Status::IoError("creating " + dir.string() + ": " + ec.message());
  fs::remove_all(tmp, ec);
  return dir.string();
}

std::optional<recipe::ModelVersion> ModelVersionFromConfig(const HfConfig& config) {
  const std::string type = config.model_type();
  if (type == "deepseek_v4") return recipe::ModelVersion::kV4;
  if (type == "deepseek_v41" || type == "deepseek_v4_1") return recipe::ModelVersion::kV41;
  if (type == "deepseek_v32" || type == "deepseek_v3") return recipe::ModelVersion::kV32;
  return std::nullopt;
}

}  // namespace deepinfer::pipeline
