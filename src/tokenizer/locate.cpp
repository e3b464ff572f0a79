#include "tokenizer/locate.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "core/mapped_file.h"
#include "tokenizer/builtin.h"

namespace deepinfer::tokenizer {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxTokenizerFileBytes = size_t{256} << 20;

std::string BuiltinList() {
  std::string out;
  for (std::string_view n : kBuiltinTokenizers) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

Status WriteFile(const fs::path& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) return Status::IoError(path.string() + ": cannot write");
  return Status::Ok();
}

}  // namespace

std::string TokenizerSource::ToString() const { return builtin.empty() ? path : "builtin " + builtin; }

Result<TokenizerSource> ResolveTokenizer(std::string_view name, std::string_view default_builtin) {
  std::string spec(name);
  if (spec.empty()) {
    const char* env = std::getenv("DEEPINFER_TOKENIZER");
    spec = env != nullptr && *env != '\0' ? env : std::string(default_builtin);
  }
  std::error_code ec;
  if (fs::is_directory(spec, ec)) {
    const fs::path inside = fs::path(spec) / "tokenizer.json";
    if (fs::is_regular_file(inside, ec)) return TokenizerSource{inside.string(), ""};
    return Status::NotFound("no tokenizer.json in directory " + spec);
  }
  if (fs::exists(spec, ec)) return TokenizerSource{spec, ""};
  if (IsBuiltinTokenizer(spec)) return TokenizerSource{"", spec};
  return Status::NotFound("tokenizer '" + spec + "' is neither a file nor a builtin tokenizer (" + BuiltinList() + ")");
}

Result<std::string> ReadTokenizerJson(const TokenizerSource& source) {
  if (!source.builtin.empty()) return BuiltinTokenizerJson(source.builtin);
  return ReadFileToString(source.path, kMaxTokenizerFileBytes);
}

Result<Tokenizer> LoadTokenizer(const TokenizerSource& source) {
  if (source.builtin.empty()) return Tokenizer::FromFile(source.path);  // mapped, not copied
  DI_ASSIGN_OR_RETURN(std::string json, BuiltinTokenizerJson(source.builtin));
  Result<Tokenizer> tokenizer = Tokenizer::FromJson(json);
  if (!tokenizer.ok()) return NameTokenizerSource(tokenizer.status(), source.ToString());
  return tokenizer;
}

Result<Tokenizer> LoadTokenizer(std::string_view name, std::string_view default_builtin) {
  DI_ASSIGN_OR_RETURN(TokenizerSource source, ResolveTokenizer(name, default_builtin));
  return LoadTokenizer(source);
}

Status WriteTokenizerFiles(const TokenizerSource& source, const std::string& dir) {
  DI_ASSIGN_OR_RETURN(std::string json, ReadTokenizerJson(source));
  DI_RETURN_IF_ERROR(WriteFile(fs::path(dir) / "tokenizer.json", json));
  std::string config;
  if (!source.builtin.empty()) {
    DI_ASSIGN_OR_RETURN(config, BuiltinTokenizerConfigJson(source.builtin));
  } else {
    const fs::path beside = fs::path(source.path).parent_path() / "tokenizer_config.json";
    std::error_code ec;
    if (fs::is_regular_file(beside, ec)) {
      DI_ASSIGN_OR_RETURN(config, ReadFileToString(beside.string()));
    }
  }
  if (!config.empty()) DI_RETURN_IF_ERROR(WriteFile(fs::path(dir) / "tokenizer_config.json", config));
  return Status::Ok();
}

}  // namespace deepinfer::tokenizer
