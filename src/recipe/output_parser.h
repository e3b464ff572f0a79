// The incremental parser of a DeepSeek model completion (V3.2, V4, V4.1), fed decoded text chunks as
// they stream out of the detokenizer. It splits reasoning, answer content and DSML tool calls, handles
// JSON-output mode and stop sequences, and emits each piece exactly once, never retracting it.
//
// It reproduces deepseek-recipe 0.2's stream state machine, deltas included: every stage has an ordered
// list of delimiters matched byte by byte (DelimiterMatcher); the bytes between delimiters form
// segments; a segment goes out when it ends, or at the end of a chunk when no delimiter is partially
// matched (otherwise the whole open segment waits for the next chunk). A segment spanning several
// chunks goes out as one delta per chunk. Tool-call arguments stream as JSON text fragments: `{`, the
// raw parameter name with its quotes, `: `, `"`, the value (escaped piece by piece for string="true",
// verbatim for string="false"), `"`, `, `, ... `}`, each boundary leaving as soon as it is crossed.
//
// Bytes of a chunk that end inside a UTF-8 character are held until the character completes, so a
// chunk boundary anywhere gives the same deltas as a boundary at the character's start.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "recipe/delimiter_matcher.h"
#include "recipe/output_options.h"

namespace deepinfer::recipe {

struct OutputDelta {
  enum class Kind { kReasoning, kContent, kToolCallBegin, kToolArguments };
  Kind kind;
  int tool_index = -1;  // tool calls only
  std::string text;     // the text, the tool name (kToolCallBegin) or an arguments fragment
  // The chunk the text came from (chunks_fed() when it was fed; for what a delimiter emits, the chunk that
  // completed the delimiter): per-token data (logprobs) of that chunk goes with the delta.
  size_t source = 0;

  bool operator==(const OutputDelta& other) const {
    return kind == other.kind && tool_index == other.tool_index && text == other.text;
  }
};

// Model output the reference treats as invalid; it is dropped from the response and recorded here.
enum class OutputIssue {
  kExtraThinkingEnd,       // `</think>` in the answer content
  kContentAfterFinished,   // text after the tool-call block
  kInvalidUtf8,            // bytes that are not UTF-8 (replaced by U+FFFD)
};

class OutputParser {
 public:
  explicit OutputParser(OutputParserOptions options);
  ~OutputParser();
  OutputParser(const OutputParser&) = delete;
  OutputParser& operator=(const OutputParser&) = delete;

  // Parses the next chunk of the completion and appends the deltas it completes. Bytes at its end that
  // begin a UTF-8 character wait for the next chunk, unless `ends_unit`: then the chunk was decoded on its
  // own and they are invalid (U+FFFD), as in a run of tokens that a control token interrupts.
  void Feed(std::string_view chunk, std::vector<OutputDelta>* deltas, bool ends_unit = false);
  // The completion arrives as tokens: `</think>` then ends the reasoning (or is dropped from the answer
  // content) only as the control token, fed by FeedThinkingEndToken; spelled out in text it is text, as
  // deepseek-recipe reads token chunks. Call before feeding anything.
  void UseThinkingEndToken();
  // The `</think>` control token, as a chunk of its own.
  void FeedThinkingEndToken(std::vector<OutputDelta>* deltas);
  // The completion has ended: flushes what was held back (a partial delimiter is then plain text).
  void Finish(std::vector<OutputDelta>* deltas);

  // A stop sequence matched: the response is complete and further text is ignored.
  bool stopped_by_sequence() const { return stopped_by_sequence_; }
  // The stop sequence that matched, or null.
  const std::string* matched_stop_sequence() const {
    return stopped_by_sequence_ ? &matched_stop_sequence_ : nullptr;
  }
  // The tool-call block closed or a stop sequence matched; further text is invalid.
  bool finished() const;
  int tool_call_count() const { return tool_call_count_; }
  // Chunks fed so far (Feed and FeedThinkingEndToken calls): the next chunk's `source`.
  size_t chunks_fed() const { return chunks_fed_; }
  // The oldest chunk whose text the parser still holds back (chunks_fed() when it holds none): deltas of
  // later calls have no older source.
  size_t oldest_held_source() const;

  // The reasoning's extent in the input: it begins after the leading newlines a new turn drops and ends
  // where `</think>` (or a tool-call block) begins; no end while the reasoning lasts.
  size_t reasoning_begin() const { return reasoning_begin_; }
  std::optional<size_t> reasoning_end() const { return reasoning_end_; }
  const std::vector<OutputIssue>& issues() const { return issues_; }

 private:
  enum class Stage;
  enum class Unmatched;
  struct Pattern;

  void EnterStage(Stage stage, bool leading);
  void ProcessByte(uint8_t byte, std::vector<OutputDelta>* deltas);
  void OnMatch(size_t pattern, size_t matched_length, std::vector<OutputDelta>* deltas);
  void FlushPending(std::vector<OutputDelta>* deltas);
  void EmitPieces(size_t count, size_t end, std::vector<OutputDelta>* deltas);
  void EmitPiece(Unmatched action, std::string_view piece, size_t source, std::vector<OutputDelta>* deltas);
  void EmitArguments(std::string text, std::vector<OutputDelta>* deltas);
  void Push(OutputDelta::Kind kind, int tool_index, std::string text, size_t source, std::vector<OutputDelta>* deltas);
  void ParseChunk(std::string_view chunk, std::vector<OutputDelta>* deltas);
  void ReleaseHeld(std::vector<OutputDelta>* deltas);
  Unmatched CurrentUnmatched() const;
  void AddIssue(OutputIssue issue);

  OutputParserOptions options_;
  std::vector<Pattern> patterns_;        // every delimiter any stage uses
  std::vector<size_t> active_;           // indices of the current stage's delimiters, in order
  Stage stage_;
  bool leading_ = false;                 // the stage drops leading '\n' bytes
  bool first_parameter_ = true;
  bool string_value_ = false;
  bool stopped_by_sequence_ = false;
  int tool_call_count_ = 0;
  std::string tool_name_;
  std::string matched_stop_sequence_;
  // Bytes of the open segment not yet emitted, where each chunk's piece of them starts, and that chunk.
  std::string pending_;
  std::vector<size_t> piece_starts_{0};
  std::vector<size_t> piece_sources_{0};
  // Bytes that can change a delimiter's state when none is partially matched (first bytes, '\n').
  bool interesting_[256] = {};
  bool idle_ = true;  // no delimiter of the stage is partially matched
  std::string utf8_carry_;  // an incomplete UTF-8 character at the end of the last chunk
  std::vector<OutputIssue> issues_;
  // Input offsets (bytes parsed): in total and at the start of the chunk being parsed; chunks fed.
  size_t consumed_ = 0;
  size_t chunk_begin_ = 0;
  size_t chunks_fed_ = 0;
  bool thinking_end_token_ = false;  // UseThinkingEndToken() was called
  size_t reasoning_begin_ = 0;
  std::optional<size_t> reasoning_end_;
  // What a delimiter that began in the current chunk emits (quotes, braces, a tool call's start), held
  // while the bytes after it keep a delimiter partially matched, as deepseek-recipe holds it; it goes out
  // before anything that follows it.
  std::vector<OutputDelta> held_;
};

}  // namespace deepinfer::recipe
