// Tokenizer: exact byte-level BPE as described by a Hugging Face tokenizer.json (the DeepSeek V3/V4
// family), with a hand-written pre-tokenizer, segment-parallel encoding and a streaming detokenizer.
//
// Two ways in, because prompt safety depends on it:
//  - EncodeText never produces an added/special token id: text that spells "<｜Assistant｜>" is encoded
//    as the ids of its characters.
//  - Encode takes a sequence of pieces, each either a control token id or plain text; the prompt
//    encoder builds prompts this way.
// EncodeWithAddedTokens reproduces Hugging Face `encode(text, add_special_tokens=False)`, which does
// match added-token spellings in the text; use it only for trusted text (tests, tools).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace deepinfer::tokenizer {

class Vocabulary;      // the loaded vocabulary, merges and added tokens (tokenizer/vocabulary.h)
class AddedTokenMatcher;   // finds added-token spellings (tokenizer/added_tokens.h)

// One element of a prompt: a control token (control_id >= 0) or plain text encoded with EncodeText.
struct EncodePiece {
  int32_t control_id = -1;
  std::string_view text;
};

// The status of a failed load, naming `source` (a path, "builtin deepseek-v4") once.
Status NameTokenizerSource(const Status& status, const std::string& source);

class Tokenizer {
 public:
  // Loads a tokenizer.json. Constructs this implementation does not support are reported as
  // kUnimplemented errors naming them.
  static Result<Tokenizer> FromFile(const std::string& tokenizer_json_path);
  static Result<Tokenizer> FromJson(std::string_view tokenizer_json);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Plain text to ids; added-token spellings stay text. Long inputs are split where the pre-tokenizer
  // cuts anyway and encoded on ThreadPool::Shared(); the result equals EncodeTextSequential. Any bytes
  // are accepted: invalid UTF-8 bytes pre-tokenize as characters of no Unicode class and encode as their
  // byte tokens, so the ids' bytes always concatenate back to the input.
  // Work and memory are linear in the input: besides the output (4 bytes per id), encoding holds the
  // offsets of at most 1 MiB of input at a time and, for the longest pre-token piece, about 20 bytes per
  // byte of that piece (BPE merges inside one piece cannot be streamed without changing the ids; a piece
  // is one run of letters, CJK, punctuation or whitespace, so it is long only in contrived input).
  std::vector<int32_t> EncodeText(std::string_view text) const;
  // The same ids, computed on the calling thread only.
  std::vector<int32_t> EncodeTextSequential(std::string_view text) const;
  // Appends the ids of `text` to *out (sequentially).
  void AppendEncodedText(std::string_view text, std::vector<int32_t>* out) const;

  // Control ids are copied as they are; text pieces go through EncodeText.
  std::vector<int32_t> Encode(std::span<const EncodePiece> pieces) const;

  // Encode with a limit on the number of ids (a model's context): the same ids when they fit, else
  // kOutOfRange. It fails before any work when the text's length alone proves the limit passed (no id
  // covers more than max_token_bytes() bytes), and otherwise stops after the 4 MiB slice of text that
  // passes it, so an over-long prompt costs work and memory for about max_ids ids, not for its length.
  Result<std::vector<int32_t>> EncodeWithin(std::span<const EncodePiece> pieces, size_t max_ids) const;
  // The most bytes any id decodes to.
  size_t max_token_bytes() const { return max_token_bytes_; }

  // Hugging Face `encode(text, add_special_tokens=False)`: added-token spellings become their ids.
  std::vector<int32_t> EncodeWithAddedTokens(std::string_view text) const;

  // Id of a vocabulary or added token by its stored spelling (e.g. "<｜begin▁of▁sentence｜>").
  std::optional<int32_t> TokenToId(std::string_view token) const;
  // Stored spelling of an id (byte-level alphabet for vocabulary tokens); empty when unknown.
  std::string_view IdToToken(int32_t id) const;
  // The bytes an id decodes to (what Decode concatenates); empty when unknown.
  std::string_view TokenBytes(int32_t id) const;
  bool IsAddedToken(int32_t id) const;
  bool IsSpecialToken(int32_t id) const;
  // One past the largest id that has a string (vocabulary and added tokens).
  size_t vocab_size() const;

  // Hugging Face decode: token bytes concatenated, invalid UTF-8 replaced by U+FFFD per maximal
  // invalid subsequence; unknown ids are skipped; skip_special drops special added tokens.
  std::string Decode(std::span<const int32_t> ids, bool skip_special = false) const;

  const Vocabulary& model() const { return *model_; }

 private:
  // AppendEncodedText for one segment (at most kStreamSegmentBytes unless one pre-token piece is longer).
  void AppendEncodedSegment(std::string_view text, std::vector<int32_t>* out) const;
  explicit Tokenizer(std::unique_ptr<Vocabulary> model);
  std::unique_ptr<Vocabulary> model_;
  std::unique_ptr<AddedTokenMatcher> added_matcher_;
  size_t max_token_bytes_ = 1;
};

// Turns ids fed one at a time into text, emitting only complete UTF-8 code points and holding back an
// incomplete tail. The concatenation of every Add() and Finish() equals Tokenizer::Decode of all ids.
// The tokenizer must outlive the detokenizer.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special = false);

  // Text completed by this id (possibly empty).
  std::string Add(int32_t id);
  // Flushes the held-back tail (as U+FFFD, as one-shot decode would) and resets for a new stream.
  std::string Finish();
  // Bytes currently held back.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;
};

}  // namespace deepinfer::tokenizer
