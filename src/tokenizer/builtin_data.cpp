// The bytes of data/tokenizers/, placed in .rodata by the assembler's .incbin (no multi-megabyte array
// literal for the compiler to parse). DEEPINFER_DATA_DIR is the repository's data directory; the build
// passes the files' hashes as DEEPINFER_DATA_HASH so that a changed data file changes this file's compile
// command (ccache would otherwise reuse the old object: it does not see .incbin inputs).
#include "tokenizer/builtin_data.h"

#ifndef DEEPINFER_DATA_DIR
#error "DEEPINFER_DATA_DIR must name the repository's data directory"
#endif

#define DI_EMBED(symbol, file)                                   \
  asm(".pushsection .rodata\n"                                   \
      ".balign 16\n"                                             \
      ".local " #symbol "\n" #symbol ":\n"                       \
      ".incbin \"" DEEPINFER_DATA_DIR "/" file "\"\n"            \
      ".local " #symbol "_end\n" #symbol "_end:\n"               \
      ".popsection\n");                                          \
  extern "C" const char symbol[];                                \
  extern "C" const char symbol##_end[]

DI_EMBED(di_tok_v3_json_xz, "tokenizers/deepseek-v3/tokenizer.json.xz");
DI_EMBED(di_tok_v3_config, "tokenizers/deepseek-v3/tokenizer_config.json");
DI_EMBED(di_tok_v4_json_xz, "tokenizers/deepseek-v4/tokenizer.json.xz");
DI_EMBED(di_tok_v4_config, "tokenizers/deepseek-v4/tokenizer_config.json");
DI_EMBED(di_tok_v41_delta, "tokenizers/deepseek-v4.1/tokenizer.json.delta");
DI_EMBED(di_tok_v41_config, "tokenizers/deepseek-v4.1/tokenizer_config.json");

namespace deepinfer::tokenizer::internal {

namespace {
std::string_view View(const char* begin, const char* end) {
  return {begin, static_cast<size_t>(end - begin)};
}
}  // namespace

BuiltinFiles EmbeddedFiles(std::string_view name) {
  if (name == "deepseek-v3") {
    return {View(di_tok_v3_json_xz, di_tok_v3_json_xz_end), {}, View(di_tok_v3_config, di_tok_v3_config_end)};
  }
  if (name == "deepseek-v4") {
    return {View(di_tok_v4_json_xz, di_tok_v4_json_xz_end), {}, View(di_tok_v4_config, di_tok_v4_config_end)};
  }
  if (name == "deepseek-v4.1") {
    return {{}, View(di_tok_v41_delta, di_tok_v41_delta_end), View(di_tok_v41_config, di_tok_v41_config_end)};
  }
  return {};
}

}  // namespace deepinfer::tokenizer::internal
