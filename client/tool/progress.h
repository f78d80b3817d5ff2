// Progress lines of `ferry lower` and `ferry verify` (--progress): one line
// on stderr per finished pipeline pass and verification step, the same
// whether the stage ran in-process (ProgressFn, passes/pipeline.h) or on a
// ferryd (ProgressUpdate snapshots of LowerStream / VerifyStream). stdout
// stays the report.
//
//   ferry lower: [3/7] partition 0.21 ms
//   ferry verify: main: eager_run 1.40 ms
#ifndef FERRY_CLIENT_TOOL_PROGRESS_H_
#define FERRY_CLIENT_TOOL_PROGRESS_H_

#include <cstdint>
#include <string>

#include "ferry/client.h"
#include "passes/pipeline.h"

namespace CLI {
class App;
}  // namespace CLI

namespace ferry::tool {

// Declares --progress=auto|always|never on `app` (auto: when stderr is a
// terminal), read into `mode`.
void AddProgressFlag(CLI::App& app, std::string& mode);
// The line of --progress for usage texts.
std::string ProgressFlagHelp();

class ProgressPrinter {
 public:
  // `command` prefixes every line ("lower", "verify"). Prints nothing when
  // `mode` is "never", or "auto" and stderr is not a terminal.
  ProgressPrinter(std::string command, const std::string& mode);

  bool enabled() const { return enabled_; }
  // For the in-process pipeline and verification; empty when disabled.
  ProgressFn Stages();
  // For Client::LowerStream / VerifyStream; empty when disabled.
  ProgressCallback Updates();

 private:
  void Finished(const std::string& stage, const std::string& method,
                int64_t micros);
  void Update(const v1::ProgressUpdate& update);

  std::string command_;
  bool enabled_;
  int passes_total_;
  int passes_done_ = 0;
  int printed_ = 0;  // finished stages of the current attempt printed
  bool queued_printed_ = false;
};

}  // namespace ferry::tool

#endif  // FERRY_CLIENT_TOOL_PROGRESS_H_
