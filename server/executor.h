// A bounded executor: a fixed set of worker threads and a bounded queue of
// jobs waiting for them. The service hands every pass and every
// verification to it, so no compile work runs on a gRPC thread, and a full
// queue is answered at once (RESOURCE_EXHAUSTED) instead of piling up.
#ifndef FERRY_SERVER_EXECUTOR_H_
#define FERRY_SERVER_EXECUTOR_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ferry {

class BoundedExecutor {
 public:
  // `workers` jobs run at once; up to `queue_depth` more wait.
  BoundedExecutor(int workers, int queue_depth);
  // Closes, runs every job already accepted, and joins the workers.
  ~BoundedExecutor();
  BoundedExecutor(const BoundedExecutor&) = delete;
  BoundedExecutor& operator=(const BoundedExecutor&) = delete;

  enum class Admission { kAccepted, kQueueFull, kClosed };
  // Accepts `job` when a worker is idle or the queue has room.
  Admission TrySubmit(std::function<void()> job);

  // Refuses every later TrySubmit (kClosed); accepted jobs still run.
  void Close();
  // Waits until no job is queued or running, or `deadline` passes. True when
  // idle.
  bool WaitIdle(std::chrono::steady_clock::time_point deadline);

  int queued() const;
  int running() const;
  int workers() const { return static_cast<int>(threads_.size()); }
  int queue_depth() const { return queue_depth_; }

 private:
  void WorkerLoop();

  const int queue_depth_;
  mutable std::mutex mutex_;
  std::condition_variable job_ready_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> queue_;
  int running_ = 0;
  bool closed_ = false;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace ferry

#endif  // FERRY_SERVER_EXECUTOR_H_
