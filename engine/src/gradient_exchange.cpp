#include "gradient_exchange.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "executor.hpp"

namespace tfpin::engine::detail {

GradientExchange::GradientExchange(DataParallelOptions options) : options_(std::move(options)) {}

GradientExchange::~GradientExchange() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  packed_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

GradientExchange::Slot GradientExchange::place(std::size_t floats) {
  const std::uint64_t threshold = options_.fusion_threshold_bytes;
  if (buckets_.empty() || buckets_.back().floats * sizeof(float) >= threshold ||
      threshold == 0) {
    buckets_.emplace_back();
  }
  Bucket& bucket = buckets_.back();
  const Slot slot{static_cast<int>(buckets_.size() - 1), bucket.floats};
  bucket.floats += floats;
  ++bucket.gradients;
  return slot;
}

void GradientExchange::allocate() {
  for (Bucket& bucket : buckets_) {
    bucket.storage = allocate_aligned(bucket.floats * sizeof(float));
    if (!bucket.storage) throw std::bad_alloc();
    bucket.data = reinterpret_cast<float*>(bucket.storage.get());
  }
  packed_.assign(buckets_.size(), 0);
  reduced_ = static_cast<int>(buckets_.size());  // nothing to do before the first run
}

std::uint64_t GradientExchange::bytes() const {
  std::uint64_t total = 0;
  for (const Bucket& bucket : buckets_) total += bucket.floats * sizeof(float);
  return total;
}

void GradientExchange::start() {
  thread_ = std::thread([this] {
    if (!options_.communication_cpus.empty()) {
      std::string error;
      if (!pin_current_thread(options_.communication_cpus, &error)) {
        std::lock_guard lock(mutex_);
        failure_ = fmt::format("the communication thread: {}", error);
      }
    }
    communicate();
  });
}

std::string GradientExchange::begin_run() {
  std::lock_guard lock(mutex_);
  if (!failure_.empty()) return failure_;
  std::fill(packed_.begin(), packed_.end(), 0);
  reduced_ = 0;
  reduce_seconds_ = 0;
  exposed_seconds_ = 0;
  return {};
}

void GradientExchange::abandon(const std::string& why) {
  {
    std::lock_guard lock(mutex_);
    if (failure_.empty()) failure_ = why;
  }
  reduced_cv_.notify_all();
}

void GradientExchange::packed(int bucket) {
  bool full = false;
  {
    std::lock_guard lock(mutex_);
    const auto b = static_cast<std::size_t>(bucket);
    full = ++packed_[b] == buckets_[b].gradients;
  }
  if (full) packed_cv_.notify_all();
}

void GradientExchange::wait(int bucket) {
  const auto start = Clock::now();
  std::unique_lock lock(mutex_);
  reduced_cv_.wait(lock, [&] { return reduced_ > bucket || !failure_.empty(); });
  exposed_seconds_ += std::chrono::duration<double>(Clock::now() - start).count();
  if (reduced_ <= bucket) throw std::runtime_error(failure_);
}

ExchangeStats GradientExchange::last_run() const {
  std::lock_guard lock(mutex_);
  ExchangeStats stats;
  stats.buckets = static_cast<int>(buckets_.size());
  stats.bytes = bytes();
  stats.reduce_seconds = reduce_seconds_;
  stats.exposed_seconds = exposed_seconds_;
  return stats;
}

void GradientExchange::communicate() {
  const auto count = static_cast<int>(buckets_.size());
  for (;;) {
    int next = 0;
    {
      std::unique_lock lock(mutex_);
      packed_cv_.wait(lock, [&] {
        return stop_ || (failure_.empty() && reduced_ < count &&
                         packed_[static_cast<std::size_t>(reduced_)] ==
                             buckets_[static_cast<std::size_t>(reduced_)].gradients);
      });
      if (stop_) return;
      next = reduced_;
    }
    Bucket& bucket = buckets_[static_cast<std::size_t>(next)];
    const auto start = Clock::now();
    Status status;
    try {
      status = options_.reducer->sum({bucket.data, bucket.floats});
    } catch (const std::exception& e) {
      status = {StatusCode::runtime_error, e.what()};
    }
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    {
      std::lock_guard lock(mutex_);
      reduce_seconds_ += seconds;
      if (status.ok()) {
        ++reduced_;
      } else if (failure_.empty()) {
        failure_ = fmt::format("the gradient reduction of bucket {} of {} failed: {}", next + 1,
                               count, status.message());
      }
    }
    reduced_cv_.notify_all();
  }
}

}  // namespace tfpin::engine::detail
