// DeepSeek V3.2 prompt encoding (encoding/encoding_dsv32.py of deepseek-ai/DeepSeek-V3.2; spec §3).
#include "recipe/encoding_internal.h"

namespace deepinfer::recipe {

Result<RenderedPrompt> RenderPromptV32(const Conversation&) {
  return Status::Unimplemented("V3.2 rendering is not implemented yet");
}

}  // namespace deepinfer::recipe
