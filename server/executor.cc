#include "server/executor.h"

#include <utility>

namespace ferry {

BoundedExecutor::BoundedExecutor(int workers, int queue_depth)
    : queue_depth_(queue_depth) {
  threads_.reserve(workers);
  for (int i = 0; i < workers; ++i) {
    threads_.emplace_back([this] { WorkerLoop(); });
  }
}

BoundedExecutor::~BoundedExecutor() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    stopping_ = true;
  }
  job_ready_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

BoundedExecutor::Admission BoundedExecutor::TrySubmit(
    std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closed_) return Admission::kClosed;
    // Accepted jobs not yet finished: one per worker runs, the rest wait.
    int accepted = static_cast<int>(queue_.size()) + running_;
    if (accepted >= workers() + queue_depth_) return Admission::kQueueFull;
    queue_.push_back(std::move(job));
  }
  job_ready_.notify_one();
  return Admission::kAccepted;
}

void BoundedExecutor::Close() {
  std::lock_guard<std::mutex> lock(mutex_);
  closed_ = true;
}

bool BoundedExecutor::WaitIdle(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mutex_);
  return idle_.wait_until(lock, deadline,
                          [this] { return queue_.empty() && running_ == 0; });
}

int BoundedExecutor::queued() const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Jobs a free worker is about to take are not waiting.
  int waiting = static_cast<int>(queue_.size()) - (workers() - running_);
  return waiting > 0 ? waiting : 0;
}

int BoundedExecutor::running() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return running_;
}

void BoundedExecutor::WorkerLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    job_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and nothing left to run
    std::function<void()> job = std::move(queue_.front());
    queue_.pop_front();
    ++running_;
    lock.unlock();
    job();
    job = nullptr;  // release captures outside the lock
    lock.lock();
    --running_;
    if (queue_.empty() && running_ == 0) idle_.notify_all();
  }
}

}  // namespace ferry
