// process_* metrics, with the names and meanings of the Prometheus client
// libraries' process collectors (prometheus-cpp has none), read from
// /proc/self at every scrape:
//   process_cpu_seconds_total        user + system CPU time
//   process_resident_memory_bytes    resident set size
//   process_virtual_memory_bytes     virtual memory size
//   process_open_fds, process_max_fds  file descriptors open / the soft limit
//   process_start_time_seconds       start time, seconds since the Unix epoch
// A value that cannot be read (no /proc) is left out, never made up.
#ifndef FERRY_SERVER_PROCESS_METRICS_H_
#define FERRY_SERVER_PROCESS_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace ferry {

class ProcessCollector final : public prometheus::Collectable {
 public:
  std::vector<prometheus::MetricFamily> Collect() const override;
};

// The fields of /proc/PID/stat the collector uses (proc(5)), parsed from
// its text; nullopt when it is not that format. Exposed for tests.
struct ProcStat {
  double utime_ticks = 0;
  double stime_ticks = 0;
  double start_ticks = 0;  // after boot
  double vsize_bytes = 0;
  double rss_pages = 0;
};
std::optional<ProcStat> ParseProcStat(absl::string_view text);

}  // namespace ferry

#endif  // FERRY_SERVER_PROCESS_METRICS_H_
