// deepinfer inspect MODEL_DIR: the architecture summary from config.json and the tensor inventory.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "cli/flags.h"
#include "core/hf_config.h"
#include "core/safetensors.h"

namespace deepinfer::cli {
namespace {

constexpr const char* kInspectUsage =
    "usage: deepinfer inspect [--json] MODEL_DIR\n\n"
    "Prints the architecture summary from MODEL_DIR/config.json and the inventory of the safetensors\n"
    "checkpoint (single file, sharded with model.safetensors.index.json, or a lone .safetensors file):\n"
    "name, dtype, shape and bytes of every tensor, with the totals.\n\n"
    "  --json   print one JSON object instead of the table\n";

// The config keys worth a line in the summary, in display order; absent keys are skipped.
constexpr const char* kSummaryKeys[] = {
    "model_type", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
    "q_lora_rank", "kv_lora_rank", "o_lora_rank", "qk_rope_head_dim", "intermediate_size",
    "moe_intermediate_size", "n_routed_experts", "n_shared_experts", "num_experts_per_tok", "vocab_size",
    "max_position_embeddings", "sliding_window", "hc_mult", "index_topk", "num_nextn_predict_layers",
    "torch_dtype"};

std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int RunInspect(const std::vector<std::string>& args) {
  bool as_json = false;
  std::vector<std::string> dirs;
  Flags flags("inspect");
  flags.Switch("--json", &as_json);
  flags.Positionals("MODEL_DIR", &dirs, 1, 1);
  if (int rc = flags.Parse(args)) return rc;
  const std::string& dir = dirs[0];

  std::optional<HfConfig> config;
  const bool is_dir = std::filesystem::is_directory(dir);
  if (is_dir && std::filesystem::exists(std::filesystem::path(dir) / "config.json")) {
    auto loaded = HfConfig::Load(dir);
    if (!loaded.ok()) return Fail("inspect", loaded.status().message());
    config = std::move(loaded).value();
  }
  auto checkpoint = Checkpoint::Open(dir);
  if (!checkpoint.ok()) return Fail("inspect", checkpoint.status().message());

  std::map<std::string, std::pair<int64_t, uint64_t>> by_dtype;  // params, bytes
  for (const TensorInfo* t : checkpoint->tensors()) {
    auto& [params, bytes] = by_dtype[std::string(DTypeName(t->dtype))];
    params += t->numel();
    bytes += t->nbytes();
  }

  if (as_json) {
    nlohmann::ordered_json out;
    out["path"] = dir;
    if (config) {
      out["architectures"] = config->architectures();
      nlohmann::ordered_json summary = nlohmann::ordered_json::object();
      for (const char* key : kSummaryKeys)
        if (config->raw().contains(key)) summary[key] = config->raw()[key];
      out["config"] = summary;
    }
    out["files"] = checkpoint->num_files();
    out["total_tensors"] = checkpoint->tensors().size();
    out["total_params"] = checkpoint->total_params();
    out["total_bytes"] = checkpoint->total_bytes();
    nlohmann::ordered_json dtypes = nlohmann::ordered_json::object();
    for (const auto& [name, pb] : by_dtype) dtypes[name] = {{"params", pb.first}, {"bytes", pb.second}};
    out["dtypes"] = dtypes;
    nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
    for (const TensorInfo* t : checkpoint->tensors())
      tensors.push_back({{"name", t->name},
                         {"dtype", DTypeName(t->dtype)},
                         {"shape", t->shape},
                         {"bytes", t->nbytes()},
                         {"file", std::filesystem::path(t->file).filename().string()}});
    out["tensors"] = tensors;
    std::cout << out.dump(2) << "\n";
    return 0;
  }

  std::cout << "model: " << dir << "\n";
  if (config) {
    auto archs = config->architectures();
    std::cout << "architecture: " << (archs.empty() ? "(none listed)" : archs[0]) << "\n";
    for (const char* key : kSummaryKeys)
      if (config->raw().contains(key)) std::cout << "  " << key << ": " << config->raw()[key].dump() << "\n";
  } else {
    std::cout << "architecture: (no config.json)\n";
  }
  size_t name_width = 4;
  for (const TensorInfo* t : checkpoint->tensors()) name_width = std::max(name_width, t->name.size());
  std::printf("\n%-*s  %-8s  %-24s  %14s\n", static_cast<int>(name_width), "name", "dtype", "shape", "bytes");
  for (const TensorInfo* t : checkpoint->tensors())
    std::printf("%-*s  %-8s  %-24s  %14llu\n", static_cast<int>(name_width), t->name.c_str(),
                std::string(DTypeName(t->dtype)).c_str(), ShapeString(t->shape).c_str(),
                static_cast<unsigned long long>(t->nbytes()));
  std::printf("\n");
  for (const auto& [name, pb] : by_dtype)
    std::printf("%-8s  %16lld params  %s\n", name.c_str(), static_cast<long long>(pb.first), HumanBytes(pb.second).c_str());
  std::printf("total: %zu tensors in %zu file(s), %lld params, %llu bytes (%s)\n", checkpoint->tensors().size(),
              checkpoint->num_files(), static_cast<long long>(checkpoint->total_params()),
              static_cast<unsigned long long>(checkpoint->total_bytes()), HumanBytes(checkpoint->total_bytes()).c_str());
  std::fflush(stdout);
  return 0;
}

const CommandRegistration kInspectRegistration(
    {"inspect", "architecture summary and tensor inventory of a checkpoint", kInspectUsage, RunInspect});

}  // namespace
}  // namespace deepinfer::cli
