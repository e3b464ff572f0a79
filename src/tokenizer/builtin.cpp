#include "tokenizer/builtin.h"

#include <algorithm>

#include "core/hash.h"
#include "core/json.h"
#include "core/xz.h"
#include "tokenizer/builtin_data.h"

namespace deepinfer::tokenizer {

namespace {

constexpr size_t kMaxTokenizerBytes = size_t{64} << 20;

// XXH3-128 (seed 0) of each upstream tokenizer.json, recorded from the files whose sha256 the READMEs in
// data/tokenizers/ give (tools/tokenizer/pack_data.py checks those).
struct Expected {
  std::string_view name;
  size_t size;
  Hash128 hash;
};
constexpr Expected kExpected[] = {
    {"deepseek-v3", 7847652, {0x6d378a21f1ff05e3ull, 0x4df18b80aed1002dull}},
    {"deepseek-v4", 6367146, {0xb05b6bc39f13115cull, 0xecc04ea06af52baeull}},
    {"deepseek-v4.1", 6367257, {0x95303e8fab78bbedull, 0xf9e118e05c01f04full}},
};

Status Verify(std::string_view name, const std::string& bytes) {
  for (const Expected& e : kExpected) {
    if (e.name != name) continue;
    if (bytes.size() != e.size || HashBytes(bytes) != e.hash) {
      return Status::DataLoss("builtin tokenizer " + std::string(name) + ": embedded data does not match its recorded hash (" +
                              std::to_string(bytes.size()) + " bytes, XXH3-128 " + HashBytes(bytes).ToHex() + ")");
    }
    return Status::Ok();
  }
  return Status::Internal("no recorded hash for builtin tokenizer " + std::string(name));
}

// Applies data/tokenizers/<name>/tokenizer.json.delta: {"edits": [{"offset", "remove", "insert"}, ...]} in
// increasing, non-overlapping offset order.
Result<std::string> ApplyDelta(std::string_view delta_json, const std::string& base) {
  DI_ASSIGN_OR_RETURN(nlohmann::json delta, ParseJson(delta_json));
  if (!delta.is_object() || !delta.contains("edits") || !delta["edits"].is_array()) {
    return Status::DataLoss("tokenizer delta: no edits array");
  }
  std::string out;
  out.reserve(base.size() + 4096);
  uint64_t at = 0;
  for (const auto& e : delta["edits"]) {
    if (!e.is_object() || !e.contains("offset") || !e["offset"].is_number_unsigned() || !e.contains("remove") ||
        !e["remove"].is_number_unsigned() || !e.contains("insert") || !e["insert"].is_string()) {
      return Status::DataLoss("tokenizer delta: malformed edit");
    }
    const uint64_t offset = e["offset"].get<uint64_t>(), remove = e["remove"].get<uint64_t>();
    if (offset < at || offset > base.size() || remove > base.size() - offset) {
      return Status::DataLoss("tokenizer delta: edit out of order or out of range");
    }
    out.append(base, at, offset - at);
    out += e["insert"].get_ref<const std::string&>();
    at = offset + remove;
  }
  out.append(base, at, std::string::npos);
  return out;
}

}  // namespace

bool IsBuiltinTokenizer(std::string_view name) {
  return std::find(kBuiltinTokenizers.begin(), kBuiltinTokenizers.end(), name) != kBuiltinTokenizers.end();
}

Result<std::string> BuiltinTokenizerJson(std::string_view name) {
  if (!IsBuiltinTokenizer(name)) return Status::NotFound("no builtin tokenizer named '" + std::string(name) + "'");
  const internal::BuiltinFiles files = internal::EmbeddedFiles(name);
  std::string bytes;
  if (!files.tokenizer_json_xz.empty()) {
    DI_ASSIGN_OR_RETURN(bytes, XzDecompress(files.tokenizer_json_xz, kMaxTokenizerBytes));
  } else {
    DI_ASSIGN_OR_RETURN(nlohmann::json delta, ParseJson(files.tokenizer_json_delta));
    if (!delta.contains("base") || !delta["base"].is_string() || delta["base"] == name) {
      return Status::DataLoss("tokenizer delta of " + std::string(name) + ": no base");
    }
    DI_ASSIGN_OR_RETURN(std::string base, BuiltinTokenizerJson(delta["base"].get<std::string>()));
    DI_ASSIGN_OR_RETURN(bytes, ApplyDelta(files.tokenizer_json_delta, base));
  }
  DI_RETURN_IF_ERROR(Verify(name, bytes));
  return bytes;
}

Result<std::string> BuiltinTokenizerConfigJson(std::string_view name) {
  if (!IsBuiltinTokenizer(name)) return Status::NotFound("no builtin tokenizer named '" + std::string(name) + "'");
  return std::string(internal::EmbeddedFiles(name).tokenizer_config_json);
}

}  // namespace deepinfer::tokenizer
