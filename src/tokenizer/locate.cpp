#include "tokenizer/locate.h"

#include <cstdlib>
#include <filesystem>
#include <system_error>

namespace deepinfer::tokenizer {

namespace fs = std::filesystem;

std::vector<std::string> DefaultTokenizerCandidates() {
  std::vector<std::string> out;
  if (const char* env = std::getenv("DEEPINFER_TOKENIZER"); env != nullptr && *env != '\0') out.push_back(env);
  out.push_back("tokenizer.json");
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    for (fs::path dir = exe.parent_path(); !dir.empty(); dir = dir.parent_path()) {
      out.push_back((dir / "shared/data/tokenizers/deepseek-v3/tokenizer.json").string());
      if (dir == dir.root_path()) break;
    }
  }
  return out;
}

Result<std::string> LocateTokenizerJson(const std::string& hint) {
  std::error_code ec;
  if (!hint.empty()) {
    if (fs::is_directory(hint, ec)) {
      fs::path inside = fs::path(hint) / "tokenizer.json";
      if (fs::is_regular_file(inside, ec)) return inside.string();
      return Status::NotFound("no tokenizer.json in directory " + hint);
    }
    if (fs::is_regular_file(hint, ec)) return hint;
    return Status::NotFound("tokenizer file not found: " + hint);
  }
  std::string tried;
  for (const std::string& candidate : DefaultTokenizerCandidates()) {
    if (fs::is_directory(candidate, ec)) {
      fs::path inside = fs::path(candidate) / "tokenizer.json";
      if (fs::is_regular_file(inside, ec)) return inside.string();
    } else if (fs::is_regular_file(candidate, ec)) {
      return candidate;
    }
    tried += "\n  " + candidate;
  }
  return Status::NotFound("no tokenizer.json found (use --tokenizer PATH or set DEEPINFER_TOKENIZER); tried:" + tried);
}

}  // namespace deepinfer::tokenizer
