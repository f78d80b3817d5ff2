#include "server/process_metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"

namespace ferry {
namespace {

using prometheus::MetricFamily;
using prometheus::MetricType;

std::string ReadProcFile(const char* path) {
  std::ifstream file(path);
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

// "btime" of /proc/stat: the boot time, seconds since the epoch.
std::optional<double> BootTimeSeconds() {
  std::string stat = ReadProcFile("/proc/stat");
  for (absl::string_view line : absl::StrSplit(stat, '\n')) {
    constexpr absl::string_view kBtime = "btime ";
    double seconds = 0;
    if (absl::ConsumePrefix(&line, kBtime) &&
        absl::SimpleAtod(line, &seconds)) {
      return seconds;
    }
  }
  return std::nullopt;
}

std::optional<double> OpenFds() {
  std::error_code error;
  std::filesystem::directory_iterator fds("/proc/self/fd", error);
  if (error) return std::nullopt;
  double count = 0;
  for (auto it = std::filesystem::begin(fds); it != std::filesystem::end(fds);
       it.increment(error)) {
    if (error) return std::nullopt;
    ++count;
  }
  // The iterator's own descriptor was open while counting.
  return count > 0 ? count - 1 : 0;
}

void Add(std::vector<MetricFamily>& families, std::string name,
         std::string help, MetricType type, double value) {
  prometheus::ClientMetric metric;
  if (type == MetricType::Counter) {
    metric.counter.value = value;
  } else {
    metric.gauge.value = value;
  }
  families.push_back(
      MetricFamily{std::move(name), std::move(help), type, {metric}});
}

}  // namespace

std::optional<ProcStat> ParseProcStat(absl::string_view text) {
  // "PID (COMM) STATE ..." where COMM may hold spaces and parentheses: the
  // fields after it start past the last ')'.
  size_t close = text.rfind(')');
  if (close == absl::string_view::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(text.substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state) of proc(5); rss is field 24.
  constexpr size_t kUtime = 14 - 3, kStime = 15 - 3, kStart = 22 - 3,
                   kVsize = 23 - 3, kRss = 24 - 3;
  if (fields.size() <= kRss) return std::nullopt;
  ProcStat stat;
  if (!absl::SimpleAtod(fields[kUtime], &stat.utime_ticks) ||
      !absl::SimpleAtod(fields[kStime], &stat.stime_ticks) ||
      !absl::SimpleAtod(fields[kStart], &stat.start_ticks) ||
      !absl::SimpleAtod(fields[kVsize], &stat.vsize_bytes) ||
      !absl::SimpleAtod(fields[kRss], &stat.rss_pages)) {
    return std::nullopt;
  }
  return stat;
}

std::vector<MetricFamily> ProcessCollector::Collect() const {
  std::vector<MetricFamily> families;
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  if (std::optional<ProcStat> stat =
          ParseProcStat(ReadProcFile("/proc/self/stat"));
      stat && ticks > 0 && page > 0) {
    Add(families, "process_cpu_seconds_total",
        "Total user and system CPU time spent in seconds.", MetricType::Counter,
        (stat->utime_ticks + stat->stime_ticks) / ticks);
    Add(families, "process_resident_memory_bytes",
        "Resident memory size in bytes.", MetricType::Gauge,
        stat->rss_pages * page);
    Add(families, "process_virtual_memory_bytes",
        "Virtual memory size in bytes.", MetricType::Gauge, stat->vsize_bytes);
    if (std::optional<double> boot = BootTimeSeconds()) {
      Add(families, "process_start_time_seconds",
          "Start time of the process since unix epoch in seconds.",
          MetricType::Gauge, *boot + stat->start_ticks / ticks);
    }
  }
  if (std::optional<double> open = OpenFds()) {
    Add(families, "process_open_fds", "Number of open file descriptors.",
        MetricType::Gauge, *open);
  }
  if (rlimit limit{}; getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
                      limit.rlim_cur != RLIM_INFINITY) {
    Add(families, "process_max_fds", "Maximum number of open file descriptors.",
        MetricType::Gauge, static_cast<double>(limit.rlim_cur));
  }
  return families;
}

}  // namespace ferry
