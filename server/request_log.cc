#include "server/request_log.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "passes/diagnostics.h"

namespace ferry {

LogLine::LogLine(absl::string_view event) {
  Str("ts", absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                             absl::UTCTimeZone()));
  Str("event", event);
}

LogLine& LogLine::Str(absl::string_view key, absl::string_view value) {
  absl::StrAppend(&fields_, fields_.empty() ? "" : ",", "\"", key, "\":\"",
                  JsonEscape(std::string_view(value.data(), value.size())),
                  "\"");
  return *this;
}

LogLine& LogLine::Num(absl::string_view key, double value) {
  absl::StrAppend(&fields_, fields_.empty() ? "" : ",", "\"", key,
                  "\":", absl::StrFormat("%.3f", value));
  return *this;
}

LogLine& LogLine::Int(absl::string_view key, int64_t value) {
  absl::StrAppend(&fields_, fields_.empty() ? "" : ",", "\"", key,
                  "\":", value);
  return *this;
}

LogLine& LogLine::Bool(absl::string_view key, bool value) {
  absl::StrAppend(&fields_, fields_.empty() ? "" : ",", "\"", key,
                  "\":", value ? "true" : "false");
  return *this;
}

std::string LogLine::Json() const { return absl::StrCat("{", fields_, "}"); }

Logger::Logger(std::function<void(absl::string_view)> sink)
    : sink_(std::move(sink)) {}

void Logger::Write(const LogLine& line) {
  std::string json = line.Json();
  std::lock_guard<std::mutex> lock(mutex_);
  if (sink_) {
    sink_(json);
    return;
  }
  json.push_back('\n');
  std::fwrite(json.data(), 1, json.size(), stderr);
  std::fflush(stderr);
}

}  // namespace ferry
