// Data-parallel training's gradient exchange: fused buckets of weight gradients, packed by steps
// that run as soon as backward has produced each gradient, summed by the reducer on one
// communication thread (buckets strictly in order: every replica must issue the same collectives
// in the same order), and waited for by the steps that apply the updates.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "lowering.hpp"

namespace tfpin::engine::detail {

class GradientExchange {
 public:
  explicit GradientExchange(DataParallelOptions options);
  ~GradientExchange();  // stops the communication thread (after a reduction in progress)
  GradientExchange(const GradientExchange&) = delete;
  GradientExchange& operator=(const GradientExchange&) = delete;

  struct Slot {
    int bucket = -1;
    std::size_t offset = 0;  // floats into the bucket
  };
  // Compile time, in the order backward produces the gradients: where a gradient of `floats`
  // goes. A bucket closes once it reaches the fusion threshold.
  Slot place(std::size_t floats);
  // Compile time, after the last place(): allocates the buckets. Throws std::bad_alloc.
  void allocate();
  [[nodiscard]] int buckets() const { return static_cast<int>(buckets_.size()); }
  [[nodiscard]] std::uint64_t bytes() const;
  [[nodiscard]] float* data(int bucket) { return buckets_[static_cast<std::size_t>(bucket)].data; }
  [[nodiscard]] float scale() const { return 1.0f / static_cast<float>(options_.replicas); }
  // Starts the communication thread. Throws std::system_error.
  void start();

  // Before each run: a failed exchange fails every later run (the replicas' collectives are out
  // of step and cannot be resumed). Returns the failure, empty when the run may go on.
  std::string begin_run();
  // After a run that failed elsewhere: the buckets of this run will never all be packed.
  void abandon(const std::string& why);
  // From a packing step: one gradient of `bucket` is in place.
  void packed(int bucket);
  // From a waiting step: blocks until `bucket` is reduced; throws std::runtime_error with the
  // reducer's failure.
  void wait(int bucket);
  [[nodiscard]] ExchangeStats last_run() const;

 private:
  using Clock = std::chrono::steady_clock;
  struct Bucket {
    std::size_t floats = 0;
    int gradients = 0;  // packed per run
    AlignedBytes storage;
    float* data = nullptr;
  };
  void communicate();

  DataParallelOptions options_;
  std::vector<Bucket> buckets_;
  std::thread thread_;

  mutable std::mutex mutex_;
  std::condition_variable packed_cv_;   // a bucket filled, or stop
  std::condition_variable reduced_cv_;  // a bucket reduced, or the exchange failed
  std::vector<int> packed_;             // per bucket: gradients packed in this run
  int reduced_ = 0;                     // buckets reduced in this run (always in order)
  bool stop_ = false;
  std::string failure_;
  double reduce_seconds_ = 0;
  double exposed_seconds_ = 0;
};

}  // namespace tfpin::engine::detail
