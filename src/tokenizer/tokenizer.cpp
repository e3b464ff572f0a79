#include "tokenizer/tokenizer.h"

#include <algorithm>

#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "core/utf8.h"
#include "tokenizer/added_tokens.h"
#include "tokenizer/bpe.h"
#include "tokenizer/vocabulary.h"
#include "tokenizer/piece_cache.h"
#include "tokenizer/pretokenizer.h"

namespace deepinfer::tokenizer {
namespace {

// Below this size a text is encoded on the calling thread: splitting costs more than it saves.
constexpr size_t kMinParallelBytes = 64 * 1024;
constexpr size_t kMinSegmentBytes = 16 * 1024;
constexpr size_t kStreamSegmentBytes = 1 << 20;

}  // namespace

Tokenizer::Tokenizer(std::unique_ptr<Vocabulary> model)
    : model_(std::move(model)), added_matcher_(std::make_unique<AddedTokenMatcher>(model_->added_tokens())) {
  // Over every id, added ones included: a bound that holds whatever the merges can build.
  for (size_t id = 0; id < model_->id_limit(); ++id) {
    max_token_bytes_ = std::max(max_token_bytes_, model_->Bytes(static_cast<int32_t>(id)).size());
  }
  max_token_bytes_ = std::max<size_t>(max_token_bytes_, 1);
}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Result<Tokenizer> Tokenizer::FromJson(std::string_view tokenizer_json) {
  DI_ASSIGN_OR_RETURN(Vocabulary model, Vocabulary::FromJson(tokenizer_json));
  return Tokenizer(std::make_unique<Vocabulary>(std::move(model)));
}

Status NameTokenizerSource(const Status& status, const std::string& source) {
  // The loader's messages say "tokenizer.json: ..." when they know no better; the source replaces that.
  constexpr std::string_view kGeneric = "tokenizer.json: ";
  std::string_view message = status.message();
  if (message.substr(0, kGeneric.size()) == kGeneric) message.remove_prefix(kGeneric.size());
  return Status(status.code(), source + ": " + std::string(message));
}

Result<Tokenizer> Tokenizer::FromFile(const std::string& tokenizer_json_path) {
  Result<MappedFile> file = MappedFile::Open(tokenizer_json_path);
  if (!file.ok()) return file.status();
  Result<Tokenizer> tokenizer = FromJson(file->view());
  if (!tokenizer.ok()) return NameTokenizerSource(tokenizer.status(), tokenizer_json_path);
  return tokenizer;
}

void Tokenizer::AppendEncodedText(std::string_view text, std::vector<int32_t>* out) const {
  // Long inputs go through in segments cut where the pre-tokenizer cuts anyway (the ids are the same), so
  // the piece offsets held at a time are bounded by the segment, not by the input.
  if (text.size() > kStreamSegmentBytes) {
    size_t begin = 0;
    while (begin < text.size()) {
      const size_t end = text.size() - begin > kStreamSegmentBytes ? NextSafeCut(text, begin + kStreamSegmentBytes)
                                                                   : text.size();
      AppendEncodedSegment(text.substr(begin, end - begin), out);
      begin = end;
    }
    return;
  }
  AppendEncodedSegment(text, out);
}

void Tokenizer::AppendEncodedSegment(std::string_view text, std::vector<int32_t>* out) const {
  thread_local std::vector<size_t> piece_ends;
  piece_ends.clear();
  PreTokenize(text, &piece_ends);
  const int32_t* byte_ids = model_->byte_ids();
  const BpeMerges& merges = model_->merges();
  PieceCache& cache = PieceCache::ForThread(model_->serial());
  size_t begin = 0;
  for (size_t end : piece_ends) {
    std::string_view piece = text.substr(begin, end - begin);
    begin = end;
    if (piece.size() == 1) {
      out->push_back(byte_ids[static_cast<unsigned char>(piece[0])]);
      continue;
    }
    if (piece.size() > PieceCache::kMaxPieceBytes) {
      BpeEncodePiece(merges, byte_ids, piece, out);
      continue;
    }
    uint64_t hash = PieceCache::Hash(piece);
    const int32_t* cached;
    size_t count;
    if (cache.Find(piece, hash, &cached, &count)) {
      out->insert(out->end(), cached, cached + count);
      continue;
    }
    size_t first = out->size();
    BpeEncodePiece(merges, byte_ids, piece, out);
    cache.Insert(piece, hash, out->data() + first, out->size() - first);
  }
  // Do not keep a huge offset buffer alive on this thread after one very long input.
  if (piece_ends.capacity() > (size_t{1} << 20)) std::vector<size_t>().swap(piece_ends);
}

std::vector<int32_t> Tokenizer::EncodeTextSequential(std::string_view text) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size() / 3);
  AppendEncodedText(text, &ids);
  return ids;
}

std::vector<int32_t> Tokenizer::EncodeText(std::string_view text) const {
  ThreadPool& pool = ThreadPool::Shared();
  if (text.size() < kMinParallelBytes || pool.size() == 1) return EncodeTextSequential(text);
  // Several segments per thread so that uneven segments still balance.
  size_t segment_bytes = std::max(kMinSegmentBytes, text.size() / (static_cast<size_t>(pool.size()) * 8));
  std::vector<size_t> cuts = {0};
  while (cuts.back() < text.size()) {
    size_t target = cuts.back() + segment_bytes;
    cuts.push_back(target >= text.size() ? text.size() : NextSafeCut(text, target));
  }
  const int64_t segments = static_cast<int64_t>(cuts.size()) - 1;
  std::vector<std::vector<int32_t>> parts(segments);
  pool.ParallelFor(
      segments,
      [&](int64_t begin, int64_t end) {
        for (int64_t s = begin; s < end; ++s) {
          parts[s].reserve((cuts[s + 1] - cuts[s]) / 3);
          AppendEncodedText(text.substr(cuts[s], cuts[s + 1] - cuts[s]), &parts[s]);
        }
      },
      1);
  size_t total = 0;
  for (const auto& p : parts) total += p.size();
  std::vector<int32_t> ids;
  ids.reserve(total);
  for (const auto& p : parts) ids.insert(ids.end(), p.begin(), p.end());
  return ids;
}

std::vector<int32_t> Tokenizer::Encode(std::span<const EncodePiece> pieces) const {
  std::vector<int32_t> ids;
  for (const EncodePiece& piece : pieces) {
    if (piece.control_id >= 0) {
      ids.push_back(piece.control_id);
    } else if (piece.text.size() >= kMinParallelBytes) {
      std::vector<int32_t> part = EncodeText(piece.text);
      ids.insert(ids.end(), part.begin(), part.end());
    } else {
      AppendEncodedText(piece.text, &ids);
    }
  }
  return ids;
}

Result<std::vector<int32_t>> Tokenizer::EncodeWithin(std::span<const EncodePiece> pieces, size_t max_ids) const {
  // First the bound from bytes alone: no id covers more than max_token_bytes_ bytes of text.
  size_t at_least = 0;
  for (const EncodePiece& piece : pieces) {
    at_least += piece.control_id >= 0 ? 1 : (piece.text.size() + max_token_bytes_ - 1) / max_token_bytes_;
  }
  auto too_many = [&](size_t count) {
    return Status::OutOfRange("at least " + std::to_string(count) + " tokens, more than the limit of " +
                              std::to_string(max_ids));
  };
  if (at_least > max_ids) return too_many(at_least);
  // Then encode in slices cut where the pre-tokenizer cuts (the ids are those of Encode), stopping after
  // the first slice that passes the limit: the work and the ids held are bounded by the limit plus one
  // slice, whatever the input's length.
  constexpr size_t kSliceBytes = size_t{4} << 20;
  std::vector<int32_t> ids;
  for (const EncodePiece& piece : pieces) {
    if (piece.control_id >= 0) {
      ids.push_back(piece.control_id);
    } else {
      const std::string_view text = piece.text;
      size_t begin = 0;
      while (begin < text.size()) {
        const size_t end = text.size() - begin > kSliceBytes ? NextSafeCut(text, begin + kSliceBytes) : text.size();
        const std::string_view slice = text.substr(begin, end - begin);
        if (slice.size() >= kMinParallelBytes) {
          std::vector<int32_t> part = EncodeText(slice);
          ids.insert(ids.end(), part.begin(), part.end());
        } else {
          AppendEncodedText(slice, &ids);
        }
        begin = end;
        if (ids.size() > max_ids) return too_many(ids.size());
      }
    }
    if (ids.size() > max_ids) return too_many(ids.size());
  }
  return ids;
}

std::vector<int32_t> Tokenizer::EncodeWithAddedTokens(std::string_view text) const {
  std::vector<int32_t> ids;
  for (const AddedTokenMatcher::Segment& s : added_matcher_->Split(text)) {
    if (s.id >= 0) {
      ids.push_back(s.id);
    } else {
      AppendEncodedText(text.substr(s.begin, s.end - s.begin), &ids);
    }
  }
  return ids;
}

std::optional<int32_t> Tokenizer::TokenToId(std::string_view token) const {
  int32_t id = model_->Find(token);
  if (id < 0) return std::nullopt;
  return id;
}

std::string_view Tokenizer::IdToToken(int32_t id) const { return model_->Spelling(id); }
std::string_view Tokenizer::TokenBytes(int32_t id) const { return model_->Bytes(id); }
bool Tokenizer::IsAddedToken(int32_t id) const { return model_->IsAdded(id); }
bool Tokenizer::IsSpecialToken(int32_t id) const { return model_->IsSpecial(id); }
size_t Tokenizer::vocab_size() const { return model_->id_limit(); }

std::string Tokenizer::Decode(std::span<const int32_t> ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (!model_->Known(id) || (skip_special && model_->IsSpecial(id))) continue;
    bytes.append(model_->Bytes(id));
  }
  if (utf8::IsValid(bytes)) return bytes;
  return utf8::ToValidLossy(bytes);
}

StreamingDetokenizer::StreamingDetokenizer(const Tokenizer& tokenizer, bool skip_special)
    : tokenizer_(&tokenizer), skip_special_(skip_special) {}

std::string StreamingDetokenizer::Add(int32_t id) {
  const Vocabulary& model = tokenizer_->model();
  if (!model.Known(id) || (skip_special_ && model.IsSpecial(id))) return {};
  pending_.append(model.Bytes(id));
  size_t hold = utf8::IncompleteTailLength(pending_);
  std::string_view ready(pending_.data(), pending_.size() - hold);
  std::string out = utf8::IsValid(ready) ? std::string(ready) : utf8::ToValidLossy(ready);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StreamingDetokenizer::Finish() {
  std::string out = utf8::ToValidLossy(pending_);
  pending_.clear();
  return out;
}

}  // namespace deepinfer::tokenizer
