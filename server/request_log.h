// One structured log line (JSON, to stderr by default) per request:
//   {"ts":"2025-05-20T10:00:00.123456Z","event":"rpc","request_id":"...",
//    "method":"Lower","code":"OK","outcome":"lowered","duration_ms":12.5,
//    "queue_ms":0.4,"nodes":"120","peer":"ipv4:127.0.0.1:5555"}
// and the same shape for server events ("event":"start", "drain", ...).
// A line is a LogLine message (log_line.proto) printed by ReportJson
// (passes/report_io.h), as every report is.
#ifndef FERRY_SERVER_REQUEST_LOG_H_
#define FERRY_SERVER_REQUEST_LOG_H_

#include <functional>
#include <mutex>
#include <string>

#include "absl/strings/string_view.h"
#include "server/log_line.pb.h"

namespace ferry {

// A line for `event`, stamped with the current time.
LogLine NewLogLine(absl::string_view event);

// Where lines go. Thread-safe; each line is written whole.
class Logger {
 public:
  // `sink` receives each line without its newline; empty: stderr.
  explicit Logger(std::function<void(absl::string_view)> sink = {});
  void Write(const LogLine& line);

 private:
  std::mutex mutex_;
  std::function<void(absl::string_view)> sink_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_REQUEST_LOG_H_
