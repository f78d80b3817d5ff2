// GPU metrics, read at every scrape where a GPU is visible
// (runtime/device.h ReadGpuUsage):
//   ferry_gpu_memory_used_bytes{device="cuda:N"}   gauge
//   ferry_gpu_memory_total_bytes{device="cuda:N"}  gauge
//   ferry_gpu_utilization_ratio{device="cuda:N"}   gauge, 0..1 (only where
//                                                  the driver's NVML loads)
// Without a GPU the collector is not installed and no ferry_gpu_* series
// exists.
#ifndef FERRY_SERVER_GPU_METRICS_H_
#define FERRY_SERVER_GPU_METRICS_H_

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <functional>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace ferry {

class GpuCollector final : public prometheus::Collectable {
 public:
  // `read` is ReadGpuUsage outside tests.
  explicit GpuCollector(std::function<std::vector<GpuUsage>()> read)
      : read_(std::move(read)) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  std::function<std::vector<GpuUsage>()> read_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_GPU_METRICS_H_
