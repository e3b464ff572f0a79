#include "tokenizer/json_scan.h"

#include "core/utf8.h"

namespace deepinfer::tokenizer {

namespace {
constexpr int kMaxDepth = 128;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}
}  // namespace

Status JsonScanner::Error(const std::string& what) const {
  return Status::InvalidArgument("tokenizer.json: " + what + " at byte " + std::to_string(pos_));
}

Status JsonScanner::Expect(char c) {
  if (!Consume(c)) return Error(std::string("expected '") + c + "'");
  return Status::Ok();
}

Status JsonScanner::String(std::string* out) {
  out->clear();
  DI_RETURN_IF_ERROR(Expect('"'));
  while (true) {
    size_t run = pos_;
    while (run < text_.size() && text_[run] != '"' && text_[run] != '\\' && static_cast<unsigned char>(text_[run]) >= 0x20) {
      ++run;
    }
    out->append(text_.data() + pos_, run - pos_);
    pos_ = run;
    if (pos_ >= text_.size()) return Error("unterminated string");
    char c = text_[pos_++];
    if (c == '"') return Status::Ok();
    if (c != '\\') return Error("control character in string");
    if (pos_ >= text_.size()) return Error("unterminated escape");
    char e = text_[pos_++];
    switch (e) {
      case '"': out->push_back('"'); break;
      case '\\': out->push_back('\\'); break;
      case '/': out->push_back('/'); break;
      case 'b': out->push_back('\b'); break;
      case 'f': out->push_back('\f'); break;
      case 'n': out->push_back('\n'); break;
      case 'r': out->push_back('\r'); break;
      case 't': out->push_back('\t'); break;
      case 'u': {
        auto hex4 = [&](uint32_t* v) -> bool {
          if (pos_ + 4 > text_.size()) return false;
          *v = 0;
          for (int i = 0; i < 4; ++i) {
            int h = HexValue(text_[pos_ + i]);
            if (h < 0) return false;
            *v = *v * 16 + static_cast<uint32_t>(h);
          }
          pos_ += 4;
          return true;
        };
        uint32_t cp;
        if (!hex4(&cp)) return Error("bad \\u escape");
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          uint32_t low;
          if (pos_ + 2 > text_.size() || text_[pos_] != '\\' || text_[pos_ + 1] != 'u') return Error("lone surrogate");
          pos_ += 2;
          if (!hex4(&low) || low < 0xDC00 || low > 0xDFFF) return Error("bad surrogate pair");
          cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
        } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
          return Error("lone surrogate");
        }
        utf8::Append(*out, cp);
        break;
      }
      default:
        return Error("bad escape");
    }
  }
}

Status JsonScanner::Integer(int64_t* out) {
  SkipSpace();
  bool negative = Consume('-');
  size_t start = pos_;
  int64_t v = 0;
  while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
    if (v > (int64_t{1} << 40)) return Error("integer too large");
    v = v * 10 + (text_[pos_++] - '0');
  }
  if (pos_ == start) return Error("expected an integer");
  if (pos_ < text_.size() && (text_[pos_] == '.' || text_[pos_] == 'e' || text_[pos_] == 'E')) {
    return Error("expected an integer");
  }
  *out = negative ? -v : v;
  return Status::Ok();
}

Status JsonScanner::SkipValue() { return SkipValueAt(0); }

Status JsonScanner::SkipValueAt(int depth) {
  if (depth > kMaxDepth) return Error("nesting too deep");
  SkipSpace();
  if (pos_ >= text_.size()) return Error("unexpected end");
  char c = text_[pos_];
  if (c == '"') return String(&scratch_);
  if (c == '{' || c == '[') {
    char close = c == '{' ? '}' : ']';
    ++pos_;
    if (Consume(close)) return Status::Ok();
    while (true) {
      if (c == '{') {
        DI_RETURN_IF_ERROR(String(&scratch_));
        DI_RETURN_IF_ERROR(Expect(':'));
      }
      DI_RETURN_IF_ERROR(SkipValueAt(depth + 1));
      if (Consume(close)) return Status::Ok();
      DI_RETURN_IF_ERROR(Expect(','));
    }
  }
  size_t start = pos_;
  while (pos_ < text_.size() && std::string_view("{}[],: \t\r\n\"").find(text_[pos_]) == std::string_view::npos) {
    ++pos_;
  }
  if (pos_ == start) return Error("unexpected character");
  return Status::Ok();  // a number or literal; nlohmann validates the ones that are used
}

Status JsonScanner::ObjectMembers(std::vector<std::pair<std::string, std::string_view>>* members) {
  members->clear();
  DI_RETURN_IF_ERROR(Expect('{'));
  if (Consume('}')) return Status::Ok();
  while (true) {
    std::string key;
    DI_RETURN_IF_ERROR(String(&key));
    DI_RETURN_IF_ERROR(Expect(':'));
    SkipSpace();
    size_t start = pos_;
    DI_RETURN_IF_ERROR(SkipValue());
    members->emplace_back(std::move(key), text_.substr(start, pos_ - start));
    if (Consume('}')) return Status::Ok();
    DI_RETURN_IF_ERROR(Expect(','));
  }
}

}  // namespace deepinfer::tokenizer
