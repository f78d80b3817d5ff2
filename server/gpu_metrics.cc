#include "server/gpu_metrics.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace ferry {

std::vector<prometheus::MetricFamily> GpuCollector::Collect() const {
  using prometheus::MetricFamily;
  using prometheus::MetricType;
  MetricFamily used{"ferry_gpu_memory_used_bytes",
                    "GPU memory in use (by every process), in bytes.",
                    MetricType::Gauge,
                    {}};
  MetricFamily total{"ferry_gpu_memory_total_bytes",
                     "GPU memory, in bytes.",
                     MetricType::Gauge,
                     {}};
  MetricFamily utilization{
      "ferry_gpu_utilization_ratio",
      "Fraction of the driver's last sample period a kernel ran on the GPU.",
      MetricType::Gauge,
      {}};
  for (const GpuUsage& usage : read_()) {
    prometheus::ClientMetric metric;
    metric.label = {{"device", absl::StrCat("cuda:", usage.index)}};
    metric.gauge.value = static_cast<double>(usage.memory_used_bytes);
    used.metric.push_back(metric);
    metric.gauge.value = static_cast<double>(usage.memory_total_bytes);
    total.metric.push_back(metric);
    if (usage.utilization) {
      metric.gauge.value = *usage.utilization;
      utilization.metric.push_back(metric);
    }
  }
  return {used, total, utilization};
}

}  // namespace ferry
