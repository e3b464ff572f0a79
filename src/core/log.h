// Structured logging: a level, a message and key=value fields, one line per record, to stderr.
//   DI_LOG(kInfo, "model loaded").Field("tensors", 42).Field("path", dir);
// The threshold comes from DEEPINFER_LOG (debug|info|warn|error|off), default info.
#pragma once

#include <sstream>
#include <string>
#include <string_view>

namespace deepinfer {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

LogLevel GetLogLevel();
void SetLogLevel(LogLevel level);
bool ParseLogLevel(std::string_view text, LogLevel* level);
// Tests capture records through a sink; nullptr restores stderr.
using LogSink = void (*)(std::string_view line);
void SetLogSink(LogSink sink);

class LogRecord {
 public:
  LogRecord(LogLevel level, std::string_view message);
  ~LogRecord();  // emits the line
  LogRecord(const LogRecord&) = delete;
  LogRecord& operator=(const LogRecord&) = delete;

  LogRecord& Field(std::string_view key, std::string_view value);
  LogRecord& Field(std::string_view key, const char* value) { return Field(key, std::string_view(value)); }
  LogRecord& Field(std::string_view key, const std::string& value) { return Field(key, std::string_view(value)); }
  LogRecord& Field(std::string_view key, bool value) { return Field(key, value ? "true" : "false"); }
  template <typename Number>
  LogRecord& Field(std::string_view key, Number value) {
    if (!enabled_) return *this;
    std::ostringstream s;
    s << value;
    return Field(key, s.str());
  }

 private:
  bool enabled_;
  LogLevel level_;
  std::string line_;
};

// Formats one record: "2026-11-29T12:00:00.123Z INFO message key=value key2=\"quoted value\"".
std::string FormatLogValue(std::string_view value);

}  // namespace deepinfer

#define DI_LOG(level, message) ::deepinfer::LogRecord(::deepinfer::LogLevel::level, message)
