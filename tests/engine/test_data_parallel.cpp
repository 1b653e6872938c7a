// Data-parallel training inside one process: N replicas (threads, each its own Runtime) whose
// gradient reducer sums through shared memory, checked against one process training the whole
// batch. Covers the fused buckets, the deferred updates, dropout drawn per global sample, the
// exchange's figures and a failing reducer (the run fails, later runs refuse, nothing hangs).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <barrier>
#include <thread>

#include "test_util.hpp"
#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine {
namespace {

using ::testing::HasSubstr;
using testing::random_vector;
using Dims = std::vector<std::int64_t>;
using Values = std::map<std::string, std::vector<float>>;

constexpr std::int64_t global_batch = 8;
constexpr std::int64_t classes = 10;
constexpr int steps = 3;
const Dims image{3, 12, 12};
constexpr std::size_t image_floats = 3 * 12 * 12;

// No batch norm (its statistics are per replica by design); dropout on, drawn per global sample.
Graph small_net(std::int64_t batch, std::vector<std::string>* trained) {
  Graph g;
  std::uint64_t seed = 0;
  auto constant = [&](const std::string& name, const Dims& dims, float scale) {
    std::size_t n = 1;
    for (auto d : dims) n *= static_cast<std::size_t>(d);
    trained->push_back(name);
    return g.constant(name, dims, random_vector(n, ++seed, -scale, scale));
  };
  TensorId x = g.input("x", {batch, image[0], image[1], image[2]}, Layout::nchw);
  Conv2D c;
  c.padding = {1, 1, 1, 1};
  x = g.relu(g.convolution(x, constant("conv1.w", {8, 3, 3, 3}, 0.3f),
                           constant("conv1.b", {8}, 0.1f), c, "conv1"));
  x = g.relu(g.convolution(x, constant("conv2.w", {16, 8, 3, 3}, 0.2f),
                           constant("conv2.b", {16}, 0.1f), c, "conv2"));
  Pool2D p;
  p.kernel = {4, 4};
  p.stride = {4, 4};
  x = g.flatten(g.max_pool(x, p));
  x = g.relu(g.inner_product(x, constant("fc1.w", {64, 16 * 9}, 0.15f),
                             constant("fc1.b", {64}, 0.1f), "fc1"));
  x = g.dropout(x, Dropout{0.3f});
  x = g.inner_product(x, constant("fc2.w", {classes, 64}, 0.25f), constant("fc2.b", {classes}, 0.1f),
                      "fc2");
  g.output(g.softmax(x), "p");
  return g;
}

// The global batch: images and labels.
struct Batch {
  std::vector<float> images = random_vector(global_batch * image_floats, 99);
  std::vector<float> labels;
  Batch() {
    for (std::int64_t n = 0; n < global_batch; ++n) labels.push_back(static_cast<float>(n * 3 % classes));
  }
};

// Sums across the replicas of one in-process job: everyone posts its buffer, everyone adds all of
// them in replica order (the same bits everywhere), then everyone writes its result back.
class SharedMemoryJob {
 public:
  explicit SharedMemoryJob(unsigned replicas) : posted_(replicas), barrier_(replicas) {}

  class Reducer : public GradientReducer {
   public:
    Reducer(SharedMemoryJob& job, unsigned rank) : job_(job), rank_(rank) {}
    Status sum(std::span<float> data) override {
      ++calls;
      if (fail_on_call != 0 && calls == fail_on_call) {
        return {StatusCode::runtime_error, "the other replica is gone"};
      }
      job_.posted_[rank_] = data;
      job_.barrier_.arrive_and_wait();
      std::vector<float> total(data.size(), 0.0f);
      for (const std::span<float>& other : job_.posted_) {
        if (other.size() != data.size()) return {StatusCode::runtime_error, "bucket sizes differ"};
        for (std::size_t i = 0; i < data.size(); ++i) total[i] += other[i];
      }
      job_.barrier_.arrive_and_wait();
      std::copy(total.begin(), total.end(), data.begin());
      return {};
    }
    int calls = 0;
    int fail_on_call = 0;

   private:
    SharedMemoryJob& job_;
    unsigned rank_;
  };

 private:
  std::vector<std::span<float>> posted_;
  std::barrier<> barrier_;
};

struct Replica {
  Status status;
  std::vector<float> losses;
  Values parameters;
  CompileReport report;
  ExchangeStats exchange;
};

// Trains `steps` steps on samples [first, first + batch) of the global batch.
Replica train(unsigned first, std::int64_t batch, CompileOptions options) {
  Replica r;
  std::vector<std::string> trained;
  const Graph g = small_net(batch, &trained);
  const Batch data;
  options.training->first_sample = first;
  std::vector<float> images(data.images.begin() + first * image_floats,
                            data.images.begin() + (first + batch) * image_floats);
  std::vector<float> labels(data.labels.begin() + first, data.labels.begin() + first + batch);
  std::unique_ptr<Runtime> rt;
  r.status = Runtime::create(g, options, &rt);
  if (!r.status.ok()) return r;
  r.report = rt->report();
  std::vector<float> p(static_cast<std::size_t>(batch * classes));
  const ExternalInput in[] = {{"x", images.data()}, {"labels", labels.data()}};
  const ExternalOutput out[] = {{"p", p.data()}};
  r.status = rt->setup(in, out);
  for (int s = 0; r.status.ok() && s < steps; ++s) {
    r.status = rt->run();
    r.losses.push_back(rt->loss());
  }
  if (!r.status.ok()) return r;
  r.exchange = rt->exchange_stats();
  for (const std::string& name : trained) {
    if (Status s = rt->parameter(name, &r.parameters[name]); !s.ok()) r.status = s;
  }
  return r;
}

CompileOptions training_options(unsigned lanes = 1) {
  CompileOptions o;
  o.lanes = lanes;
  o.training = TrainingOptions{};
  o.training->learning_rate = 0.1f;
  return o;
}

// Trains `replicas` replicas of global_batch / replicas each, in threads; with `reduce` false
// they train independently (first_sample still set).
std::vector<Replica> train_replicas(unsigned replicas, bool reduce, CompileOptions options,
                                    std::uint64_t fusion_bytes = 64ull << 20,
                                    int fail_rank = -1, int fail_on_call = 0) {
  SharedMemoryJob job(replicas);
  std::vector<Replica> out(replicas);
  std::vector<std::thread> threads;
  const std::int64_t batch = global_batch / replicas;
  for (unsigned rank = 0; rank < replicas; ++rank) {
    threads.emplace_back([&, rank] {
      CompileOptions o = options;
      if (reduce) {
        auto reducer = std::make_shared<SharedMemoryJob::Reducer>(job, rank);
        if (static_cast<int>(rank) == fail_rank) reducer->fail_on_call = fail_on_call;
        DataParallelOptions dp;
        dp.reducer = reducer;
        dp.replicas = replicas;
        dp.fusion_threshold_bytes = fusion_bytes;
        o.training->data_parallel = dp;
      }
      out[rank] = train(rank * static_cast<unsigned>(batch), batch, o);
    });
  }
  for (std::thread& t : threads) t.join();
  return out;
}

double mean_loss(const std::vector<Replica>& replicas, std::size_t step) {
  double sum = 0;
  for (const Replica& r : replicas) sum += r.losses.at(step);
  return sum / static_cast<double>(replicas.size());
}

TEST(DataParallel, TwoReplicasOfHalfTheBatchTrainAsOneProcessOfTheWholeBatch) {
  const Replica whole = train(0, global_batch, training_options());
  ASSERT_TRUE(whole.status.ok()) << whole.status.to_string();
  for (unsigned lanes : {1u, 2u}) {
    const std::vector<Replica> halves = train_replicas(2, true, training_options(lanes));
    for (const Replica& r : halves) ASSERT_TRUE(r.status.ok()) << r.status.to_string();
    for (std::size_t s = 0; s < steps; ++s) {
      EXPECT_NEAR(mean_loss(halves, s), whole.losses[s], 1e-4 * whole.losses[s])
          << "step " << s << " lanes " << lanes;
    }
    for (const auto& [name, values] : whole.parameters) {
      // Every replica holds the same weights, bit for bit: they applied the same sums.
      EXPECT_EQ(halves[0].parameters.at(name), halves[1].parameters.at(name)) << name;
      EXPECT_TRUE(testing::close(halves[0].parameters.at(name), values, 1e-4, 1e-5))
          << name << " lanes " << lanes;
    }
  }
}

TEST(DataParallel, WithoutTheReductionTheReplicasDiverge) {
  const Replica whole = train(0, global_batch, training_options());
  const std::vector<Replica> halves = train_replicas(2, false, training_options());
  ASSERT_TRUE(whole.status.ok() && halves[0].status.ok() && halves[1].status.ok());
  // The first step starts from the same weights, so its mean loss agrees; the weights then differ.
  EXPECT_NEAR(mean_loss(halves, 0), whole.losses[0], 1e-4 * whole.losses[0]);
  int differing = 0;
  for (const auto& [name, values] : whole.parameters) {
    differing += testing::close(halves[0].parameters.at(name), values, 1e-4, 1e-5) ? 0 : 1;
  }
  EXPECT_GE(differing, 6) << "of " << whole.parameters.size() << " trained tensors";
}

TEST(DataParallel, BucketsFollowTheFusionThresholdAndGiveTheSameWeights) {
  const std::vector<Replica> fused = train_replicas(2, true, training_options(), 64ull << 20);
  const std::vector<Replica> per_tensor = train_replicas(2, true, training_options(), 0);
  const std::vector<Replica> small = train_replicas(2, true, training_options(), 4096);
  for (const auto* job : {&fused, &per_tensor, &small}) {
    for (const Replica& r : *job) ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  }
  std::uint64_t trained_bytes = 0;
  for (const auto& [name, values] : fused[0].parameters) trained_bytes += values.size() * 4;
  EXPECT_EQ(fused[0].report.gradient_buckets, 1);
  EXPECT_EQ(per_tensor[0].report.gradient_buckets, static_cast<int>(fused[0].parameters.size()));
  // fc1.w (36 KiB) alone exceeds 4 KiB: buckets close at the threshold, big tensors stay whole.
  EXPECT_GT(small[0].report.gradient_buckets, 1);
  EXPECT_LT(small[0].report.gradient_buckets, per_tensor[0].report.gradient_buckets);
  for (const auto* job : {&fused, &per_tensor, &small}) {
    const Replica& r = (*job)[0];
    // In the layouts the primitives use: blocked weights are padded to 16 channels.
    EXPECT_GE(r.report.gradient_bytes, trained_bytes);
    EXPECT_LT(r.report.gradient_bytes, trained_bytes * 6 / 5);
    EXPECT_EQ(r.exchange.buckets, r.report.gradient_buckets);
    EXPECT_EQ(r.exchange.bytes, r.report.gradient_bytes);
    EXPECT_GT(r.exchange.reduce_seconds, 0.0);
    EXPECT_GE(r.exchange.exposed_seconds, 0.0);
    for (const auto& [name, values] : fused[0].parameters) {
      EXPECT_EQ(r.parameters.at(name), values) << name;  // same sums, same order: same bits
    }
  }
}

TEST(DataParallel, AFailingReductionFailsTheRunAndEveryLaterOneWithoutHanging) {
  SharedMemoryJob job(1);
  auto reducer = std::make_shared<SharedMemoryJob::Reducer>(job, 0);
  reducer->fail_on_call = 2;  // with one bucket per tensor: fails inside the first step
  CompileOptions o = training_options();
  DataParallelOptions dp;
  dp.reducer = reducer;
  dp.fusion_threshold_bytes = 0;
  o.training->data_parallel = dp;
  std::vector<std::string> trained;
  const Graph g = small_net(global_batch, &trained);
  const Batch data;
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::create(g, o, &rt).ok());
  std::vector<float> p(global_batch * classes);
  const ExternalInput in[] = {{"x", data.images.data()}, {"labels", data.labels.data()}};
  const ExternalOutput out[] = {{"p", p.data()}};
  ASSERT_TRUE(rt->setup(in, out).ok());
  const Status first = rt->run();
  EXPECT_EQ(first.code(), StatusCode::runtime_error);
  EXPECT_THAT(first.message(), HasSubstr("the other replica is gone"));
  EXPECT_THAT(first.message(), HasSubstr("bucket 2 of"));
  const Status second = rt->run();
  EXPECT_EQ(second.code(), StatusCode::runtime_error);
  EXPECT_THAT(second.message(), HasSubstr("the data-parallel job cannot go on"));
  EXPECT_EQ(reducer->calls, 2);  // no reduction after the failure
}

TEST(DataParallel, OptionsAreChecked) {
  std::vector<std::string> trained;
  const Graph g = small_net(2, &trained);
  CompileOptions o = training_options();
  o.training->data_parallel = DataParallelOptions{};  // no reducer
  std::unique_ptr<Runtime> rt;
  const Status s = Runtime::create(g, o, &rt);
  EXPECT_EQ(s.code(), StatusCode::invalid_argument);
  EXPECT_THAT(s.message(), HasSubstr("reducer"));
}

}  // namespace
}  // namespace tfpin::engine
