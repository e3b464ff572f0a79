#include "core/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>

namespace deepinfer {
namespace {

LogLevel InitialLevel() {
  LogLevel level = LogLevel::kInfo;
  if (const char* env = std::getenv("DEEPINFER_LOG")) ParseLogLevel(env, &level);
  return level;
}

std::atomic<LogLevel>& LevelStorage() {
  static std::atomic<LogLevel> level{InitialLevel()};
  return level;
}

std::atomic<LogSink> g_sink{nullptr};
std::mutex g_write_mutex;

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarn: return "WARN";
    case LogLevel::kError: return "ERROR";
    case LogLevel::kOff: return "OFF";
  }
  return "?";
}

}  // namespace

LogLevel GetLogLevel() { return LevelStorage().load(std::memory_order_relaxed); }
void SetLogLevel(LogLevel level) { LevelStorage().store(level, std::memory_order_relaxed); }
void SetLogSink(LogSink sink) { g_sink.store(sink); }

bool ParseLogLevel(std::string_view text, LogLevel* level) {
  if (text == "debug") *level = LogLevel::kDebug;
  else if (text == "info") *level = LogLevel::kInfo;
  else if (text == "warn" || text == "warning") *level = LogLevel::kWarn;
  else if (text == "error") *level = LogLevel::kError;
  else if (text == "off") *level = LogLevel::kOff;
  else return false;
  return true;
}

std::string FormatLogValue(std::string_view value) {
  bool needs_quotes = value.empty();
  for (char c : value) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) {
      needs_quotes = true;
      break;
    }
  }
  if (!needs_quotes) return std::string(value);
  std::string out = "\"";
  for (char c : value) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned char>(c));
          out += buf;
        } else {
          out += c;
        }
    }
  }
  out += '"';
  return out;
}

LogRecord::LogRecord(LogLevel level, std::string_view message)
    : enabled_(level != LogLevel::kOff && level >= GetLogLevel()), level_(level) {
  if (!enabled_) return;
  const auto now = std::chrono::system_clock::now();
  const std::time_t seconds = std::chrono::system_clock::to_time_t(now);
  const auto millis =
      std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char stamp[96];
  std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", utc.tm_year + 1900, utc.tm_mon + 1,
                utc.tm_mday, utc.tm_hour, utc.tm_min, utc.tm_sec, static_cast<int>(millis));
  line_ = stamp;
  line_ += ' ';
  line_ += LevelName(level_);
  line_ += ' ';
  line_ += message;
}

LogRecord& LogRecord::Field(std::string_view key, std::string_view value) {
  if (!enabled_) return *this;
  line_ += ' ';
  line_ += key;
  line_ += '=';
  line_ += FormatLogValue(value);
  return *this;
}

LogRecord::~LogRecord() {
  if (!enabled_) return;
  if (LogSink sink = g_sink.load()) {
    sink(line_);
    return;
  }
  std::lock_guard<std::mutex> lock(g_write_mutex);
  line_ += '\n';
  std::fwrite(line_.data(), 1, line_.size(), stderr);
}

}  // namespace deepinfer
