// One structured log line (JSON, to stderr by default) per request:
//   {"ts":"2025-05-20T10:00:00.123456Z","event":"rpc","request_id":"...",
//    "method":"Lower","code":"OK","outcome":"lowered","duration_ms":12.5,
//    "queue_ms":0.4,"nodes":120,"peer":"ipv4:127.0.0.1:5555"}
// and the same shape for server events ("event":"start", "drain", ...).
#ifndef FERRY_SERVER_REQUEST_LOG_H_
#define FERRY_SERVER_REQUEST_LOG_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace ferry {

// Fields of one line, in the order given. Values are strings or numbers.
class LogLine {
 public:
  explicit LogLine(absl::string_view event);
  LogLine& Str(absl::string_view key, absl::string_view value);
  LogLine& Num(absl::string_view key, double value);
  LogLine& Int(absl::string_view key, int64_t value);
  LogLine& Bool(absl::string_view key, bool value);
  // The finished JSON object, without a trailing newline.
  std::string Json() const;

 private:
  std::string fields_;
};

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
