#include "cli/flags.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "core/utf8.h"

namespace deepinfer::cli {

namespace {

// How a bad value is quoted in a message: invalid bytes replaced, long values cut, so that the message
// stays one short, printable line whatever was typed.
std::string Quote(std::string_view text) {
  std::string shown = utf8::ToValidLossy(text.substr(0, 64));
  for (char& c : shown) {
    if (static_cast<unsigned char>(c) < 0x20) c = '?';
  }
  if (text.size() > 64) shown += "...";
  return "'" + shown + "'";
}

Status NotUtf8() { return Status::InvalidArgument("is not valid UTF-8"); }

}  // namespace

std::string UsageLine(const std::string& command, const std::string& message) {
  return "deepinfer " + command + ": " + message + " (see 'deepinfer " + command + " --help')";
}

std::string HumanBytes(uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.2f %s", v, units[u]);
  return buf;
}

Flags::Flags(std::string command) : command_(std::move(command)) {}

Flags& Flags::Add(std::string name, bool takes_value, std::function<Status(const std::string&)> apply) {
  specs_.push_back({std::move(name), takes_value, false, false, std::move(apply)});
  return *this;
}

Flags::Spec* Flags::Find(std::string_view name) {
  for (Spec& s : specs_) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

Flags& Flags::String(std::string name, std::string* out) {
  return Add(std::move(name), true, [out](const std::string& v) {
    *out = v;
    return Status::Ok();
  });
}

Flags& Flags::Path(std::string name, std::string* out) {
  return Add(std::move(name), true, [out](const std::string& v) {
    if (v.empty()) return Status::InvalidArgument("needs a non-empty path");
    *out = v;
    return Status::Ok();
  });
}

Flags& Flags::Strings(std::string name, std::vector<std::string>* out) {
  return Add(std::move(name), true, [out](const std::string& v) {
    if (out->size() >= 4096) return Status::InvalidArgument("is given more than 4096 times");
    out->push_back(v);
    return Status::Ok();
  });
}

Flags& Flags::Switch(std::string name, bool* out, bool value) {
  return Add(std::move(name), false, [out, value](const std::string&) {
    *out = value;
    return Status::Ok();
  });
}

Status Flags::ParseSigned(const std::string& text, int64_t min, int64_t max, int64_t* out) {
  const std::string range = "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < min || v > max) {
    return Status::InvalidArgument(range + " (got " + Quote(text) + ")");
  }
  *out = v;
  return Status::Ok();
}

Status Flags::ParseUnsigned(const std::string& text, uint64_t min, uint64_t max, uint64_t* out) {
  const std::string range = "must be an integer in [" + std::to_string(min) + ", " + std::to_string(max) + "]";
  uint64_t v = 0;
  const char* end = text.data() + text.size();
  // from_chars on an unsigned type rejects a leading '-' (no wrap-around: "-1" is not 2^64-1).
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (text.empty() || ec != std::errc() || ptr != end || v < min || v > max) {
    return Status::InvalidArgument(range + " (got " + Quote(text) + ")");
  }
  *out = v;
  return Status::Ok();
}

Flags& Flags::Double(std::string name, double* out, double min, double max) {
  return Add(std::move(name), true, [out, min, max](const std::string& text) {
    char range[96];
    std::snprintf(range, sizeof range, "must be a number in [%g, %g]", min, max);
    char* end = nullptr;
    const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < min || v > max) {
      return Status::InvalidArgument(std::string(range) + " (got " + Quote(text) + ")");
    }
    *out = v;
    return Status::Ok();
  });
}

Flags& Flags::DoubleOr(std::string name, double* out, double min, double max, std::string word,
                       double word_value) {
  return Add(std::move(name), true, [out, min, max, word = std::move(word), word_value](const std::string& text) {
    if (text == word) {
      *out = word_value;
      return Status::Ok();
    }
    char range[96];
    std::snprintf(range, sizeof range, "must be a number in [%g, %g]", min, max);
    char* end = nullptr;
    const double v = text.empty() ? 0.0 : std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || !std::isfinite(v) || v < min || v > max) {
      return Status::InvalidArgument(std::string(range) + " or " + word + " (got " + Quote(text) + ")");
    }
    *out = v;
    return Status::Ok();
  });
}

Flags& Flags::IntList(std::string name, std::vector<int64_t>* out, int64_t min, int64_t max, size_t max_count) {
  return Add(std::move(name), true, [out, min, max, max_count](const std::string& text) -> Status {
    std::vector<int64_t> values;
    size_t at = 0;
    while (true) {
      const size_t comma = std::min(text.find(',', at), text.size());
      if (values.size() == max_count) {
        return Status::InvalidArgument("takes at most " + std::to_string(max_count) + " values");
      }
      int64_t v = 0;
      Status s = ParseSigned(text.substr(at, comma - at), min, max, &v);
      if (!s.ok()) return Status::InvalidArgument("takes comma-separated values that each " + s.message());
      values.push_back(v);
      if (comma == text.size()) break;
      at = comma + 1;
    }
    *out = std::move(values);
    return Status::Ok();
  });
}

Flags& Flags::Custom(std::string name, std::string value_name, std::function<Status(const std::string&)> parse) {
  (void)value_name;  // kept for the reader of the call site; usage texts are written by hand
  return Add(std::move(name), true, std::move(parse));
}

Flags& Flags::Required() {
  if (!specs_.empty()) specs_.back().required = true;
  return *this;
}

Flags& Flags::Positionals(std::string name, std::vector<std::string>* out, size_t min, size_t max) {
  positional_name_ = std::move(name);
  positionals_ = out;
  positional_min_ = min;
  positional_max_ = max;
  return *this;
}

bool Flags::given(std::string_view name) const {
  for (const Spec& s : specs_) {
    if (s.name == name) return s.seen;
  }
  return false;
}

Status Flags::Check(const std::vector<std::string>& args) {
  std::vector<std::string> positionals;
  bool only_positionals = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool is_option = !only_positionals && a.size() > 1 && a[0] == '-';
    if (!is_option) {
      if (!utf8::IsValid(a)) {
        return Status::InvalidArgument((positional_name_.empty() ? "an argument" : positional_name_) + " " +
                                       NotUtf8().message());
      }
      positionals.push_back(a);
      continue;
    }
    if (a == "--") {
      only_positionals = true;
      continue;
    }
    const size_t eq = a.find('=');
    const std::string name = a.substr(0, eq);
    Spec* spec = Find(name);
    if (spec == nullptr) return Status::InvalidArgument("unknown option " + Quote(name));
    std::string value;
    if (spec->takes_value) {
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else if (i + 1 < args.size()) {
        value = args[++i];
      } else {
        return Status::InvalidArgument(name + " needs a value");
      }
      if (!utf8::IsValid(value)) return Status::InvalidArgument(name + " " + NotUtf8().message());
    } else if (eq != std::string::npos) {
      return Status::InvalidArgument(name + " takes no value");
    }
    Status s = spec->apply(value);
    if (!s.ok()) return Status::InvalidArgument(name + " " + s.message());
    spec->seen = true;
  }
  for (const Spec& s : specs_) {
    if (s.required && !s.seen) return Status::InvalidArgument(s.name + " is required");
  }
  if (positionals_ == nullptr) {
    if (!positionals.empty()) return Status::InvalidArgument("unexpected argument " + Quote(positionals[0]));
  } else {
    if (positionals.size() < positional_min_) return Status::InvalidArgument(positional_name_ + " is required");
    if (positionals.size() > positional_max_) {
      return Status::InvalidArgument(positional_max_ == 1 ? "more than one " + positional_name_ + " given"
                                                          : "too many arguments");
    }
    *positionals_ = std::move(positionals);
  }
  return Status::Ok();
}

int Flags::Parse(const std::vector<std::string>& args) {
  Status s = Check(args);
  if (s.ok()) return 0;
  std::cerr << UsageLine(command_, s.message()) << "\n";
  return 2;
}

}  // namespace deepinfer::cli
