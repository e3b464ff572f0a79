#include "core/json.h"

#include <exception>
#include <new>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/utf8.h"

namespace deepinfer {

namespace {

// Builds a value from SAX events with an explicit stack of open containers. Object members are collected
// first and moved in once: growing an ordered_json's member vector in place would copy whole subtrees on
// every reallocation (pair<const string, json> cannot be moved), making parsing quadratic in the worst case.
template <typename Json>
class BoundedBuilder {
 public:
  using number_integer_t = typename Json::number_integer_t;
  using number_unsigned_t = typename Json::number_unsigned_t;
  using number_float_t = typename Json::number_float_t;
  using string_t = typename Json::string_t;
  using binary_t = typename Json::binary_t;

  explicit BoundedBuilder(int max_depth) : max_depth_(max_depth) {}

  bool null() { return Put(Json(nullptr)); }
  bool boolean(bool v) { return Put(Json(v)); }
  bool number_integer(number_integer_t v) { return Put(Json(v)); }
  bool number_unsigned(number_unsigned_t v) { return Put(Json(v)); }
  bool number_float(number_float_t v, const string_t&) { return Put(Json(v)); }
  bool string(string_t& v) { return Put(Json(std::move(v))); }
  bool binary(binary_t&) { return false; }  // not produced by the text parser
  bool start_object(std::size_t) { return Open(true); }
  bool key(string_t& k) {
    frames_.back().key = std::move(k);
    return true;
  }
  bool end_object() {
    Frame frame = std::move(frames_.back());
    frames_.pop_back();
    Json object = Json::object();
    if constexpr (std::is_same_v<Json, nlohmann::ordered_json>) {
      auto& members = object.template get_ref<typename Json::object_t&>();
      // The index views the keys inside `unique`, whose storage never moves (reserved in full up front).
      std::unordered_map<std::string_view, size_t> index;
      std::vector<std::pair<std::string, Json>> unique;
      unique.reserve(frame.members.size());
      for (auto& member : frame.members) {
        if (auto it = index.find(member.first); it != index.end()) {
          unique[it->second].second = std::move(member.second);
        } else {
          unique.push_back(std::move(member));
          index.emplace(unique.back().first, unique.size() - 1);
        }
      }
      members.reserve(unique.size());
      for (auto& [k, v] : unique) members.emplace_back(std::move(k), std::move(v));
    } else {
      auto& members = object.template get_ref<typename Json::object_t&>();
      for (auto& [k, v] : frame.members) members.insert_or_assign(std::move(k), std::move(v));
    }
    return Put(std::move(object));
  }
  bool start_array(std::size_t) { return Open(false); }
  bool end_array() {
    Json array = std::move(frames_.back().array);
    frames_.pop_back();
    return Put(std::move(array));
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    error_ = e.what();
    return false;
  }

  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }
  Json Take() { return std::move(root_); }

 private:
  struct Frame {
    bool is_object = false;
    std::vector<std::pair<std::string, Json>> members;
    Json array;
    std::string key;
  };
  bool Open(bool is_object) {
    if (static_cast<int>(frames_.size()) >= max_depth_) {
      too_deep_ = true;
      return false;
    }
    frames_.push_back({is_object, {}, is_object ? Json() : Json::array(), {}});
    return true;
  }
  bool Put(Json value) {
    if (frames_.empty()) {
      root_ = std::move(value);
    } else if (frames_.back().is_object) {
      frames_.back().members.emplace_back(std::move(frames_.back().key), std::move(value));
    } else {
      frames_.back().array.push_back(std::move(value));
    }
    return true;
  }

  const int max_depth_;
  std::vector<Frame> frames_;
  Json root_;
  bool too_deep_ = false;
  std::string error_;
};

// "[json.exception.parse_error.101] parse error at line 1, column 2: syntax error while parsing value -
// invalid literal; last read: 'x'" -> "invalid JSON at line 1, column 2: invalid literal; last read: 'x'".
std::string CleanParseError(const std::string& what) {
  std::string text = what;
  if (text.rfind("[json.exception.", 0) == 0) {
    if (size_t close = text.find("] "); close != std::string::npos) text = text.substr(close + 2);
  }
  if (text.rfind("parse error", 0) == 0) text = text.substr(11);
  text = text.rfind(" at ", 0) == 0 ? text.substr(1) : ": " + text;
  if (size_t dash = text.find(" - "); dash != std::string::npos) {
    const size_t colon = text.find(": ");
    text = (colon != std::string::npos && colon < dash ? text.substr(0, colon + 2) : std::string()) +
           text.substr(dash + 3);
  }
  text = utf8::ToValidLossy(text);  // "last read: ..." quotes the input's bytes
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20) c = ' ';
  }
  return "invalid JSON" + std::string(text.rfind("at ", 0) == 0 ? " " : "") + text;
}

template <typename Json>
Result<Json> Parse(std::string_view text, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Status::InvalidArgument("JSON text of " + std::to_string(text.size()) + " bytes exceeds the limit of " +
                                   std::to_string(limits.max_bytes));
  }
  try {
    BoundedBuilder<Json> builder(limits.max_depth);
    const bool ok = Json::sax_parse(text, &builder, Json::input_format_t::json, /*strict=*/true);
    if (builder.too_deep()) {
      return Status::InvalidArgument("JSON nests deeper than " + std::to_string(limits.max_depth) + " levels");
    }
    if (!ok) return Status::InvalidArgument(CleanParseError(builder.error()));
    return builder.Take();
  } catch (const std::bad_alloc&) {
    return Status::ResourceExhausted("out of memory parsing JSON of " + std::to_string(text.size()) + " bytes");
  } catch (const std::exception& e) {
    return Status::InvalidArgument(CleanParseError(e.what()));
  }
}

}  // namespace

Result<nlohmann::json> ParseJson(std::string_view text, const JsonLimits& limits) {
  return Parse<nlohmann::json>(text, limits);
}

Result<nlohmann::ordered_json> ParseOrderedJson(std::string_view text, const JsonLimits& limits) {
  return Parse<nlohmann::ordered_json>(text, limits);
}

int JsonTextDepth(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) return max_depth;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return max_depth;
}

std::string DumpJson(const nlohmann::json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string DumpJson(const nlohmann::ordered_json& value, int indent) {
  return value.dump(indent, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace deepinfer
