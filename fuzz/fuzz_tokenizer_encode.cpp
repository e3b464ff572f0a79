// Encodes arbitrary bytes (valid UTF-8 or not) and checks what must hold for every input: the token bytes
// concatenate back to the input, segment cuts do not change the ids, and streaming decode equals one-shot
// decode.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tokenizer/locate.h"
#include "tokenizer/pretokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

const deepinfer::tokenizer::Tokenizer& Get() {
  static const deepinfer::tokenizer::Tokenizer* tok = [] {
    auto t = deepinfer::tokenizer::LoadTokenizer("deepseek-v3");
    if (!t.ok()) std::abort();
    return new deepinfer::tokenizer::Tokenizer(std::move(*t));
  }();
  return *tok;
}

void Check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 4096) return 0;
  const deepinfer::tokenizer::Tokenizer& tok = Get();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<int32_t> ids = tok.EncodeTextSequential(text);
  std::string bytes;
  for (int32_t id : ids) {
    Check(!tok.IsAddedToken(id));
    bytes += tok.TokenBytes(id);
  }
  Check(bytes == text);
  // Every safe cut splits the ids.
  size_t cut = deepinfer::tokenizer::NextSafeCut(text, size / 2);
  if (cut < size) {
    std::vector<int32_t> joined = tok.EncodeTextSequential(text.substr(0, cut));
    std::vector<int32_t> right = tok.EncodeTextSequential(text.substr(cut));
    joined.insert(joined.end(), right.begin(), right.end());
    Check(joined == ids);
  }
  std::vector<int32_t> with_added = tok.EncodeWithAddedTokens(text);
  std::string decoded = tok.Decode(with_added);
  deepinfer::tokenizer::StreamingDetokenizer stream(tok);
  std::string streamed;
  for (int32_t id : with_added) streamed += stream.Add(id);
  streamed += stream.Finish();
  Check(streamed == decoded);
  // Arbitrary ids (including unknown ones) decode without trouble, streaming or not.
  std::vector<int32_t> raw;
  for (size_t i = 0; i + 4 <= size && raw.size() < 64; i += 4) {
    raw.push_back(static_cast<int32_t>(data[i] | (data[i + 1] << 8) | (data[i + 2] << 16)) - 1000);
  }
  deepinfer::tokenizer::StreamingDetokenizer raw_stream(tok, /*skip_special=*/true);
  std::string raw_streamed;
  for (int32_t id : raw) raw_streamed += raw_stream.Add(id);
  raw_streamed += raw_stream.Finish();
  Check(raw_streamed == tok.Decode(raw, /*skip_special=*/true));
  return 0;
}
