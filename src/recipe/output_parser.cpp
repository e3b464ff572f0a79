#include "recipe/output_parser.h"

#include <algorithm>
#include <utility>

#include "core/py_json.h"
#include "core/utf8.h"

namespace deepinfer::recipe {
namespace {

// Delimiters of deepseek-recipe's stream state machine (the tag prefix before `invoke`/`parameter` is
// not matched, which is what lets one parser read V4 `<｜DSML｜invoke` and V4.1 `<｜DSML｜ invoke`).
constexpr std::string_view kDsmlBeginLabel = "<｜DSML｜";
constexpr std::string_view kDsmlEndLabel = "</｜DSML｜";
constexpr std::string_view kThinkingEnd = "</think>";
constexpr std::string_view kToolCallsEndV4 = "</｜DSML｜tool_calls>";
constexpr std::string_view kToolCallsEndV41 = "</｜DSML｜ calls>";
constexpr std::string_view kFunctionCallsEndV32 = "</｜DSML｜function_calls>";
// The `</think>` control token inside the parser when the completion arrives as tokens: bytes that never
// occur in (validated) UTF-8 text, as many as the token's, so that input offsets stay those of the tokens.
constexpr std::string_view kThinkingEndToken = "\xFF\xFF\xFF\xFF\xFF\xFF\xFF\xFF";
static_assert(kThinkingEndToken.size() == kThinkingEnd.size());

enum class PatternId {
  kDsmlBegin,          // newlines + `<｜DSML｜`: the tool-call block starts
  kReasoningEnd,       // newlines + `</think>` in reasoning
  kExtraThinkingEnd,   // `</think>` in content: invalid, dropped
  kJsonFence,          // ```json\n or ```\n
  kJsonOpen,           // a raw `{` or `[` starts the JSON (and is part of it)
  kStop,
  kJsonEnd,            // \n```
  kInvoke,             // invoke name="
  kToolCallsEnd,
  kToolNameEnd,        // "
  kParameter,          // parameter name=
  kArgumentsEnd,       // </｜DSML｜ closing the invoke
  kParameterNameEnd,   // a space after the name
  kStringType,         // true">
  kRawType,            // false">
  kValueEnd,           // </｜DSML｜ closing the parameter
};

}  // namespace

enum class OutputParser::Stage {
  kReasoning, kContent, kJson, kMatchedJson, kToolCalls, kToolName, kToolArguments, kParameterName,
  kParameterType, kParameterValue, kFinished,
};

// What the bytes between delimiters become.
enum class OutputParser::Unmatched {
  kReasoning, kContent, kSpace, kSkip, kInvalid, kToolName, kRawArguments, kStringArguments,
};

struct OutputParser::Pattern {
  DelimiterMatcher matcher;
  PatternId id;
};

OutputParser::OutputParser(OutputParserOptions options) : options_(std::move(options)) {
  auto add = [&](std::string_view text, bool newlines, PatternId id) {
    patterns_.push_back(Pattern{DelimiterMatcher(text, newlines), id});
  };
  add(kDsmlBeginLabel, true, PatternId::kDsmlBegin);                 // 0
  add(kThinkingEnd, true, PatternId::kReasoningEnd);            // 1
  add(kThinkingEnd, false, PatternId::kExtraThinkingEnd);       // 2
  add("```json\n", false, PatternId::kJsonFence);               // 3
  add("```\n", false, PatternId::kJsonFence);                   // 4
  add("{", false, PatternId::kJsonOpen);                        // 5
  add("[", false, PatternId::kJsonOpen);                        // 6
  add("\n```", false, PatternId::kJsonEnd);                     // 7
  add("invoke name=\"", false, PatternId::kInvoke);             // 8
  add("\"", false, PatternId::kToolNameEnd);                    // 9
  add("parameter name=", false, PatternId::kParameter);         // 10
  add(kDsmlEndLabel, false, PatternId::kArgumentsEnd);               // 11
  add(" ", false, PatternId::kParameterNameEnd);                // 12
  add("true\">", false, PatternId::kStringType);                // 13
  add("false\">", false, PatternId::kRawType);                  // 14
  add(kDsmlEndLabel, false, PatternId::kValueEnd);                   // 15
  add(kToolCallsEndV4, false, PatternId::kToolCallsEnd);        // 16
  add(kToolCallsEndV41, false, PatternId::kToolCallsEnd);       // 17
  if (options_.model_version == ModelVersion::kV32) {
    add(kFunctionCallsEndV32, false, PatternId::kToolCallsEnd);
  }
  for (const std::string& stop : options_.stop_sequences) {
    // A stop sequence that is not UTF-8 could match inside a character and cut it; repair it first.
    if (!stop.empty()) add(utf8::IsValid(stop) ? stop : utf8::ToValidLossy(stop), false, PatternId::kStop);
  }
  if (options_.starts_in_tool_calls) {
    EnterStage(Stage::kToolCalls, false);
  } else if (!options_.thinking_stage) {
    EnterStage(Stage::kContent, true);
  } else if (*options_.thinking_stage == ThinkingStage::kContentContinuation) {
    EnterStage(Stage::kContent, false);
  } else {
    EnterStage(Stage::kReasoning, *options_.thinking_stage == ThinkingStage::kReasoningStart);
  }
}

OutputParser::~OutputParser() = default;

bool OutputParser::finished() const { return stage_ == Stage::kFinished; }

void OutputParser::EnterStage(Stage stage, bool leading) {
  stage_ = stage;
  leading_ = leading;
  active_.clear();
  auto use = [&](size_t index) { active_.push_back(index); };
  auto use_stops = [&] {
    for (size_t i = 0; i < patterns_.size(); ++i) {
      if (patterns_[i].id == PatternId::kStop) use(i);
    }
  };
  switch (stage) {
    case Stage::kReasoning:
      if (options_.parse_tool_calls) use(0);
      use(1);
      break;
    case Stage::kContent:
      if (options_.parse_json_output) {
        use(3); use(4); use(5); use(6);
      } else {
        use_stops();
      }
      if (options_.parse_tool_calls) use(0);
      use(2);
      break;
    case Stage::kJson:
      use_stops();
      use(7);
      break;
    case Stage::kMatchedJson:
      if (options_.parse_tool_calls) use(0);
      break;
    case Stage::kToolCalls:
      use(8);
      for (size_t i = 0; i < patterns_.size(); ++i) {
        if (patterns_[i].id == PatternId::kToolCallsEnd) use(i);
      }
      break;
    case Stage::kToolName: use(9); break;
    case Stage::kToolArguments: use(10); use(11); break;
    case Stage::kParameterName: use(12); break;
    case Stage::kParameterType: use(13); use(14); break;
    case Stage::kParameterValue: use(15); break;
    case Stage::kFinished: break;
  }
  std::fill(std::begin(interesting_), std::end(interesting_), false);
  for (size_t index : active_) {
    DelimiterMatcher& matcher = patterns_[index].matcher;
    matcher.Reset();
    interesting_[static_cast<uint8_t>(matcher.delimiter()[0])] = true;
    if (matcher.absorbs_newlines()) interesting_[static_cast<uint8_t>('\n')] = true;
  }
  idle_ = true;
}

OutputParser::Unmatched OutputParser::CurrentUnmatched() const {
  switch (stage_) {
    case Stage::kReasoning: return Unmatched::kReasoning;
    case Stage::kContent: return options_.parse_json_output ? Unmatched::kSpace : Unmatched::kContent;
    case Stage::kJson: return Unmatched::kContent;
    case Stage::kMatchedJson: return Unmatched::kSpace;
    case Stage::kToolCalls: return Unmatched::kSkip;
    case Stage::kToolName: return Unmatched::kToolName;
    case Stage::kToolArguments: return Unmatched::kSkip;
    case Stage::kParameterName: return Unmatched::kRawArguments;
    case Stage::kParameterType: return Unmatched::kSkip;
    case Stage::kParameterValue:
      return string_value_ ? Unmatched::kStringArguments : Unmatched::kRawArguments;
    case Stage::kFinished: return Unmatched::kInvalid;
  }
  return Unmatched::kSkip;
}

void OutputParser::AddIssue(OutputIssue issue) {
  if (std::find(issues_.begin(), issues_.end(), issue) == issues_.end()) issues_.push_back(issue);
}

void OutputParser::Push(OutputDelta::Kind kind, int tool_index, std::string text, size_t source,
                        std::vector<OutputDelta>* deltas) {
  deltas->push_back(OutputDelta{kind, tool_index, std::move(text), source});
}

size_t OutputParser::oldest_held_source() const {
  size_t oldest = chunks_fed_;
  if (!held_.empty()) oldest = held_.front().source;
  if (!pending_.empty()) oldest = std::min(oldest, piece_sources_.front());
  return oldest;
}

void OutputParser::ReleaseHeld(std::vector<OutputDelta>* deltas) {
  if (held_.empty()) return;
  for (OutputDelta& delta : held_) deltas->push_back(std::move(delta));
  held_.clear();
}

void OutputParser::EmitArguments(std::string text, std::vector<OutputDelta>* deltas) {
  Push(OutputDelta::Kind::kToolArguments, tool_call_count_ - 1, std::move(text), chunks_fed_ - 1, deltas);
}

void OutputParser::EmitPiece(Unmatched action, std::string_view piece, size_t source,
                             std::vector<OutputDelta>* deltas) {
  if (piece.empty()) return;
  switch (action) {
    case Unmatched::kReasoning:
      Push(OutputDelta::Kind::kReasoning, -1, std::string(piece), source, deltas);
      break;
    case Unmatched::kContent:
      Push(OutputDelta::Kind::kContent, -1, std::string(piece), source, deltas);
      break;
    case Unmatched::kSpace:  // JSON mode: text around the JSON becomes one space per piece
      Push(OutputDelta::Kind::kContent, -1, " ", source, deltas);
      break;
    case Unmatched::kSkip:
      break;
    case Unmatched::kInvalid:
      AddIssue(OutputIssue::kContentAfterFinished);
      break;
    case Unmatched::kToolName:
      tool_name_.append(piece);
      break;
    case Unmatched::kRawArguments:
      Push(OutputDelta::Kind::kToolArguments, tool_call_count_ - 1, std::string(piece), source, deltas);
      break;
    case Unmatched::kStringArguments: {
      std::string quoted = PyJsonString(piece, /*ensure_ascii=*/false);
      Push(OutputDelta::Kind::kToolArguments, tool_call_count_ - 1, quoted.substr(1, quoted.size() - 2), source,
           deltas);
      break;
    }
  }
}

// Emits the first `count` pieces of pending_, which end at byte `end`, and drops them.
void OutputParser::EmitPieces(size_t count, size_t end, std::vector<OutputDelta>* deltas) {
  const Unmatched action = CurrentUnmatched();
  const std::string_view pending(pending_);
  for (size_t i = 0; i < count; ++i) {
    const size_t piece_end = i + 1 < piece_starts_.size() ? piece_starts_[i + 1] : pending_.size();
    EmitPiece(action, pending.substr(piece_starts_[i], piece_end - piece_starts_[i]), piece_sources_[i], deltas);
  }
  pending_.erase(0, end);
  const auto erased = static_cast<std::ptrdiff_t>(count);
  piece_starts_.erase(piece_starts_.begin(), piece_starts_.begin() + erased);
  piece_sources_.erase(piece_sources_.begin(), piece_sources_.begin() + erased);
  for (size_t& start : piece_starts_) start -= end;
  if (piece_starts_.empty() || piece_starts_[0] != 0) {
    // What follows is the rest of the chunk being parsed.
    piece_starts_.insert(piece_starts_.begin(), 0);
    piece_sources_.insert(piece_sources_.begin(), chunks_fed_ == 0 ? 0 : chunks_fed_ - 1);
  }
}

void OutputParser::FlushPending(std::vector<OutputDelta>* deltas) {
  EmitPieces(piece_starts_.size(), pending_.size(), deltas);
}

void OutputParser::OnMatch(size_t pattern, size_t matched_length, std::vector<OutputDelta>* deltas) {
  // The match is the tail of the pending bytes; what precedes it is the stage's ordinary text.
  const size_t keep = pending_.size() - std::min(matched_length, pending_.size());
  const std::string matched = pending_.substr(keep);
  pending_.resize(keep);
  while (piece_starts_.size() > 1 && piece_starts_.back() >= keep) {
    piece_starts_.pop_back();
    piece_sources_.pop_back();
  }
  ReleaseHeld(deltas);
  FlushPending(deltas);
  // A delimiter that began in this chunk: what it emits waits while the bytes right after it keep a
  // delimiter of the new stage partially matched (V4's `</｜DSML｜parameter>` looks like the start of
  // `parameter name=`), as the oracle's does. Only chunks of several tokens can show the difference.
  if (consumed_ - matched.size() >= chunk_begin_) deltas = &held_;

  switch (patterns_[pattern].id) {
    case PatternId::kDsmlBegin:
      if (stage_ == Stage::kReasoning) reasoning_end_ = consumed_ - matched.size();
      EnterStage(Stage::kToolCalls, false);
      break;
    case PatternId::kReasoningEnd:
      reasoning_end_ = consumed_ - matched.size();  // newlines before `</think>` are not reasoning
      EnterStage(Stage::kContent, true);
      break;
    case PatternId::kExtraThinkingEnd:
      AddIssue(OutputIssue::kExtraThinkingEnd);
      EnterStage(Stage::kContent, false);
      break;
    case PatternId::kJsonFence:
      EnterStage(Stage::kJson, false);
      break;
    case PatternId::kJsonOpen:
      EnterStage(Stage::kJson, false);
      EmitPiece(Unmatched::kContent, matched, chunks_fed_ - 1, deltas);
      break;
    case PatternId::kStop:
      stopped_by_sequence_ = true;
      matched_stop_sequence_ = patterns_[pattern].matcher.delimiter();
      EnterStage(Stage::kFinished, false);
      break;
    case PatternId::kJsonEnd:
      EnterStage(Stage::kMatchedJson, false);
      break;
    case PatternId::kInvoke:
      tool_name_.clear();
      EnterStage(Stage::kToolName, false);
      break;
    case PatternId::kToolCallsEnd:
      EnterStage(Stage::kFinished, false);
      break;
    case PatternId::kToolNameEnd:
      Push(OutputDelta::Kind::kToolCallBegin, tool_call_count_, tool_name_, chunks_fed_ - 1, deltas);
      ++tool_call_count_;
      first_parameter_ = true;
      EnterStage(Stage::kToolArguments, false);
      break;
    case PatternId::kParameter:
      EmitArguments(first_parameter_ ? "{" : ", ", deltas);
      first_parameter_ = false;
      EnterStage(Stage::kParameterName, false);
      break;
    case PatternId::kArgumentsEnd:
      EmitArguments(first_parameter_ ? "{}" : "}", deltas);
      EnterStage(Stage::kToolCalls, false);
      break;
    case PatternId::kParameterNameEnd:
      EmitArguments(": ", deltas);
      EnterStage(Stage::kParameterType, false);
      break;
    case PatternId::kStringType:
      EmitArguments("\"", deltas);
      string_value_ = true;
      EnterStage(Stage::kParameterValue, false);
      break;
    case PatternId::kRawType:
      string_value_ = false;
      EnterStage(Stage::kParameterValue, false);
      break;
    case PatternId::kValueEnd:
      if (string_value_) EmitArguments("\"", deltas);
      EnterStage(Stage::kToolArguments, false);
      break;
  }
}

void OutputParser::ProcessByte(uint8_t byte, std::vector<OutputDelta>* deltas) {
  ++consumed_;
  if (stage_ == Stage::kFinished) {
    // Text after a stop sequence is simply cut; after the tool-call block it is invalid output.
    if (!stopped_by_sequence_) AddIssue(OutputIssue::kContentAfterFinished);
    return;
  }
  if (leading_) {
    if (byte == '\n' && pending_.empty()) return;
    leading_ = false;
    if (stage_ == Stage::kReasoning) reasoning_begin_ = consumed_ - 1;
  }
  pending_.push_back(static_cast<char>(byte));
  bool idle = true;
  for (size_t index : active_) {
    DelimiterMatcher& matcher = patterns_[index].matcher;
    if (matcher.Advance(byte)) {
      OnMatch(index, matcher.matched_length(), deltas);
      return;
    }
    idle = idle && matcher.pending_length() == 0;
  }
  idle_ = idle;
  if (idle && !held_.empty()) ReleaseHeld(deltas);
}

void OutputParser::UseThinkingEndToken() {
  if (thinking_end_token_) return;
  thinking_end_token_ = true;
  for (Pattern& pattern : patterns_) {
    if (pattern.id == PatternId::kReasoningEnd || pattern.id == PatternId::kExtraThinkingEnd) {
      pattern.matcher = DelimiterMatcher(kThinkingEndToken, pattern.matcher.absorbs_newlines());
    }
  }
  EnterStage(stage_, leading_);
}

void OutputParser::FeedThinkingEndToken(std::vector<OutputDelta>* deltas) {
  // Where it is no delimiter (JSON, tool calls), deepseek-recipe reads the token as its text.
  if (!thinking_end_token_ || (stage_ != Stage::kReasoning && stage_ != Stage::kContent)) {
    Feed(kThinkingEnd, deltas, true);
    return;
  }
  ++chunks_fed_;
  std::string text;
  if (!utf8_carry_.empty()) {  // a character the token cut short
    AddIssue(OutputIssue::kInvalidUtf8);
    text = utf8::ToValidLossy(utf8_carry_);
    utf8_carry_.clear();
  }
  text.append(kThinkingEndToken);
  ParseChunk(text, deltas);
}

void OutputParser::Feed(std::string_view chunk, std::vector<OutputDelta>* deltas, bool ends_unit) {
  ++chunks_fed_;
  std::string text;
  if (!utf8_carry_.empty()) {
    text = std::move(utf8_carry_);
    utf8_carry_.clear();
    text.append(chunk);
    chunk = text;
  }
  const size_t carry = ends_unit ? 0 : utf8::IncompleteTailLength(chunk);
  utf8_carry_.assign(chunk.substr(chunk.size() - carry));
  chunk.remove_suffix(carry);
  std::string repaired;
  if (!utf8::IsValid(chunk)) {
    AddIssue(OutputIssue::kInvalidUtf8);
    repaired = utf8::ToValidLossy(chunk);
    chunk = repaired;
  }
  ParseChunk(chunk, deltas);
}

void OutputParser::ParseChunk(std::string_view chunk, std::vector<OutputDelta>* deltas) {
  if (chunk.empty()) return;
  chunk_begin_ = consumed_;
  if (!pending_.empty() && piece_starts_.back() != pending_.size()) {
    piece_starts_.push_back(pending_.size());
    piece_sources_.push_back(chunks_fed_ - 1);
  }
  piece_sources_.back() = chunks_fed_ - 1;
  for (size_t i = 0; i < chunk.size();) {
    if (idle_ && !leading_ && stage_ != Stage::kFinished && held_.empty()) {
      // No delimiter is partially matched: bytes that cannot start one leave every matcher as it is.
      size_t j = i;
      while (j < chunk.size() && !interesting_[static_cast<uint8_t>(chunk[j])]) ++j;
      if (j > i) {
        pending_.append(chunk.data() + i, j - i);
        consumed_ += j - i;
        i = j;
        continue;
      }
    }
    ProcessByte(static_cast<uint8_t>(chunk[i]), deltas);
    ++i;
  }
  if (stage_ == Stage::kFinished) return;
  // A delimiter may be starting: the chunk piece it starts in, and any after it, wait for more input
  // (the whole piece, as deepseek-recipe does); pieces of earlier chunks wholly before it go out now.
  size_t partial = 0;
  for (size_t index : active_) partial = std::max(partial, patterns_[index].matcher.pending_length());
  if (partial == 0) {
    ReleaseHeld(deltas);
    FlushPending(deltas);
    return;
  }
  const size_t partial_start = pending_.size() - std::min(partial, pending_.size());
  size_t released = 0;
  while (released + 1 < piece_starts_.size() && piece_starts_[released + 1] <= partial_start) ++released;
  if (released == 0) return;
  ReleaseHeld(deltas);  // it sits before the first piece, which goes out
  EmitPieces(released, piece_starts_[released], deltas);
}

void OutputParser::Finish(std::vector<OutputDelta>* deltas) {
  ReleaseHeld(deltas);
  chunk_begin_ = consumed_;
  if (!utf8_carry_.empty()) {
    std::string tail = std::move(utf8_carry_);
    utf8_carry_.clear();
    AddIssue(OutputIssue::kInvalidUtf8);
    std::string repaired = utf8::ToValidLossy(tail);
    if (!pending_.empty() && piece_starts_.back() != pending_.size()) {
      piece_starts_.push_back(pending_.size());
      piece_sources_.push_back(chunks_fed_ - 1);
    }
    for (char c : repaired) ProcessByte(static_cast<uint8_t>(c), deltas);
  }
  ReleaseHeld(deltas);
  if (stage_ != Stage::kFinished) FlushPending(deltas);
}

}  // namespace deepinfer::recipe
