#include "parallel/unit_messages.h"

#include <cstring>
#include <type_traits>

namespace deepinfer::parallel {
namespace {

// The most alternatives and outputs one update carries (sampling's own bounds are lower).
constexpr uint64_t kMaxListEntries = uint64_t{1} << 24;

class Writer {
 public:
  explicit Writer(std::string* out) : out_(out) {}
  template <typename T>
  void Put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    out_->append(reinterpret_cast<const char*>(&value), sizeof(T));
  }
  void PutString(std::string_view s) {
    Put<uint64_t>(s.size());
    out_->append(s);
  }
  void PutToken(const engine::GeneratedToken& t) {
    Put<int32_t>(t.id);
    PutString(t.bytes);
    Put<uint8_t>(static_cast<uint8_t>(t.control) | static_cast<uint8_t>(t.special) << 1);
    Put<float>(t.logprob);
    Put<uint64_t>(t.top_logprobs.size());
    for (const engine::TokenAlternative& a : t.top_logprobs) {
      Put<int32_t>(a.id);
      Put<float>(a.logprob);
      PutString(a.bytes);
    }
  }
  void PutTokens(const std::vector<engine::GeneratedToken>& tokens) {
    Put<uint64_t>(tokens.size());
    for (const engine::GeneratedToken& t : tokens) PutToken(t);
  }

 private:
  std::string* out_;
};

class Reader {
 public:
  explicit Reader(std::string_view in) : in_(in) {}
  bool done() const { return at_ == in_.size(); }
  template <typename T>
  bool Get(T* value) {
    if (in_.size() - at_ < sizeof(T)) return false;
    std::memcpy(value, in_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool GetString(std::string* s) {
    uint64_t n = 0;
    if (!Get(&n) || n > in_.size() - at_) return false;
    s->assign(in_.data() + at_, n);
    at_ += n;
    return true;
  }
  // A list length: each entry takes at least `min_entry_bytes`, so a count past what is left is malformed.
  bool GetCount(uint64_t min_entry_bytes, uint64_t* n) {
    return Get(n) && *n <= kMaxListEntries && *n <= (in_.size() - at_) / min_entry_bytes;
  }
  bool GetToken(engine::GeneratedToken* t) {
    uint8_t flags = 0;
    uint64_t alternatives = 0;
    if (!Get(&t->id) || !GetString(&t->bytes) || !Get(&flags) || !Get(&t->logprob) || !GetCount(16, &alternatives))
      return false;
    t->control = (flags & 1) != 0;
    t->special = (flags & 2) != 0;
    t->top_logprobs.resize(alternatives);
    for (engine::TokenAlternative& a : t->top_logprobs)
      if (!Get(&a.id) || !Get(&a.logprob) || !GetString(&a.bytes)) return false;
    return true;
  }
  bool GetTokens(std::vector<engine::GeneratedToken>* tokens) {
    uint64_t n = 0;
    if (!GetCount(25, &n)) return false;
    tokens->resize(n);
    for (engine::GeneratedToken& t : *tokens)
      if (!GetToken(&t)) return false;
    return true;
  }

 private:
  std::string_view in_;
  size_t at_ = 0;
};

constexpr uint8_t kNoFinish = 0xff;

void PutUpdate(const engine::RequestUpdate& u, Writer* w) {
  w->Put<int64_t>(u.prompt_tokens);
  w->Put<int64_t>(u.prompt_cache_hit_tokens);
  w->Put<uint64_t>(u.seed);
  w->Put<uint64_t>(u.sequences.size());
  for (const engine::SequenceDelta& d : u.sequences) {
    w->Put<int32_t>(d.index);
    w->PutTokens(d.tokens);
    w->PutString(d.text);
    w->Put<uint8_t>(d.finish ? static_cast<uint8_t>(*d.finish) : kNoFinish);
    w->PutString(d.stop_string);
    w->Put<int32_t>(d.stop_token);
  }
  w->PutTokens(u.prompt_logprobs);
  w->Put<uint8_t>(u.finished);
  w->Put<int32_t>(static_cast<int32_t>(u.status.code()));
  w->PutString(u.status.message());
}

bool GetStatus(Reader* r, Status* status) {
  int32_t code = 0;
  std::string message;
  if (!r->Get(&code) || !r->GetString(&message)) return false;
  if (code < 0 || code > static_cast<int32_t>(StatusCode::kUnavailable)) return false;
  *status = Status(static_cast<StatusCode>(code), std::move(message));
  return true;
}

bool GetUpdate(Reader* r, engine::RequestUpdate* u) {
  uint64_t sequences = 0;
  if (!r->Get(&u->prompt_tokens) || !r->Get(&u->prompt_cache_hit_tokens) || !r->Get(&u->seed) ||
      !r->GetCount(30, &sequences))
    return false;
  u->sequences.resize(sequences);
  for (engine::SequenceDelta& d : u->sequences) {
    uint8_t finish = 0;
    if (!r->Get(&d.index) || !r->GetTokens(&d.tokens) || !r->GetString(&d.text) || !r->Get(&finish) ||
        !r->GetString(&d.stop_string) || !r->Get(&d.stop_token))
      return false;
    if (finish != kNoFinish) {
      if (finish > static_cast<uint8_t>(engine::FinishReason::kError)) return false;
      d.finish = static_cast<engine::FinishReason>(finish);
    }
  }
  uint8_t finished = 0;
  if (!r->GetTokens(&u->prompt_logprobs) || !r->Get(&finished) || finished > 1) return false;
  u->finished = finished != 0;
  return GetStatus(r, &u->status);
}

}  // namespace

void AppendUnitMessage(const UnitMessage& message, std::string* batch) {
  Writer w(batch);
  w.Put<uint8_t>(static_cast<uint8_t>(message.kind));
  w.Put<uint64_t>(message.request);
  switch (message.kind) {
    case UnitMessageKind::kAdd:
      w.PutString(message.body);
      break;
    case UnitMessageKind::kAbort:
      break;
    case UnitMessageKind::kAccepted:
      w.Put<int32_t>(static_cast<int32_t>(message.status.code()));
      w.PutString(message.status.message());
      break;
    case UnitMessageKind::kUpdate:
      PutUpdate(message.update, &w);
      break;
    case UnitMessageKind::kFigures:
      w.Put(message.figures);
      break;
  }
}

Result<std::vector<UnitMessage>> ParseUnitMessages(std::string_view batch) {
  std::vector<UnitMessage> out;
  Reader r(batch);
  while (!r.done()) {
    UnitMessage m;
    uint8_t kind = 0;
    bool ok = r.Get(&kind) && r.Get(&m.request);
    if (ok) {
      m.kind = static_cast<UnitMessageKind>(kind);
      switch (m.kind) {
        case UnitMessageKind::kAdd:
          ok = r.GetString(&m.body);
          break;
        case UnitMessageKind::kAbort:
          break;
        case UnitMessageKind::kAccepted:
          ok = GetStatus(&r, &m.status);
          break;
        case UnitMessageKind::kUpdate:
          ok = GetUpdate(&r, &m.update);
          m.update.id = m.request;
          break;
        case UnitMessageKind::kFigures:
          ok = r.Get(&m.figures);
          break;
        default:
          ok = false;
      }
    }
    if (!ok)
      return Status::DataLoss("malformed message from another rank (message " + std::to_string(out.size()) + ")");
    out.push_back(std::move(m));
  }
  return out;
}

}  // namespace deepinfer::parallel
