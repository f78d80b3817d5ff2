#include "server/request_log.h"

#include <cstdio>
#include <utility>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "passes/report_io.h"

namespace ferry {

LogLine NewLogLine(absl::string_view event) {
  LogLine line;
  line.set_ts(absl::FormatTime("%Y-%m-%dT%H:%M:%E6SZ", absl::Now(),
                               absl::UTCTimeZone()));
  line.set_event(std::string(event));
  return line;
}

Logger::Logger(std::function<void(absl::string_view)> sink)
    : sink_(std::move(sink)) {}

void Logger::Write(const LogLine& line) {
  std::string json = ReportJson(line);
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
